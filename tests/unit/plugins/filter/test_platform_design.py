"""platform_design: the decision matrix, the MIG layout, the queue backend, warnings, refusals."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.platform_design import FilterModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.design import mig as design_mig
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig import profiles as mig
from kit.paths import MIG_PARTED_CONFIG

FILTERS = FilterModule().filters()
design = FILTERS["platform_design"]
PARTED = MIG_PARTED_CONFIG


def inv(hosts, **labels):
    return {"hosts": hosts, "labels": labels, "taints": [{"key": "nvidia.com/gpu", "value": "present",
                                                          "effect": "NoSchedule"}]}


def tenant(name, gpu):
    return {"name": name, "quota": {"requests.nvidia.com/gpu": gpu}}


def codes(result):
    return sorted(w["code"] for w in result["warnings"])


# --- the four cases of the issue -----------------------------------------------------------

def test_mixed_trust_pool_asking_for_time_slicing_is_refused():
    pools = {"pool_l40s": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["team-a", "team-b"],
                           "allocation": "time-slicing"}}
    with pytest.raises(AnsibleFilterError) as err:
        design(pools, [tenant("team-a", gpu=2), tenant("team-b", gpu=2)],
               inventory={"pool_l40s": inv(["l40s-1"], accelerator="l40s", workload="inference", trust="mixed")})
    msg = str(err.value)
    assert "platform_pools.pool_l40s.allocation: time-slicing refused" in msg
    assert "trust=mixed" in msg and "exclusive" in msg


def test_teams_of_different_trust_refuse_time_slicing_even_on_a_single_labelled_pool():
    pools = {"pool_l40s": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["team-a", "team-b"],
                           "allocation": "time-slicing"}}
    req = {"teams": {"team-a": {"trust": "internal"}, "team-b": {"trust": "partner"}}}
    with pytest.raises(AnsibleFilterError, match="teams internal, partner"):
        design(pools, [tenant("team-a", gpu=2), tenant("team-b", gpu=2)], req,
               inventory={"pool_l40s": inv(["l40s-1"], accelerator="l40s", workload="inference", trust="single")})


def test_h100_pool_with_several_teams_gets_mig_with_a_covering_layout():
    pools = {"pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8,
                           "teams": ["team-a", "team-b", "team-c"]}}
    tenants = [{"name": "team-a", "quota": {"requests.nvidia.com/gpu": 8}},
               {"name": "team-b", "quota": {"requests.nvidia.com/mig-1g.10gb": 14}},
               {"name": "team-c", "quota": {"requests.nvidia.com/mig-3g.40gb": "4"}}]
    req = {"teams": {"team-a": {"whole_gpus": {"pool_h100": 8}, "gang": True}}}
    result = design(pools, tenants, req,
                    inventory={"pool_h100": inv(["h100-1", "h100-2", "h100-3"], accelerator="h100",
                                                workload="training", trust="mixed")})
    pool = result["pools"]["pool_h100"]
    assert pool["allocation"] == "mig" and pool["recommended"] == "mig"
    layout = pool["mig"]
    assert layout["covered"] is True
    # 14 x 1g.10gb -> one node all-1g.10gb (56); 4 x 3g.40gb -> one node all-3g.40gb (16); 8 whole -> one node
    assert pool["mig_profiles"] == {"h100-1": "all-1g.10gb", "h100-2": "all-3g.40gb", "h100-3": "all-disabled"}
    assert layout["offered"] == {"1g.10gb": 56, "3g.40gb": 16} and layout["whole_gpus"] == 8
    assert result["roles"]["gpu_operator_mig_strategy"] == "mixed"
    assert result["roles"]["mig_profile_by_host"]["h100-3"] == "all-disabled"
    assert result["scheduler"]["backend"] == "kai"
    assert any("gang" in r for r in result["scheduler"]["reasons"])


def test_a100_pool_uses_the_a100_profiles():
    pools = {"pool_a100": {"gpu_product": "NVIDIA-A100-SXM4-40GB", "gpus_per_node": 4,
                           "teams": ["team-a", "team-b"]}}
    tenants = [{"name": "team-a", "quota": {"requests.nvidia.com/mig-1g.5gb": 20}},
               {"name": "team-b", "quota": {"requests.nvidia.com/mig-2g.10gb": 3}}]
    result = design(pools, tenants, inventory={"pool_a100": inv(["a1", "a2"], accelerator="a100", workload="mixed")})
    pool = result["pools"]["pool_a100"]
    assert pool["allocation"] == "mig"
    # 20 x 1g.5gb need one node of 4 x 7; 3 x 2g.10gb one node of 4 x 3
    assert pool["mig_profiles"] == {"a1": "all-1g.5gb", "a2": "all-2g.10gb"}
    assert pool["mig"]["covered"] is True


def test_l40s_pool_with_one_team_allows_time_slicing():
    pools = {"pool_l40s_inference": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["team-c"],
                                     "time_slicing_replicas": 3}}
    inventory = {"pool_l40s_inference": dict(inv(["gpu-l40s-1"], accelerator="l40s", workload="inference",
                                                 trust="single", sharing="time-slicing"),
                                             nodes=["gpu-l40s-1.cluster.example"])}
    result = design(pools, [tenant("team-c", gpu=4)], inventory=inventory)
    pool = result["pools"]["pool_l40s_inference"]
    assert pool["allocation"] == "time-slicing"
    assert "one team with inference work" in " ".join(pool["reasons"])
    assert result["roles"]["gpu_operator_time_slicing"] == {
        "configmap": "time-slicing-config",
        "configs": {"shared-3": {"replicas": 3, "fail_requests_greater_than_one": True}},
        "nodes": {"gpu-l40s-1.cluster.example": "shared-3"}}
    assert result["scheduler"]["backend"] == "none"
    assert result["warnings"] == []


def test_non_mig_pool_for_several_teams_is_exclusive():
    pools = {"pool_l40s": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 8, "teams": ["team-a", "team-b"]}}
    result = design(pools, [tenant("team-a", gpu=4), tenant("team-b", gpu=4)],
                    inventory={"pool_l40s": inv(["l1", "l2"], accelerator="l40s", workload="inference",
                                                trust="single")})
    pool = result["pools"]["pool_l40s"]
    assert pool["allocation"] == "exclusive"
    assert "has no MIG" in pool["reasons"][0] and "several teams" in pool["reasons"][1]
    assert result["roles"]["gpu_operator_time_slicing"] is None
    assert result["roles"]["gpu_operator_mig_strategy"] is None
    # several teams compete, nobody needs gangs or borrowing: KAI's fair share
    assert result["scheduler"]["backend"] == "kai"


# --- explicit choices, refusals and input validation ---------------------------------------

def test_explicit_choice_wins_and_is_reported():
    pools = {"pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["team-a", "team-b"],
                           "allocation": "exclusive"}}
    tenants = [tenant("team-a", gpu=8), {"name": "team-b", "quota": {"requests.nvidia.com/mig-1g.10gb": 7}}]
    result = design(pools, tenants, {"queue_backend": "kueue"},
                    inventory={"pool_h100": inv(["h1"], accelerator="h100", workload="training")})
    pool = result["pools"]["pool_h100"]
    assert (pool["allocation"], pool["recommended"], pool["differs"]) == ("exclusive", "mig", True)
    assert result["scheduler"]["backend"] == "kueue" and result["scheduler"]["recommended"] == "kai"
    assert codes(result).count("explicit_differs") == 2
    # team-b wants slices nobody offers now
    assert "slices_not_offered" in codes(result)


def test_mig_on_a_gpu_without_mig_is_refused():
    pools = {"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["team-a"], "allocation": "mig"}}
    with pytest.raises(AnsibleFilterError, match="platform_pools.p.allocation: mig is impossible, NVIDIA-L40S"):
        design(pools, [tenant("team-a", gpu=1)], inventory={"p": inv(["n1"], accelerator="l40s", workload="training")})


@pytest.mark.parametrize("pools, tenants, req, message", [
    ({"p": {"gpus_per_node": 8, "teams": []}}, [], {}, "platform_pools.p.gpu_product is required"),
    ({"p": {"gpu_product": "NVIDIA-L40S", "teams": []}}, [], {}, "platform_pools.p.gpus_per_node is required"),
    ({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 0}}, [], {}, "platform_pools.p.gpus_per_node must be"),
    ({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 1, "sharing": "x"}}, [], {},
     "platform_pools.p: unknown key(s) sharing"),
    ({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 1, "allocation": "dra"}}, [], {},
     "platform_pools.p.allocation is 'dra'"),
    ({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 1, "teams": ["team-x"]}}, [{"name": "team-a"}], {},
     "platform_pools.p.teams names 'team-x'"),
    ({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 1, "teams": ["team-a"]}}, [{"name": "team-a"}],
     {"teams": {"team-a": {"preempts": ["team-z"]}}}, "platform_requirements.teams.team-a.preempts names 'team-z'"),
    ({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 1, "teams": ["team-a"]}}, [{"name": "team-a"}],
     {"teams": {"team-a": {"mig_slices": {"big": 1}}}}, "mig_slices key 'big' is not a MIG profile"),
    ({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 1, "teams": ["team-a"]}}, [{"name": "team-a"}],
     {"queue_backend": "volcano"}, "platform_requirements.queue_backend is 'volcano'"),
    ({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 1}}, [{"name": "Team_A"}], {},
     "tenants_list[0].name 'Team_A' must be a DNS-1123 label"),
    ({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 1}}, [], {"airgap": True},
     "platform_requirements: unknown key(s) airgap"),
])
def test_bad_inputs_name_the_field(pools, tenants, req, message):
    with pytest.raises(AnsibleFilterError) as err:
        design(pools, tenants, req, inventory={"p": inv(["n1"], accelerator="x", workload="training")})
    assert message in str(err.value)


def test_pool_without_hosts_needs_a_node_count():
    with pytest.raises(AnsibleFilterError, match="platform_pools.p.nodes: the pool has no hosts"):
        design({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 1}})


# --- warnings for the common mistakes -------------------------------------------------------

def test_common_mistakes_are_warned():
    pools = {"pool_mixed": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["train", "serve"]},
             "pool_bare": {"gpu_product": "NVIDIA-L4", "gpus_per_node": 1, "teams": ["serve"]}}
    tenants = [{"name": "train", "quota": {"requests.cpu": "8"}}, tenant("serve", gpu=2)]
    req = {"teams": {"train": {"workload": "training"}, "serve": {"workload": "inference", "production": True}}}
    result = design(pools, tenants, req,
                    inventory={"pool_mixed": inv(["m1"], accelerator="l40s", workload="mixed"),
                               "pool_bare": {"hosts": ["b1"], "labels": {}, "taints": []}})
    found = codes(result)
    assert "training_and_inference_without_priority" in found
    assert "team_without_quota" in found
    assert "pool_without_labels" in found
    no_quota = [w for w in result["warnings"] if w["code"] == "team_without_quota"][0]
    assert no_quota["team"] == "train"


def test_priorities_with_a_queue_silence_the_mixed_workload_warning():
    pools = {"pool_mixed": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["train", "serve"]}}
    tenants = [{"name": "train", "quota": {"requests.nvidia.com/gpu": 2}, "queue": {"priority": 50}},
               {"name": "serve", "quota": {"requests.nvidia.com/gpu": 2}, "queue": {"priority": 200}}]
    req = {"teams": {"train": {"workload": "training"}, "serve": {"workload": "inference"}}}
    result = design(pools, tenants, req, inventory={"pool_mixed": inv(["m1"], accelerator="l40s", workload="mixed")})
    assert "training_and_inference_without_priority" not in codes(result)


def test_sharing_label_that_contradicts_the_decision_is_warned():
    pools = {"pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["team-a"]}}
    tenants = [{"name": "team-a", "quota": {"requests.nvidia.com/mig-1g.10gb": 7}}]
    result = design(pools, tenants, inventory={"pool_h100": inv(["h1"], accelerator="h100", workload="training",
                                                                sharing="exclusive")})
    warning = [w for w in result["warnings"] if w["code"] == "sharing_label_differs"][0]
    assert "node_prereqs_pool.sharing: mig" in warning["message"]


# --- MIG layout ---------------------------------------------------------------------------

def test_layout_that_cannot_cover_says_why_and_how_many_nodes_would():
    model = mig.GPU_MODELS["H100-80GB"]
    result = design_mig.layout("H100-80GB", model, "0x233010DE", {"1g.10gb": 60, "3g.40gb": 2}, 0, ["h1"], 8)
    assert result["covered"] is False
    assert "60 x 1g.10gb" in result["reason"] and "2 more node(s) like these would cover it" in result["reason"]
    assert "the closest offers 56 x 1g.10gb" in result["reason"]


def test_layout_refuses_profiles_of_another_model():
    model = mig.GPU_MODELS["H100-80GB"]
    result = design_mig.layout("H100-80GB", model, "0x233010DE", {"1g.5gb": 7}, 0, ["h1"], 8)
    assert result["covered"] is False and "1g.5gb" in result["reason"]


@pytest.mark.needs_shared
def test_derived_config_names_exist_upstream_with_the_same_layout():
    """The naming rule the filter uses without a cluster config matches the real default config."""
    with open(PARTED) as handle:
        parted = mig.MigPartedConfig(handle.read())
    for name, model in mig.GPU_MODELS.items():
        for device_id in model["device_ids"]:
            upstream_configs = design_mig.configs_from(parted, model, device_id, 2)
            for config, per_gpu in design_mig.derived_configs(model, device_id).items():
                assert config in upstream_configs, (name, device_id, config)
                assert upstream_configs[config] == per_gpu, (name, device_id, config)


@pytest.mark.needs_shared
def test_cluster_mig_parted_config_adds_balanced_layouts():
    with open(PARTED) as handle:
        text = handle.read()
    pools = {"pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 1, "teams": ["a", "b", "c"]}}
    tenants = [{"name": "a", "quota": {"requests.nvidia.com/mig-1g.10gb": 2}},
               {"name": "b", "quota": {"requests.nvidia.com/mig-2g.20gb": 1}},
               {"name": "c", "quota": {"requests.nvidia.com/mig-3g.40gb": 1}}]
    result = design(pools, tenants, inventory={"pool_h100": inv(["h1"], accelerator="h100", workload="mixed")},
                    mig_parted_config=text)
    assert result["pools"]["pool_h100"]["mig_profile"] == "all-balanced"


# --- inventory pools ----------------------------------------------------------------------

def test_inventory_pools_from_groups_and_hostvars():
    groups = {"all": ["localhost", "h1", "h2"], "gpu_nodes": ["h1", "h2"], "pool_h100": ["h2", "h1"]}
    hostvars = {"h1": {"node_prereqs_pool": {"accelerator": "h100"}, "node_prereqs_node_name": "h1.example"},
                "h2": {"node_prereqs_pool": {"accelerator": "h100"}}, "localhost": {}}
    pools = FILTERS["platform_inventory_pools"](groups, hostvars)
    assert pools == {"pool_h100": {"hosts": ["h1", "h2"], "nodes": ["h1.example", "h2"],
                                   "labels": {"accelerator": "h100"}, "taints": [], "label_prefix": None,
                                   "labels_known": True}}


def test_without_hostvars_the_mig_layout_is_the_same_and_label_checks_are_skipped():
    """A variable read through hostvars cannot see hostvars: the mig role reads mig_profile that way."""
    groups = {"pool_h100": ["h1", "h2"]}
    hostvars = {"h1": {"node_prereqs_pool": {"accelerator": "h100", "sharing": "exclusive"}},
                "h2": {"node_prereqs_pool": {"accelerator": "h100", "sharing": "exclusive"}}}
    pools = {"pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["a", "b"]}}
    tenants = [{"name": "a", "quota": {"requests.nvidia.com/mig-1g.10gb": 7}},
               {"name": "b", "quota": {"requests.nvidia.com/mig-3g.40gb": 2}}]
    full = design(pools, tenants, inventory=FILTERS["platform_inventory_pools"](groups, hostvars))
    partial = design(pools, tenants, inventory=FILTERS["platform_inventory_pools"](groups, None))
    assert full["roles"]["mig_profile_by_host"] == partial["roles"]["mig_profile_by_host"] == {
        "h1": "all-1g.10gb", "h2": "all-3g.40gb"}
    assert "sharing_label_differs" in codes(full) and "sharing_label_differs" not in codes(partial)


def test_node_count_that_contradicts_the_inventory_is_refused():
    with pytest.raises(AnsibleFilterError, match="platform_pools.p.nodes is 3, but inventory group p has 1 host"):
        design({"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 1, "nodes": 3}},
               inventory={"p": inv(["n1"], accelerator="l40s", workload="training")})


def test_short_layout_covers_the_slices_first():
    """The slices are why the pool runs MIG: a pool too small for everything still offers them."""
    model = mig.GPU_MODELS["H100-80GB"]
    result = design_mig.layout("H100-80GB", model, "0x233010DE", {"1g.10gb": 14}, 10, ["h1", "h2"], 4)
    assert result["covered"] is False
    assert result["profiles"] == {"h1": "all-1g.10gb", "h2": "all-disabled"}
    assert "the closest offers 28 x 1g.10gb, 4 whole GPU(s). 2 more node(s) like these would cover it" \
        in result["reason"]


def test_whole_gpus_on_a_mig_pool_default_to_the_quota_of_a_single_pool_team():
    pools = {"p": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 4, "teams": ["a", "b"]}}
    tenants = [{"name": "a", "quota": {"requests.nvidia.com/gpu": 4}},
               {"name": "b", "quota": {"requests.nvidia.com/mig-1g.10gb": 7}}]
    result = design(pools, tenants, inventory={"p": inv(["h1", "h2"], accelerator="h100", workload="training")})
    layout = result["pools"]["p"]["mig"]
    assert layout["whole_requested"] == 4 and layout["covered"] is True
    assert result["pools"]["p"]["mig_profiles"] == {"h1": "all-1g.10gb", "h2": "all-disabled"}


def test_explicit_mig_profile_is_used_for_every_node_and_checked_by_name():
    pools = {"p": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["a"],
                   "mig_profile": "all-2g.20gb"}}
    result = design(pools, [{"name": "a", "quota": {"requests.nvidia.com/mig-1g.10gb": 7}}],
                    inventory={"p": inv(["h1", "h2"], accelerator="h100", workload="training")})
    assert result["pools"]["p"]["mig_profiles"] == {"h1": "all-2g.20gb", "h2": "all-2g.20gb"}
    assert result["pools"]["p"]["explicit"] == "mig" and "mig_profile_unknown" not in codes(result)
    pools["p"]["mig_profile"] = "all-1g.5gb"
    result = design(pools, [{"name": "a", "quota": {"requests.nvidia.com/mig-1g.10gb": 7}}],
                    inventory={"p": inv(["h1"], accelerator="h100", workload="training")})
    assert "mig_profile_unknown" in codes(result)
    pools = {"p": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["a"], "mig_profile": "all-1g.10gb"}}
    with pytest.raises(AnsibleFilterError, match="platform_pools.p.mig_profile: mig is impossible"):
        design(pools, [{"name": "a"}], inventory={"p": inv(["l1"], accelerator="l40s", workload="training")})
