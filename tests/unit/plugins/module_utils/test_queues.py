"""Queue objects: KAI Queues, Kueue flavors/queues, the queue policy; checked against the real CRDs."""
import os

import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import objects as q
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from kit.paths import REPO, UPSTREAM as UP
CRDS = {"Queue": "kai-scheduler/crds/scheduling.run.ai_queues.yaml",
        "ClusterQueue": "kueue/crds/kueue.x-k8s.io_clusterqueues.yaml",
        "LocalQueue": "kueue/crds/kueue.x-k8s.io_localqueues.yaml",
        "ResourceFlavor": "kueue/crds/kueue.x-k8s.io_resourceflavors.yaml"}
POOLS = {"h100-nvlink-training": {"labels": {"gpu.skaffon.io/accelerator": "h100"},
                                  "taints": [{"key": "gpu.skaffon.io/workload", "value": "training",
                                              "effect": "NoSchedule"}]},
         "l40s-pcie-inference": {"labels": {"gpu.skaffon.io/accelerator": "l40s"}, "taints": []}}
DEPTS = [{"name": "research", "gpu": {"quota": 8}}]


def kai_team(name, quota, weight=1, **extra):
    queue = {"parent": "research", "gpu": {"quota": quota, "over_quota_weight": weight}}
    queue.update(extra)
    return {"name": name, "queue": queue}


def kueue_team(name, nominal, cohort="research", **res):
    block = {"nominal": nominal}
    block.update(res)
    return {"name": name, "queue": {"cohort": cohort, "flavors": [
        {"name": "h100-nvlink-training", "resources": {"nvidia.com/gpu": block}}]}}


def schema_errors(obj):
    """Field errors of obj against the real CRD (OpenAPI + x-kubernetes-validations)."""
    from simcluster.validation import schema
    path = os.path.join(UP, CRDS[obj["kind"]])
    if not os.path.exists(path):
        pytest.skip("upstream CRDs absent (../shared)")
    with open(path) as fh:
        crd = yaml.safe_load(fh)
    group, version = obj["apiVersion"].split("/")
    ver = [v for v in crd["spec"]["versions"] if v["name"] == version]
    assert ver, "%s not served by the CRD (%s)" % (obj["apiVersion"], [v["name"] for v in crd["spec"]["versions"]])
    root = schema.compile_schema(ver[0]["schema"]["openAPIV3Schema"])
    pruned, unknown = dict(obj), []
    unknown = schema.prune(pruned, root)
    assert not unknown, "fields the CRD would prune: %s" % unknown
    return [str(e) for e in schema.validate(obj, root)]


def fail(fn, *args, **kw):
    with pytest.raises(DomainError) as exc:
        fn(*args, **kw)
    return exc.value.msg


# -- KAI ------------------------------------------------------------------------------------

@pytest.mark.needs_shared
def test_kai_queues_render_all_three_resources_and_pass_the_crd():
    objs = q.render("kai", [kai_team("team-a", 2, 1), kai_team("team-b", 2, 3)], DEPTS)
    queues = [o for o in objs if o["kind"] == "Queue"]
    assert [o["metadata"]["name"] for o in queues] == ["research", "team-a", "team-b", "default-queue"]
    # the chart's default-queue (quota 0, limit -1) would hand out free GPUs to unlabelled pods
    assert queues[3]["spec"]["resources"]["gpu"] == {"quota": 0, "limit": 0, "overQuotaWeight": 0}
    assert queues[3]["spec"]["parentQueue"] == "default-parent-queue"
    assert "default-queue" not in [o["metadata"]["name"] for o in q.render(
        "kai", [kai_team("team-a", 2)], DEPTS, kai_default_queue="open")]
    b = queues[2]["spec"]
    assert b["parentQueue"] == "research"
    assert b["resources"]["gpu"] == {"quota": 2, "limit": -1, "overQuotaWeight": 3}
    # unset limit would be 0 (blocks); cpu/memory unmanaged -> unlimited, weight 1
    assert b["resources"]["cpu"] == {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    assert b["resources"]["memory"] == {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    for o in queues:
        assert schema_errors(o) == []


def test_kai_units_cpu_millicores_memory_megabytes():
    team = kai_team("team-a", 2, cpu={"quota": "4", "limit": "8"}, memory={"quota": "16Gi"})
    spec = q.render("kai", [team], [{"name": "research", "gpu": {"quota": 8}, "cpu": {"quota": 16},
                                     "memory": {"quota": "64Gi"}}])[1]["spec"]
    assert spec["resources"]["cpu"] == {"quota": 4000, "limit": 8000, "overQuotaWeight": 1}
    assert spec["resources"]["memory"]["quota"] == round(16 * 2 ** 30 / 1e6, 3)


def test_kai_policy_refuses_other_queue_labels():
    objs = q.render("kai", [kai_team("team-a", 2), kai_team("team-b", 2)], DEPTS)
    policy, binding = objs[-2:]
    assert policy["kind"] == "ValidatingAdmissionPolicy"
    assert "kai.scheduler/queue" in policy["spec"]["validations"][0]["expression"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "team-a", "team-b"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["validations"][1]["expression"].endswith("object.spec.queue == request.namespace")
    # default-queue left open: its PodGroups (written by the pod-grouper) must pass in team namespaces
    opened = q.render("kai", [kai_team("team-a", 2)], DEPTS, kai_default_queue="open")[-2]
    assert opened["spec"]["validations"][1]["expression"].endswith(
        "object.spec.queue in [request.namespace, 'default-queue']")


@pytest.mark.parametrize("team,depts,needle", [
    (kai_team("team-a", 4, gpu_limit=None), DEPTS, "unknown keys"),
    ({"name": "team-a", "queue": {"parent": "research", "gpu": {"quota": 4, "limit": 2}}}, DEPTS,
     "tenants_list[0].queue.gpu.limit: below the quota 4"),
    (kai_team("team-a", 9), DEPTS, "tenants_list[0].queue.gpu.quota: above the quota 8 of its parent research"),
    ({"name": "team-a", "queue": {"parent": "nope", "gpu": {"quota": 1}}}, DEPTS,
     "tenants_list[0].queue.parent: no such department"),
    (kai_team("team-a", 1, weight=-1), DEPTS, "over_quota_weight: below 0"),
    ({"name": "team-a", "queue": {"parent": "research"}}, DEPTS, "tenants_list[0].queue.gpu: missing"),
    (kai_team("team-a", 1), [{"name": "research", "parent": "ghost", "gpu": {"quota": 8}}],
     "queues_departments[0].parent: no such department"),
    (kai_team("team-a", 1, priority="high"), DEPTS, "priority: not an integer"),
])
def test_kai_refusals_name_variable_value_and_fix(team, depts, needle):
    if "gpu_limit" in team["queue"]:
        team["queue"]["bogus"] = 1
    msg = fail(q.render, "kai", [team], depts)
    assert needle in msg
    assert ":" in msg.split("(got")[1]        # value shown, then the fix


def test_kai_children_sum_above_parent_refused():
    msg = fail(q.render, "kai", [kai_team("team-a", 5), kai_team("team-b", 5)], DEPTS)
    assert "queues_departments[0].gpu.quota: below the sum 10" in msg


def test_backend_none_renders_nothing_and_unknown_backend_refused():
    assert q.render("none", [kai_team("team-a", 2)], DEPTS) == []
    assert "tenants_queue_backend: unknown backend" in fail(q.render, "slurm", [], [])


# -- Kueue ------------------------------------------------------------------------------------

@pytest.mark.needs_shared
def test_kueue_objects_pass_the_crds_including_cel():
    objs = q.render("kueue", [kueue_team("team-a", 4, borrowing_limit=4), kueue_team("team-b", 4)],
                    pools=POOLS)
    kinds = [o["kind"] for o in objs]
    assert kinds == ["ResourceFlavor", "ClusterQueue", "ClusterQueue", "LocalQueue", "LocalQueue",
                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    rf, cq_a = objs[0], objs[1]
    assert rf["metadata"]["name"] == "h100-nvlink-training"
    assert rf["spec"]["tolerations"] == [{"key": "gpu.skaffon.io/workload", "operator": "Equal",
                                          "value": "training", "effect": "NoSchedule"}]
    assert cq_a["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    assert cq_a["spec"]["cohortName"] == "research"
    assert cq_a["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 4, "borrowingLimit": 4}]
    assert objs[3]["metadata"] == {"name": "team-a", "namespace": "team-a"}
    for o in objs[:5]:
        assert schema_errors(o) == []


@pytest.mark.needs_shared
def test_kueue_crd_cel_refuses_borrowing_without_cohort():
    """The CRD's own rule (evaluated by the simulator's CEL) agrees with our pre-check."""
    cq = q.render("kueue", [kueue_team("team-a", 4)], pools=POOLS)[1]
    cq["spec"].pop("cohortName")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 1
    assert any("borrowingLimit" in e or "cohort" in e for e in schema_errors(cq))


@pytest.mark.parametrize("team,needle", [
    (kueue_team("team-a", 4, cohort=None, borrowing_limit=2), "borrowing_limit: set without a cohort"),
    (kueue_team("team-a", 4, lending_limit=5), "lending_limit: above the nominal quota"),
    ({"name": "team-a", "queue": {"flavors": [{"name": "a100", "resources": {"nvidia.com/gpu": 1}}]}},
     "flavors[0].name: not a GPU pool"),
    ({"name": "team-a", "queue": {"flavors": [
        {"name": "h100-nvlink-training", "resources": {"nvidia.com/gpu": 1, "cpu": 8}},
        {"name": "l40s-pcie-inference", "resources": {"nvidia.com/gpu": 1}}]}},
     "flavors[1].resources: lacks covered resources cpu"),
    ({"name": "team-a", "queue": {"fair_sharing_weight": -2, "flavors": [
        {"name": "h100-nvlink-training", "resources": {"nvidia.com/gpu": 1}}]}},
     "fair_sharing_weight: below 0"),
    ({"name": "team-a", "queue": {"preemption": {"reclaimWithinCohort": "Always"}, "flavors": [
        {"name": "h100-nvlink-training", "resources": {"nvidia.com/gpu": 1}}]}},
     "reclaimWithinCohort: not a Kueue policy"),
])
def test_kueue_refusals(team, needle):
    assert needle in fail(q.render, "kueue", [team], pools=POOLS)


def test_kueue_refuses_departments():
    assert "queues_departments: set with backend kueue" in fail(
        q.render, "kueue", [kueue_team("team-a", 4)], DEPTS, POOLS)


def test_pools_from_node_prereqs_hostvars():
    hostvars = {
        "gpu-h100-1": {"node_prereqs_pool": {"accelerator": "h100", "topology": "nvlink", "workload": "training"},
                       "node_prereqs_pool_taints": [{"key": "workload", "value": "training",
                                                     "effect": "NoSchedule"}]},
        "gpu-h100-2": {"node_prereqs_pool": {"accelerator": "h100", "topology": "nvlink", "workload": "training"}},
        "gpu-l40s-1": {"node_prereqs_pool": {"accelerator": "l40s", "topology": "pcie", "workload": "inference"},
                       "node_prereqs_pool_taints": [{"key": "nvidia.com/gpu", "value": "present",
                                                     "effect": "NoSchedule"}]},
        "localhost": {},
    }
    pools = q.pools_from_hostvars(hostvars, sorted(hostvars))
    assert sorted(pools) == ["h100-nvlink-training", "l40s-pcie-inference"]
    assert pools["h100-nvlink-training"]["labels"]["gpu.skaffon.io/accelerator"] == "h100"
    assert pools["l40s-pcie-inference"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present",
                                                      "effect": "NoSchedule"}]


def test_chart_values_for_the_mirror_and_pull_secrets_per_chart_shape():
    kai = q.chart_values("kai", "registry.local:5000/mirror", pull_secrets=["regcred"])
    assert kai == {"global": {"registry": "registry.local:5000/mirror/kai-scheduler/kai-scheduler",
                              "imagePullSecrets": [{"name": "regcred"}]}}
    kueue = q.chart_values("kueue", "registry.local:5000/mirror", pull_secrets=[{"name": "regcred"}],
                           user_values={"controllerManager": {"replicas": 2}})
    assert kueue.pop("managerConfig")       # the Configuration: test_queues_dra.py
    assert kueue == {"controllerManager": {"manager": {"image": {
        "repository": "registry.local:5000/mirror/kueue/kueue"}}, "imagePullSecrets": [{"name": "regcred"}],
        "replicas": 2}}
    assert "queues_image_mirror: not a registry prefix" in fail(q.chart_values, "kai", "https://mirror")


def test_kueue_borrowing_the_resource_quota_makes_unusable_is_refused_with_the_fix():
    team = kueue_team("team-a", 4, borrowing_limit=6)
    team["quota"] = {"requests.nvidia.com/gpu": 8, "requests.cpu": "16"}
    msg = fail(q.render, "kueue", [team, kueue_team("team-b", 4)], pools=POOLS)
    assert msg.startswith("tenants_list[0].queue.flavors[0].resources[nvidia.com/gpu].borrowing_limit: nominal 4 + "
                          "borrowing_limit 6 = 10 is above the team's ResourceQuota requests.nvidia.com/gpu: 8 "
                          "(tenants_list[0].quota)"), msg
    assert "lower borrowing_limit to 4, or raise tenants_list[0].quota['requests.nvidia.com/gpu'] to 10" in msg
    # nominal + borrowing within the quota, or no GPU quota at all: allowed
    team["queue"]["flavors"][0]["resources"]["nvidia.com/gpu"]["borrowing_limit"] = 4
    assert q.render("kueue", [team, kueue_team("team-b", 4)], pools=POOLS)
    team["quota"] = {"requests.cpu": "16"}
    team["queue"]["flavors"][0]["resources"]["nvidia.com/gpu"]["borrowing_limit"] = 60
    assert q.render("kueue", [team, kueue_team("team-b", 4)], pools=POOLS)


def test_kueue_chart_version_as_the_real_chart_writes_it():
    """The role's example and archive check follow the real Chart.yaml: Kueue without a v, KAI with one."""
    path = os.path.join(REPO, "roles", "queues", "vars", "main.yml")
    with open(path) as fh:
        backends = yaml.safe_load(fh)["queues_backends"]
    import tarfile
    # the released archives (KAI's source Chart.yaml says 0.0.0: its release sets the version)
    for backend, archive, member in (("kueue", "kueue/charts/kueue-0.19.2.tgz", "kueue/Chart.yaml"),
                                     ("kai", "kai-scheduler/charts/kai-scheduler-v0.17.0.tgz",
                                      "kai-scheduler/Chart.yaml")):
        real = os.path.join(UP, archive)
        if not os.path.exists(real):
            pytest.skip("upstream charts absent (../shared)")
        with tarfile.open(real) as tar:
            version = str(yaml.safe_load(tar.extractfile(member))["version"])
        assert backends[backend]["example_version"] == version
        assert backends[backend]["version_prefix"] == ("v" if version.startswith("v") else "")
