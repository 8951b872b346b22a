"""KAI GPU fractions and placement per pool: chart values against the real chart, shards against the
real SchedulingShard CRD, the GPU-fraction admission policies in the simulator's admission (real CEL)."""
import itertools
import os
import tarfile

import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import kai_sharing as ks
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import objects as q
from kit import charts, paths

KEY = "gpu.skaffon.io/workload"
POOLS = {"h100-nvlink-training": {"labels": {"gpu.skaffon.io/accelerator": "h100", KEY: "training"}, "taints": []},
         "l40s-pcie-inference": {"labels": {"gpu.skaffon.io/accelerator": "l40s", KEY: "inference"}, "taints": []}}
DEPTS = [{"name": "research", "gpu": {"quota": 8}}, {"name": "serving", "gpu": {"quota": 4}}]
TEAMS = [{"name": "team-a", "queue": {"parent": "research", "pool": "h100-nvlink-training", "gpu": {"quota": 4}}},
         {"name": "team-inf", "queue": {"parent": "serving", "pool": "l40s-pcie-inference", "gpu": {"quota": 2}}}]
SPLIT = {"h100-nvlink-training": "binpack", "l40s-pcie-inference": "spread"}
NAMES = itertools.count()


def fail(fn, *args, **kw):
    with pytest.raises(DomainError) as exc:
        fn(*args, **kw)
    return str(exc.value)


def render_chart(values):
    return charts.render(paths.KAI_CHART, values, release="kai-scheduler", namespace="kai-scheduler")


def kai_config(docs):
    """The Config the chart's hook applies (ConfigMap kai-config-manifest, key kai-config.yaml)."""
    cm = [d for d in docs if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == "kai-config-manifest"]
    return yaml.safe_load(cm[0]["data"]["kai-config.yaml"])


# -- chart values: what the real chart renders from them ------------------------------------------------

@pytest.mark.needs_shared
def test_gpu_sharing_on_reaches_the_config_admission_and_the_reservation_namespace_exists():
    values = q.chart_values("kai", kai_gpu_sharing=True)
    assert values == {"global": {"gpuSharing": True}}
    docs = render_chart(values)
    assert kai_config(docs)["spec"]["admission"]["gpuSharing"] is True
    # the binder's reservation pods live here (chart global.resourceReservation.namespace)
    assert [d["metadata"]["name"] for d in charts.by_kind(docs, "Namespace")] == ["kai-resource-reservation"]
    assert kai_config(render_chart(q.chart_values("kai")))["spec"]["admission"]["gpuSharing"] is False
    blocked = q.chart_values("kai", kai_block_visible_devices=True)
    assert kai_config(render_chart(blocked))["spec"]["admission"]["blockNvidiaVisibleDevices"] is True


@pytest.mark.needs_shared
def test_one_strategy_for_every_pool_sets_the_default_shard():
    values = q.chart_values("kai", kai_placement={"h100-nvlink-training": "spread", "l40s-pcie-inference": "spread"},
                            pools=POOLS)
    assert values == {"scheduler": {"placementStrategy": "spread"}}
    shard = charts.by_kind(render_chart(values), "SchedulingShard")
    assert [(s["metadata"]["name"], s["spec"]["placementStrategy"]) for s in shard] == [
        ("default", {"gpu": "spread", "cpu": "spread"})]


@pytest.mark.needs_shared
def test_pools_that_differ_shard_by_the_workload_label():
    values = q.chart_values("kai", kai_placement=SPLIT, pools=POOLS)
    assert values == {"global": {"nodePoolLabelKey": KEY}}
    docs = render_chart(values)
    assert kai_config(docs)["spec"]["global"]["nodePoolLabelKey"] == KEY
    # the chart's default shard keeps binpack for nodes without the label
    assert charts.by_kind(docs, "SchedulingShard")[0]["spec"]["placementStrategy"]["gpu"] == "binpack"


def test_pools_not_named_keep_the_chart_binpack():
    plan = ks.placement_plan({"l40s-pcie-inference": "spread"}, POOLS)
    assert (plan["label_key"], plan["shards"]) == (KEY, {"training": "binpack", "inference": "spread"})
    assert ks.placement_plan({"h100-nvlink-training": "binpack"}, POOLS)["strategy"] == "binpack"
    assert ks.placement_plan(None, POOLS) == {"strategy": None, "label_key": None, "shards": {}, "pool_value": {}}


def test_refusals_name_the_variable_and_the_fix():
    assert "queues_kai_placement: not a GPU pool (got 'a100')" in fail(ks.placement_plan, {"a100": "spread"}, POOLS)
    assert "unknown strategy (got 'pack')" in fail(ks.placement_plan, {"h100-nvlink-training": "pack"}, POOLS)
    same_workload = {"a": {"labels": {KEY: "training"}}, "b": {"labels": {KEY: "training"}}}
    assert "no pool label separates the pools by strategy" in fail(
        ks.placement_plan, {"a": "binpack", "b": "spread"}, same_workload)
    assert "queues_kai_gpu_sharing: not a boolean" in fail(ks.gpu_sharing, "maybe")


# -- objects: shards, queue labels --------------------------------------------------------------------

def shard_crd_schema():
    from simcluster.validation import schema
    paths.need(paths.KAI_CHART)
    with tarfile.open(paths.KAI_CHART) as tar:
        crd = yaml.safe_load(tar.extractfile("kai-scheduler/crds/kai.scheduler_schedulingshards.yaml"))
    return schema.compile_schema(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


@pytest.mark.needs_shared
def test_a_shard_per_pool_value_and_each_queue_labelled_for_its_shard():
    objs = q.render("kai", TEAMS, DEPTS, POOLS, kai_placement=SPLIT)
    shards = [o for o in objs if o["kind"] == "SchedulingShard"]
    assert [(s["metadata"]["name"], s["spec"]) for s in shards] == [
        ("inference", {"partitionLabelValue": "inference", "placementStrategy": {"gpu": "spread", "cpu": "spread"}}),
        ("training", {"partitionLabelValue": "training", "placementStrategy": {"gpu": "binpack", "cpu": "binpack"}})]
    from simcluster.validation import schema
    root = shard_crd_schema()
    for shard in shards:
        assert schema.prune(dict(shard), root) == [], "fields the CRD would prune"
        assert [str(e) for e in schema.validate(shard, root)] == []
    labels = dict((o["metadata"]["name"], (o["metadata"].get("labels") or {}).get(KEY))
                  for o in objs if o["kind"] == "Queue")
    assert labels == {"research": "training", "team-a": "training", "serving": "inference",
                      "team-inf": "inference", "default-queue": None}


def test_sharded_queues_need_a_pool_and_one_shard_per_department():
    teams = [dict(TEAMS[0], queue=dict(TEAMS[0]["queue"], pool=None))]
    assert "tenants_list[0].queue.pool: missing" in fail(q.render, "kai", teams, DEPTS, POOLS, kai_placement=SPLIT)
    mixed = [TEAMS[0], dict(TEAMS[1], queue=dict(TEAMS[1]["queue"], parent="research"))]
    assert "a KAI queue belongs to one shard" in fail(q.render, "kai", mixed, DEPTS, POOLS, kai_placement=SPLIT)
    wrong = [dict(TEAMS[0], queue=dict(TEAMS[0]["queue"], pool="a100"))]
    assert "tenants_list[0].queue.pool: not a GPU pool (got 'a100')" in fail(q.render, "kai", wrong, DEPTS, POOLS)


ALIASES = {"pool_h100_nvlink_training": "h100-nvlink-training", "pool_l40s_inference": "l40s-pcie-inference"}


def test_pools_named_by_inventory_group_as_the_design_does_and_teams_by_the_design_pools():
    """platform_design.roles.queues_kai_placement names pools by group; platform_pools lists their teams."""
    teams = [{"name": "team-a", "queue": {"parent": "research", "gpu": {"quota": 4}}},
             {"name": "team-inf", "queue": {"parent": "serving", "gpu": {"quota": 2}}}]
    design_pools = {"pool_h100_nvlink_training": {"gpus_per_node": 4, "teams": ["team-a"]},
                    "pool_l40s_inference": {"teams": ["team-inf"]}}
    placement = {"pool_h100_nvlink_training": "binpack", "pool_l40s_inference": "spread"}
    objs = q.render("kai", teams, DEPTS, POOLS, kai_placement=placement, pool_aliases=ALIASES,
                    kai_pool_teams=design_pools, kai_gpu_sharing=True, kai_fraction_pools=["pool_l40s_inference"])
    labels = dict((o["metadata"]["name"], (o["metadata"].get("labels") or {}).get(KEY))
                  for o in objs if o["kind"] == "Queue")
    assert labels["team-a"] == "training" and labels["team-inf"] == "inference"
    bindings = dict((o["metadata"]["name"], o["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
                     ["values"]) for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding")
    assert bindings["skaffon-gpu-fraction"] == ["team-inf"] and bindings["skaffon-gpu-fraction-off"] == ["team-a"]
    assert q.chart_values("kai", kai_placement=placement, pools=POOLS, pool_aliases=ALIASES) == {
        "global": {"nodePoolLabelKey": KEY}}


def test_a_team_listed_in_two_pools_must_name_its_pool():
    teams = [{"name": "team-a", "queue": {"parent": "research", "gpu": {"quota": 4}}}]
    both = {"pool_h100_nvlink_training": ["team-a"], "pool_l40s_inference": ["team-a"]}
    assert "tenants_list[0].queue.pool: missing" in fail(q.render, "kai", teams, DEPTS, POOLS, kai_placement=SPLIT,
                                                         pool_aliases=ALIASES, kai_pool_teams=both)
    assert "queues_kai_pool_teams: not a GPU pool (got 'pool_a100')" in fail(
        q.render, "kai", teams, DEPTS, POOLS, pool_aliases=ALIASES, kai_pool_teams={"pool_a100": ["team-a"]})


def test_pool_groups_maps_each_pool_group_to_its_pool():
    hostvars = {"h1": {"node_prereqs_pool": {"accelerator": "h100", "topology": "nvlink", "workload": "training"}},
                "h2": {"node_prereqs_pool": {"accelerator": "h100", "topology": "nvlink", "workload": "training"}},
                "l1": {"node_prereqs_pool": {"accelerator": "l40s", "topology": "pcie", "workload": "inference"}}}
    groups = {"all": ["h1", "h2", "l1"], "gpu_nodes": ["h1", "h2", "l1"], "pool_h100_nvlink_training": ["h1", "h2"],
              "pool_l40s_inference": ["l1"], "controllers": ["localhost"]}
    assert q.pool_groups(hostvars, groups, groups["gpu_nodes"]) == ALIASES


def test_without_sharing_or_placement_the_objects_are_as_before():
    teams = [{"name": "team-a", "queue": {"parent": "research", "gpu": {"quota": 4}}}]
    objs = q.render("kai", teams, DEPTS)
    assert [o["kind"] for o in objs] == ["Queue", "Queue", "Queue", "Queue", "ValidatingAdmissionPolicy",
                                         "ValidatingAdmissionPolicyBinding"]


# -- the fraction policies in the simulator's admission (real CEL) ---------------------------------------

VAP = "validatingadmissionpolicies.admissionregistration.k8s.io"
VAPB = "validatingadmissionpolicybindings.admissionregistration.k8s.io"


@pytest.fixture
def store():
    pytest.importorskip("celpy")
    from kit.fake_store import FakeStore
    s = FakeStore(namespaces=())
    for ns in ("team-a", "team-inf", "other"):
        s.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}}, admit=False)
    objs = q.render("kai", TEAMS, DEPTS, POOLS, kai_gpu_sharing=True, kai_fraction_pools=["l40s-pcie-inference"])
    for obj in objs:
        if obj["kind"] == "ValidatingAdmissionPolicy":
            s.create(VAP, obj)
        elif obj["kind"] == "ValidatingAdmissionPolicyBinding":
            s.create(VAPB, obj)
    return s


def pod(ns, **annotations):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p%d" % next(NAMES), "namespace": ns, "annotations": annotations},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}


def refusal(store, obj, code=403):
    """The message of a refused pod (403: reason Forbidden, so that kubectl prints it)."""
    from simcluster.errors import ApiError
    with pytest.raises(ApiError) as exc:
        store.create("pods", obj)
    assert exc.value.code == code
    return exc.value.message


def test_a_fraction_in_a_pool_that_takes_fractions_passes(store):
    for value in ("0.5", "0.25", ".3", "5e-1"):
        store.create("pods", pod("team-inf", **{"gpu-fraction": value}))
    store.create("pods", pod("team-inf", **{"gpu-memory": "20000"}))
    store.create("pods", pod("team-a"))                      # no fraction: not concerned
    store.create("pods", pod("other", **{"gpu-fraction": "0.5"}))   # not a team namespace


@pytest.mark.parametrize("value", ["0", "1", "1.0", "1.5", "-0.5", "half", "50%"])
def test_a_fraction_outside_0_1_is_refused_as_kai_would(store, value):
    p = pod("team-inf", **{"gpu-fraction": value})
    assert refusal(store, p) == (
        "pods \"%s\" is forbidden: ValidatingAdmissionPolicy 'skaffon-gpu-fraction' with binding "
        "'skaffon-gpu-fraction' denied request: gpu-fraction %s is not a GPU fraction: KAI takes 0 < gpu-fraction < 1 "
        "(a whole GPU is nvidia.com/gpu: 1)" % (p["metadata"]["name"], value))


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "20Gi"])
def test_gpu_memory_must_be_a_positive_integer(store, value):
    assert "gpu-memory %s is not a positive integer (MiB of one GPU)" % value in refusal(
        store, pod("team-inf", **{"gpu-memory": value}))


def test_a_team_whose_pool_takes_no_fractions_is_refused_naming_the_namespace(store):
    p = pod("team-a", **{"gpu-fraction": "0.5"})
    assert refusal(store, p) == (
        "pods \"%s\" is forbidden: ValidatingAdmissionPolicy 'skaffon-gpu-fraction-off' with binding "
        "'skaffon-gpu-fraction-off' denied request: GPU fractions (gpu-fraction, gpu-memory) are not offered in "
        "namespace team-a: its pool does not share GPUs by KAI fractions; request nvidia.com/gpu "
        "(see docs/queues.md, GPU fractions)" % p["metadata"]["name"])
    assert "are not offered in namespace team-a" in refusal(store, pod("team-a", **{"gpu-memory": "1000"}))


def test_sharing_off_renders_no_fraction_policy_kai_itself_refuses():
    objs = q.render("kai", TEAMS, DEPTS, POOLS)
    assert not [o for o in objs if o["metadata"]["name"].startswith("skaffon-gpu-fraction")]
    on = q.render("kai", TEAMS, DEPTS, POOLS, kai_gpu_sharing=True)
    names = sorted(o["metadata"]["name"] for o in on if o["kind"] == "ValidatingAdmissionPolicy")
    assert names == ["skaffon-gpu-fraction", "skaffon-queue-owner"]


# -- the job template, on the KAI twin ----------------------------------------------------------------

def render_template(job):
    import jinja2
    from ansible.plugins.filter.core import FilterModule
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(paths.REPO, "docs", "templates")),
                             undefined=jinja2.StrictUndefined)
    env.filters.update(dict((k, v) for k, v in FilterModule().filters().items() if k != "default"))
    return yaml.safe_load(env.get_template("fractional-inference.yaml.j2").render(job=job))


def test_fractional_inference_template_two_replicas_share_one_gpu():
    from simcluster.twins.testkit import TwinCluster, deployment
    job = {"team": "team-inf", "namespace": "team-inf", "pool": "l40s-pcie-inference",
           "labels": {"gpu.skaffon.io/team": "team-inf"}, "queue_labels": {"kai.scheduler/queue": "team-inf"},
           "node_selector": {KEY: "inference"}, "tolerations": [], "scheduler_name": "kai-scheduler",
           "inference_image": "nvcr.io/nvidia/tritonserver:25.01-py3"}
    dep = render_template(job)
    pod = dep["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    assert pod["metadata"]["labels"][KEY] == "inference"          # the shard's label reaches the PodGroup
    assert "nvidia.com/gpu" not in str(pod["spec"]["containers"][0]["resources"])
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    repo = "ghcr.io/kai-scheduler/kai-scheduler"
    cluster = os.path.join(paths.REPO, "simcluster", "tests", "clusters", "kai-frac-3x2.yaml")
    with TwinCluster(cluster) as c:
        for ns in ("kai-scheduler", "kai-resource-reservation", "team-inf"):
            c.namespace(ns)
        for name in ("gpu-1", "gpu-2", "gpu-3"):
            node = c.store.get("nodes", None, name)
            node["status"]["allocatable"]["nvidia.com/gpu"] = "2"
            c.store.update_status("nodes", node)
            c.label(name, {KEY: "inference"})

        def svc(name):
            return {"service": {"image": {"name": name, "repository": repo, "tag": "v0.17.0"}}}
        components = (("binder", "binder"), ("podGrouper", "podgrouper"), ("podGroupController", "podgroupcontroller"),
                      ("queueController", "queuecontroller"), ("scheduler", "scheduler"))
        spec = dict((k, svc(v)) for k, v in components)
        spec["admission"] = dict(svc("admission"), gpuSharing=True)
        c.store.create("deployments.apps", deployment("kai-operator", "kai-scheduler", image=repo + "/operator:v0.17.0"))
        c.store.create("configs.kai.scheduler", {"apiVersion": "kai.scheduler/v1", "kind": "Config",
                                                 "metadata": {"name": "kai-config"}, "spec": spec})
        for obj in q.render("kai", TEAMS[1:], DEPTS[1:], POOLS):
            if obj["kind"] == "Queue":
                c.store.create("queues.scheduling.run.ai", obj)
        dep["spec"]["template"]["metadata"]["annotations"]["simcluster.skaffon.io/behaviour"] = "run"
        c.store.create("deployments.apps", dep)

        def placed():
            pods = [p for p in c.pods("team-inf") if p["spec"].get("nodeName")]
            return len(pods) == 2 and {(p["spec"]["nodeName"], p["metadata"]["labels"].get("runai-gpu-group"))
                                       for p in pods}
        where = c.wait(placed, timeout=20, what="two replicas bound")
        assert len(where) == 1, "both replicas on one GPU group: %s" % where
        assert c.handle.errors == []
