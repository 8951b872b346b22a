"""The MIG workflow (validate, drain, label, watch, verify) against a scripted fake API (kit.mig_workflow)."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig import config as mc

from kit.mig_workflow import (TooMany, _node, _pod, FakeApi, Clock, PENDING, _success, _params, _run, _run_full, H100)  # noqa: F401

pytestmark = [pytest.mark.needs_shared]


def test_success_single_strategy_reports_the_offer():
    api = FakeApi([_node()], script=[PENDING, _success({"nvidia.com/gpu": "14"})])
    cluster, results = _run_full(api)
    assert cluster["strategy"] == "single"
    assert results[0]["changed"] and results[0]["offer"]["allocatable"] == {"nvidia.com/gpu": 14}
    assert ("patch", "n1", {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}}}) in api.calls


def test_old_success_is_not_taken_for_the_new_one():
    # the first event still carries the previous success (another label changed), then pending, success
    stale = ({"unrelated": "x"}, None)
    api = FakeApi([_node()], script=[stale, PENDING, _success({"nvidia.com/gpu": "14"})])
    results = _run(api)
    assert results[0]["offer"]["allocatable"] == {"nvidia.com/gpu": 14}
    assert not api.pending_events  # it consumed every event up to the real success


def test_lost_api_server_after_the_relabel_says_what_changed_and_what_a_rerun_does():
    api = FakeApi([_node(), _node("n2")], script=[PENDING, "lost"])
    with pytest.raises(mc.MigConfigError) as err:
        _run(api, nodes=["n1", "n2"])
    assert err.value.details["changed"] is True
    assert err.value.msg.startswith("Node n1: WATCH Node n1: cannot reach the API server at https://api:6443: "
                                    "connection refused. Changed before the failure: nvidia.com/mig.config="
                                    "all-1g.10gb on node n1 (was 'all-disabled'). A re-run validates again")
    assert "waits for node n1 to finish" in err.value.msg
    assert [c[1] for c in api.calls if c[0] == "patch"] == ["n1"]   # n2 untouched


def test_existing_failed_state_for_the_profile_is_reported_before_any_change():
    manager = _pod("nvidia-mig-manager-x", gpu=False, ns="gpu-operator")
    manager["metadata"]["labels"] = {"app": "nvidia-mig-manager"}
    api = FakeApi([_node(config="all-1g.10gb", state="failed"), _node("n2")], pods=[manager])
    with pytest.raises(mc.MigConfigError) as err:
        _run(api, nodes=["n2", "n1"])
    assert err.value.msg.startswith("Node n1: mig-manager already reports nvidia.com/mig.config.state=failed for "
                                    "nvidia.com/mig.config=all-1g.10gb (an earlier attempt)")
    assert "Error applying MIG configuration" in err.value.msg and "restart the mig-manager pod" in err.value.msg
    assert api.calls == []


def test_mixed_strategy_verifies_mig_resources():
    api = FakeApi([_node(strategy="mixed")], strategy="mixed",
                  script=[PENDING, ({"nvidia.com/mig.config.state": "success"}, {"nvidia.com/mig-1g.10gb": "13"})])
    with pytest.raises(mc.MigConfigError) as err:
        _run(api)
    assert "allocatable nvidia.com/mig-1g.10gb is 13, expected 14" in err.value.msg


def test_idempotent_when_already_success():
    api = FakeApi([_node(config="all-1g.10gb", alloc={"nvidia.com/gpu": "14"})])
    api.nodes["n1"]["metadata"]["labels"].update({"nvidia.com/gpu.product": H100 + "-MIG-1g.10gb",
                                                  "nvidia.com/gpu.count": "14"})
    results = _run(api)
    assert results[0]["changed"] is False
    assert not [c for c in api.calls if c[0] == "patch"]


def test_reconfigure_false_verifies_the_nodes_at_the_profile_and_leaves_the_others_pending():
    """One call sorts a batch: n1 is at the profile (verified, its offer read), n2 is not and runs a GPU
    pod: reported pending, untouched, and its pod is no refusal here (its own call decides)."""
    done = _node(config="all-1g.10gb", alloc={"nvidia.com/gpu": "14"})
    done["metadata"]["labels"].update({"nvidia.com/gpu.product": H100 + "-MIG-1g.10gb", "nvidia.com/gpu.count": "14"})
    api = FakeApi([done, _node("n2")], pods=[_pod("train-0", node="n2")])
    results = _run(api, nodes=["n1", "n2"], reconfigure=False)
    assert [(r["node"], r["changed"], r.get("pending", False), "offer" in r) for r in results] == [
        ("n1", False, False, True), ("n2", False, True, False)]
    assert results[0]["offer"]["allocatable"] == {"nvidia.com/gpu": 14}
    assert not [c for c in api.calls if c[0] in ("patch", "evict")]
    # a call over many nodes reads them with one LIST of each kind, not requests per node; without a
    # reconfiguration no node's pods are read
    assert api.reads == [("list", "Node"), ("list", "ConfigMap", "gpu-operator")], api.reads
    # in check mode the pending node gets no offer either (what a verified node has)
    checked = _run(FakeApi([done, _node("n2")]), nodes=["n1", "n2"], reconfigure=False, check_mode=True)
    assert [(r["node"], r.get("pending", False), "offer" in r) for r in checked] == [("n1", False, True),
                                                                                     ("n2", True, False)]


def test_check_mode_changes_nothing_and_names_pods_to_evict():
    api = FakeApi([_node()], pods=[_pod("train-0")])
    results = _run(api, check_mode=True, drain=True)
    assert results[0]["changed"] and results[0]["would_evict"] == ["team-a/train-0"]
    assert api.calls == []


def test_unknown_profile_fails_before_any_change():
    api = FakeApi([_node(), _node("n2")])
    with pytest.raises(mc.MigConfigError) as err:
        _run(api, nodes=["n1", "n2"], profile="all-1g.5gb")
    assert "all-1g.10gb" in err.value.msg and api.calls == []


def test_gpu_pods_are_refused_by_name():
    api = FakeApi([_node()], pods=[_pod("train-0"), _pod("web", gpu=False), _pod("old", phase="Succeeded")])
    with pytest.raises(mc.MigConfigError) as err:
        _run(api)
    assert "team-a/train-0 (nvidia.com/gpu=1)" in err.value.msg and "web" not in err.value.msg
    assert "drain=true" in err.value.msg and api.calls == []


def test_drain_cordons_evicts_with_pdb_retry_and_uncordons():
    api = FakeApi([_node()], pods=[_pod("train-0")], evict_errors={"train-0": [TooMany()]},
                  script=[PENDING, _success({"nvidia.com/gpu": "14"})])
    results = _run(api, drain=True)
    kinds = [c[0] + ":" + str(c[2]) for c in api.calls]
    assert kinds[0] == "patch:{'spec': {'unschedulable': True}}"
    assert kinds.count("evict:train-0") == 2
    assert kinds[-1] == "patch:{'spec': {'unschedulable': None}}"
    assert results[0]["evicted"] == ["team-a/train-0"]


def test_pdb_that_never_allows_uncordons_and_changes_nothing():
    api = FakeApi([_node()], pods=[_pod("train-0")], evict_errors={"train-0": [TooMany()] * 50})
    with pytest.raises(mc.MigConfigError) as err:
        _run(api, drain=True)
    assert "disruption budget" in err.value.msg
    assert api.nodes["n1"]["spec"]["unschedulable"] is None
    assert api.nodes["n1"]["metadata"]["labels"]["nvidia.com/mig.config"] == "all-disabled"


def test_failed_state_reports_events_and_mig_manager_log():
    manager = _pod("nvidia-mig-manager-x", gpu=False, ns="gpu-operator")
    manager["metadata"]["labels"] = {"app": "nvidia-mig-manager"}
    api = FakeApi([_node()], pods=[manager],
                  script=[PENDING, ({"nvidia.com/mig.config.state": "failed"}, None)])
    with pytest.raises(mc.MigConfigError) as err:
        _run(api)
    assert "failed" in err.value.msg and "MigConfigFailed" in err.value.msg
    assert "Error applying MIG configuration" in err.value.msg
    assert err.value.details["mig_manager_log"]


def test_pending_timeout_explains_the_cause_and_names_pods():
    api = FakeApi([_node()], script=[PENDING])
    api.pods = []
    worker = mc.MigConfigurator(api, _params(), clock=Clock())
    orig = api.pods_on_node
    calls = {"n": 0}

    def later_pods(node):  # a GPU pod appears after validation (e.g. a racing job)
        calls["n"] += 1
        return orig(node) + ([_pod("late-job")] if calls["n"] > 1 else [])
    api.pods_on_node = later_pods
    with pytest.raises(mc.MigConfigError) as err:
        worker.run()
    assert "timed out" in err.value.msg and "gpu-operator#2833" in err.value.msg
    assert "team-a/late-job" in err.value.msg


def test_no_cluster_policy_is_explained():
    api = FakeApi([_node()])
    api.policy = None
    with pytest.raises(mc.MigConfigError, match="No ClusterPolicy"):
        _run(api)


def test_not_mig_capable_and_missing_node():
    node = _node()
    node["metadata"]["labels"]["nvidia.com/mig.capable"] = "false"
    with pytest.raises(mc.MigConfigError) as err:
        _run(FakeApi([node]), nodes=["n1", "ghost"])
    assert "not MIG capable" in err.value.msg and "Node ghost does not exist" in err.value.msg


def test_single_strategy_refuses_all_balanced_before_change():
    api = FakeApi([_node()])
    with pytest.raises(mc.MigConfigError, match="mixed"):
        _run(api, profile="all-balanced")
    assert api.calls == []
