"""platform_design: the allocation API per cluster -- device plugin by default, Dynamic Resource Allocation
only as an explicit, acknowledged-experimental choice on Kubernetes >= 1.34 -- with its refusals (device
plugin sharing modes, an explicit mig_profile) and the role values (gpu_operator_allocation_api,
gpu_operator_dra_experimental, tenants_allocation_api; no time-slicing, MIG strategy or MIG manager labels)."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.platform_design import FilterModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.design import report

design = FilterModule().filters()["platform_design"]
TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
DRA = {"allocation_api": "dra", "kubernetes_version": "1.34", "dra_experimental": True}


def inv(hosts, **labels):
    return {"hosts": hosts, "labels": labels, "taints": TAINT}


def tenant(name, **quota):
    return {"name": name, "quota": dict(("requests.nvidia.com/%s" % k.replace("_", "."), v) for k, v in quota.items())}


POOLS = {
    "pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["team-a", "team-b"]},
    "pool_l40s": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["team-c"], "allocation": "exclusive"},
}
INV = {"pool_h100": inv(["gpu-h100-1", "gpu-h100-2"], accelerator="h100", workload="training", trust="single"),
       "pool_l40s": inv(["gpu-l40s-1"], accelerator="l40s", workload="inference", trust="single")}
TENANTS = [tenant("team-a", gpu=8), tenant("team-b", **{"mig-1g_10gb": 7}), tenant("team-c", gpu=4)]


def test_default_is_the_device_plugin_and_says_why():
    result = design(POOLS, TENANTS, inventory=INV)
    assert result["allocation_api"]["api"] == "device-plugin" and result["allocation_api"]["experimental"] is False
    roles = result["roles"]
    assert roles["gpu_operator_allocation_api"] == roles["tenants_allocation_api"] == "device-plugin"
    assert roles["gpu_operator_dra_experimental"] is False
    assert roles["gpu_operator_mig_strategy"] == "mixed"      # unchanged by the new keys


def test_dra_sets_the_stack_and_drops_device_plugin_settings():
    result = design(POOLS, TENANTS, requirements=DRA, inventory=INV)
    alloc = result["allocation_api"]
    assert alloc["api"] == "dra" and alloc["experimental"] is True and alloc["kubernetes_version"] == "1.34"
    assert any("marks the GPUCluster (DRA) stack experimental" in r for r in alloc["reasons"])
    roles = result["roles"]
    assert roles["gpu_operator_allocation_api"] == roles["tenants_allocation_api"] == "dra"
    assert roles["gpu_operator_dra_experimental"] is True
    assert roles["gpu_operator_mig_strategy"] is None and roles["gpu_operator_time_slicing"] is None
    assert roles["mig_profile_by_host"] == {}
    # the MIG pool's layout is still computed, and the report says the hosts must carry it
    assert result["pools"]["pool_h100"]["allocation"] == "mig"
    (warning,) = [w for w in result["warnings"] if w["code"] == "dra_mig_layout_on_hosts"]
    assert "runs no MIG manager" in warning["message"] and "gpu-h100-" in warning["message"]
    # the real operands claim a whole GPU on every GPU node: a node of MIG devices only keeps them Pending
    (whole,) = [w for w in result["warnings"] if w["code"] == "dra_node_without_whole_gpu"]
    mig_hosts = sorted(h for h, p in result["pools"]["pool_h100"]["mig_profiles"].items() if p != "all-disabled")
    assert mig_hosts and ", ".join(mig_hosts) in whole["message"]
    assert "the GPUCluster stays notReady (OperandNotReady)" in whole["message"]
    text = report.architecture(result)
    assert "Dynamic Resource Allocation, experimental" in text and "`gpuCluster.deployCR: true`" in text


@pytest.mark.parametrize("requirements, words", [
    ({"allocation_api": "dra", "kubernetes_version": "1.34"}, "Set platform_requirements.dra_experimental: true"),
    ({"allocation_api": "dra", "dra_experimental": True}, "needs platform_requirements.kubernetes_version"),
    (dict(DRA, kubernetes_version="v1.33.4"), "Kubernetes 1.33 serves no resource.k8s.io/v1 (DRA is GA from 1.34"),
    (dict(DRA, kubernetes_version="latest"), "platform_requirements.kubernetes_version is 'latest'"),
    (dict(DRA, allocation_api="DRA"), "choose one of device-plugin, dra"),
    (dict(DRA, dra_experimental="yes"), "dra_experimental is 'yes'; write true or false"),
])
def test_dra_prerequisites_are_refused_naming_the_field(requirements, words):
    with pytest.raises(AnsibleFilterError) as err:
        design(POOLS, TENANTS, requirements=requirements, inventory=INV)
    assert words in str(err.value)


@pytest.mark.parametrize("allocation, extra, words", [
    ("time-slicing", {}, "allocation time-slicing refused with allocation_api: dra"),
    ("mps", {}, "allocation mps refused with allocation_api: dra"),
])
def test_device_plugin_sharing_is_refused_with_dra(allocation, extra, words):
    pools = dict(POOLS, pool_l40s=dict(POOLS["pool_l40s"], allocation=allocation, **extra))
    with pytest.raises(AnsibleFilterError) as err:
        design(pools, TENANTS, requirements=DRA, inventory=INV)
    assert words in str(err.value) and "runs no device plugin" in str(err.value)
    assert "Set platform_pools.pool_l40s.allocation: exclusive" in str(err.value)


def test_a_recommended_time_slicing_pool_is_refused_too():
    pools = dict(POOLS)
    pools["pool_l40s"] = dict(POOLS["pool_l40s"])
    del pools["pool_l40s"]["allocation"]        # one inference team: the recommendation is time-slicing
    with pytest.raises(AnsibleFilterError) as err:
        design(pools, TENANTS, requirements=DRA, inventory=INV)
    assert "allocation time-slicing (the recommendation) refused" in str(err.value)


def test_an_explicit_mig_profile_is_refused_with_dra():
    pools = dict(POOLS, pool_h100=dict(POOLS["pool_h100"], mig_profile="all-1g.10gb"))
    with pytest.raises(AnsibleFilterError) as err:
        design(pools, TENANTS, requirements=DRA, inventory=INV)
    assert "mig_profile: all-1g.10gb refused with allocation_api: dra" in str(err.value)
    assert "nvidia.com/mig.config" in str(err.value)


def test_a_quota_on_claims_is_a_gpu_quota():
    """In DRA mode a team's GPU quota counts claimed devices per DeviceClass: no team_without_quota for it."""
    claims = [{"name": "team-a", "quota": {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 8}},
              {"name": "team-b", "quota": {"mig.nvidia.com.deviceclass.resource.k8s.io/devices": 7}},
              {"name": "team-c", "quota": {"requests.cpu": "8"}}]
    result = design(POOLS, claims, requirements=DRA, inventory=INV)
    missing = [w["team"] for w in result["warnings"] if w["code"] == "team_without_quota"]
    assert missing == ["team-c"], result["warnings"]
    assert result["teams"]["team-a"]["quota"] == {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 8}
