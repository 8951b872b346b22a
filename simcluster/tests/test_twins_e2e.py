"""End to end: the twins behind the HTTP API, driven by the kubernetes client and kubectl."""
import json
import shutil
import time

import pytest

from simcluster.twins.testkit import chart_workloads, cluster_policy

pytestmark = [
    pytest.mark.cluster("default.yaml"), pytest.mark.slow, pytest.mark.needs_shared]
NS = "gpu-operator"
CUDA_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"


def _wait(fn, timeout=20, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out waiting for %s" % what)


@pytest.fixture(scope="module")
def api(simcluster):
    from kubernetes import client
    c = simcluster.api_client()
    core, apps = client.CoreV1Api(c), client.AppsV1Api(c)
    custom = client.CustomObjectsApi(c)
    core.create_namespace({"metadata": {"name": NS, "labels": {
        "pod-security.kubernetes.io/enforce": "privileged"}}})
    for obj in chart_workloads(NS):      # the real chart's operator and NFD workloads
        if obj["kind"] == "Deployment":
            apps.create_namespaced_deployment(NS, obj)
        else:
            apps.create_namespaced_daemon_set(NS, obj)
    custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", cluster_policy())
    return {"core": core, "apps": apps, "custom": custom, "sim": simcluster}


def test_cluster_policy_becomes_ready_seen_through_a_watch(api):
    from kubernetes import watch
    custom = api["custom"]
    states = []
    w = watch.Watch()
    for ev in w.stream(custom.list_cluster_custom_object, "nvidia.com", "v1", "clusterpolicies",
                       timeout_seconds=20):
        st = ev["object"].get("status") or {}
        states.append(st.get("state"))
        ready = [c for c in st.get("conditions") or [] if c["type"] == "Ready"]
        if st.get("state") == "ready" and ready and ready[0]["reason"] == "Reconciled":
            w.stop()
            break
    assert "ready" in states
    nodes = {n.metadata.name: n for n in api["core"].list_node().items}
    assert nodes["gpu-h100-1"].status.allocatable["nvidia.com/gpu"] == "8"
    assert nodes["gpu-h100-1"].metadata.labels["nvidia.com/gpu.deploy.driver"] == "pre-installed"


def test_vectoradd_log_through_the_log_endpoint(api):
    core = api["core"]
    _wait(lambda: (core.read_node("gpu-l40s-1").status.allocatable or {}).get("nvidia.com/gpu") == "4")
    core.create_namespaced_pod("default", {
        "metadata": {"name": "cuda-vectoradd"},
        "spec": {"restartPolicy": "OnFailure", "containers": [{
            "name": "cuda-vectoradd", "image": CUDA_IMAGE,
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    _wait(lambda: core.read_namespaced_pod("cuda-vectoradd", "default").status.phase == "Succeeded",
          what="vectoradd Succeeded")
    log = core.read_namespaced_pod_log("cuda-vectoradd", "default")
    assert log.rstrip().endswith("Test PASSED")


def test_unschedulable_message_with_kubectl(api):
    sim = api["sim"]
    if not shutil.which("kubectl", path=sim.env["PATH"]):
        pytest.skip("kubectl not installed")
    api["core"].create_namespaced_pod("default", {
        "metadata": {"name": "too-big"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                 "resources": {"limits": {"nvidia.com/gpu": "64"}}}]}})
    msg = _wait(lambda: sim.run("kubectl", "get", "pod", "too-big", "-o",
                                "jsonpath={.status.conditions[?(@.type=='PodScheduled')].message}").stdout)
    assert msg.startswith("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    out = sim.run("kubectl", "get", "pods", "-n", NS, "-o", "wide").stdout
    assert "nvidia-device-plugin-daemonset-" in out and "Running" in out


def test_rollout_restart_with_kubectl_replaces_the_device_plugin(api):
    sim, core = api["sim"], api["core"]
    if not shutil.which("kubectl", path=sim.env["PATH"]):
        pytest.skip("kubectl not installed")
    sel = "app=nvidia-device-plugin-daemonset"
    before = {p.metadata.name for p in core.list_namespaced_pod(NS, label_selector=sel).items}
    assert before
    sim.run("kubectl", "-n", NS, "rollout", "restart", "daemonset/nvidia-device-plugin-daemonset")
    sim.run("kubectl", "-n", NS, "rollout", "status", "daemonset/nvidia-device-plugin-daemonset",
            "--timeout=30s")
    after = {p.metadata.name for p in core.list_namespaced_pod(NS, label_selector=sel).items}
    assert after and not after & before
    ds = json.loads(sim.run("kubectl", "-n", NS, "get", "ds", "nvidia-device-plugin-daemonset",
                            "-o", "json").stdout)
    assert ds["status"]["numberReady"] == ds["status"]["desiredNumberScheduled"] == 2
