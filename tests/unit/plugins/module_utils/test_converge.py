"""core/converge.py, the one converge engine: plan, diff, apply in bounded parallel, prune with ownership."""
import copy
import json

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import converge as engine
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import overrides
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube

OURS = {"app.kubernetes.io/managed-by": "skaffon.gpu_platform"}


def cm(name, namespace="team-a", labels=None, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(OURS if labels is None else labels)},
            "data": data}


def ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(OURS)}}


class PostAndPatch(engine.Strategy):
    """A strategy as tenants' is: POST to create, a merge patch of what differs, no write in check mode."""
    create = "create"
    check_mode = engine.NO_WRITE

    def compare(self, desired, live):
        writes, fields = engine.Strategy.compare(self, desired, live)
        return ([("patch", {"data": desired["data"]})] if writes else []), fields


def run(kube, desired, strategy=None, **kw):
    return engine.converge(kube, desired, strategy or engine.Strategy(), **kw)


def test_first_run_writes_each_object_once_and_a_rerun_only_lists():
    kube = FakeKube()
    desired = [cm("a", x="1"), cm("b", x="2")]
    first = run(kube, desired)
    assert first["changed"] is True
    assert first["objects"] == [{"kind": "ConfigMap", "name": "a", "namespace": "team-a", "action": "created"},
                                {"kind": "ConfigMap", "name": "b", "namespace": "team-a", "action": "created"}]
    assert sorted((c.verb, c.name) for c in kube.writes()) == [("APPLY", "a"), ("APPLY", "b")]
    kube.calls = []
    again = run(kube, desired)
    assert again == {"changed": False, "requests": {"LIST": 1}, "objects": [
        dict(row, action="unchanged") for row in first["objects"]]}
    assert [c.verb for c in kube.calls] == ["LIST"]


def test_one_write_per_object_that_differs_and_foreign_labels_are_no_difference():
    live = cm("a", x="1")
    live["metadata"]["labels"]["team"] = "sre"             # someone else's label
    live["metadata"]["resourceVersion"] = "7"
    kube = FakeKube([live, cm("b", x="1")])
    out = run(kube, [cm("a", x="1"), cm("b", x="2")], PostAndPatch())
    assert [r["action"] for r in out["objects"]] == ["unchanged", "updated"]
    assert [(c.verb, c.name) for c in kube.writes()] == [("PATCH", "b")]
    assert kube.objects[("ConfigMap", "team-a", "b")]["data"] == {"x": "2"}
    assert out["requests"] == {"LIST": 1, "PATCH": 1}


def test_prune_deletes_only_objects_carrying_our_label_and_accepted_by_the_caller():
    kube = FakeKube([cm("old"), cm("foreign", labels={}), cm("other-team", namespace="team-b")])
    desired = [cm("a")]
    scopes = [engine.Scope("v1", "ConfigMap", None, None)]
    out = run(kube, desired, scopes=scopes, prunable=lambda obj: obj["metadata"]["namespace"] == "team-a")
    assert {"kind": "ConfigMap", "name": "old", "namespace": "team-a", "action": "deleted"} in out["objects"]
    assert [(c.verb, c.name) for c in kube.writes() if c.verb == "DELETE"] == [("DELETE", "old")]
    assert ("ConfigMap", "team-a", "foreign") in kube.objects and ("ConfigMap", "team-b", "other-team") in kube.objects
    kube = FakeKube([cm("old")])
    run(kube, desired, scopes=scopes)               # no prunable: nothing is deleted
    assert ("ConfigMap", "team-a", "old") in kube.objects


def test_check_mode_is_a_dry_run_or_no_write_as_the_strategy_says():
    kube = FakeKube([cm("a", x="1")])
    out = run(kube, [cm("a", x="2"), cm("b")], check_mode=True)
    assert [(c.verb, c.name, c.dry_run) for c in kube.writes()] == [("APPLY", "a", True), ("APPLY", "b", True)]
    assert [r["action"] for r in out["objects"]] == ["updated", "created"]
    assert kube.objects[("ConfigMap", "team-a", "a")]["data"] == {"x": "1"} and len(kube.objects) == 1
    kube.calls = []
    out = run(kube, [cm("a", x="2"), cm("b")], PostAndPatch(), check_mode=True)
    assert kube.writes() == [] and [r["action"] for r in out["objects"]] == ["updated", "created"]


def test_namespaces_first_deletes_last_and_a_failed_namespace_skips_its_objects():
    kube = FakeKube([cm("gone", namespace="team-c")], fail={("CREATE", "Namespace", "team-b"): 500})
    run_ = engine.Converge(kube, PostAndPatch(), workers=4)
    desired = [cm("a", namespace="team-a"), cm("b", namespace="team-b"), ns("team-a"), ns("team-b")]
    live = run_.read([engine.Scope("v1", "Namespace", None, None), engine.Scope("v1", "ConfigMap", None, None)])
    changes = run_.plan(desired, live, prunable=lambda obj: True)
    errors = run_.apply(changes)
    verbs = [(c.verb, c.kind, c.name) for c in kube.writes()]
    assert sorted(verbs[:2]) == [("CREATE", "Namespace", "team-a"), ("CREATE", "Namespace", "team-b")]
    assert verbs[2:] == [("CREATE", "ConfigMap", "a"), ("DELETE", "ConfigMap", "gone")]
    assert errors == ["Namespace team-b: CREATE Namespace team-b: HTTP 500 Internal Server Error: boom",
                      "ConfigMap team-b/b: skipped: its namespace could not be written"]
    out = run_.result(changes)
    assert [(r["name"], r["action"]) for r in out["objects"]] == [
        ("a", "created"), ("team-a", "created"), ("gone", "deleted")]


def test_fail_fast_raises_the_api_error_as_it_is():
    kube = FakeKube(fail={("APPLY", "ConfigMap", "b"): 422})
    with pytest.raises(ApiError) as err:
        run(kube, [cm("a"), cm("b"), cm("c")], workers=1)
    assert err.value.status == 422
    assert [c.name for c in kube.writes()] == ["a", "b"]          # in order, nothing after the failure


def test_diff_shows_before_and_after_and_masks_secrets():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "team-a",
                                                                 "labels": dict(OURS)}, "data": {"token": "c2VjcmV0"}}
    kube = FakeKube([cm("a", x="1")])
    out = run(kube, [cm("a", x="2"), secret], diff=True)
    first, second = out["diff"]
    assert first["before_header"] == "ConfigMap team-a/a" and first["before"]["data"] == {"x": "1"}
    assert first["after"]["data"] == {"x": "2"}
    assert second["before"] == {} and second["after"]["data"] == {"token": engine.MASK}
    assert "c2VjcmV0" not in json.dumps(out)
    assert "diff" not in run(FakeKube(), [cm("a")])            # only asked for


def test_get_missing_reads_a_same_named_object_without_our_label_and_takes_it_over():
    kube = FakeKube([cm("a", labels={}, x="1")])
    out = run(kube, [cm("a", x="1")], get_missing=True)
    assert [c.verb for c in kube.calls] == ["LIST", "GET", "APPLY"]
    assert kube.calls[0].label_selector == "app.kubernetes.io/managed-by=skaffon.gpu_platform"
    assert out["objects"][0]["action"] == "updated"


def test_several_requests_for_one_object_are_one_action():
    class Recreate(PostAndPatch):
        def compare(self, desired, live):
            return ([("delete",), ("create",)] if desired["data"] != live["data"] else []), ["data"]
    kube = FakeKube([cm("a", x="1")])
    out = run(kube, [cm("a", x="2")], Recreate())
    assert [c.verb for c in kube.writes()] == ["DELETE", "CREATE"]
    assert out["objects"][0]["action"] == "updated" and out["requests"] == {"LIST": 1, "DELETE": 1, "CREATE": 1}


def test_values_a_quota_change_raised_are_kept_with_a_note():
    live = cm("a", x="8")
    live["metadata"]["annotations"] = {overrides.ANNOTATION: overrides.record(live, ["data", "x"], "8", "CHG-1", "t")}

    class Honouring(engine.Strategy):
        honour_overrides = True
        content_keys = ("data",)
    engine_ = engine.Converge(FakeKube([live]), Honouring())
    changes = engine_.plan([cm("a", x="4")], {engine.key(live): copy.deepcopy(live)})
    assert changes[0].action == "unchanged" and changes[0].desired["data"] == {"x": "8"}
    assert "the cluster keeps 8 from the quota change CHG-1" in engine_.overrides[0]


def test_one_vocabulary_and_counted_requests():
    with pytest.raises(ValueError):
        engine.Change("create", cm("a"))
    assert engine.ACTIONS == ("created", "updated", "unchanged", "deleted")
    kube = engine.Counted(FakeKube([cm("a")]))
    kube.get("v1", "ConfigMap", "a", "team-a")
    kube.list("v1", "ConfigMap")
    assert kube.served("v1", "ConfigMap") is True          # discovery is not counted
    assert kube.requests == {"GET": 1, "LIST": 1}
    assert engine.Converge(kube, engine.Strategy()).kube is kube
