"""node/labels.py: which Nodes get a patch, with which keys, and what is refused before any write."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.labels import check_wanted, plan


def node(name, **labels):
    return {"metadata": {"name": name, "labels": labels}}


NODES = [node("a", pool="h100", keep="1"), node("b", pool="l40s"), node("c")]


def test_only_differing_nodes_and_keys_are_patched():
    changes, unknown = plan(NODES, {"a": {"pool": "h100", "new": "x"}, "b": {"pool": "l40s"}, "c": {}})
    assert unknown == []
    assert [(c["name"], c["patch"]) for c in changes] == [("a", {"new": "x"})]
    assert changes[0]["after"] == {"pool": "h100", "keep": "1", "new": "x"}


def test_none_removes_a_label_and_absent_none_is_no_change():
    changes, dummy = plan(NODES, {"a": {"keep": None}, "c": {"gone": None}})
    assert [(c["name"], c["patch"], c["after"]) for c in changes] == [("a", {"keep": None}, {"pool": "h100"})]


def test_unknown_nodes_are_reported():
    changes, unknown = plan(NODES, {"zz": {"x": "1"}, "a": {"pool": "h100"}})
    assert changes == [] and unknown == ["zz"]


def test_values_become_strings_and_bad_shapes_are_refused_by_name():
    assert check_wanted({"a": {"n": 3}}) == {"a": {"n": "3"}}
    with pytest.raises(DomainError, match=r"labels\[a\]\[on\] = True: a label value is a string"):
        check_wanted({"a": {"on": True}})
    with pytest.raises(DomainError, match=r"labels\[a\] = 'x': must be a mapping"):
        check_wanted({"a": "x"})
    with pytest.raises(DomainError, match=r"labels = \['a'\]: must map node names"):
        check_wanted(["a"])
