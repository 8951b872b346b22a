"""helm_release_info against a stand-in helm binary that prints what helm 3/4 print for `list -o json` and
`get values -o json`, and records the arguments and the Helm environment it was run with."""
import json
import stat

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.skaffon.gpu_platform.plugins.modules import helm_release_info

LISTED = [{"name": "gpu-operator-canary", "namespace": "gpu-operator", "revision": "1", "status": "deployed",
           "chart": "gpu-operator-v26.3.3", "app_version": "v26.3.3", "updated": "2026-11-30 10:00:00 +0000 UTC"},
          {"name": "gpu-operator", "namespace": "gpu-operator", "revision": "4", "status": "pending-upgrade",
           "chart": "gpu-operator-v26.7.0", "app_version": "v26.7.0", "updated": "2026-12-01 10:00:00 +0000 UTC"}]
VALUES = {"driver": {"enabled": False}, "operator": {"imagePullSecrets": ["regcred"]}}
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: [{name: site, context: {}}]\nusers: []\n"


def fake_helm(tmp_path, listed=None, values="default", rc=0, stderr="", raw=None):
    """A helm that answers `list` (LISTED unless `listed`) and `get values` (VALUES unless `values`); each call
    appends {argv, env} to calls.jsonl."""
    listed = LISTED if listed is None else listed
    values = VALUES if values == "default" else values
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "helm"
    listed_out = raw if raw is not None else json.dumps(listed)
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        "with open(%r, 'a') as fh:\n"
        "    fh.write(json.dumps({'argv': sys.argv[1:], 'env': {k: v for k, v in os.environ.items()"
        " if k.startswith('HELM_') or k == 'KUBECONFIG'}}) + '\\n')\n"
        "sys.stderr.write(%r)\n"
        "if sys.argv[1] == 'list':\n"
        "    print(%r)\n"
        "elif sys.argv[1:3] == ['get', 'values']:\n"
        "    print(%r)\n"
        "sys.exit(%d)\n" % (str(log), stderr, listed_out, json.dumps(values), rc))
    script.chmod(stat.S_IRWXU)
    return str(script), log


def calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            helm_release_info.main()
    return json.loads(capsys.readouterr().out)


def test_a_pending_release_is_found_by_its_exact_name_with_its_values_in_two_helm_runs(capsys, tmp_path):
    helm, log = fake_helm(tmp_path)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    result = run_module(capsys, name="gpu-operator", release_namespace="gpu-operator", binary_path=helm,
                        release_state=["deployed", "failed", "pending"], kubeconfig=str(kubeconfig),
                        context="site")
    assert result["changed"] is False and "failed" not in result
    status = result["status"]
    assert (status["name"], status["revision"], status["status"], status["chart"]) == (
        "gpu-operator", "4", "pending-upgrade", "gpu-operator-v26.7.0")
    assert status["values"] == VALUES
    made = calls(log)
    assert [c["argv"] for c in made] == [
        ["list", "--output=json", "--filter", "gpu-operator", "--deployed", "--failed", "--pending"],
        ["get", "values", "--output=json", "gpu-operator"]]
    # Helm access as kubernetes.core's Helm modules give it: namespace and context in helm's environment
    for call in made:
        assert call["env"]["HELM_NAMESPACE"] == "gpu-operator" and call["env"]["HELM_KUBECONTEXT"] == "site"
        assert call["env"]["KUBECONFIG"]


def test_a_name_the_filter_only_partly_matches_is_not_the_release(capsys, tmp_path):
    helm, log = fake_helm(tmp_path, listed=LISTED[:1])
    result = run_module(capsys, name="gpu-operator", release_namespace="gpu-operator", binary_path=helm)
    assert "status" not in result and result["changed"] is False
    assert [c["argv"][:2] for c in calls(log)] == [["list", "--output=json"]]   # no values read


def test_no_release_at_all(capsys, tmp_path):
    helm = fake_helm(tmp_path, listed=[])[0]
    assert "status" not in run_module(capsys, name="kai", release_namespace="kai-scheduler", binary_path=helm)


def test_a_release_without_user_values_has_an_empty_mapping(capsys, tmp_path):
    helm = fake_helm(tmp_path, values=None)[0]       # helm prints null
    result = run_module(capsys, name="gpu-operator", release_namespace="gpu-operator", binary_path=helm)
    assert result["status"]["values"] == {}


def test_a_failed_helm_run_is_a_message_with_helms_words(capsys, tmp_path):
    helm = fake_helm(tmp_path, rc=1, stderr="Error: Kubernetes cluster unreachable: connection refused\n")[0]
    result = run_module(capsys, name="gpu-operator", release_namespace="gpu-operator", binary_path=helm)
    assert result["failed"] is True
    assert "Kubernetes cluster unreachable" in result["msg"] and "Traceback" not in result["msg"]
    assert "cluster unreachable" in result["stderr"]


def test_output_that_is_not_json_names_the_binary(capsys, tmp_path):
    helm = fake_helm(tmp_path, raw="NAME\tNAMESPACE\tREVISION")[0]
    result = run_module(capsys, name="gpu-operator", release_namespace="gpu-operator", binary_path=helm)
    assert result["failed"] is True
    assert result["msg"].startswith("helm list printed no JSON (is binary_path Helm 3 or 4?)"), result["msg"]


def test_an_unknown_state_is_refused_before_helm_runs(capsys, tmp_path):
    helm, log = fake_helm(tmp_path)
    result = run_module(capsys, name="gpu-operator", release_namespace="gpu-operator", binary_path=helm,
                        release_state=["deployed", "broken"])
    assert result["failed"] is True and result["msg"].startswith("release_state broken: use all, deployed")
    assert calls(log) == []
