"""quota_change's writes go through the converge engine: one merge patch per step, the engine's objects and
requests in the result, undo newest first when a step fails."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.quota.change import QuotaChange
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.quota.queues import adapter
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube

OURS = {"app.kubernetes.io/managed-by": "skaffon.gpu_platform"}


def site(cpu="4", queue_quota=None):
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": dict(OURS)}},
            {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": "tenant-quota", "namespace": "team-a", "labels": dict(OURS)},
             "spec": {"hard": {"requests.cpu": cpu}}, "status": {"used": {"requests.cpu": "1"}}}]
    if queue_quota is not None:
        objs.append({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "team-a"},
                     "spec": {"resources": {"cpu": {"quota": queue_quota, "limit": -1}}}})
    return FakeKube(objs)


def change(kube, value, check=False, backend=None):
    params = dict(team="team-a", resource="requests.cpu", value=value, ticket="CHG-1", user="me")
    return QuotaChange(kube, params, check_mode=check, now="t", queue=adapter(backend, kube, "CHG-1", "t")).run()


def test_raise_is_one_patch_per_object_and_the_same_value_again_none():
    kube = site()
    out = change(kube, 6)
    assert out["changed"] and [(c.verb, c.kind) for c in kube.writes()] == [("PATCH", "ResourceQuota")]
    assert out["objects"] == [{"kind": "ResourceQuota", "name": "tenant-quota", "namespace": "team-a",
                               "action": "updated"}]
    assert out["requests"] == {"GET": 2, "PATCH": 1}
    assert kube.objects[("ResourceQuota", "team-a", "tenant-quota")]["spec"]["hard"]["requests.cpu"] == "6"
    kube.calls = []
    again = change(kube, 6)
    assert not again["changed"] and kube.writes() == []
    assert again["objects"][0]["action"] == "unchanged"


def test_check_mode_reports_the_plan_and_writes_nothing():
    kube = site(queue_quota=4)
    out = change(kube, 6, check=True, backend="kai")
    assert kube.writes() == []
    assert [(o["kind"], o["action"]) for o in out["objects"]] == [("Queue", "updated"), ("ResourceQuota", "updated")]


def test_a_failed_step_undoes_the_ones_done():
    kube = site(queue_quota=4)
    kube.fail = {("PATCH", "ResourceQuota", "tenant-quota"): 500}
    with pytest.raises(DomainError) as err:
        change(kube, 6, backend="kai")
    assert "Restored: KAI Queue team-a cpu quota 4 -> 6" in err.value.msg
    assert [(c.verb, c.kind) for c in kube.writes()] == [("PATCH", "Queue"), ("PATCH", "ResourceQuota"),
                                                         ("PATCH", "Queue")]
    assert kube.objects[("Queue", None, "team-a")]["spec"]["resources"]["cpu"]["quota"] == 4
