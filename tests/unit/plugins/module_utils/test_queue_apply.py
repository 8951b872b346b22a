"""queue_apply.converge with a stand-in Kube: LISTs per kind, writes only changes, refuses a missing backend."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import apply as qa
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube


def fake(served=True, existing=None):
    return FakeKube(list((existing or {}).values()), served=served)


def calls(kube, *verbs):
    return [c for c in kube.calls if c.verb in verbs]


def queue(name, quota):
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name},
            "spec": {"resources": {"gpu": {"quota": quota, "limit": -1, "overQuotaWeight": 1}}}}


def test_one_list_per_kind_and_only_changed_objects_written():
    stored = queue("a", 2)
    stored["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "skaffon.gpu_platform"}
    stored["spec"]["priority"] = 100                 # a server default: not a difference
    kube = fake(existing={"a": stored})
    out = qa.converge(kube, "kai", [queue("a", 2), queue("b", 1)])
    assert [(c.verb, c.kind) for c in calls(kube, "LIST")] == [("LIST", "Queue")]
    assert [(c.verb, c.name, c.dry_run) for c in kube.writes()] == [("APPLY", "b", False)]
    assert [o["action"] for o in out["objects"]] == ["unchanged", "created"]
    assert out["changed"] is True
    assert out["requests"] == {"LIST": 1, "APPLY": 1}


def test_check_mode_is_a_dry_run():
    kube = fake()
    qa.converge(kube, "kai", [queue("a", 2)], check_mode=True)
    assert [(c.verb, c.name, c.dry_run) for c in kube.writes()] == [("APPLY", "a", True)]
    assert kube.objects == {}


def test_backend_not_installed_is_refused_before_any_write():
    kube = fake(served=False)
    with pytest.raises(DomainError) as exc:
        qa.converge(kube, "kai", [queue("a", 2)])
    assert "tenants_queue_backend: kai is chosen but the cluster does not serve Queue scheduling.run.ai/v2" in \
        exc.value.msg
    assert not [c for c in kube.calls if c.verb != "SERVED"]
    kube = fake(served=False)
    out = qa.converge(kube, "kai", [queue("a", 2)], check_mode=True, allow_missing_kinds=True)
    assert out["objects"] == [{"kind": "Queue", "name": "a", "action": "created"}]
    assert not [c for c in kube.calls if c.verb != "SERVED"]


def test_contains_compares_numbers_and_lists():
    assert qa.contains({"a": 1.0, "b": [{"x": 1, "y": 2}]}, {"a": 1, "b": [{"x": 1}]})
    assert not qa.contains({"b": [{"x": 1}, {"x": 2}]}, {"b": [{"x": 1}]})
    assert not qa.contains({"a": True}, {"a": 1})


def test_quota_lowered_below_use_is_refused_unless_allowed():
    stored = queue("a", 4)
    stored["status"] = {"allocated": {"nvidia.com/gpu": "3"}}
    with pytest.raises(DomainError) as exc:
        qa.converge(fake(existing={"a": stored}), "kai", [queue("a", 2)])
    assert "Queue a: gpu quota 2 is below the 3 in use" in exc.value.msg
    assert "queues_allow_quota_decrease: true" in exc.value.msg
    out = qa.converge(fake(existing={"a": stored}), "kai", [queue("a", 2)], allow_quota_decrease=True)
    assert out["objects"][0]["action"] == "updated"
    qa.converge(fake(existing={"a": stored}), "kai", [queue("a", 3)])     # down to the use: fine


def test_kueue_nominal_lowered_below_usage_is_refused():
    def cq(nominal):
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "t"},
                "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}]}]}}
    stored = cq(4)
    stored["status"] = {"flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}]}
    with pytest.raises(DomainError) as exc:
        qa.converge(fake(existing={"t": stored}), "kueue", [cq(2)])
    assert "ClusterQueue t: nominalQuota of nvidia.com/gpu in flavor h100 2 is below the 4 in use" in exc.value.msg


def test_record_of_a_quota_change_dropped_once_the_inventory_caught_up_in_one_action():
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import overrides
    stored = queue("a", 4)
    stored["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "skaffon.gpu_platform"}
    stored["metadata"]["annotations"] = {overrides.ANNOTATION: overrides.record(
        stored, ["spec", "resources", "gpu", "quota"], 4, "CHG-1", "t")}
    kube = fake(existing={"a": stored})
    out = qa.converge(kube, "kai", [queue("a", 4)])       # the inventory says 4 now as well
    assert [(c.verb, c.name) for c in kube.writes()] == [("PATCH", "a")]
    assert out["objects"] == [{"kind": "Queue", "name": "a", "action": "updated"}]
    assert overrides.ANNOTATION not in kube.objects[("Queue", None, "a")]["metadata"]["annotations"]
    kube.calls = []
    assert qa.converge(kube, "kai", [queue("a", 4)])["changed"] is False and kube.writes() == []


def test_check_mode_dry_run_into_a_namespace_not_created_yet_is_reported():
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "team-a", "namespace": "team-a"}, "spec": {"clusterQueue": "team-a"}}
    kube = FakeKube(fail={("APPLY", "LocalQueue"): 404})
    out = qa.converge(kube, "kueue", [local], check_mode=True)
    assert out["objects"] == [{"kind": "LocalQueue", "name": "team-a", "namespace": "team-a", "action": "created"}]
    with pytest.raises(Exception) as err:
        qa.converge(kube, "kueue", [local])                 # a real write: the 404 is an error
    assert getattr(err.value, "status", None) == 404
