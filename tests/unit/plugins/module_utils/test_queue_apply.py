"""queue_apply.converge with a stand-in Kube: LISTs per kind, writes only changes, refuses a missing backend."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import apply as qa
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError


class FakeKube:
    def __init__(self, served=True, existing=None):
        self._served = served
        self.existing = existing or {}
        self.calls = []

    def served(self, api, kind):
        self.calls.append(("served", kind))
        return self._served

    def list(self, api, kind):
        self.calls.append(("list", kind))
        return [o for o in self.existing.values() if o["kind"] == kind], "1"

    def apply(self, body, manager, force=True, dry_run=False):
        self.calls.append(("apply", body["metadata"]["name"], dry_run))
        return body


def queue(name, quota):
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name},
            "spec": {"resources": {"gpu": {"quota": quota, "limit": -1, "overQuotaWeight": 1}}}}


def test_one_list_per_kind_and_only_changed_objects_written():
    stored = queue("a", 2)
    stored["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "skaffon.gpu_platform"}
    stored["spec"]["priority"] = 100                 # a server default: not a difference
    kube = FakeKube(existing={"a": stored})
    out = qa.converge(kube, "kai", [queue("a", 2), queue("b", 1)])
    assert [c for c in kube.calls if c[0] == "list"] == [("list", "Queue")]
    assert [c for c in kube.calls if c[0] == "apply"] == [("apply", "b", False)]
    assert [o["action"] for o in out["objects"]] == ["unchanged", "create"]
    assert out["changed"] is True


def test_check_mode_is_a_dry_run():
    kube = FakeKube()
    qa.converge(kube, "kai", [queue("a", 2)], check_mode=True)
    assert ("apply", "a", True) in kube.calls


def test_backend_not_installed_is_refused_before_any_write():
    kube = FakeKube(served=False)
    with pytest.raises(DomainError) as exc:
        qa.converge(kube, "kai", [queue("a", 2)])
    assert "tenants_queue_backend: kai is chosen but the cluster does not serve Queue scheduling.run.ai/v2" in \
        exc.value.msg
    assert not [c for c in kube.calls if c[0] in ("list", "apply")]
    out = qa.converge(FakeKube(served=False), "kai", [queue("a", 2)], check_mode=True, allow_missing_kinds=True)
    assert out["objects"] == [{"kind": "Queue", "name": "a", "action": "create"}]


def test_contains_compares_numbers_and_lists():
    assert qa.contains({"a": 1.0, "b": [{"x": 1, "y": 2}]}, {"a": 1, "b": [{"x": 1}]})
    assert not qa.contains({"b": [{"x": 1}, {"x": 2}]}, {"b": [{"x": 1}]})
    assert not qa.contains({"a": True}, {"a": 1})


def test_quota_lowered_below_use_is_refused_unless_allowed():
    stored = queue("a", 4)
    stored["status"] = {"allocated": {"nvidia.com/gpu": "3"}}
    with pytest.raises(DomainError) as exc:
        qa.converge(FakeKube(existing={"a": stored}), "kai", [queue("a", 2)])
    assert "Queue a: gpu quota 2 is below the 3 in use" in exc.value.msg
    assert "queues_allow_quota_decrease: true" in exc.value.msg
    out = qa.converge(FakeKube(existing={"a": stored}), "kai", [queue("a", 2)], allow_quota_decrease=True)
    assert out["objects"][0]["action"] == "update"
    qa.converge(FakeKube(existing={"a": stored}), "kai", [queue("a", 3)])     # down to the use: fine


def test_kueue_nominal_lowered_below_usage_is_refused():
    def cq(nominal):
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "t"},
                "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}]}]}}
    stored = cq(4)
    stored["status"] = {"flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}]}
    with pytest.raises(DomainError) as exc:
        qa.converge(FakeKube(existing={"t": stored}), "kueue", [cq(2)])
    assert "ClusterQueue t: nominalQuota of nvidia.com/gpu in flavor h100 2 is below the 4 in use" in exc.value.msg
