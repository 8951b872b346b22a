"""Issue 11 "Secrets": a Helm repository password, a token and secret chart values never show
in the output, not with --diff and not with -vvv, while they do reach Helm and the cluster.

A local Helm repository with basic auth serves the real chart; the inventory sets
gpu_operator_chart_repo_username/password (own variables, not the URL), an env var named
like a password and one like a token, and a value marked secret with gpu_operator_secret_values.
"""
import base64
import http.server
import json
import os
import shutil
import subprocess
import threading

import pytest

from playbook import BIN, REPO
from pool_inventory import CHART, cluster_file, need_shared, write_inventory

PLAYBOOK = os.path.join(REPO, "playbooks", "gpu_operator.yml")
NODE_PREREQS = os.path.join(REPO, "playbooks", "node_prereqs.yml")
USER, PASSWORD = "ops", "Repo-Pa55-q8v"
PROXY_PASSWORD, TOKEN, SITE_KEY = "Proxy-S3cret-z1", "Tok-9f8e7d6c", "SiteKey-77aa"
SECRETS = (PASSWORD, PROXY_PASSWORD, TOKEN, SITE_KEY)

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


def serve_repo(folder):
    """A Helm repository over HTTP that answers 401 without the right basic auth."""
    expected = "Basic " + base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=folder, **kwargs)

        def do_GET(self):
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="charts"')
                self.end_headers()
                return
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    need_shared()
    from simcluster import testing
    work = tmp_path_factory.mktemp("secrets")
    repo = work / "repo"
    repo.mkdir()
    shutil.copy(CHART, str(repo))
    server = serve_repo(str(repo))
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
        prep = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inv, NODE_PREREQS],
                              env=env(sim), capture_output=True, text=True, timeout=600)
        assert prep.returncode == 0, prep.stdout[-3000:]
        yield sim, inv, work
    finally:
        sim.stop()
        server.shutdown()


def env(sim):
    run_env = dict(sim.env)
    run_env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "build", "collections"),
                   ANSIBLE_PYTHON_INTERPRETER=os.path.join(BIN, "python"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_LOCALHOST_WARNING="false")
    return run_env


def plan_file(work, sim, inv):
    """The driver plan as node_prereqs.yml prints it (the person hands it to gpu_operator.yml)."""
    from ansible_collections.skaffon.gpu_platform.plugins.filter.driver_plan import driver_plan
    hosts = {"gpu-h100-1": {"gpu_node": _facts(True)}, "gpu-h100-2": {"gpu_node": _facts(True)},
             "gpu-l40s-1": {"gpu_node": _facts(False)}}
    path = os.path.join(str(work), "plan.json")
    with open(path, "w") as handle:
        json.dump({"gpu_operator_driver_plan": json.loads(json.dumps(
            driver_plan(hosts, driver_precompiled=True)))}, handle)
    return path


def _facts(host_driver):
    return {"gpu_host": True, "gpu_count": 2,
            "driver": {"state": "host", "version": "590.48.01"} if host_driver else {"state": "none"},
            "toolkit": {"state": "none"}, "container_runtime": {}, "nouveau_loaded": False,
            "kernel": {"headers_installed": False}}


def run(sim, inv, plan, *args):
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", inv, PLAYBOOK, "-e", "@" + plan] + list(args)
    return subprocess.run(cmd, env=env(sim), capture_output=True, text=True, timeout=900)


def test_repo_password_token_and_secret_values_never_shown(setup):
    sim, inv, work = setup
    plan = plan_file(work, sim, inv)
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
