"""Shared setup for the MIG integration tests (no tests here): cluster file, GPU Operator, runners."""
import atexit
import json
import os
import shutil
import tempfile
import time

from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig.config import MigConfigError, MigConfigurator
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig.k8s import K8sMigApi

from kit.paths import CLUSTERPOLICY_CRD as CRD
from kit.playbook import run_playbook, task_play

OPERATOR_NS = "gpu-operator"

# Six H100 nodes (one per scenario), one CPU node; gpu-h100-4 never leaves pending.
CLUSTER_TEMPLATE = """\
crds: [{crd}]
# no NFD subchart here (the operator is created by hand): labels from the start
nfd: preinstalled
nodes:
  - {{name: gpu-h100-1, gpus: {{model: NVIDIA-H100-80GB-HBM3, count: 2, memory_mib: 81559, mig_capable: true}},
     host_driver: "550.54.15", host_toolkit: true}}
  - {{name: gpu-h100-2, gpus: {{model: NVIDIA-H100-80GB-HBM3, count: 2, memory_mib: 81559, mig_capable: true}},
     host_driver: "550.54.15", host_toolkit: true}}
  - {{name: gpu-h100-3, gpus: {{model: NVIDIA-H100-80GB-HBM3, count: 2, memory_mib: 81559, mig_capable: true}},
     host_driver: "550.54.15", host_toolkit: true}}
  - {{name: gpu-h100-4, gpus: {{model: NVIDIA-H100-80GB-HBM3, count: 2, memory_mib: 81559, mig_capable: true}},
     host_driver: "550.54.15", host_toolkit: true}}
  - {{name: gpu-h100-5, gpus: {{model: NVIDIA-H100-80GB-HBM3, count: 2, memory_mib: 81559, mig_capable: true}},
     host_driver: "550.54.15", host_toolkit: true}}
  - {{name: gpu-h100-6, gpus: {{model: NVIDIA-H100-80GB-HBM3, count: 2, memory_mib: 81559, mig_capable: true}},
     host_driver: "550.54.15", host_toolkit: true}}
  - name: cpu-1
faults:
  mig_pending_forever: {pending}
  mig_apply_fails: {failing}
"""


def write_cluster_file(name, pending=(), failing=()):
    """A cluster file (removed at exit) for the `cluster` marker, computed at import time."""
    folder = tempfile.mkdtemp(prefix="mig-cluster-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, name)
    with open(path, "w") as handle:
        handle.write(CLUSTER_TEMPLATE.format(crd=CRD, pending=json.dumps(list(pending)),
                                             failing=json.dumps(list(failing))))
    return path


def mig_module(name, strategy, pending=(), failing=()):
    """(pytestmark, cluster fixture) of a MIG test module: its own cluster file, and the
    operator installed with that MIG strategy once per module."""
    import pytest
    marks = [
        pytest.mark.needs_shared,
        pytest.mark.cluster(write_cluster_file(name, pending, failing)),
    ]

    @pytest.fixture(scope="module")
    def cluster(simcluster):
        install_operator(simcluster, strategy=strategy)
        return simcluster

    return marks, cluster


def install_operator(sim, strategy, timeout=30):
    """What the gpu-operator chart creates that matters here: namespace, operator Deployment
    (the twin reconciles only with it), ClusterPolicy. Waits for MIG-ready nodes."""
    from kubernetes import client
    api = sim.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    custom = client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": OPERATOR_NS, "labels": {
        "pod-security.kubernetes.io/enforce": "privileged"}}})
    from simcluster.twins.testkit import chart_workloads
    for obj in chart_workloads(OPERATOR_NS):     # the real chart's operator + NFD workloads
        if obj["kind"] == "Deployment":
            apps.create_namespaced_deployment(OPERATOR_NS, obj)
        else:
            apps.create_namespaced_daemon_set(OPERATOR_NS, obj)
    custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"operator": {}, "daemonsets": {}, "dcgm": {"enabled": False},
                 "dcgmExporter": {"enabled": True}, "devicePlugin": {"enabled": True},
                 "driver": {"enabled": False}, "toolkit": {"enabled": False}, "gfd": {"enabled": True},
                 "nodeStatusExporter": {"enabled": False},
                 "migManager": {"enabled": True, "config": {"default": "all-disabled"}},
                 "mig": {"strategy": strategy}}})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        policy = custom.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
        pods = core.list_namespaced_pod(OPERATOR_NS, label_selector="app=nvidia-mig-manager").items
        ready = [p for p in pods if p.status.phase == "Running"]
        nodes = [n for n in core.list_node().items
                 if (n.metadata.labels or {}).get("nvidia.com/mig.config.state") == "success"]
        if (policy.get("status") or {}).get("state") == "ready" and len(ready) >= 6 and len(nodes) >= 6:
            return
        time.sleep(0.2)
    raise AssertionError("GPU Operator twin not ready: %s" % (policy.get("status"),))


def node(sim, name):
    from kubernetes import client
    api = sim.api_client()
    return api.sanitize_for_serialization(client.CoreV1Api(api).read_node(name))


def labels(sim, name):
    return node(sim, name)["metadata"]["labels"]


def wait_pod_running(sim, namespace, name, timeout=20):
    from kubernetes import client
    core = client.CoreV1Api(sim.api_client())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod(name, namespace)
        if pod.status.phase == "Running":
            return pod
        time.sleep(0.1)
    raise AssertionError("pod %s/%s not Running: %s" % (namespace, name, pod.status))


def run_mig(sim, nodes, profile, drain=False, timeout=30, verify_timeout=10, eviction_timeout=10,
            device_id=None, check_mode=False):
    """The module's workflow in-process on kubernetes.core's client; raises AssertionError
    with the module's message (and details) on failure."""
    params = dict(nodes=nodes, profile=profile, drain=drain, timeout=timeout, verify_timeout=verify_timeout,
                  eviction_timeout=eviction_timeout, device_id=device_id, operator_namespace=None)
    api = K8sMigApi(get_api_client(kubeconfig=sim.kubeconfig))
    try:
        return MigConfigurator(api, params, check_mode=check_mode).run()
    except MigConfigError as exc:
        raise AssertionError("%s %s" % (exc.msg, json.dumps(exc.details, default=str)[:4000]))


def run_module_playbook(sim, tmp_path, args, check=False, diff=False):
    """One mig_config task through real ansible-playbook (JSON callback)."""
    play = task_play(os.path.join(str(tmp_path), "mig.yml"), "skaffon.gpu_platform.mig_config", args, name="mig_config")
    return run_playbook(play, sim.env, check=check, diff=diff)
