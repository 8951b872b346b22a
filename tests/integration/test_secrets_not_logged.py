"""Issue 11 "Secrets": a Helm repository password, a token and secret chart values never show
in the output, not with --diff and not with -vvv, while they do reach Helm and the cluster.

A local Helm repository with basic auth serves the real chart; the inventory sets
gpu_operator_chart_repo_username/password (own variables, not the URL), an env var named
like a password and one like a token, and a value marked secret with gpu_operator_secret_values.
"""
import json
import os
import shutil
import subprocess

import pytest

from kit.helm_repo import PLAYBOOK, env, plan_file, serve_repo
from kit.paths import BIN, REPO
from kit.playbook import ansible_playbook
from kit.pool_inventory import CHART, cluster_file, write_inventory

NODE_PREREQS = os.path.join(REPO, "playbooks", "node_prereqs.yml")
USER, PASSWORD = "ops", "Repo-Pa55-q8v"
PROXY_PASSWORD, TOKEN, SITE_KEY = "Proxy-S3cret-z1", "Tok-9f8e7d6c", "SiteKey-77aa"
SECRETS = (PASSWORD, PROXY_PASSWORD, TOKEN, SITE_KEY)

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from simcluster import testing
    work = tmp_path_factory.mktemp("secrets")
    repo = work / "repo"
    repo.mkdir()
    shutil.copy(CHART, str(repo))
    server = serve_repo(str(repo), USER, PASSWORD)
    url = "http://127.0.0.1:%d" % server.server_address[1]
    subprocess.run([os.path.join(BIN, "helm3"), "repo", "index", str(repo), "--url", url], check=True)
    sim = testing.start(cluster_file(str(work / "cluster.yaml")), str(work / "run"))
    try:
        inv = write_inventory(work, sim, all_vars={
            "gpu_operator_chart_source": "repo", "gpu_operator_chart_ref": "gpu-operator",
            "gpu_operator_chart_repo_url": url,
            "gpu_operator_chart_repo_username": USER, "gpu_operator_chart_repo_password": PASSWORD,
            "gpu_operator_secret_values": ["operator.annotations.site-key"],
            "gpu_operator_values": {"operator": {
                "env": [{"name": "HTTPS_PROXY_PASSWORD", "value": PROXY_PASSWORD},
                        {"name": "NGC_API_TOKEN", "value": TOKEN}],
                "annotations": {"site-key": SITE_KEY}}}})
        prep = subprocess.run(ansible_playbook() + ["-i", inv, NODE_PREREQS],
                              env=env(sim), capture_output=True, text=True, timeout=600)
        assert prep.returncode == 0, prep.stdout[-3000:]
        yield sim, inv, work
    finally:
        sim.stop()
        server.shutdown()


def run(sim, inv, plan, *args):
    cmd = ansible_playbook() + ["-i", inv, PLAYBOOK, "-e", "@" + plan] + list(args)
    return subprocess.run(cmd, env=env(sim), capture_output=True, text=True, timeout=900)


def test_repo_password_token_and_secret_values_never_shown(setup):
    sim, inv, work = setup
    plan = plan_file(work)
    first = run(sim, inv, plan, "-vvv", "--diff")
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-4000:]
    for secret in SECRETS:
        assert secret not in out, (secret, [line for line in out.splitlines() if secret in line][:5])
    # they did reach Helm and the cluster
    values = json.loads(sim.run(os.path.join(BIN, "helm3"), "get", "values", "gpu-operator", "-n",
                                "gpu-operator", "-o", "json").stdout)
    assert {"name": "HTTPS_PROXY_PASSWORD", "value": PROXY_PASSWORD} in values["operator"]["env"]
    assert "********" in out  # the diff showed them masked

    # a changed secret: the diff says it changed without showing either value
    with open(os.path.join(inv, "group_vars", "all.yml")) as handle:
        text = handle.read()
    with open(os.path.join(inv, "group_vars", "all.yml"), "w") as handle:
        handle.write(text.replace(TOKEN, TOKEN + "-new"))
    second = run(sim, inv, plan, "-vvv", "--diff", "--check")
    out = second.stdout + second.stderr
    assert second.returncode == 0, out[-4000:]
    for secret in SECRETS:
        assert secret not in out, (secret, [line for line in out.splitlines() if secret in line][:5])
    assert "******** (changed)" in out or "'value': '********'" in out, out[-3000:]
