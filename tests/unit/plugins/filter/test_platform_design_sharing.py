"""platform_design: the allocation matrix beyond exclusive/time-slicing/MIG -- MPS and KAI GPU fractions --
with their refusals, placement per pool, and the role values they produce (gpu_operator_time_slicing with
sharing.mps configs, queues_kai_gpu_sharing, queues_kai_placement, tenants_gpu_allocation)."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.platform_design import FilterModule

design = FilterModule().filters()["platform_design"]
TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


def inv(hosts, **labels):
    return {"hosts": hosts, "labels": labels, "taints": TAINT}


def tenant(name, **quota):
    return {"name": name, "quota": dict(("requests.nvidia.com/%s" % k, v) for k, v in quota.items())}


def l40s(allocation=None, teams=("team-c",), **extra):
    spec = {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": list(teams)}
    if allocation:
        spec["allocation"] = allocation
    spec.update(extra)
    return spec


INV = {"pool_l40s": inv(["gpu-l40s-1"], accelerator="l40s", workload="inference", trust="single")}


def test_mps_pool_renders_one_sharing_config_selected_per_node():
    result = design({"pool_l40s": l40s("mps", mps_replicas=4)}, [tenant("team-c", gpu=4)], inventory=INV)
    pool = result["pools"]["pool_l40s"]
    assert pool["allocation"] == "mps" and pool["mps"] == {"config": "mps-4", "replicas": 4}
    assert "1/replicas of the SMs" in pool["trade_offs"]
    assert result["roles"]["gpu_operator_time_slicing"] == {
        "configmap": "time-slicing-config",
        "configs": {"mps-4": {"replicas": 4, "strategy": "mps", "fail_requests_greater_than_one": True}},
        "nodes": {"gpu-l40s-1": "mps-4"}}
    assert result["roles"]["tenants_gpu_allocation"] == {"team-c": "MPS share (1/4 of a GPU's memory and compute)"}
    assert pool["placement"] == "spread"
    assert result["roles"]["queues_kai_placement"] == {"pool_l40s": "spread"}
    assert result["roles"]["queues_kai_gpu_sharing"] is False
    assert result["roles"]["queues_kai_fraction_pools"] == []


def test_time_slicing_and_mps_pools_share_one_configmap():
    pools = {"pool_l40s": l40s("mps"), "pool_l4": dict(l40s("time-slicing", teams=["team-d"]),
                                                       gpu_product="NVIDIA-L4")}
    inventory = dict(INV, pool_l4=inv(["gpu-l4-1"], accelerator="l4", workload="interactive", trust="single"))
    result = design(pools, [tenant("team-c", gpu=4), tenant("team-d", gpu=2)], inventory=inventory)
    ts = result["roles"]["gpu_operator_time_slicing"]
    assert ts["nodes"] == {"gpu-l40s-1": "mps-4", "gpu-l4-1": "shared-4"}
    assert sorted(ts["configs"]) == ["mps-4", "shared-4"]
    assert result["roles"]["tenants_gpu_allocation"]["team-d"] == "time-slice (1/4, no isolation)"


@pytest.mark.parametrize("allocation, why", [
    ("mps", "a fatal GPU exception of one client reaches all of them"),
    ("fraction", "KAI does not enforce the memory"),
    ("time-slicing", "share GPU memory and faults"),
])
def test_sharing_for_tenants_of_different_trust_is_refused(allocation, why):
    inventory = {"pool_l40s": inv(["gpu-l40s-1"], accelerator="l40s", workload="inference", trust="mixed")}
    with pytest.raises(AnsibleFilterError) as err:
        design({"pool_l40s": l40s(allocation, teams=["team-a", "team-b"])},
               [tenant("team-a", gpu=2), tenant("team-b", gpu=2)], {"queue_backend": "kai"}, inventory=inventory)
    msg = str(err.value)
    assert "platform_pools.pool_l40s.allocation: %s refused" % allocation in msg and "trust=mixed" in msg
    assert why in msg


def test_mps_next_to_a_mig_pool_is_refused_because_of_the_mixed_strategy():
    pools = {"pool_l40s": l40s("mps"),
             "pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["team-a"]}}
    inventory = dict(INV, pool_h100=inv(["gpu-h100-1"], accelerator="h100", workload="training"))
    with pytest.raises(AnsibleFilterError) as err:
        design(pools, [tenant("team-c", gpu=4), tenant("team-a", **{"mig-1g.10gb": 7})], inventory=inventory)
    msg = str(err.value)
    assert "platform_pools.pool_l40s.allocation: mps refused: pool pool_h100 uses MIG" in msg
    assert "using --mig-strategy=mixed is not supported with MPS" in msg


@pytest.mark.parametrize("allocation, message", [
    ("mps", "allocation mps refused with mig_profile 'all-1g.10gb': the NVIDIA device plugin does not share MIG"),
    ("fraction", "allocation fraction refused with mig_profile 'all-1g.10gb': KAI GPU fractions share whole GPUs"),
])
def test_mps_and_fractions_on_a_mig_pool_are_refused(allocation, message):
    pools = {"pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["team-a"],
                           "allocation": allocation, "mig_profile": "all-1g.10gb"}}
    with pytest.raises(AnsibleFilterError, match=message):
        design(pools, [tenant("team-a", gpu=8)], {"queue_backend": "kai"},
               inventory={"pool_h100": inv(["h1"], accelerator="h100", workload="training")})


@pytest.mark.parametrize("replicas, message", [(1, "mps_replicas must be"), (49, "at most 48 clients")])
def test_mps_replicas_out_of_range_are_refused(replicas, message):
    with pytest.raises(AnsibleFilterError, match="platform_pools.pool_l40s.mps_replicas"):
        design({"pool_l40s": l40s("mps", mps_replicas=replicas)}, [tenant("team-c", gpu=4)], inventory=INV)


def test_fractions_need_the_kai_backend():
    # recommended by themselves ...
    result = design({"pool_l40s": l40s("fraction")}, [tenant("team-c", gpu=4)], inventory=INV)
    assert result["scheduler"]["backend"] == "kai"
    assert "GPU fractions on pool pool_l40s" in " ".join(result["scheduler"]["reasons"])
    assert result["roles"]["queues_kai_gpu_sharing"] is True
    assert result["roles"]["queues_kai_fraction_pools"] == ["pool_l40s"]
    # ... and refused under another explicit backend
    with pytest.raises(AnsibleFilterError) as err:
        design({"pool_l40s": l40s("fraction")}, [tenant("team-c", gpu=4)], {"queue_backend": "none"}, inventory=INV)
    msg = str(err.value)
    assert "platform_pools.pool_l40s.allocation: fraction refused" in msg
    assert "queue backend is none" in msg and "queue_backend: kai" in msg
    with pytest.raises(AnsibleFilterError, match="queue backend is kueue"):
        design({"pool_l40s": l40s("fraction")}, [tenant("team-c", gpu=4)], {"queue_backend": "kueue"}, inventory=INV)


def test_fractions_with_kai_turn_on_gpu_sharing_and_say_what_pods_get():
    result = design({"pool_l40s": l40s("fraction")}, [tenant("team-c", gpu=4)], {"queue_backend": "kai"},
                    inventory=INV)
    pool = result["pools"]["pool_l40s"]
    assert pool["allocation"] == "fraction" and pool["differs"] and pool["recommended"] == "time-slicing"
    assert "reservation pod" in pool["trade_offs"]
    roles = result["roles"]
    assert roles["queues_kai_gpu_sharing"] is True
    assert roles["gpu_operator_time_slicing"] is None
    assert roles["tenants_gpu_allocation"] == {"team-c": "GPU fraction (KAI)"}


def test_placement_binpack_for_training_spread_for_inference_and_explicit_wins():
    pools = {"pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["team-a"]},
             "pool_l40s": l40s(),
             "pool_l4": dict(l40s(teams=["team-d"]), gpu_product="NVIDIA-L4", placement="binpack")}
    inventory = dict(INV, pool_h100=inv(["h1"], accelerator="h100", workload="training"),
                     pool_l4=inv(["l4-1"], accelerator="l4", workload="inference", trust="single"))
    result = design(pools, [tenant("team-a", gpu=8), tenant("team-c", gpu=4), tenant("team-d", gpu=1)],
                    inventory=inventory)
    assert result["roles"]["queues_kai_placement"] == {"pool_h100": "binpack", "pool_l40s": "spread",
                                                       "pool_l4": "binpack"}
    assert "whole nodes stay free for gangs" in result["pools"]["pool_h100"]["placement_reason"]
    assert result["pools"]["pool_l4"]["placement_reason"] == "explicit in the inventory"
    with pytest.raises(AnsibleFilterError, match="platform_pools.pool_l40s.placement is 'pack'"):
        design({"pool_l40s": l40s(placement="pack")}, [tenant("team-c", gpu=4)], inventory=INV)


def test_each_mode_names_what_the_pods_get():
    pools = {"pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["team-a"]},
             "pool_l40s": l40s("exclusive", teams=["team-c", "team-a"])}
    inventory = dict(INV, pool_h100=inv(["h1"], accelerator="h100", workload="training"))
    result = design(pools, [tenant("team-a", **{"mig-1g.10gb": 7}), tenant("team-c", gpu=4)], inventory=inventory)
    alloc = result["roles"]["tenants_gpu_allocation"]
    assert alloc["team-c"] == "full GPU"
    assert alloc["team-a"] == "pool_h100: MIG slice 1g.10gb; pool_l40s: full GPU"
