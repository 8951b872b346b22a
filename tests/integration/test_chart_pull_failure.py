"""A failed authenticated chart pull: the operator reads Helm's reason, never the repository
username or password (not at -vvv either), and no scratch directory is left behind."""
import glob
import os
import shutil
import subprocess

import pytest

from kit.helm_repo import PLAYBOOK, env, plan_file, serve_repo
from kit.paths import BIN
from kit.playbook import ansible_playbook
from kit.pool_inventory import CHART, cluster_file, write_inventory

USER, PASSWORD = "chart-reader-7q", "Wrong-Pa55-x1"    # not what the repository accepts

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


def test_failed_pull_says_why_without_the_credentials_and_cleans_up(tmp_path):
    from simcluster import testing
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(CHART, str(repo))
    server = serve_repo(str(repo), "ops", "Repo-Pa55-q8v")     # the repository's own account
    url = "http://127.0.0.1:%d" % server.server_address[1]
    subprocess.run([os.path.join(BIN, "helm3"), "repo", "index", str(repo), "--url", url], check=True)
    sim = testing.start(cluster_file(str(tmp_path / "cluster.yaml")), str(tmp_path / "run"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    try:
        inv = write_inventory(tmp_path, sim, all_vars={
            "gpu_operator_chart_source": "repo", "gpu_operator_chart_ref": "gpu-operator",
            "gpu_operator_chart_repo_url": url,
            "gpu_operator_chart_repo_username": USER, "gpu_operator_chart_repo_password": PASSWORD})
        run_env = dict(env(sim), TMPDIR=str(scratch))
        proc = subprocess.run(ansible_playbook() + ["-i", inv, PLAYBOOK, "-vvv",
                               "-e", "@" + plan_file(tmp_path)],
                              env=run_env, capture_output=True, text=True, timeout=900)
    finally:
        sim.stop()
        server.shutdown()
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "helm pull of gpu-operator v26.7.0 from %s failed:" % url in out, out[-3000:]
    assert "401" in out, out[-3000:]                       # Helm's reason reaches the operator
    assert "gpu_operator_chart_repo_username / gpu_operator_chart_repo_password" in out
    for secret in (USER, PASSWORD):
        assert secret not in out, (secret, [line for line in out.splitlines() if secret in line][:5])
    assert glob.glob(str(scratch / "gpu-operator-chart-*")) == []
