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


PREFIX = "gpu.skaffon.io/"


def tainted(name, labels, taints):
    obj = node(name, **labels)
    obj["spec"] = {"taints": taints}
    return obj


def pool_cluster():
    return FakeKube([
        tainted("a", {PREFIX + "stale": "x", "team": "ml"},
                [{"key": "example.com/maintenance", "effect": "PreferNoSchedule"},
                 {"key": PREFIX + "old", "value": "y", "effect": "NoSchedule"}]),
        node("b")])


POOLS = {"a": {"host": "host-a", "prefix": PREFIX, "pool": {"accelerator": "h100"},
               "taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}],
               "labels": {"nvidia.com/gpu.deploy.driver": "false"}},
         "b": {"host": "host-b", "pool": {"accelerator": "l40s"}}}


def test_pool_labels_and_taints_in_one_patch_per_node_foreign_ones_kept_none_on_a_rerun():
    kube = pool_cluster()
    res = converge(kube, {}, pools=POOLS, diff=True)
    assert [c.verb for c in kube.calls] == ["LIST", "PATCH", "PATCH"], kube.calls
    a = kube.get("v1", "Node", "a")
    assert a["metadata"]["labels"] == {"team": "ml", PREFIX + "accelerator": "h100",
                                       "nvidia.com/gpu.deploy.driver": "false"}
    # the foreign taint stays in place, the stale one under the prefix goes, the pool's is added
    assert a["spec"]["taints"] == [{"key": "example.com/maintenance", "effect": "PreferNoSchedule"},
                                   {"key": PREFIX + "workload", "value": "training", "effect": "NoSchedule"}]
    assert kube.get("v1", "Node", "b")["metadata"]["labels"] == {PREFIX + "accelerator": "l40s"}
    assert [o["name"] for o in res["objects"]] == ["a", "b"]
    diff_a = res["diff"][0]
    assert [t["key"] for t in diff_a["before"]["spec"]["taints"]] == ["example.com/maintenance", PREFIX + "old"]
    assert [t["key"] for t in diff_a["after"]["spec"]["taints"]] == ["example.com/maintenance", PREFIX + "workload"]
    # the same site again: one LIST, no write
    again = converge(kube, {}, pools=POOLS)
    assert again["changed"] is False and again["requests"] == {"LIST": 1} and again["objects"] == []


def test_only_a_drifted_taint_is_patched_and_an_empty_value_matches_an_absent_one():
    kube = FakeKube([tainted("a", {PREFIX + "accelerator": "h100"},
                             [{"key": PREFIX + "gpu", "effect": "NoSchedule"}])])
    pools = {"a": {"prefix": PREFIX, "pool": {"accelerator": "h100"},
                   "taints": [{"key": "gpu", "effect": "NoSchedule"}]}}
    assert converge(kube, {}, pools=pools)["changed"] is False and kube.writes() == []
    pools["a"]["taints"] = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]
    res = converge(kube, {}, pools=pools, check_mode=True, diff=True)
    assert res["changed"] is True and [(c.name, c.dry_run) for c in kube.writes()] == [("a", True)]
    assert res["diff"][0]["after"]["spec"]["taints"] == [{"key": PREFIX + "gpu", "value": "yes", "effect": "NoSchedule"}]
    assert kube.get("v1", "Node", "a")["spec"]["taints"] == [{"key": PREFIX + "gpu", "effect": "NoSchedule"}]


def test_a_missing_node_of_a_host_is_refused_naming_host_node_and_fix_before_any_write():
    kube = pool_cluster()
    pools = dict(POOLS, zz={"host": "host-z", "pool": {}})
    with pytest.raises(DomainError, match=r"Node zz \(host host-z\) does not exist.*set node_prereqs_node_name"):
        converge(kube, {}, pools=pools)
    assert kube.writes() == []


def test_bad_pool_specs_are_refused_by_name():
    with pytest.raises(DomainError, match=r"effect must be one of"):
        converge(pool_cluster(), {}, pools={"a": {"taints": [{"key": "x", "effect": "Never"}]}})
    with pytest.raises(DomainError, match=r"pools\[a\] has unknown keys tains"):
        converge(pool_cluster(), {}, pools={"a": {"tains": []}})
    with pytest.raises(DomainError, match=r"pools\[a\].prefix must end with '/'"):
        converge(pool_cluster(), {}, pools={"a": {"prefix": "gpu.skaffon.io"}})
