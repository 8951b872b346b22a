"""node/labels.py: which Nodes get a patch, with which keys, and what is refused before any write."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.labels import check_wanted, converge
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube


def node(name, **labels):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def cluster():
    return FakeKube([node("a", pool="h100", keep="1"), node("b", pool="l40s"), node("c")])


def patches(kube):
    return [(c.name, c.dry_run) for c in kube.writes()]


def test_only_differing_nodes_are_patched_after_one_list():
    kube = cluster()
    res = converge(kube, {"a": {"pool": "h100", "new": "x"}, "b": {"pool": "l40s"}, "c": {}}, diff=True)
    assert [c.verb for c in kube.calls] == ["LIST", "PATCH"] and patches(kube) == [("a", False)]
    assert res["objects"] == [{"kind": "Node", "name": "a", "action": "updated"}]
    assert res["requests"] == {"LIST": 1, "PATCH": 1} and res["changed"] is True
    assert res["diff"][0]["after"]["metadata"]["labels"] == {"pool": "h100", "keep": "1", "new": "x"}
    assert kube.get("v1", "Node", "a")["metadata"]["labels"]["new"] == "x"
    again = converge(kube, {"a": {"pool": "h100", "new": "x"}})
    assert again["changed"] is False and again["requests"] == {"LIST": 1}


def test_none_removes_a_label_and_an_absent_label_set_to_none_is_no_change():
    kube = cluster()
    res = converge(kube, {"a": {"keep": None}, "c": {"gone": None}})
    assert patches(kube) == [("a", False)] and [o["name"] for o in res["objects"]] == ["a"]
    assert kube.get("v1", "Node", "a")["metadata"]["labels"] == {"pool": "h100"}


def test_check_mode_sends_dry_runs():
    kube = cluster()
    res = converge(kube, {"b": {"pool": "h100"}}, check_mode=True)
    assert res["changed"] is True and patches(kube) == [("b", True)]
    assert kube.get("v1", "Node", "b")["metadata"]["labels"]["pool"] == "l40s"


def test_unknown_nodes_are_refused_before_any_write_unless_allowed():
    kube = cluster()
    with pytest.raises(DomainError, match=r"no Node named zz in the cluster \(3 Nodes: a, b, c\)"):
        converge(kube, {"zz": {"x": "1"}, "a": {"pool": "other"}})
    assert kube.writes() == []
    res = converge(kube, {"zz": {"x": "1"}, "a": {"pool": "other"}}, allow_missing=True)
    assert res["unknown"] == ["zz"] and patches(kube) == [("a", False)]


def test_a_failed_patch_is_reported_with_the_others_written():
    kube = FakeKube([node("a"), node("b")], fail={("PATCH", "Node", "a"): 403})
    with pytest.raises(DomainError, match=r"1 Node label patches failed") as err:
        converge(kube, {"a": {"x": "1"}, "b": {"x": "1"}})
    assert err.value.details["changed"] is True
    assert kube.get("v1", "Node", "b")["metadata"]["labels"] == {"x": "1"}


def test_values_become_strings_and_bad_shapes_are_refused_by_name():
    assert check_wanted({"a": {"n": 3}}) == {"a": {"n": "3"}}
    with pytest.raises(DomainError, match=r"labels\[a\]\[on\] = True: a label value is a string"):
        check_wanted({"a": {"on": True}})
    with pytest.raises(DomainError, match=r"labels\[a\] = 'x': must be a mapping"):
        check_wanted({"a": "x"})
    with pytest.raises(DomainError, match=r"labels = \['a'\]: must map node names"):
        check_wanted(["a"])
