"""The MIG workflow (validate, drain, label, watch, verify) against a scripted fake API."""
import copy

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig import config as mc
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError

from kit.paths import MIG_PARTED_CONFIG as DEFAULT_CM

pytestmark = [pytest.mark.needs_shared]

H100 = "NVIDIA-H100-80GB-HBM3"


def TooMany():
    return ApiError("CREATE", "Pod eviction", "train-0", "team-a", status=429, reason="Too Many Requests",
                    message="Cannot evict pod as it would violate the pod's disruption budget.")


def Lost():
    return ApiError("WATCH", "Node", "n1", status=None, message="connection refused", url="https://api:6443")


def _node(name="n1", config="all-disabled", state="success", alloc=None, strategy="single", rv="10"):
    return {"metadata": {"name": name, "resourceVersion": rv, "labels": {
        "nvidia.com/mig.capable": "true", "nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": "2",
        "nvidia.com/mig.config": config, "nvidia.com/mig.config.state": state,
        "nvidia.com/mig.strategy": strategy}},
        "spec": {}, "status": {"allocatable": alloc if alloc is not None else {"nvidia.com/gpu": "2"}}}


def _pod(name, node="n1", gpu=True, ns="team-a", phase="Running"):
    res = {"limits": {"nvidia.com/gpu": "1"}} if gpu else {}
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"nodeName": node, "containers": [
        {"name": "c", "resources": res}]}, "status": {"phase": phase}}


class FakeApi(object):
    """Nodes in a dict; `script` = list of node label/status changes the 'mig-manager' makes
    after the mig.config patch, delivered through watch_node."""

    def __init__(self, nodes, pods=(), strategy="single", script=(), evict_errors=None):
        with open(DEFAULT_CM) as handle:
            import yaml
            self.cm = yaml.safe_load(handle)
        self.cm["metadata"]["namespace"] = "gpu-operator"
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.pods = list(pods)
        self.policy = {"metadata": {"name": "cluster-policy"}, "spec": {"mig": {"strategy": strategy}},
                       "status": {"state": "ready", "namespace": "gpu-operator"}}
        self.script = list(script)
        self.pending_events = []
        self.evict_errors = dict(evict_errors or {})
        self.calls = []

    def cluster_policies(self):
        return [copy.deepcopy(self.policy)] if self.policy else []

    def operator_deployment_namespaces(self):
        return []

    def configmap(self, ns, name):
        return copy.deepcopy(self.cm) if (ns, name) == ("gpu-operator", "default-mig-parted-config") else None

    def node(self, name):
        return copy.deepcopy(self.nodes.get(name))

    def pods_on_node(self, node):
        return [copy.deepcopy(p) for p in self.pods if p["spec"]["nodeName"] == node]

    def pods_list_version(self, node):
        return self.pods_on_node(node), "5"

    def watch_pods_on_node(self, node, version, timeout):
        return iter(())

    def node_events(self, node):
        return [{"type": "Warning", "reason": "MigConfigFailed", "message": "mig-parted apply failed",
                 "involvedObject": {"kind": "Node", "name": node}}]

    def pod_log(self, ns, name, container=None, tail_lines=40):
        return "level=error msg=\"Error applying MIG configuration\""

    def patch_node(self, name, patch):
        self.calls.append(("patch", name, patch))
        node = self.nodes[name]
        for key, value in (patch.get("metadata") or {}).get("labels", {}).items():
            node["metadata"]["labels"][key] = value
        if "spec" in patch:
            node["spec"]["unschedulable"] = patch["spec"]["unschedulable"]
        if (patch.get("metadata") or {}).get("labels"):
            self.pending_events = list(self.script)
        return copy.deepcopy(node)

    def evict(self, ns, name):
        self.calls.append(("evict", ns, name))
        errors = self.evict_errors.get(name)
        if errors:
            raise errors.pop(0)
        self.pods = [p for p in self.pods if p["metadata"]["name"] != name]

    def watch_node(self, name, version, timeout):
        while self.pending_events:
            step = self.pending_events.pop(0)
            if step == "lost":
                raise Lost()
            node = self.nodes[name]
            labels, alloc = step
            node["metadata"]["labels"].update(labels)
            if alloc is not None:
                node["status"]["allocatable"] = alloc
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
            yield "MODIFIED", copy.deepcopy(node)


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0  # every look at the clock costs a second: loops end
        return self.now


PENDING = ({"nvidia.com/mig.config.state": "pending"}, None)


def _success(alloc):
    return ({"nvidia.com/mig.config.state": "success",
             "nvidia.com/gpu.product": H100 + "-MIG-1g.10gb", "nvidia.com/gpu.count": "14"}, alloc)


def _params(**kw):
    params = dict(nodes=["n1"], profile="all-1g.10gb", drain=False, timeout=30, verify_timeout=10,
                  eviction_timeout=10, device_id=None, operator_namespace=None)
    params.update(kw)
    return params


def _run(api, check_mode=False, **kw):
    return _run_full(api, check_mode, **kw)[1]


def _run_full(api, check_mode=False, **kw):
    return mc.MigConfigurator(api, _params(**kw), check_mode=check_mode, clock=Clock(),
                              sleep=lambda s: None).run()


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
