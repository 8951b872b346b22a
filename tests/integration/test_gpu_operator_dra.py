"""The DRA allocation mode through the gpu_operator role on the simulated cluster, from an inventory as a
site keeps it: platform_pools and platform_requirements (allocation_api: dra) in group_vars, the design's
role values wired in, the cluster's kubeconfig in group_vars too (nothing in the environment).

Refused before anything is written: dra without the experimental opt-in, dra on a cluster that serves no
resource.k8s.io/v1 (Kubernetes 1.33), and switching an installed cluster between the ClusterPolicy and the
GPUCluster stack (the chart and the operator allow one at a time; the GPUCluster outlives a deployCR flip).
With tests/clusters/dra.yaml (Kubernetes >= 1.34, the DRA driver twin): the release renders the GPUCluster
and no ClusterPolicy, the wait reads the GPUCluster and each GPU node's ResourceSlices, a re-run is
changed=0, and switching back to the device plugin is refused.
"""

import json
import os

import pytest
import yaml

from kit.charts import by_kind, render
from kit.gpu_operator import NS, base_vars, gpu_node, kget, package_chart, plan_for, play, start_cluster
from kit.kubectl import apply
from kit.paths import CLUSTERS
from kit.playbook import CLUSTER_DEFAULTS, run_playbook
from simcluster import testing as simtesting

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
DRA_CLUSTER = os.path.join(CLUSTERS, "dra.yaml")
NODES = [gpu_node("gpu-a", "550.54.15"), {"name": "cpu-1"}]
POOLS = {"pool_gpu": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 2, "teams": ["team-a"],
                      "allocation": "exclusive", "nodes": 1}}
DRA = {"allocation_api": "dra", "kubernetes_version": "1.34", "dra_experimental": True}
# The wiring docs/design.md shows: the design computes, the role variables take its values.
WIRING = {
    "platform_design": "{{ platform_pools | skaffon.gpu_platform.platform_design("
                       "tenants=tenants_list | default([]), requirements=platform_requirements | default({})) }}",
    "gpu_operator_allocation_api": "{{ platform_design.roles.gpu_operator_allocation_api }}",
    "gpu_operator_dra_experimental": "{{ platform_design.roles.gpu_operator_dra_experimental }}",
    "gpu_operator_mig_strategy": "{{ platform_design.roles.gpu_operator_mig_strategy }}",
    "gpu_operator_time_slicing": "{{ platform_design.roles.gpu_operator_time_slicing }}",
}


def site(sim, archive, plan, requirements, pools=None, **extra):
    settings = base_vars(sim, archive, plan, platform_pools=pools or POOLS, platform_requirements=requirements,
                         tenants_list=[{"name": "team-a", "quota": {"requests.nvidia.com/gpu": 2}}], **extra)
    settings.update(WIRING)
    return settings


def messages(res):
    return "\n".join(res.failure_messages())


@pytest.fixture(scope="module")
def old_cluster(tmp_path_factory):
    """Kubernetes 1.33: no resource.k8s.io/v1."""
    sim = start_cluster(tmp_path_factory, "dra-old", NODES, kubernetes_version="v1.33.4")
    try:
        yield sim, package_chart(tmp_path_factory), plan_for(NODES)
    finally:
        sim.stop()


def test_dra_without_the_experimental_opt_in_is_refused(old_cluster):
    sim, archive, plan = old_cluster
    res = play(sim, site(sim, archive, plan, dict(DRA, dra_experimental=False)))
    assert res.rc != 0
    assert "Set platform_requirements.dra_experimental: true" in messages(res)
    assert res.changed() == 0 and kget(sim, "namespace", NS) is None


def test_dra_on_kubernetes_without_resource_v1_is_refused_before_any_write(old_cluster):
    sim, archive, plan = old_cluster
    res = play(sim, site(sim, archive, plan, DRA))
    assert res.rc != 0
    assert "the cluster serves no resource.k8s.io/v1 DeviceClass" in messages(res), messages(res)
    assert res.changed() == 0 and kget(sim, "namespace", NS) is None


def test_a_cluster_rebuilt_at_the_same_address_without_resource_v1_is_refused(tmp_path_factory, tmp_path):
    """kubernetes.core keeps its discovery cache in a file per server address, which outlives a cluster:
    one rebuilt there on Kubernetes 1.33 still "serves" DeviceClass to a kubernetes.core.k8s_info. The
    cluster before served every kind the role reads before the check (one missing from the cache would
    refresh it), as a DRA site there did: the ClusterPolicy and, from the chart, the GPUCluster CRD.
    The cache lives in the runs' own TMPDIR: in /tmp it is shared with every test whose cluster got the
    same port before (ports are reused across the session), which a test on another worker may rewrite."""
    cache_dir = tmp_path / "tmp"
    cache_dir.mkdir()
    read = str(tmp_path / "read.yml")
    with open(read, "w") as fh:
        fh.write("- hosts: localhost\n  gather_facts: false\n" + CLUSTER_DEFAULTS + "  tasks:\n" + "".join(
            "    - name: read %s\n      kubernetes.core.k8s_info: {api_version: %s, kind: %s}\n" % (kind, api, kind)
            for api, kind in (("nvidia.com/v1", "ClusterPolicy"), ("nvidia.com/v1alpha1", "GPUCluster"),
                              ("resource.k8s.io/v1", "DeviceClass"))))
    archive = package_chart(tmp_path_factory)
    before = start_cluster(tmp_path_factory, "dra-before-rebuild", NODES)
    before.env["TMPDIR"] = str(cache_dir)
    try:
        crd = [d for d in by_kind(render(archive, args=("--include-crds",)), "CustomResourceDefinition")
               if d["metadata"]["name"] == "gpuclusters.nvidia.com"]
        apply(before, crd[0])
        first = run_playbook(read, before.env)
        assert first.rc == 0 and first.task_results("read DeviceClass")[0]["api_found"] is True
        port = int(before.url.rsplit(":", 1)[1])
    finally:
        before.stop()
    rebuilt = start_cluster(tmp_path_factory, "dra-rebuilt", NODES, port=port, kubernetes_version="v1.33.4")
    rebuilt.env["TMPDIR"] = str(cache_dir)
    try:
        stale = run_playbook(read, rebuilt.env)
        assert stale.rc == 0 and stale.task_results("read DeviceClass")[0]["api_found"] is True, \
            "the discovery cache no longer outlives the cluster: this test needs another way to go stale"
        res = play(rebuilt, site(rebuilt, archive, plan_for(NODES), DRA))
        assert res.rc != 0
        assert "the cluster serves no resource.k8s.io/v1 DeviceClass" in messages(res), messages(res)
        assert res.changed() == 0 and kget(rebuilt, "namespace", NS) is None
    finally:
        rebuilt.stop()


def test_switching_an_installed_device_plugin_cluster_to_dra_is_refused(old_cluster):
    sim, archive, plan = old_cluster
    first = play(sim, site(sim, archive, plan, {}))
    assert first.rc == 0, messages(first)
    assert kget(sim, "clusterpolicy", "cluster-policy") is not None
    res = play(sim, site(sim, archive, plan, DRA))
    assert res.rc != 0
    text = messages(res)
    assert "ClusterPolicy cluster-policy exists, but gpu_operator_allocation_api is dra" in text, text
    assert "helm uninstall gpu-operator -n gpu-operator" in text
    assert res.changed() == 0


# --- the DRA stack itself (needs the simulator's resource.k8s.io/v1 and the DRA driver twin) -------------

def _dra_nodes():
    if not os.path.exists(DRA_CLUSTER):
        pytest.skip("tests/clusters/dra.yaml not found")
    with open(DRA_CLUSTER) as fh:
        return [n for n in (yaml.safe_load(fh) or {}).get("nodes") or [] if n.get("gpus")]


def _plan(nodes):
    from ansible_collections.skaffon.gpu_platform.plugins.filter.driver_plan import driver_plan
    hosts = {}
    for n in nodes:
        host = n.get("host_driver")
        hosts[n["name"]] = {"gpu_node": {
            "gpu_host": True, "gpu_count": int((n.get("gpus") or {}).get("count") or 0),
            "driver": {"state": "host", "version": host} if host else {"state": "none"},
            "toolkit": {"state": "none"}, "container_runtime": {"nvidia_runtime": False, "nvidia_default": False},
            "nouveau_loaded": False, "kernel": {"headers_installed": True, "release": "6.8.0-45-generic"}}}
    return json.loads(json.dumps(driver_plan(hosts)))


@pytest.fixture(scope="module")
def dra_cluster(tmp_path_factory):
    nodes = _dra_nodes()
    workdir = tmp_path_factory.mktemp("sim-dra")
    # in place: the file names the CRDs relative to itself
    sim = simtesting.start(DRA_CLUSTER, str(workdir / "run"))
    try:
        yield sim, package_chart(tmp_path_factory), _plan(nodes), nodes
    finally:
        sim.stop()


def _dra_pools(nodes):
    product = (nodes[0].get("gpus") or {}).get("model") or "NVIDIA-H100-80GB-HBM3"
    return {"pool_gpu": {"gpu_product": product, "gpus_per_node": int(nodes[0]["gpus"].get("count") or 1),
                         "teams": ["team-a"], "allocation": "exclusive", "nodes": len(nodes)}}


def test_dra_converges_waits_on_slices_and_reruns_unchanged(dra_cluster):
    sim, archive, plan, nodes = dra_cluster
    settings = site(sim, archive, plan, DRA, pools=_dra_pools(nodes), gpu_operator_wait_timeout=120)
    first = play(sim, settings)
    assert first.rc == 0, messages(first)
    assert kget(sim, "clusterpolicy", "cluster-policy") is None
    cluster = kget(sim, "gpucluster", "gpu-cluster")
    assert cluster["status"]["state"] == "ready"
    (wait,) = first.task_results("Wait until the GPUCluster is ready and every GPU node publishes its GPUs")
    assert wait["ready"] is True and wait["reason"] == "Reconciled"
    slices = wait["resource_slices"]
    assert sorted(slices) == sorted(n["name"] for n in nodes)
    for n in nodes:
        assert slices[n["name"]]["physical_gpus"] == int(n["gpus"]["count"]), slices[n["name"]]
    # a node with a MIG layout publishes its MIG devices by profile next to whole GPUs
    mig_nodes = [n["name"] for n in nodes if n.get("mig_config")]
    for name in mig_nodes:
        assert slices[name]["mig"] and all(profile != "<no profile>" for profile in slices[name]["mig"]), slices[name]
    again = play(sim, settings)
    assert again.rc == 0 and again.changed() == 0, again.changed_tasks()
    # and back to the device plugin: refused, the GPUCluster stays
    back = play(sim, site(sim, archive, plan, {}, pools=_dra_pools(nodes)))
    assert back.rc != 0
    assert "GPUCluster gpu-cluster exists, but gpu_operator_allocation_api is device-plugin" in messages(back)
    assert back.changed() == 0 and kget(sim, "gpucluster", "gpu-cluster") is not None
