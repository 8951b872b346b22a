"""Teams, claims and the hand-over checks in DRA mode on the simulated cluster (Kubernetes 1.34,
resource.k8s.io/v1, the structured allocator, quota on claims), twice: with the DeviceClasses and
ResourceSlices the driver publishes written by hand ("published"), and on tests/clusters/dra.yaml with the
GPUCluster stack installed by gpu_operator.yml and the DRA driver twin publishing the slices ("driver").

tenants.yml gives each team its ResourceClaimTemplates and a quota on claims (re-run changed=0), verify.yml
passes gpus-visible, cuda-test, wrong-node-excluded and quota-enforced with slices and claims. A pod with a
claim for a MIG profile runs on the node whose slices have it and stays Pending on a node without it; a claim
over the team's quota is refused with the API server's message; a quota on nvidia.com/gpu is refused in DRA mode.
"""

import json
import os

import pytest
import yaml

from kit.gpu_operator import base_vars, package_chart, play as operator_play
from kit.paths import BIN, CLUSTERS, REPO
from kit.kubectl import apply, claim_pod, kget, kubectl, pod_started, pod_unschedulable, wait_object
from kit.playbook import run_playbook
from kit.queues import inventory
from simcluster import testing as simtesting

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
DRA_CLUSTER = os.path.join(CLUSTERS, "dra.yaml")
GPU_KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIG_KEY = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"
TEAMS = [
    {"name": "team-a", "quota": {GPU_KEY: 2, "count/resourceclaims.resource.k8s.io": 8},
     "claim_templates": [{"name": "gpu", "gpus": 1}, {"name": "h100x2", "gpus": 2, "product": "NVIDIA H100 80GB HBM3"}]},
    {"name": "team-b", "quota": {GPU_KEY: 0, MIG_KEY: 2},
     "claim_templates": [{"name": "mig-1g.10gb", "mig_profile": "1g.10gb"}]},
]


def _plan(nodes):
    from ansible_collections.skaffon.gpu_platform.plugins.filter.driver_plan import driver_plan
    hosts = {}
    for n in nodes:
        hosts[n["name"]] = {"gpu_node": {
            "gpu_host": True, "gpu_count": int(n["gpus"]["count"]),
            "driver": {"state": "host", "version": n["host_driver"]}, "toolkit": {"state": "none"},
            "container_runtime": {"nvidia_runtime": False, "nvidia_default": False},
            "nouveau_loaded": False, "kernel": {"headers_installed": True, "release": "6.8.0-45-generic"}}}
    return json.loads(json.dumps(driver_plan(hosts)))


def _driver_site(tmp_path_factory):
    """tests/clusters/dra.yaml with the GPUCluster stack installed through the gpu_operator role."""
    if not os.path.exists(DRA_CLUSTER):
        pytest.skip("tests/clusters/dra.yaml is not there (the simulator's DRA driver twin)")
    with open(DRA_CLUSTER) as fh:
        nodes = [n for n in (yaml.safe_load(fh) or {}).get("nodes") or [] if n.get("gpus")]
    work = tmp_path_factory.mktemp("sim-dra-teams")
    sim = simtesting.start(DRA_CLUSTER, str(work / "run"))     # its paths (CRDs, mig-parted) are relative
    try:
        settings = base_vars(sim, package_chart(tmp_path_factory), _plan(nodes), gpu_operator_allocation_api="dra",
                             gpu_operator_dra_experimental=True, gpu_operator_wait_timeout=120)
        res = operator_play(sim, settings)
        assert res.rc == 0, "\n".join(res.failure_messages())
    except BaseException:
        sim.stop()
        raise
    return sim, nodes


# What the driver publishes, written by hand: the DeviceClasses of manifests/state-dra-driver and one
# ResourceSlice per node with the kubelet plugin's attributes (a whole-GPU node, a node with MIG set on the
# host, an L40S node), for a cluster without the operator twin's DRA stack.
PUBLISHED_NODES = [
    {"name": "gpu-h100-1", "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 2, "memory_mib": 81559},
     "host_driver": "580.95.05", "cpu": "64", "memory": "512Gi"},
    {"name": "gpu-h100-mig-1", "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 1, "memory_mib": 81559},
     "host_driver": "580.95.05", "cpu": "64", "memory": "512Gi"},
    {"name": "cpu-1", "cpu": "16", "memory": "64Gi"}]


def _device(name, kind, uuid, profile=None, parent=None):
    attrs = {"type": {"string": kind}, "uuid": {"string": uuid}, "productName": {"string": "NVIDIA H100 80GB HBM3"}}
    if profile:
        attrs.update(profile={"string": profile}, parentUUID={"string": parent})
    return {"name": name, "attributes": attrs}


def _published():
    classes = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                              "device.attributes['gpu.nvidia.com'].type == '%s'" % t}}]}}
               for name, t in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))]
    devices = {"gpu-h100-1": [_device("gpu-0", "gpu", "GPU-a0"), _device("gpu-1", "gpu", "GPU-a1")],
               "gpu-h100-mig-1": [_device("gpu-0-mig-1g10gb-19-%d" % i, "mig", "MIG-%d" % i, "1g.10gb", "GPU-m0")
                                  for i in range(2)]}
    slices = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": "%s-gpu.nvidia.com" % node},
               "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": found}}
              for node, found in sorted(devices.items())]
    return classes + slices


def _published_site(tmp_path_factory):
    work = tmp_path_factory.mktemp("sim-dra-published")
    path = work / "cluster.yaml"
    path.write_text(yaml.safe_dump({"kubernetes_version": "v1.34.2", "nodes": PUBLISHED_NODES}))
    sim = simtesting.start(str(path), str(work / "run"))
    for obj in _published():
        sim.run(os.path.join(BIN, "kubectl"), "apply", "-f", "-", input=json.dumps(obj))
    return sim, [n for n in PUBLISHED_NODES if n.get("gpus")]


@pytest.fixture(scope="module", params=["published", "driver"])
def site(request, tmp_path_factory):
    sim, nodes = (_driver_site if request.param == "driver" else _published_site)(tmp_path_factory)
    try:
        yield sim, nodes, tmp_path_factory
    finally:
        sim.stop()


def _mig_node(nodes):
    return [n["name"] for n in nodes if n.get("mig_config") or "mig" in n["name"]][0]


def _whole_node(nodes):
    return [n["name"] for n in nodes if not (n.get("mig_config") or "mig" in n["name"])][0]


def run(sim, factory, playbook, teams, gpu_hosts=None, **extra):
    group_vars = {"tenants_allocation_api": "dra", "tenants_list": teams}
    group_vars.update(extra)
    inv = inventory(factory.mktemp("inv"), group_vars, gpu_hosts)
    return run_playbook(os.path.join(REPO, "playbooks", playbook), sim.env, inventory=inv, limit="localhost")


def test_tenants_render_claim_templates_and_quota_then_rerun_unchanged(site):
    sim, nodes, factory = site
    first = run(sim, factory, "tenants.yml", TEAMS)
    assert first.rc == 0, "\n".join(first.failure_messages())
    rct = kget(sim, "resourceclaimtemplate", "mig-1g.10gb", "-n", "team-b")
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] == [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]
    quota = kget(sim, "resourcequota", "tenant-quota", "-n", "team-a")
    assert quota["spec"]["hard"][GPU_KEY] == "2"
    again = run(sim, factory, "tenants.yml", TEAMS)
    assert again.rc == 0 and again.changed() == 0, again.changed_tasks()


def test_quota_on_nvidia_com_gpu_is_refused_in_dra_mode(site):
    sim, nodes, factory = site
    res = run(sim, factory, "tenants.yml", [{"name": "team-x", "quota": {"requests.nvidia.com/gpu": 2}}])
    assert res.rc != 0
    text = "\n".join(res.failure_messages())
    assert "in DRA mode (tenants_allocation_api: dra) no device plugin runs" in text, text
    assert kget(sim, "namespace", "team-x") is None


def test_mig_claim_runs_where_the_slices_have_it_and_waits_elsewhere(site):
    sim, nodes, factory = site
    assert run(sim, factory, "tenants.yml", TEAMS).rc == 0
    for pod in (claim_pod("mig-anywhere", "team-b", "mig-1g.10gb"), claim_pod("mig-wrong", "team-b", "mig-1g.10gb",
                                                                      node=_whole_node(nodes))):
        apply(sim, pod)
    ran = wait_object(sim, pod_started, "pod", "mig-anywhere", "-n", "team-b")
    assert ran["spec"]["nodeName"] == _mig_node(nodes), ran["status"]
    waiting = wait_object(sim, pod_unschedulable, "pod", "mig-wrong", "-n", "team-b")
    cond = [c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled"][0]
    assert cond["reason"] == "Unschedulable" and not waiting["spec"].get("nodeName"), cond
    kubectl(sim, "delete", "pod", "-n", "team-b", "mig-anywhere", "mig-wrong", "--wait=false")


def test_claim_over_the_team_quota_is_refused_with_the_real_message(site):
    sim, nodes, factory = site
    assert run(sim, factory, "tenants.yml", TEAMS).rc == 0
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "too-many", "namespace": "team-a"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 3}}]}}}
    res = kubectl(sim, "create", "-f", "-", input=json.dumps(claim), check=False)
    assert res.returncode != 0
    assert 'resourceclaims.resource.k8s.io "too-many" is forbidden: exceeded quota: tenant-quota' in res.stderr, \
        res.stderr
    assert "requested: %s=3" % GPU_KEY in res.stderr


def test_verify_passes_the_gpu_checks_with_slices_and_claims(site):
    sim, nodes, factory = site
    assert run(sim, factory, "tenants.yml", TEAMS).rc == 0
    hosts = dict((n["name"], {"gpu_node": {"gpu_count": int(n["gpus"]["count"])}}) for n in nodes)
    checks = ["gpus-visible", "cuda-test", "wrong-node-excluded", "quota-enforced"]
    res = run(sim, factory, "verify.yml", TEAMS, gpu_hosts=hosts, acceptance_checks=checks,
              acceptance_report_dir=str(factory.mktemp("report")), acceptance_pod_timeout=90)
    results = res.task_results("Run the hand-over checks")[0]["results"]
    by_id = dict((r["id"], r) for r in results)
    for check in checks:
        assert by_id[check]["status"] == "PASS", by_id[check]
    assert res.rc == 0
    assert "1g.10gb" in by_id["wrong-node-excluded"]["summary"]


def test_verify_operator_and_sharing_on_the_gpu_cluster_stack(site, request):
    sim, nodes, factory = site
    if "driver" not in request.node.name:
        pytest.skip("the operator's GPUCluster is installed on the driver site only")
    assert run(sim, factory, "tenants.yml", TEAMS).rc == 0
    hosts = dict((n["name"], {"gpu_node": {"gpu_count": int(n["gpus"]["count"])}}) for n in nodes)
    checks = ["operator-healthy", "sharing-verified", "gpu-access-by-request"]
    res = run(sim, factory, "verify.yml", TEAMS, gpu_hosts=hosts, acceptance_checks=checks,
              acceptance_report_dir=str(factory.mktemp("report")), acceptance_pod_timeout=90)
    by_id = dict((r["id"], r) for r in res.task_results("Run the hand-over checks")[0]["results"])
    assert by_id["operator-healthy"]["status"] == "PASS", by_id["operator-healthy"]
    assert by_id["operator-healthy"]["evidence"][0].startswith("GPUCluster gpu-cluster: state ready")
    for check in checks[1:]:
        assert by_id[check]["status"] == "PASS", by_id[check]
    assert "or a ResourceClaim in resources.claims" in by_id["gpu-access-by-request"]["evidence"][-1]
