"""A quota change in DRA mode: the team's quota on claims of gpu.nvidia.com moves its queue's GPU row too
(Kueue's nvidia.com/gpu via deviceClassMappings, KAI's gpu: both charge whole-GPU claims there)."""
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.quota.change import QuotaChange
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.quota.queues import adapter
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube

OURS = {"app.kubernetes.io/managed-by": "skaffon.gpu_platform"}
GPU_KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"


def site(queue):
    return FakeKube([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": dict(OURS)}},
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": {"name": "tenant-quota", "namespace": "team-a", "labels": dict(OURS)},
         "spec": {"hard": {GPU_KEY: "2"}}, "status": {"used": {GPU_KEY: "1"}}}, queue])


def change(kube, backend, value=4):
    params = dict(team="team-a", resource=GPU_KEY, value=value, ticket="CHG-7", user="me")
    return QuotaChange(kube, params, now="t", queue=adapter(backend, kube, "CHG-7", "t")).run()


def test_kueue_row_of_the_mapped_resource_moves_with_the_claim_quota():
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-a"},
          "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
              {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]}}
    kube = site(cq)
    out = change(kube, "kueue")
    assert out["changed"], out
    assert out["plan"][0] == "Kueue ClusterQueue team-a flavor h100 nvidia.com/gpu nominalQuota 2 -> 4"
    assert kube.objects[("ResourceQuota", "team-a", "tenant-quota")]["spec"]["hard"][GPU_KEY] == "4"
    row = kube.objects[("ClusterQueue", None, "team-a")]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert row["nominalQuota"] == 4


def test_kai_gpu_quota_moves_with_the_claim_quota():
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "team-a"},
             "spec": {"resources": {"gpu": {"quota": 2, "limit": -1, "overQuotaWeight": 1}}}}
    kube = site(queue)
    out = change(kube, "kai")
    assert out["changed"] and any("gpu" in step and "team-a" in step for step in out["plan"][:-1]), out["plan"]
    assert kube.objects[("Queue", None, "team-a")]["spec"]["resources"]["gpu"]["quota"] == 4
