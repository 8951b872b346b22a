"""Integration: cluster_policy_wait with expect_nodes on the simulated cluster (issue 11, defect 1).

A ClusterPolicy that is Ready/Reconciled while one GPU node carries a pool taint the operand
DaemonSets do not tolerate and another node's device plugin crash-loops: the wait must fail
naming both nodes and why, and succeed for the node that serves its GPUs.
"""
import json
import os

import pytest

from kit.paths import CLUSTERPOLICY_CRD as CRD
from kit.playbook import run_playbook, task_play
from kit.queues import wait_for

NS = "gpu-ops"
POOL_TAINT = {"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}


L40S = {"model": "NVIDIA-L40S", "count": 4}


def gpu_node(name, **extra):
    return dict({"name": name, "gpus": L40S, "host_driver": "550.54.15", "host_toolkit": True}, **extra)


def cluster_file(tmp_dir, nodes, faults):
    spec = {"crds": [CRD], "nfd": "preinstalled", "nodes": nodes + ["cpu-1"], "faults": faults}
    path = os.path.join(tmp_dir, "expect-nodes.json")
    with open(path, "w") as fh:
        json.dump(spec, fh)
    return path


pytestmark = [pytest.mark.needs_shared]


def start(tmp_path_factory, nodes, faults=None):
    """The cluster with namespace, operator Deployment and ClusterPolicy (the twin reconciles it)."""
    from simcluster import testing
    sim = testing.start(cluster_file(str(tmp_path_factory.mktemp("cpw")), nodes, faults or {}),
                        str(tmp_path_factory.mktemp("sim")))
    try:
        from kubernetes import client
        api = sim.api_client()
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS, "labels": {
            "pod-security.kubernetes.io/enforce": "privileged"}}})
        labels = {"app": "gpu-operator", "app.kubernetes.io/component": "gpu-operator"}
        template = {"metadata": {"labels": labels}, "spec": {"containers": [
            {"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v26.7.0",
                                     "command": ["gpu-operator"]}]}}
        client.AppsV1Api(api).create_namespaced_deployment(NS, {
            # the twin (simcluster/twins/context.py OPERATOR_LABELS) still wants `app` on the Deployment too
            "metadata": {"name": "gpu-operator", "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}})
        enabled = dict((k, {"enabled": True}) for k in ("devicePlugin", "gfd", "validator"))
        disabled = dict((k, {"enabled": False}) for k in ("driver", "toolkit", "migManager", "dcgm",
                                                         "dcgmExporter", "nodeStatusExporter"))
        client.CustomObjectsApi(api).create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
            "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "gpus"},
            "spec": dict(enabled, operator={}, daemonsets={}, **disabled)})
    except Exception:
        sim.stop()
        raise
    return sim


def settle(sim, what, condition, timeout=180):
    """Wait until the twins have brought the cluster to `condition` (sim's API client -> bool): the tests
    give the module short timeouts that must expire on a settled cluster, never on a slow machine."""
    from kubernetes import client
    api = sim.api_client()
    wait_for(lambda: condition(client, api), timeout=timeout, what=what)


def policy_ready_and_gpus_on(node):
    def condition(client, api):
        policy = client.CustomObjectsApi(api).get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "gpus")
        allocatable = client.CoreV1Api(api).read_node(node).status.allocatable or {}
        return (policy.get("status") or {}).get("state") == "ready" and allocatable.get("nvidia.com/gpu", "0") != "0"
    return condition


def device_plugin_crash_looping(client, api):
    pods = client.CoreV1Api(api).list_namespaced_pod(NS, label_selector="app=nvidia-device-plugin-daemonset").items
    return any(status.state.waiting is not None and status.state.waiting.reason == "CrashLoopBackOff"
               for pod in pods for status in pod.status.container_statuses or [])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    sim = start(tmp_path_factory, [gpu_node("gpu-ok"), gpu_node("gpu-tainted", taints=[POOL_TAINT])])
    try:
        settle(sim, "a ready ClusterPolicy and gpu-ok offering its GPUs", policy_ready_and_gpus_on("gpu-ok"))
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def crashing(tmp_path_factory):
    sim = start(tmp_path_factory, [gpu_node("gpu-crash")], {"device_plugin_crashloop": ["gpu-crash"]})
    try:
        settle(sim, "the device plugin on gpu-crash in CrashLoopBackOff", device_plugin_crash_looping)
        yield sim
    finally:
        sim.stop()


def wait(sim, tmp_path, **args):
    args = dict({"name": "gpus", "operator_namespace": NS, "timeout": 60}, **args)
    play = task_play(tmp_path / "wait.yml", "skaffon.gpu_platform.cluster_policy_wait", args, name="wait")
    res = run_playbook(play, sim.env, timeout=300)
    out = res.task_results("wait")
    assert out, res
    return out[0]


def test_ready_cluster_policy_with_a_node_the_operands_skip_fails_naming_it(cluster, tmp_path):
    out = wait(cluster, tmp_path, expect_nodes=["gpu-ok", "gpu-tainted"], timeout=20)
    assert out.get("failed") and out["ready"] is False
    assert out["state"] == "ready" and out["reason"] == "Reconciled"      # what the role used to accept
    assert out["msg"].startswith("ClusterPolicy gpus is ready but 1 expected node(s) offer no GPU "
                                 "(gpu-tainted) after 20s")
    assert list(out["nodes_without_gpus"]) == ["gpu-tainted"]
    tainted = " ".join(out["nodes_without_gpus"]["gpu-tainted"])
    assert "taint gpu.skaffon.io/workload=training:NoSchedule is not tolerated by the operand DaemonSets " in tainted
    assert "nvidia-device-plugin-daemonset" in tainted and "daemonsets.tolerations" in tainted
    assert any(line.startswith("node gpu-tainted offers no GPU: taint") for line in out["diagnostics"])


def test_crashing_device_plugin_is_named_with_its_last_log_line(crashing, tmp_path):
    out = wait(crashing, tmp_path, expect_nodes=["gpu-crash"], timeout=10)
    assert out.get("failed") and out["state"] == "notReady"
    line = ("CrashLoopBackOff (container nvidia-device-plugin): last log line: E1129 00:00:00.000000       1 "
            "main.go:176] error starting plugins: failed to initialize NVML: Unknown Error")
    assert any(d.startswith("pod %s/nvidia-device-plugin-daemonset-" % NS) and d.endswith(line)
               for d in out["diagnostics"]), out["diagnostics"]
    crash = " ".join(out["nodes_without_gpus"]["gpu-crash"])
    assert "is CrashLoopBackOff: last log line: E1129" in crash and "failed to initialize NVML" in crash


def test_nodes_that_serve_their_gpus_pass(cluster, tmp_path):
    out = wait(cluster, tmp_path, expect_nodes=["gpu-ok"])
    assert not out.get("failed"), out.get("msg")
    assert out["ready"] is True and out["changed"] is False


def test_a_missing_node_is_named(cluster, tmp_path):
    out = wait(cluster, tmp_path, expect_nodes=["gpu-ok", "gpu-typo"], timeout=5)
    assert out.get("failed") and out["nodes_without_gpus"] == {"gpu-typo": ["node gpu-typo does not exist"]}
