"""sharing-verified with KAI GPU fractions: two half-GPU probe pods through the team's queue on the fraction
pool must share one GPU of one node (one runai-gpu-group, one reservation pod, the same GPU UUID); the
probes come from the inventory as roles/queues reads it."""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import runner as acceptance
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import checks as acceptance_checks
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.inputs import checks_input, fraction_probes
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube

assert "sharing-verified" in acceptance_checks.CHECKS     # importing checks registers them
GROUP = "runai-gpu-group"
RESERVED = "run.ai/reserve_for_gpu_index"
PREFIX = "runai/shared-gpu-configmap"
WORKLOAD = "gpu.skaffon.io/workload"
PROBE = {"team": "team-inference", "pool": "l40s-pcie-inference", "nodes": ["gpu-l40s-1"],
         "node_selector": {"gpu.skaffon.io/accelerator": "l40s", WORKLOAD: "inference"},
         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]}


def node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"nvidia.com/gpu.count": "4"}},
            "status": {"allocatable": {"nvidia.com/gpu": "4"}}}


class KaiBinder(FakeKube):
    """Binds a fractional pod as KAI's binder does: the GPU group label, one reservation pod per new group
    with the UUID of its GPU, the pod's evar ConfigMap. `plan` gives (node, group) per pod, None = Pending."""

    def __init__(self, objects, plan, uuid_of=None, extra_holders=0):
        FakeKube.__init__(self, objects)
        self.plan = list(plan)
        self.uuid_of = uuid_of or {}
        self.extra_holders = extra_holders
        self.created = []

    def create(self, body, dry_run=False):
        out = FakeKube.create(self, body, dry_run)
        if body["kind"] != "Pod" or dry_run or "gpu-fraction" not in (body["metadata"].get("annotations") or {}):
            return out
        self.created.append(body)
        stored = self.objects[self.key(body)]
        where = self.plan.pop(0)
        if where is None:
            stored["status"] = {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "NonPreemptibleOverQuota: team-inference is over its quota"}]}
            return out
        node_name, group = where
        uuid = self.uuid_of.get(group, "GPU-%s" % group)
        if ("Pod", "kai-resource-reservation", "gpu-reservation-" + group) not in self.objects:
            for n in range(1 + self.extra_holders):
                self.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": "gpu-reservation-%s%s" % (group, "-%d" % n if n else ""),
                    "namespace": "kai-resource-reservation",
                    "labels": {"app": "kai-resource-reservation", GROUP: group},
                    "annotations": {RESERVED: "GPU-%s" % group}}, "spec": {"nodeName": node_name}})
        prefix = body["metadata"]["name"] + "-abcdefg-shared-gpu"
        stored["metadata"].setdefault("labels", {})[GROUP] = group
        stored["metadata"]["annotations"][PREFIX] = prefix
        stored["spec"]["nodeName"] = node_name
        stored["status"] = {"phase": "Running"}
        self.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": prefix + "-0-evar", "namespace": body["metadata"]["namespace"]},
            "data": {"NVIDIA_VISIBLE_DEVICES": uuid}})
        return out


def ctx(kube, probes=(PROBE,), **params):
    base = dict(operator_namespace="gpu-operator", cluster_policy="cluster-policy",
                gpu_nodes=[{"name": "gpu-l40s-1", "pool": "l40s-pcie-inference"}], test_namespace="gpu-acceptance",
                cuda_image="img", probe_image="agnhost", pod_timeout=1, tolerations=[],
                fraction_probes=list(probes))
    base.update(params)
    return acceptance.Context(kube, base, clock=iter(range(1000)).__next__)


def sharing(kube, **kw):
    return acceptance.run(ctx(kube, **kw), ["sharing-verified"])[0]


def test_two_halves_on_one_gpu_pass_and_the_evidence_names_the_gpu():
    kube = KaiBinder([node("gpu-l40s-1")], [("gpu-l40s-1", "g1"), ("gpu-l40s-1", "g1")])
    res = sharing(kube)
    assert res.status == "PASS", (res.summary, res.evidence)
    assert res.summary == ("every GPU node is exclusive (whole GPUs), as configured; KAI fractions: 2 x 0.5 GPU of "
                           "team-inference share GPU-g1 of gpu-l40s-1 (pool l40s-pcie-inference, binpack)")
    assert "KAI fractions: pod team-inference/acceptance-fraction-1 gpu-fraction=0.5 through queue team-inference: " \
           "Running on gpu-l40s-1, runai-gpu-group g1" in res.evidence
    assert "KAI fractions: reservation pod kai-resource-reservation/gpu-reservation-g1 on gpu-l40s-1: " \
           "run.ai/reserve_for_gpu_index GPU-g1" in res.evidence
    assert "KAI fractions: NVIDIA_VISIBLE_DEVICES of the pods (their GPU-sharing ConfigMaps): GPU-g1, GPU-g1" \
        in res.evidence
    # what was submitted: KAI's annotation, its scheduler, the team's queue, the pool's selector and tolerations
    pod = kube.created[0]
    assert pod["metadata"]["namespace"] == "team-inference"
    assert pod["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "team-inference"
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["spec"]["nodeSelector"] == PROBE["node_selector"]
    assert pod["spec"]["tolerations"] == PROBE["tolerations"]
    assert "nvidia.com/gpu" not in str(pod["spec"]["containers"][0]["resources"])
    # the probe pods are gone afterwards
    assert not [k for k in kube.objects if k[0] == "Pod" and k[1] == "team-inference"]


def test_the_shard_label_of_the_team_queue_goes_on_the_probes():
    config = {"apiVersion": "kai.scheduler/v1", "kind": "Config", "metadata": {"name": "kai-config"},
              "spec": {"global": {"nodePoolLabelKey": WORKLOAD}}}
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
             "metadata": {"name": "team-inference", "labels": {WORKLOAD: "inference"}}}
    kube = KaiBinder([node("gpu-l40s-1"), config, queue], [("gpu-l40s-1", "g1"), ("gpu-l40s-1", "g1")])
    assert sharing(kube).status == "PASS"
    assert kube.created[0]["metadata"]["labels"][WORKLOAD] == "inference"


def test_two_gpus_two_nodes_a_pending_half_or_a_second_reservation_fail_with_the_cause():
    unpacked = sharing(KaiBinder([node("gpu-l40s-1")], [("gpu-l40s-1", "g1"), ("gpu-l40s-1", "g2")]))
    assert unpacked.status == "FAIL"
    assert ("two halves of team-inference took 2 GPUs (GPU-g1 of gpu-l40s-1, GPU-g2 of gpu-l40s-1) under binpack: "
            "KAI did not pack them onto one GPU") in unpacked.summary
    assert "KAI fractions: placement of the pool's KAI scheduling shard: binpack" in unpacked.evidence
    outside = sharing(KaiBinder([node("gpu-h100-1")], [("gpu-h100-1", "g1"), ("gpu-h100-1", "g1")]))
    assert outside.status == "FAIL" and "outside pool l40s-pcie-inference (gpu-l40s-1)" in outside.summary
    pending = sharing(KaiBinder([node("gpu-l40s-1")], [("gpu-l40s-1", "g1"), None]))
    assert pending.status == "FAIL"
    assert "did not run within 1s (acceptance-fraction-2)" in pending.summary
    assert any("NonPreemptibleOverQuota" in e for e in pending.evidence), pending.evidence
    twice = sharing(KaiBinder([node("gpu-l40s-1")], [("gpu-l40s-1", "g1"), ("gpu-l40s-1", "g1")], extra_holders=1))
    assert twice.status == "FAIL" and "GPU group g1 on gpu-l40s-1 has 2 reservation pods" in twice.summary
    seen = sharing(KaiBinder([node("gpu-l40s-1")], [("gpu-l40s-1", "g1"), ("gpu-l40s-1", "g1")],
                             uuid_of={"g1": "GPU-other"}))
    assert seen.status == "FAIL" and "a pod of GPU group g1 sees GPU-other, the reservation holds GPU-g1" in seen.summary


def test_under_spread_each_half_holds_a_gpu_of_its_own():
    """KAI's gpuspread orders a whole idle GPU before a half-used one: the shard of the pool says spread."""
    shard = {"apiVersion": "kai.scheduler/v1", "kind": "SchedulingShard", "metadata": {"name": "default"},
             "spec": {"placementStrategy": {"gpu": "spread", "cpu": "spread"}}}
    kube = KaiBinder([node("gpu-l40s-1"), shard], [("gpu-l40s-1", "g1"), ("gpu-l40s-1", "g2")])
    res = sharing(kube)
    assert res.status == "PASS", res.summary
    assert res.summary.endswith("KAI fractions: 2 x 0.5 GPU of team-inference on a GPU each (GPU-g1 of gpu-l40s-1, "
                                "GPU-g2 of gpu-l40s-1), as spread places them (pool l40s-pcie-inference)")
    # still one reservation pod per GPU
    kube = KaiBinder([node("gpu-l40s-1"), shard], [("gpu-l40s-1", "g1"), ("gpu-l40s-1", "g2")], extra_holders=1)
    assert sharing(kube).status == "FAIL"


def test_a_node_in_the_wrong_mode_still_fails_beside_passing_fractions():
    kube = KaiBinder([node("gpu-l40s-1")], [("gpu-l40s-1", "g1"), ("gpu-l40s-1", "g1")])
    res = sharing(kube, gpu_nodes=[{"name": "gpu-l40s-1", "mode": "mps", "replicas": 4, "pool": "l40s"}])
    assert res.status == "FAIL" and res.summary.startswith("nodes not in their configured mode: gpu-l40s-1; KAI")


def test_no_fraction_pool_no_probe_and_a_pool_without_a_team_fails():
    kube = KaiBinder([node("gpu-l40s-1")], [])
    res = sharing(kube, probes=[])
    assert res.status == "PASS" and "KAI" not in res.summary and not kube.created
    kai = sharing(kube, probes=[], queue_backend="kai")
    assert "KAI GPU fractions: not applicable, no pool takes them" in kai.evidence[-1] and not kube.created
    lonely = sharing(KaiBinder([node("gpu-l40s-1")], []), probes=[dict(PROBE, team=None)])
    assert lonely.status == "FAIL"
    assert "no team with a queue on fraction pool l40s-pcie-inference" in lonely.summary


# -- the probes from the inventory ----------------------------------------------------------------------------

HOSTVARS = {
    "gpu-h100-1": {"node_prereqs_pool": {"accelerator": "h100", "topology": "nvlink", "workload": "training"},
                   "node_prereqs_pool_taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}]},
    "gpu-l40s-1": {"node_prereqs_pool": {"accelerator": "l40s", "topology": "pcie", "workload": "inference"},
                   "node_prereqs_node_name": "gpu-l40s-1.cluster.example",
                   "node_prereqs_pool_taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
}
GROUPS = {"all": ["gpu-h100-1", "gpu-l40s-1"], "gpu_nodes": ["gpu-h100-1", "gpu-l40s-1"],
          "pool_h100_nvlink_training": ["gpu-h100-1"], "pool_l40s_inference": ["gpu-l40s-1"]}
TENANTS = [{"name": "team-vision", "queue": {"parent": "research"}},
           {"name": "team-inference", "queue": {"parent": "serving"}},
           {"name": "team-none"}]
POOL_TEAMS = {"pool_h100_nvlink_training": {"teams": ["team-vision"]},
              "pool_l40s_inference": {"teams": ["team-inference"]}}


def probes(**kw):
    args = dict(groups=GROUPS, queue_backend="kai", kai_gpu_sharing=True,
                kai_fraction_pools=["pool_l40s_inference"], kai_pool_teams=POOL_TEAMS)
    args.update(kw)
    return fraction_probes(HOSTVARS, ["gpu-h100-1", "gpu-l40s-1"], TENANTS, **args)


def test_the_fraction_pool_of_the_design_gives_its_team_nodes_selector_and_tolerations():
    assert probes() == [{
        "team": "team-inference", "pool": "l40s-pcie-inference", "nodes": ["gpu-l40s-1.cluster.example"],
        "node_selector": {"gpu.skaffon.io/accelerator": "l40s", "gpu.skaffon.io/topology": "pcie",
                          "gpu.skaffon.io/workload": "inference"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]}]
    # the queues role's pool name works as well as the design's group name
    assert probes(kai_fraction_pools=["l40s-pcie-inference"])[0]["team"] == "team-inference"


def test_no_probe_without_kai_or_sharing_and_a_broken_pool_is_said():
    assert probes(queue_backend="kueue") == []
    assert probes(kai_gpu_sharing=False) == []
    assert probes(kai_fraction_pools=[]) == []
    broken = probes(kai_fraction_pools=["pool_a100"])
    assert broken[0]["team"] is None and "queues_kai_fraction_pools" in broken[0]["problem"]
    # every team may ask (null): one probe, the first team with a queue
    assert [p["team"] for p in probes(kai_fraction_pools=None)] == ["team-vision"]


def test_checks_input_names_each_node_pool():
    out = checks_input(HOSTVARS, ["gpu-h100-1", "gpu-l40s-1"], None, TENANTS,
                       fractions=dict(groups=GROUPS, queue_backend="kai", kai_gpu_sharing=True,
                                      kai_fraction_pools=["pool_l40s_inference"], kai_pool_teams=POOL_TEAMS))
    assert [(n["name"], n["pool"]) for n in out["gpu_nodes"]] == [
        ("gpu-h100-1", "h100-nvlink-training"), ("gpu-l40s-1.cluster.example", "l40s-pcie-inference")]
    assert [p["team"] for p in out["fraction_probes"]] == ["team-inference"]
