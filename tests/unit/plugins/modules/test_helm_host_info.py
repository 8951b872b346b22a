"""helm_host_info against the real released chart archives (../shared), kubeconfigs and binaries on disk."""
import io
import json
import os
import stat
import tarfile

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.skaffon.gpu_platform.plugins.modules import helm_host_info
from kit.paths import KAI_CHART, gpu_operator_chart, need

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: site, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: admin, user: {token: secret-token-not-returned}}]
contexts:
  - {name: site-admin, context: {cluster: site, user: admin}}
  - {name: site-ro, context: {cluster: site, user: admin}}
current-context: site-admin
"""


def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            helm_host_info.main()
    return json.loads(capsys.readouterr().out)


def executable(path):
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(stat.S_IRWXU)
    return str(path)


def tarball(path, members):
    with tarfile.open(str(path), "w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return str(path)


@pytest.mark.needs_shared
def test_the_real_charts_metadata_is_what_helm_show_chart_prints(capsys):
    result = run_module(capsys, chart_path=need(gpu_operator_chart("v26.7.0")))
    assert result["chart"]["exists"] is True and result["changed"] is False
    meta = result["chart"]["metadata"]
    assert (meta["name"], meta["version"], meta["appVersion"]) == ("gpu-operator", "v26.7.0", "v26.7.0")
    kai = run_module(capsys, chart_path=need(KAI_CHART))["chart"]["metadata"]
    assert (kai["name"], kai["version"]) == ("kai-scheduler", "v0.17.0")


def test_a_missing_archive_is_reported_not_failed(capsys, tmp_path):
    result = run_module(capsys, chart_path=str(tmp_path / "gpu-operator-v26.7.0.tgz"))
    assert result["chart"] == {"path": str(tmp_path / "gpu-operator-v26.7.0.tgz"), "exists": False, "metadata": None}
    assert "failed" not in result


@pytest.mark.parametrize("members, says", [
    ({"README.md": "not a chart"}, "has no <chart>/Chart.yaml at its top"),
    ({"mychart/Chart.yaml": "description: no name or version\n"}, "has no name and version"),
    ({"mychart/Chart.yaml": "name: [unclosed\n"}, "is not YAML"),
])
def test_an_archive_that_is_not_a_chart_is_refused_with_the_fix(capsys, tmp_path, members, says):
    result = run_module(capsys, chart_path=tarball(tmp_path / "chart.tgz", members))
    assert result["failed"] is True and says in result["msg"], result
    assert "Traceback" not in result["msg"]


def test_a_file_that_is_not_an_archive_is_refused(capsys, tmp_path):
    path = tmp_path / "gpu-operator.tgz"
    path.write_text("<html>proxy login page</html>")
    result = run_module(capsys, chart_path=str(path))
    assert result["failed"] is True and "cannot be read" in result["msg"] and str(path) in result["msg"], result


def test_a_chart_directory_is_read_too(capsys, tmp_path):
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: site-extras\nversion: 1.2.0\n")
    assert run_module(capsys, chart_path=str(tmp_path))["chart"]["metadata"]["version"] == "1.2.0"


def test_the_binary_by_path_or_by_name_in_path(capsys, tmp_path, monkeypatch):
    helm = executable(tmp_path / "helm4")
    assert run_module(capsys, binary_path=helm)["binary"] == helm
    monkeypatch.setenv("PATH", "/nonexistent" + os.pathsep + str(tmp_path))
    assert run_module(capsys, binary_path="helm4")["binary"] == helm
    # not executable, or a directory: not a helm binary
    (tmp_path / "helm3").write_text("#!/bin/sh\n")
    assert run_module(capsys, binary_path=str(tmp_path / "helm3"))["binary"] is None
    assert run_module(capsys, binary_path=str(tmp_path))["binary"] is None
    assert run_module(capsys, binary_path="helm-not-installed")["binary"] is None


def test_the_kubeconfigs_contexts_and_nothing_else_of_it(capsys, tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    result = run_module(capsys, kubeconfig=str(path), context="site-ro")
    assert result["kubeconfig"] == {"path": str(path), "exists": True, "contexts": ["site-admin", "site-ro"],
                                    "has_context": True}
    assert "secret-token" not in json.dumps(result) and "10.0.0.1" not in json.dumps(result)
    assert run_module(capsys, kubeconfig=str(path), context="other")["kubeconfig"]["has_context"] is False
    assert run_module(capsys, kubeconfig=str(path))["kubeconfig"]["has_context"] is None


def test_a_missing_or_unparsable_kubeconfig(capsys, tmp_path):
    missing = run_module(capsys, kubeconfig=str(tmp_path / "nope"), context="site-admin")["kubeconfig"]
    assert (missing["exists"], missing["contexts"], missing["has_context"]) == (False, None, None)
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [unclosed\n")
    broken = run_module(capsys, kubeconfig=str(bad), context="site-admin")["kubeconfig"]
    assert (broken["exists"], broken["contexts"], broken["has_context"]) == (True, None, None)
    empty = tmp_path / "empty"
    empty.write_text("apiVersion: v1\nkind: Config\n")
    assert run_module(capsys, kubeconfig=str(empty), context="a")["kubeconfig"]["has_context"] is False


def test_nothing_asked_nothing_read(capsys):
    result = run_module(capsys, binary_path="/bin/sh")
    assert (result["binary"], result["kubeconfig"], result["chart"]) == ("/bin/sh", None, None)
