"""Design documents and job template variables: deterministic, and what each team gets."""
import copy

from ansible_collections.skaffon.gpu_platform.plugins.filter.platform_design import FilterModule

FILTERS = FilterModule().filters()

POOLS = {"pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["team-a", "team-b"]},
         "pool_l40s": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["team-c"]}}
INVENTORY = {
    "pool_h100": {"hosts": ["h1", "h2"], "labels": {"accelerator": "h100", "workload": "training", "trust": "mixed"},
                  "taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}]},
    "pool_l40s": {"hosts": ["l1"], "nodes": ["l1.example"], "labels": {"accelerator": "l40s", "workload": "inference"},
                  "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}}
TENANTS = [
    {"name": "team-a", "quota": {"requests.nvidia.com/gpu": 8}, "labels": {"cost-center": "4711"},
     "queue": {"parent": "research", "priority": 100, "gpu": {"quota": 8, "limit": 16, "over_quota_weight": 2}}},
    {"name": "team-b", "quota": {"requests.nvidia.com/mig-1g.10gb": 14, "requests.nvidia.com/mig-3g.40gb": 2}},
    {"name": "team-c", "quota": {"requests.nvidia.com/gpu": 8}},
]
REQ = {"teams": {"team-a": {"gang": True, "gang_size": 4, "whole_gpus": {"pool_h100": 8}}}}


def _design(**kw):
    args = dict(tenants=TENANTS, requirements=REQ, inventory=INVENTORY)
    args.update(kw)
    return FILTERS["platform_design"](POOLS, **args)


def test_documents_are_deterministic_whatever_the_input_order():
    first = FILTERS["platform_design_report"](_design())
    shuffled_pools = dict(reversed(list(copy.deepcopy(POOLS).items())))
    shuffled = FILTERS["platform_design_report"](FILTERS["platform_design"](
        shuffled_pools, tenants=list(reversed(TENANTS)), requirements=REQ, inventory=INVENTORY))
    assert first == shuffled
    assert sorted(first) == ["architecture.md", "quota-queue-concept.md"]


def test_architecture_names_the_decision_and_the_layout():
    text = FILTERS["platform_design_report"](_design())["architecture.md"]
    assert "| pool_h100 | 16 x NVIDIA-H100-80GB-HBM3 | mig | MIG slice " in text
    # 14 x 1g.10gb and 2 x 3g.40gb, 8 whole GPUs for team-a: three kinds on two nodes do not fit
    assert "mig_layout_short" in text
    assert "1 more node(s) like these would cover it" in text
    assert "Time-slicing: config `shared-4`, 4 replicas per GPU" in text
    assert "| pool_l40s | 4 x NVIDIA-L40S | time-slicing | time-slice (1/4, no isolation) | spread | team-c | kai |" in text
    assert "team-c: time-slice (1/4, no isolation)" in text        # what the namespace says


def test_concept_describes_kai_queues_and_quota_changes():
    text = FILTERS["platform_design_report"](_design(), departments=[{"name": "research", "gpu": {"quota": 16}}])[
        "quota-queue-concept.md"]
    assert "KAI leaf queue `team-a` under `research`: gpu quota 8, limit 16, over-quota weight 2, priority 100" in text
    assert "Departments (KAI parent queues): research (gpu quota 16)" in text
    assert "the parent department first" in text
    assert "neither KAI nor Kueue evicts running work" in text


def test_concept_for_kueue_shows_cohort_and_flavors():
    tenants = copy.deepcopy(TENANTS)
    tenants[0]["queue"] = {"cohort": "research", "fair_sharing_weight": 2, "flavors": [
        {"name": "h100-training", "resources": {"nvidia.com/gpu": {"nominal": 8, "borrowing_limit": 4}}}]}
    design = _design(tenants=tenants, requirements=dict(REQ, queue_backend="kueue"))
    text = FILTERS["platform_design_report"](design)["quota-queue-concept.md"]
    assert "Kueue ClusterQueue `team-a` (cohort `research`), LocalQueue team-a/team-a; fair-sharing weight 2" in text
    assert "nvidia.com/gpu nominal 8, borrowing limit 4, lending limit unlimited" in text
    assert "preemption: reclaimWithinCohort=Any, withinClusterQueue=LowerPriority" in text


def _jobs(design):
    return dict(((j["team"], j["template"]), j["job"]) for j in FILTERS["platform_job_templates"](design))


def test_templates_request_what_each_team_has():
    jobs = _jobs(_design())
    assert jobs[("team-a", "single-gpu-job")]["resource"] == "nvidia.com/gpu"
    assert jobs[("team-a", "gang-job")]["gang_annotation"] == "kai.scheduler/batch-min-member"
    assert jobs[("team-a", "gang-job")]["gang_size"] == 4
    # team-b has only slices: its smallest one everywhere
    assert jobs[("team-b", "single-gpu-job")]["resource"] == "nvidia.com/mig-1g.10gb"
    assert jobs[("team-b", "inference-deployment")]["resource"] == "nvidia.com/mig-1g.10gb"
    team_c = jobs[("team-c", "inference-deployment")]
    assert (team_c["pool"], team_c["resource"]) == ("pool_l40s", "nvidia.com/gpu")
    assert team_c["node_selector"] == {"gpu.skaffon.io/accelerator": "l40s", "gpu.skaffon.io/workload": "inference"}
    assert team_c["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                                      "effect": "NoSchedule"}]
    assert jobs[("team-a", "single-gpu-job")]["labels"] == {
        "cost-center": "4711", "gpu-platform.skaffon.io/team": "team-a", "gpu-platform.skaffon.io/pool": "pool_h100"}
    # the pools' KAI placements differ (training binpack, inference spread): one shard per workload
    # label, so the pods carry their pool's value for the pod-grouper to put the PodGroup into that shard
    assert jobs[("team-a", "single-gpu-job")]["queue_labels"] == {"kai.scheduler/queue": "team-a",
                                                                  "gpu.skaffon.io/workload": "training"}
    assert jobs[("team-c", "inference-deployment")]["queue_labels"]["gpu.skaffon.io/workload"] == "inference"
    assert jobs[("team-a", "single-gpu-job")]["scheduler_name"] == "kai-scheduler"


def test_air_gapped_templates_pull_from_the_mirror():
    jobs = _jobs(_design(requirements=dict(REQ, air_gapped=True, image_mirror="mirror.example:5000/")))
    assert jobs[("team-a", "single-gpu-job")]["image"] == \
        "mirror.example:5000/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
    assert jobs[("team-c", "inference-deployment")]["inference_image"].startswith("mirror.example:5000/nvidia/")


def test_gang_team_with_only_slices_is_warned():
    req = {"teams": {"team-b": {"gang": True}}}
    design = _design(requirements=req)
    assert any(w["code"] == "gang_without_whole_gpus" and w["team"] == "team-b" for w in design["warnings"])


def test_fractional_inference_only_for_a_team_on_a_fraction_pool():
    """KAI GPU fractions on pool_l40s: team-c gets fractional-inference (gpu-fraction, no GPU resource, the KAI
    scheduler, its pool's selector and shard label) beside inference-deployment; teams elsewhere do not."""
    pools = copy.deepcopy(POOLS)
    pools["pool_l40s"]["allocation"] = "fraction"
    design = FILTERS["platform_design"](pools, tenants=TENANTS, requirements=dict(REQ, queue_backend="kai"),
                                        inventory=INVENTORY)
    jobs = _jobs(design)
    frac = jobs[("team-c", "fractional-inference")]
    assert (frac["pool"], frac["resource"], frac["gpu_fraction"]) == ("pool_l40s", None, "0.5")
    assert frac["scheduler_name"] == "kai-scheduler"
    assert frac["node_selector"] == {"gpu.skaffon.io/accelerator": "l40s", "gpu.skaffon.io/workload": "inference"}
    assert frac["queue_labels"] == {"kai.scheduler/queue": "team-c", "gpu.skaffon.io/workload": "inference"}
    assert jobs[("team-c", "inference-deployment")]["resource"] == "nvidia.com/gpu"
    assert [t for (team, t) in jobs if t == "fractional-inference"] == ["fractional-inference"]
    # without a fraction pool nobody gets it
    assert not [k for k in _jobs(_design()) if k[1] == "fractional-inference"]


def test_fractional_inference_renders_kais_annotation_and_no_gpu_request():
    import os

    import jinja2
    import yaml

    pools = copy.deepcopy(POOLS)
    pools["pool_l40s"]["allocation"] = "fraction"
    design = FILTERS["platform_design"](pools, tenants=TENANTS, requirements=dict(REQ, queue_backend="kai"),
                                        inventory=INVENTORY)
    job = _jobs(design)[("team-c", "fractional-inference")]
    root = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "templates")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(root))
    env.filters["to_nice_yaml"] = lambda v, indent=2: yaml.safe_dump(v, indent=indent, default_flow_style=False)
    env.filters["combine"] = lambda a, b: dict(a, **b)
    doc = yaml.safe_load(env.get_template("fractional-inference.yaml.j2").render(job=job))
    pod = doc["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "team-c"
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert "nvidia.com/gpu" not in str(pod["spec"]["containers"][0]["resources"])
    assert pod["spec"]["tolerations"] == job["tolerations"]
