"""Integration: every Kubernetes API error ends in a message naming verb, object and the server's answer.

The modules run through real ansible-playbook (action plugins, module base, kubernetes.core's
client) against the simulated cluster; errors are injected at run time with
POST /_sim/api_errors (simcluster/api_faults.py). The API server is stopped last.
Run with -s to see the table of messages (lines starting with "API-ERROR |").
"""
import json
import os
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from playbook import BIN, run_playbook
from test_mig_helpers import labels, mig_module

pytestmark, cluster = mig_module("api-errors.yaml", "single", pending=["gpu-h100-4"])
TABLE = []


def set_faults(sim, rules):
    req = urllib.request.Request(sim.url + "/_sim/api_errors", data=json.dumps(rules).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def hits(sim):
    with urllib.request.urlopen(sim.url + "/_sim/api_errors", timeout=10) as resp:
        return [r["hits"] for r in json.loads(resp.read())["rules"]]


def run_task(sim, tmp_path, module, args, check=False, env=None):
    play = os.path.join(str(tmp_path), "play.yml")
    with open(play, "w") as fh:
        fh.write("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - name: under test\n"
                 "      skaffon.gpu_platform.%s: %s\n" % (module, json.dumps(args)))
    res = run_playbook(play, env or sim.env, check=check, timeout=300)
    found = res.task_results("under test")
    assert found, res
    return found[0]


def record(case, out):
    TABLE.append((case, out.get("msg")))
    print("API-ERROR | %s | %s" % (case, out.get("msg")))


MIG = {"nodes": ["gpu-h100-1"], "profile": "all-1g.10gb", "timeout": 30}


@pytest.mark.parametrize("status,verb,resource,starts", [
    (403, "patch", "nodes", 'Node gpu-h100-1: PATCH Node gpu-h100-1: HTTP 403 Forbidden: nodes "gpu-h100-1" is '
                            'forbidden: User "system:serviceaccount:default:ansible" cannot patch resource "nodes" '
                            'in API group "" at the cluster scope (the credentials lack RBAC verb \'patch\' on '
                            'nodes cluster-wide (a ClusterRole)). Nothing was changed on node gpu-h100-1'),
    (409, "patch", "nodes", "Node gpu-h100-1: PATCH Node gpu-h100-1: HTTP 409 Conflict: Operation cannot be "
                            'fulfilled on nodes "gpu-h100-1": the object has been modified'),
    (422, "patch", "nodes", 'Node gpu-h100-1: PATCH Node gpu-h100-1: HTTP 422 Unprocessable Entity: Node '
                            '"gpu-h100-1" is invalid: metadata.labels'),
    (500, "patch", "nodes", "Node gpu-h100-1: PATCH Node gpu-h100-1: HTTP 500 Internal Server Error: Internal "
                            "error occurred: simulated failure (faults.api_errors) (the API server failed; a write "
                            "is not retried blindly"),
    (401, "list", "clusterpolicies", "LIST ClusterPolicy: HTTP 401 Unauthorized: Unauthorized (the credentials "
                                     "were refused: check the kubeconfig, token or client certificate)"),
    (404, "get", "configmaps", "Neither ConfigMap gpu-operator/gpu-h100-1-mig-config nor "
                               "gpu-operator/default-mig-parted-config exists"),
])
def test_write_and_read_errors_fail_with_the_servers_message(cluster, tmp_path, status, verb, resource, starts):
    set_faults(cluster, [{"status": status, "verb": verb, "resource": resource}])
    try:
        out = run_task(cluster, tmp_path, "mig_config", MIG)
    finally:
        set_faults(cluster, [])
    record("%d %s %s (mig_config)" % (status, verb, resource), out)
    assert out.get("failed") and out["msg"].startswith(starts), out["msg"]
    assert "Traceback" not in json.dumps(out) and out.get("changed") is not True
    assert labels(cluster, "gpu-h100-1")["nvidia.com/mig.config"] == "all-disabled"


def test_a_write_is_not_retried_but_reads_are(cluster, tmp_path):
    set_faults(cluster, [{"status": 500, "verb": "patch", "resource": "nodes", "count": 5},
                         {"status": 503, "verb": "list", "resource": "pods", "count": 2},
                         {"status": 504, "verb": "get", "resource": "nodes", "count": 1}])
    try:
        out = run_task(cluster, tmp_path, "mig_config", MIG)
        counts = hits(cluster)
    finally:
        set_faults(cluster, [])
    assert out.get("failed") and counts == [1, 2, 1], (counts, out["msg"])


def test_429_reads_honour_retry_after_and_succeed(cluster, tmp_path):
    set_faults(cluster, [{"status": 429, "verb": "list", "resource": "pods", "count": 2, "retry_after": 1}])
    started = time.monotonic()
    try:
        out = run_task(cluster, tmp_path, "mig_config", MIG, check=True)
        counts = hits(cluster)
    finally:
        set_faults(cluster, [])
    assert not out.get("failed"), out.get("msg")
    assert counts == [2] and time.monotonic() - started >= 2   # waited Retry-After twice
    record("429 list pods x2, Retry-After 1 (mig_config, check mode)", {"msg": "succeeded after 2 retries"})


def test_watch_errors_mid_wait_are_resumed(cluster, tmp_path):
    set_faults(cluster, [{"status": 503, "verb": "watch", "resource": "nodes", "count": 2}])
    try:
        out = run_task(cluster, tmp_path, "mig_config", dict(MIG, nodes=["gpu-h100-2"]))
        counts = hits(cluster)
    finally:
        set_faults(cluster, [])
    assert not out.get("failed"), out.get("msg")
    assert counts == [2] and out["changed"] is True
    assert out["nodes"][0]["offer"]["allocatable"] == {"nvidia.com/gpu": 14}
    record("503 watch nodes x2 during the MIG wait (mig_config)", {"msg": "succeeded: watch resumed"})


def test_persistent_5xx_on_reads_gives_up_after_the_bounded_retry(cluster, tmp_path):
    set_faults(cluster, [{"status": 500, "verb": "list", "resource": "clusterpolicies"}])
    started = time.monotonic()
    try:
        out = run_task(cluster, tmp_path, "cluster_policy_wait", {"timeout": 5})
    finally:
        set_faults(cluster, [])
    record("500 list clusterpolicies, always (cluster_policy_wait)", out)
    assert out.get("failed") and out["msg"].startswith(
        "LIST ClusterPolicy [metadata.name=cluster-policy]: HTTP 500 Internal Server Error: Internal error occurred: simulated failure")
    assert "retried for a while, then gave up" in out["msg"]
    assert 25 < time.monotonic() - started < 120


def test_vaulted_kubeconfig_works_through_the_action_plugins(cluster, tmp_path):
    vault_pass = tmp_path / "vault-pass"
    vault_pass.write_text("s3cret\n")
    vaulted = tmp_path / "kubeconfig.vault"
    vaulted.write_text(open(cluster.kubeconfig).read())
    subprocess.run([os.path.join(BIN, "ansible-vault"), "encrypt", str(vaulted), "--vault-password-file",
                    str(vault_pass)], check=True, capture_output=True)
    assert vaulted.read_text().startswith("$ANSIBLE_VAULT;")
    env = dict((k, v) for k, v in cluster.env.items() if k not in ("KUBECONFIG", "K8S_AUTH_KUBECONFIG"))
    env["ANSIBLE_VAULT_PASSWORD_FILE"] = str(vault_pass)
    out = run_task(cluster, tmp_path, "cluster_policy_wait", {"timeout": 30, "kubeconfig": str(vaulted)}, env=env)
    assert not out.get("failed") and out["ready"] is True, out.get("msg")
    out = run_task(cluster, tmp_path, "mig_config", dict(MIG, kubeconfig=str(vaulted)), check=True, env=env)
    assert not out.get("failed"), out.get("msg")


def test_a_hung_api_server_is_a_timeout_not_a_hang(cluster):
    """Real kubernetes client, Kube with a short read timeout, a socket that accepts and never answers."""
    from kubernetes import dynamic

    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.errors import ApiError
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.kube import Kube
    dyn = dynamic.DynamicClient(cluster.api_client())
    kube = Kube(dyn, retry_seconds=2, request_timeout=(2, 1))
    kube.resource("v1", "Node")                        # discovery from the real server
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)
    dyn.client.configuration.host = "http://127.0.0.1:%d" % hung.getsockname()[1]
    kube.url = dyn.client.configuration.host
    started = time.monotonic()
    with pytest.raises(ApiError) as err:
        kube.get("v1", "Node", "gpu-h100-1")
    hung.close()
    record("read timeout (server accepts, never answers; Kube direct)", {"msg": str(err.value)})
    assert str(err.value).startswith("GET Node gpu-h100-1: cannot reach the API server at http://127.0.0.1:")
    assert "no answer in time" in str(err.value) and time.monotonic() - started < 30


def test_api_server_stopped_mid_wait_says_what_was_changed(cluster, tmp_path):
    """gpu-h100-4 stays pending: the module waits; the API server stops after the relabel."""
    out = {}

    def run():
        out.update(run_task(cluster, tmp_path, "mig_config", {"nodes": ["gpu-h100-4"], "profile": "all-1g.10gb",
                                                              "timeout": 120}))
    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and labels(cluster, "gpu-h100-4")["nvidia.com/mig.config"] != "all-1g.10gb":
        time.sleep(0.2)
    assert labels(cluster, "gpu-h100-4")["nvidia.com/mig.config"] == "all-1g.10gb"
    cluster.stop()
    thread.join(200)
    record("API server stopped during the MIG wait (mig_config)", out)
    assert out.get("failed") and out["changed"] is True
    assert out["msg"].startswith("Node gpu-h100-4: WATCH Node gpu-h100-4: cannot reach the API server at "
                                 + cluster.url), out["msg"]
    assert "Changed before the failure: nvidia.com/mig.config=all-1g.10gb on node gpu-h100-4 (was " in out["msg"]
    assert "waits for node gpu-h100-4 to finish" in out["msg"]
    # and a module started while the API server is down
    out = run_task(cluster, tmp_path, "cluster_policy_wait", {"timeout": 5})
    record("API server stopped (cluster_policy_wait)", out)
    assert out.get("failed") and "cannot reach the API server at %s: connection refused (is the API server " \
        "running" % cluster.url in out["msg"], out["msg"]
