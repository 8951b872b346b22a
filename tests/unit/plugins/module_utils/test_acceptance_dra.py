"""Hand-over checks in DRA mode: GPUs as ResourceSlice devices, a claim-based CUDA test, the wrong-node
check with a MIG-profile claim, the quota on claims."""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import runner as acceptance
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import checks as acceptance_checks
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.inputs import checks_input
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube

GPU_KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
assert "cuda-test" in acceptance_checks.CHECKS     # importing checks registers them


def device(name, kind, profile=None, parent="GPU-0"):
    attrs = {"type": {"string": kind}, "productName": {"string": "NVIDIA H100 80GB HBM3"}}
    if profile:
        attrs["profile"] = {"string": profile}
        attrs["parentUUID"] = {"string": parent}
    return {"name": name, "attributes": attrs}


def node_slice(node, devices):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node + "-slice"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node}, "devices": devices}}


def node(name, allocatable=None):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "status": {"allocatable": dict(allocatable or {"cpu": "32"})}}


class Scheduling(FakeKube):
    """Stores a created pod as the scheduler leaves it: Pending Unschedulable, or Succeeded with a log."""

    def __init__(self, objects, verdict):
        FakeKube.__init__(self, objects)
        self.verdict = verdict
        self.pods = []

    def create(self, body, dry_run=False):
        out = FakeKube.create(self, body, dry_run)
        if body["kind"] == "Pod" and not dry_run:
            self.pods.append(body)
            stored = self.objects[self.key(body)]
            stored["status"] = self.verdict
            self.logs[(body["metadata"]["namespace"], body["metadata"]["name"])] = "Test PASSED\n"
        return out


UNSCHEDULABLE = {"phase": "Pending", "conditions": [{
    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
    "message": "0/3 nodes are available: 3 cannot allocate all claims."}]}
CLUSTER = [node("h100-a"), node("h100-mig"), node("l40s-a"),
           node_slice("h100-a", [device("gpu-0", "gpu"), device("gpu-1", "gpu")]),
           node_slice("h100-mig", [device("gpu-0-mig-1g10gb-19-0", "mig", "1g.10gb"),
                                   device("gpu-0-mig-1g10gb-19-1", "mig", "1g.10gb")]),
           node_slice("l40s-a", [device("gpu-0", "gpu")])]
NODES = [{"name": "h100-a"}, {"name": "h100-mig", "mode": "mig", "mig_config": "all-1g.10gb"}, {"name": "l40s-a"}]


def ctx(kube, **params):
    base = dict(operator_namespace="gpu-operator", cluster_policy="cluster-policy", gpu_nodes=NODES,
                test_namespace="gpu-acceptance", cuda_image="img", pod_timeout=1, tolerations=[],
                allocation_api="dra")
    base.update(params)
    return acceptance.Context(kube, base, clock=iter(range(1000)).__next__)


def test_gpus_visible_reads_the_slices_per_node():
    res = acceptance.run(ctx(FakeKube(CLUSTER)), ["gpus-visible"])[0]
    assert res.status == acceptance.PASS, res.evidence
    assert "h100-mig: 0 GPU(s), 2 MIG device(s) (1g.10gb x2), NVIDIA H100 80GB HBM3" in res.evidence
    # a node whose slice is missing, and one that still offers nvidia.com/gpu through a device plugin
    kube = FakeKube([node("h100-a", {"nvidia.com/gpu": "2"}), node("l40s-a")] + CLUSTER[3:4])
    bad = acceptance.run(ctx(kube, gpu_nodes=[{"name": "h100-a"}, {"name": "l40s-a"}]), ["gpus-visible"])[0]
    assert bad.status == acceptance.FAIL
    assert any("also offers nvidia.com/gpu=2: a device plugin hands out the same GPUs" in e for e in bad.evidence)
    assert any(e.startswith("l40s-a: 0 GPU(s)") and "its slices publish no GPU" in e for e in bad.evidence)
    # MIG set on the host: the node counts as its MIG devices' parents; the host's GPU count is compared
    counted = acceptance.run(ctx(FakeKube(CLUSTER), gpu_nodes=[{"name": "h100-mig", "gpu_count": 1},
                                                               {"name": "h100-a", "gpu_count": 4}]),
                             ["gpus-visible"])[0]
    assert counted.status == acceptance.FAIL and counted.summary.endswith(": h100-a")
    assert any("publishes 2 physical GPUs, the host reported 4" in e for e in counted.evidence)


def test_cuda_test_runs_with_a_claim_from_a_template():
    kube = Scheduling(CLUSTER, {"phase": "Succeeded"})
    res = acceptance.run(ctx(kube), ["cuda-test"])[0]
    assert res.status == acceptance.PASS, res.evidence
    pod = kube.pods[0]
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "acceptance-cuda-claim"}]
    assert pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "h100-a"}
    created = [(c.kind, c.name) for c in kube.writes() if c.verb == "CREATE"]
    assert ("ResourceClaimTemplate", "acceptance-cuda-claim") in created
    # cleaned up: the pod and the template
    assert not [k for k in kube.objects if k[0] in ("Pod", "ResourceClaimTemplate")]


def test_wrong_node_pins_a_mig_profile_claim_to_a_node_without_it():
    kube = Scheduling(CLUSTER, UNSCHEDULABLE)
    res = acceptance.run(ctx(kube), ["wrong-node-excluded"])[0]
    assert res.status == acceptance.PASS, res.evidence
    assert res.summary == "a claim for MIG profile 1g.10gb stays Pending, Unschedulable on h100-a"
    assert kube.pods[0]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "h100-a"}
    placed = Scheduling(CLUSTER, {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]})
    placed_result = acceptance.run(ctx(placed), ["wrong-node-excluded"])[0]
    assert placed_result.status == acceptance.FAIL


def test_quota_on_claims_needs_a_403_exceeded_quota():
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tenant-quota", "namespace": "team-a"},
             "spec": {"hard": {GPU_KEY: "2"}}, "status": {"hard": {GPU_KEY: "2"}, "used": {GPU_KEY: "1"}}}
    message = ('resourceclaims.resource.k8s.io "acceptance-over-quota" is forbidden: exceeded quota: tenant-quota, '
               'requested: %s=2, used: %s=1, limited: %s=2' % (GPU_KEY, GPU_KEY, GPU_KEY))
    refused = FakeKube([quota], fail={("CREATE", "ResourceClaim"): ApiError(
        "CREATE", "ResourceClaim", "acceptance-over-quota", "team-a", status=403, message=message)})
    team = {"namespace": "team-a", "resource": GPU_KEY}
    res = acceptance.run(ctx(refused, quota_team=team), ["quota-enforced"])[0]
    assert res.status == acceptance.PASS, res.evidence
    assert "dry-run ResourceClaim asking 2 device(s) of class gpu.nvidia.com" in res.evidence[0]
    assert [c.dry_run for c in refused.calls if c.verb == "CREATE"] == [True]
    assert acceptance.run(ctx(FakeKube([quota]), quota_team=team), ["quota-enforced"])[0].status == acceptance.FAIL
    old_team = {"namespace": "team-a", "resource": "requests.nvidia.com/gpu"}
    skipped = acceptance.run(ctx(FakeKube([quota]), quota_team=old_team), ["quota-enforced"])[0]
    assert skipped.status == acceptance.SKIP and "quota on claims" in skipped.summary


def test_inputs_pick_the_team_with_a_quota_on_claims():
    teams = [{"name": "a", "quota": {"requests.cpu": "4"}}, {"name": "b", "quota": {GPU_KEY: 4}}]
    picked = checks_input({}, [], tenants=teams, allocation_api="dra")["quota_team"]
    assert picked == {"namespace": "b", "resource": GPU_KEY}
    assert checks_input({}, [], tenants=teams)["quota_team"] is None


def test_operator_healthy_reads_the_gpu_cluster():
    gpu_cluster = {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "metadata": {"name": "gpu-cluster"},
                   "status": {"state": "ready", "conditions": [
                       {"type": "Ready", "status": "True", "reason": "Reconciled"},
                       {"type": "Error", "status": "False", "reason": "Ready"}]}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nvidia-dra-driver-kubelet-plugin-x",
                                                           "namespace": "gpu-operator"},
           "status": {"phase": "Running"}}
    res = acceptance.run(ctx(FakeKube([gpu_cluster, pod])), ["operator-healthy"])[0]
    assert res.status == acceptance.PASS, res.evidence
    assert res.evidence[0] == "GPUCluster gpu-cluster: state ready, Ready reason Reconciled"
    missing = acceptance.run(ctx(FakeKube([pod])), ["operator-healthy"])[0]
    assert missing.status == acceptance.FAIL


def test_queues_fair_says_why_it_does_not_probe_in_dra_mode():
    """The probe's Jobs ask nvidia.com/gpu: in DRA mode a SKIP naming that, not 'no GPU in the pool'."""
    kube = FakeKube(CLUSTER)
    res = acceptance.run(ctx(kube, queue_backend="kueue", teams=["team-a", "team-b", "team-c"],
                             queue_teams=["team-a", "team-b"]), ["queues-fair"])[0]
    assert res.status == acceptance.SKIP, res.summary
    assert "no device plugin serves next to the GPUCluster stack" in res.summary
    assert res.evidence == ["queue backend kueue; teams with a queue: team-a, team-b"]
    assert not kube.writes()          # nothing submitted
