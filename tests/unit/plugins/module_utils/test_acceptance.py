"""Hand-over checks: runner, inputs from the inventory, protocol and JUnit rendering."""

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import runner as acceptance
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import checks as acceptance_checks  # noqa: F401
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.inputs import checks_input
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.report import junit, markdown
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube


def cluster(*objects, **kw):
    """A FakeKube that serves no custom kind (no CRD installed), as the checks below expect."""
    kw.setdefault("served", False)
    return FakeKube(objects, **kw)


def ctx(kube, **params):
    base = dict(operator_namespace="gpu-operator", cluster_policy="cluster-policy", gpu_nodes=[],
                test_namespace="gpu-acceptance", cuda_image="img", pod_timeout=1, tolerations=[])
    base.update(params)
    return acceptance.Context(kube, base, clock=iter(range(1000)).__next__)


def node(name, allocatable, **labels):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": allocatable}}


def test_unknown_check_id_is_refused_with_the_list():
    with pytest.raises(DomainError) as err:
        acceptance.validate_ids(["gpus-visible", "gpu-visible"])
    assert "gpu-visible" in err.value.msg and "operator-healthy" in err.value.msg


def test_results_come_in_protocol_order_and_api_errors_are_fails():
    # gpus-visible reads the GPU nodes with one LIST (not a GET per node)
    kube = cluster(fail={("LIST", "Node"): ApiError("LIST", "Node", None, status=403, message="no")})
    results = acceptance.run(ctx(kube, gpu_nodes=[{"name": "gpu-1"}]), ["runbooks", "gpus-visible"])
    assert [r.id for r in results] == ["gpus-visible", "runbooks"]
    assert results[0].status == acceptance.FAIL and "HTTP 403" in results[0].summary


def test_gpus_visible_compares_the_count_with_replicas():
    kube = cluster(node("gpu-l40s-1", {"nvidia.com/gpu": "16"}, **{"nvidia.com/gpu.count": "4"}),
                   node("gpu-a", {"nvidia.com/gpu": "2"}, **{"nvidia.com/gpu.count": "4"}))
    ok = acceptance.run(ctx(kube, gpu_nodes=[{"name": "gpu-l40s-1", "mode": "time-slicing", "replicas": 4}]),
                        ["gpus-visible"])[0]
    assert ok.status == acceptance.PASS, ok.evidence
    bad = acceptance.run(ctx(kube, gpu_nodes=[{"name": "gpu-a"}, {"name": "gpu-gone"}]), ["gpus-visible"])[0]
    assert bad.status == acceptance.FAIL
    assert "gpu-a: nvidia.com/gpu=2 -- offers 2, expected 4 (4 GPUs x 1)" in bad.evidence
    assert "gpu-gone: no such Kubernetes node" in bad.evidence


def test_quota_check_needs_a_403_exceeded_quota():
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": "team-a"},
             "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}}
    refused = cluster(quota, fail={("CREATE", "Pod"): ApiError(
        "CREATE", "Pod", "x", "team-a", status=403, message='pods "x" is forbidden: exceeded quota: gpu')})
    res = acceptance.run(ctx(refused, quota_team={"namespace": "team-a", "resource": "requests.nvidia.com/gpu"}),
                         ["quota-enforced"])[0]
    assert res.status == acceptance.PASS and "asking nvidia.com/gpu: 9" in res.evidence[0]
    admitted = cluster(quota)
    res = acceptance.run(ctx(admitted, quota_team={"namespace": "team-a", "resource": "requests.nvidia.com/gpu"}),
                         ["quota-enforced"])[0]
    assert res.status == acceptance.FAIL
    assert acceptance.run(ctx(admitted), ["quota-enforced"])[0].status == acceptance.SKIP


def test_update_rehearsed_reads_the_helm_history():
    import base64
    import gzip
    import json

    def secret(rev, desc):
        body = base64.b64encode(gzip.compress(json.dumps({"info": {"description": desc}, "chart": {
            "metadata": {"version": "v26.7.0"}}}).encode()))
        labels = {"owner": "helm", "name": "gpu-operator", "version": str(rev), "status": "superseded"}
        return {"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "sh.helm.release.v1.gpu-operator.v%d" % rev, "namespace": "gpu-operator",
                             "labels": labels},
                "data": {"release": base64.b64encode(body).decode()}}
    kube = cluster(secret(1, "Install complete"), secret(2, "Upgrade complete"))
    res = acceptance.run(ctx(kube), ["update-rehearsed"])[0]
    assert res.status == "SKIP" and "not rehearsed yet: on record 1 upgrade(s), 0 rollback(s)" in res.summary
    kube.put(secret(3, "Rollback to 1"))
    res = acceptance.run(ctx(kube), ["update-rehearsed"])[0]
    assert res.status == "PASS", res.evidence
    assert "revision 3: superseded, chart v26.7.0 (Rollback to 1)" in res.evidence[2]


def test_update_rehearsed_needs_an_upgrade_and_a_rollback():
    up = {"action": "upgrade", "result": "success", "from_version": "v26.3.3", "to_version": "v26.7.0"}
    down = {"action": "rollback", "result": "success", "from_version": "v26.7.0", "to_version": "v26.3.3"}
    assert acceptance.run(ctx(cluster(), upgrade_records=[up]), ["update-rehearsed"])[0].status == "SKIP"
    # no release at all is not a rehearsal to do later: the operator is missing
    assert acceptance.run(ctx(cluster()), ["update-rehearsed"])[0].status == "FAIL"
    assert acceptance.run(ctx(cluster(), upgrade_records=[up, down]), ["update-rehearsed"])[0].status == "PASS"


def test_runbooks_check_reads_the_directory(tmp_path):
    for name in acceptance_checks.RUNBOOKS[:3]:
        (tmp_path / (name + ".md")).write_text("x")
    res = acceptance.run(ctx(cluster(), runbooks_dir=str(tmp_path)), ["runbooks"])[0]
    assert res.status == "FAIL" and "quota-increase" in res.summary
    (tmp_path / "quota-increase.md").write_text("x")
    links = {"GpuXidFatal": "docs/runbooks/node-failure.md", "GpuHot": ""}
    res = acceptance.run(ctx(cluster(), runbooks_dir=str(tmp_path), alert_runbook_links=links), ["runbooks"])[0]
    assert res.status == "FAIL" and "GpuHot" in res.evidence[-1]
    links["GpuHot"] = "https://git.example/docs/runbooks/driver-problem.md#hot"
    assert acceptance.run(ctx(cluster(), runbooks_dir=str(tmp_path), alert_runbook_links=links),
                          ["runbooks"])[0].status == "PASS"


def test_inputs_follow_the_roles_variables():
    hostvars = {
        "gpu-h100-1": {"mig_profile": "all-1g.10gb", "node_prereqs_pool_taints": [
            {"key": "workload", "value": "training", "effect": "NoSchedule"}]},
        "gpu-l40s-1": {"node_prereqs_node_name": "gpu-l40s-1.example", "gpu_node": {"gpu_count": 4}},
        "gpu-x": {"mig_profile": "all-disabled"},
    }
    ts = {"configs": {"l40s": {"replicas": 4}}, "nodes": {"gpu-l40s-1.example": "l40s"}}
    tenants = [{"name": "team-x", "quota": {"requests.cpu": "4"}},
               {"name": "team-a", "quota": {"requests.nvidia.com/gpu": 8}}]
    out = checks_input(hostvars, ["gpu-h100-1", "gpu-l40s-1", "gpu-x"], ts, tenants)
    assert out["gpu_nodes"] == [
        {"name": "gpu-h100-1", "mode": "mig", "mig_config": "all-1g.10gb"},
        {"name": "gpu-l40s-1.example", "mode": "time-slicing", "replicas": 4, "gpu_count": 4},
        {"name": "gpu-x", "mode": "exclusive"}]
    assert {"key": "gpu.skaffon.io/workload", "operator": "Equal", "value": "training",
            "effect": "NoSchedule"} in out["tolerations"]
    assert out["quota_team"] == {"namespace": "team-a", "resource": "requests.nvidia.com/gpu"}
    assert out["teams"] == ["team-x", "team-a"]


RESULTS = [
    {"id": "operator-healthy", "title": "GPU Operator healthy", "status": "PASS", "summary": "ok | fine",
     "evidence": ["ClusterPolicy ready"], "seconds": 0.5},
    {"id": "queues-fair", "title": "Queues", "status": "SKIP", "summary": "no backend", "evidence": [], "seconds": 0},
    {"id": "cuda-test", "title": "CUDA", "status": "FAIL", "summary": "timed out <pod>", "evidence": ["a & b"],
     "seconds": 1.25},
]
META = {"cluster": "prod-gpu", "date": "2026-12-01 10:00 UTC", "operator_version": "v26.7.0"}


def test_protocol_is_deterministic_and_complete():
    text = markdown(RESULTS, META)
    assert text == markdown(RESULTS, META)
    assert "| Cluster | prod-gpu |" in text and "| GPU Operator chart | v26.7.0 |" in text
    assert "Result: 1 passed, 1 failed, 1 skipped of 3 checks." in text
    assert "| 3 | `cuda-test` CUDA | **FAIL** | timed out <pod> | 1.2 |" in text
    assert "ok \\| fine" in text and "- a & b" in text and "## Sign-off" in text


def test_junit_parses_and_marks_failures_and_skips():
    root = ET.fromstring(junit(RESULTS, META))
    assert root.get("tests") == "3" and root.get("failures") == "1" and root.get("skipped") == "1"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["cuda-test"].find("failure").get("message") == "timed out <pod>"
    assert "a & b" in cases["cuda-test"].find("failure").text
    assert cases["queues-fair"].find("skipped") is not None
    assert cases["operator-healthy"].find("failure") is None


def test_kai_split_quota_first_then_weights_with_limits():
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.queues import kai_split
    two = [{"name": "a", "quota": 2, "limit": -1, "weight": 1}, {"name": "b", "quota": 2, "limit": -1, "weight": 3}]
    assert kai_split(two, 8) == {"a": 3, "b": 5}       # the case: 2+1 and 2+3
    capped = [{"name": "a", "quota": 2, "limit": 3, "weight": 1}, {"name": "b", "quota": 0, "limit": -1, "weight": 1}]
    assert kai_split(capped, 8) == {"a": 3, "b": 5}    # a's limit caps it; b takes the rest
    assert kai_split([{"name": "a", "quota": 2, "limit": -1, "weight": 0},
                      {"name": "b", "quota": 1, "limit": -1, "weight": 0}], 8) == {"a": 2, "b": 1}


def _cq(name, nominal, cohort="research", flavor="h100", used=0, **row):
    res = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    res.update(row)
    spec = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": flavor, "resources": [res]}]}], "preemption": {"reclaimWithinCohort": "Any"}}
    if cohort:
        spec["cohortName"] = cohort
    return {"metadata": {"name": name}, "spec": spec,
            "status": {"flavorsUsage": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "total": str(used)}]}]}}


def test_kueue_shares_count_the_cohort_borrowing_and_lending():
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.queues import KueueQuota
    # two teams of 2 nominal, borrowing 2 each, a 4-GPU pool: 4 in all, each at least its 2
    two = {"a": _cq("a", 2, borrowingLimit=2), "b": _cq("b", 2, borrowingLimit=2)}
    bounds, total = KueueQuota(two, "h100").shares("a", "b", {"a": 4, "b": 4})
    assert total == 4 and bounds == {"a": (2, 4), "b": (2, 4)}
    # an idle third member lends its 4: the two may take 8, each at most nominal + borrowingLimit
    three = dict(two, c=_cq("c", 4))
    bounds, total = KueueQuota(three, "h100").shares("a", "b", {"a": 8, "b": 8})
    assert total == 8 and bounds["a"] == (2, 4)
    # what c lends is capped by its lendingLimit; what c uses now is not lendable
    three["c"] = _cq("c", 4, lendingLimit=1)
    assert KueueQuota(three, "h100").shares("a", "b", {"a": 8, "b": 8})[1] == 5
    # no cohort: each exactly its nominal quota
    alone = {"a": _cq("a", 3, cohort=None), "b": _cq("b", 1, cohort=None)}
    assert KueueQuota(alone, "h100").shares("a", "b", {"a": 8, "b": 8}) == ({"a": (3, 3), "b": (1, 1)}, 4)


def test_kueue_gang_blocker_goes_where_it_takes_one_gpu_from_the_gang():
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.queues import KueueQuota, QueueProbe
    cqs = {"a": _cq("a", 2, borrowingLimit=2), "b": _cq("b", 2, borrowingLimit=2)}
    probe = QueueProbe(ctx(cluster(), queue_backend="kueue"), None)
    model = KueueQuota(cqs, "h100")
    queues = {"a": cqs["a"], "b": cqs["b"]}
    # ResourceQuota 4 each = all a may take: the blocker cannot sit beside the gang, so it goes to b
    assert probe.kueue_gang_plan(model, ["a", "b"], queues, {"a": 4, "b": 4}, 4) == ("a", 4, "b")
    # no ResourceQuota: the blocker in a's own namespace
    assert probe.kueue_gang_plan(model, ["a", "b"], queues, {"a": None, "b": None}, 4) == ("a", 4, "a")
    # without a cohort and a quota equal to the nominal quota, nothing can hold a gang: the reason, not a guess
    alone = {"a": _cq("a", 4, cohort=None), "b": _cq("b", 4, cohort=None)}
    why = probe.kueue_gang_plan(KueueQuota(alone, "h100"), ["a", "b"], alone, {"a": 4, "b": 4}, 8)
    assert isinstance(why, str) and "a (gang of 4): no blocker takes one GPU from it" in why
    # quotas above the pool's GPUs: Kueue would admit a gang that cannot start whole
    why = probe.kueue_gang_plan(KueueQuota(alone, "h100"), ["a", "b"], alone, {"a": None, "b": None}, 3)
    assert why.startswith("FAIL: ClusterQueue a may be admitted 4 GPUs of flavor h100 while its nodes have 3 free")


def test_kueue_gang_plan_reads_the_room_of_a_team_outside_the_fairness_pair():
    # three teams on one flavor: the pair's rooms are known, the third team's is read when it is considered
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.queues import KueueQuota, QueueProbe
    cqs = dict((t, _cq(t, 1)) for t in ("a", "b"))
    cqs["c"] = _cq("c", 2, borrowingLimit=2)
    probe = QueueProbe(ctx(cluster(), queue_backend="kueue"), None)
    plan = probe.kueue_gang_plan(KueueQuota(cqs, "h100"), ["a", "b", "c"], cqs, {"a": 1, "b": 1}, 4)
    assert plan == ("c", 4, "c")


def test_missing_preconditions_skip_with_the_reason():
    context = ctx(cluster(), teams=["team-a"], queue_teams=["team-a"], queue_backend="kueue")
    ids = ["queues-fair", "monitoring-alert", "tenant-isolation", "cuda-test", "sharing-verified"]
    res = {r.id: r for r in acceptance.run(context, ids)}
    assert res["monitoring-alert"].status == "SKIP" and "acceptance_prometheus_url" in res["monitoring-alert"].summary
    assert res["tenant-isolation"].status == "SKIP" and "(team-a)" in res["tenant-isolation"].summary
    assert res["queues-fair"].status == "SKIP" and "fewer than two teams have a queue" in res["queues-fair"].summary
    assert res["cuda-test"].status == "SKIP" and "acceptance_gpu_hosts" in res["cuda-test"].summary
    assert res["sharing-verified"].status == "SKIP"
    # the teams have a queue: block but the cluster has none: a failure, with the fix
    fail = acceptance.run(ctx(cluster(), teams=["team-a", "team-b"], queue_backend="kueue"), ["queues-fair"])[0]
    assert fail.status == "FAIL" and "run playbooks/queues.yml" in fail.summary


def test_sharing_verified_covers_mps_replicas_times_gpus_and_the_strategy_label():
    """An MPS node passes with nvidia.com/gpu.sharing-strategy=mps and GPUs x replicas advertised; a node still
    time-sliced, or waiting for the MPS control daemon (whole GPUs only), fails with the evidence."""
    mps_labels = {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "mps",
                  "nvidia.com/gpu.count": "4"}
    spec = [{"name": "gpu-l40s-1", "mode": "mps", "replicas": 4, "resource": "nvidia.com/gpu"}]
    ok = acceptance.run(ctx(cluster(node("gpu-l40s-1", {"nvidia.com/gpu": "16"}, **mps_labels)), gpu_nodes=spec),
                        ["sharing-verified"])[0]
    assert ok.status == "PASS" and ok.summary == "MPS (gpu-l40s-1) as configured on 1 node(s)"
    assert "gpu-l40s-1: MPS, replicas label 4 (expected 4), strategy mps, nvidia.com/gpu allocatable 16" in ok.evidence[0]
    # the protocol's row says where: the pool (as roles/queues names it) and its nodes
    spec_pool = [dict(spec[0], pool="l40s-pcie-inference")]
    named = acceptance.run(ctx(cluster(node("gpu-l40s-1", {"nvidia.com/gpu": "16"}, **mps_labels)),
                               gpu_nodes=spec_pool), ["sharing-verified"])[0]
    assert named.summary == "MPS (pool l40s-pcie-inference: gpu-l40s-1) as configured on 1 node(s)"
    waiting = acceptance.run(ctx(cluster(node("gpu-l40s-1", {"nvidia.com/gpu": "4"}, **mps_labels)), gpu_nodes=spec),
                             ["sharing-verified"])[0]
    assert waiting.status == "FAIL" and "expected 16 = 4 GPUs x 4" in waiting.evidence[0]
    ts_labels = dict(mps_labels)
    ts_labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    wrong = acceptance.run(ctx(cluster(node("gpu-l40s-1", {"nvidia.com/gpu": "16"}, **ts_labels)), gpu_nodes=spec),
                           ["sharing-verified"])[0]
    assert wrong.status == "FAIL"


def test_checks_input_reads_the_mode_from_the_one_sharing_config():
    ts = {"configs": {"mps-4": {"replicas": 4, "strategy": "mps"}, "shared-2": {"replicas": 2}},
          "nodes": {"gpu-l40s-1": "mps-4", "gpu-l4-1": "shared-2"}}
    out = checks_input({}, ["gpu-l40s-1", "gpu-l4-1"], ts)
    assert out["gpu_nodes"] == [
        {"name": "gpu-l40s-1", "mode": "mps", "replicas": 4, "resource": "nvidia.com/gpu"},
        {"name": "gpu-l4-1", "mode": "time-slicing", "replicas": 2}]


def test_gpus_visible_counts_mps_shares_as_gpus_times_replicas():
    labels = {"nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "mps"}
    spec = [{"name": "gpu-l40s-1", "mode": "mps", "replicas": 4}]
    ok = acceptance.run(ctx(cluster(node("gpu-l40s-1", {"nvidia.com/gpu": "16"}, **labels)), gpu_nodes=spec),
                        ["gpus-visible"])[0]
    assert ok.status == "PASS", ok
    short = acceptance.run(ctx(cluster(node("gpu-l40s-1", {"nvidia.com/gpu": "4"}, **labels)), gpu_nodes=spec),
                           ["gpus-visible"])[0]
    assert short.status == "FAIL" and "expected 16 (4 GPUs x 4)" in " ".join(short.evidence)


def test_kai_probe_workloads_carry_the_shard_label_of_their_queue():
    """With one KAI scheduling shard per pool (Config global.nodePoolLabelKey), a Job or PodGroup
    without its queue's pool label lands in the default shard, which has no such queue."""
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.queues import QueueProbe

    def queue(name, **labels):
        return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name, "labels": labels},
                "spec": {"parentQueue": "research"}}
    config = {"apiVersion": "kai.scheduler/v1", "kind": "Config", "metadata": {"name": "kai-config"},
              "spec": {"global": {"nodePoolLabelKey": "gpu.skaffon.io/workload"}}}
    kube = FakeKube([config, queue("team-a", **{"gpu.skaffon.io/workload": "training"}), queue("team-b")])
    probe = QueueProbe(ctx(kube, queue_backend="kai", probe_image="agnhost"),
                       lambda _ctx, name, resources, image: {
                           "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "probe"}},
                           "spec": {"containers": [{"name": "c", "image": image, "resources": {"limits": resources}}]}})
    found, _queues = probe.team_queues(["team-a", "team-b"])
    assert found == ["team-a", "team-b"]
    job = probe.job("team-a", "share", 1)
    assert job["metadata"]["labels"]["gpu.skaffon.io/workload"] == "training"
    probe.kai_gang("team-a", "gang", 2)
    group = kube.get("scheduling.run.ai/v2alpha2", "PodGroup", "gang", "team-a")
    pod = kube.get("v1", "Pod", "gang-1", "team-a")
    assert group["metadata"]["labels"] == {"gpu.skaffon.io/workload": "training"}
    assert pod["metadata"]["labels"]["gpu.skaffon.io/workload"] == "training"
    # a queue without the label (or no sharding): nothing added
    assert "gpu.skaffon.io/workload" not in probe.job("team-b", "share-b", 1)["metadata"]["labels"]
