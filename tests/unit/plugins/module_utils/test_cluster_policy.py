"""ClusterPolicy readiness: evaluation, kubectl-like pod states, diagnostics, watch loop."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils import cluster_policy as cp


def policy(state, reason, status="True", message="", generation=1, observed=None, ns="gpu-operator"):
    """Conditions in pairs like the operator (>= v23.9): on failure Ready=False/Error, Error=True/<reason>."""
    ready = {"type": "Ready", "status": status, "reason": reason if status == "True" else "Error",
             "message": message if status == "True" else "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    if observed is not None:
        ready["observedGeneration"] = observed
    error = {"type": "Error", "status": "False" if status == "True" else "True", "reason": reason,
             "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    return {"metadata": {"name": "cluster-policy", "generation": generation, "resourceVersion": "7"},
            "status": {"state": state, "namespace": ns, "conditions": [ready, error]}}


NOT_READY_MSG = "ClusterPolicy is not ready; states not ready: [state-operator-validation]"


@pytest.mark.parametrize("obj,accept,done", [
    (policy("ready", "Reconciled"), ("Reconciled",), True),
    (policy("ready", "NoGPUNodes"), ("Reconciled",), False),          # FACTS.md trap
    (policy("ready", "NFDLabelsMissing"), ("Reconciled",), False),
    (policy("ready", "NoGPUNodes"), ("Reconciled", "NoGPUNodes"), True),
    (policy("notReady", "OperandNotReady", "False", NOT_READY_MSG), ("Reconciled",), False),
    (policy("ready", "Reconciled", generation=3, observed=2), ("Reconciled",), False),  # stale
    (policy("ready", "Reconciled", generation=3, observed=3), ("Reconciled",), True),
    ({"metadata": {"name": "cluster-policy"}, "status": {"state": "ready"}}, ("Reconciled",), False),
    (None, ("Reconciled",), False),
])
def test_evaluate(obj, accept, done):
    assert cp.evaluate(obj, accept)[0] is done


def test_evaluate_summary_carries_the_error_condition():
    done, summary = cp.evaluate(policy("notReady", "OperandNotReady", "False", NOT_READY_MSG))
    assert not done and summary["message"] == NOT_READY_MSG and summary["namespace"] == "gpu-operator"
    assert summary["reason"] == "OperandNotReady"
    assert cp.evaluate(None)[1]["exists"] is False


def pod(name, node="gpu-1", init_waiting=None, waiting=None, phase="Pending", ready=False, init_name="driver-validation"):
    status = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if init_waiting:
        status["initContainerStatuses"] = [{"name": init_name, "state": {"waiting": {"reason": init_waiting}}}]
    if waiting:
        status["containerStatuses"] = [{"name": "main", "state": {"waiting": {"reason": waiting}}}]
    return {"metadata": {"name": name}, "spec": {"nodeName": node}, "status": status}


def test_pod_state_like_kubectl():
    assert cp.pod_state(pod("v", init_waiting="CrashLoopBackOff")) == ("Init:CrashLoopBackOff", "driver-validation")
    assert cp.pod_state(pod("d", waiting="ImagePullBackOff")) == ("ImagePullBackOff", "main")
    assert cp.pod_state(pod("r", phase="Running", ready=True)) == ("Running", None)


def test_diagnose_names_daemonsets_pods_and_hints():
    _done, summary = cp.evaluate(policy("notReady", "OperandNotReady", "False", NOT_READY_MSG))
    daemonsets = [
        {"metadata": {"name": "nvidia-operator-validator"},
         "status": {"desiredNumberScheduled": 2, "numberReady": 1, "numberUnavailable": 1}},
        {"metadata": {"name": "nvidia-device-plugin-daemonset"},
         "status": {"desiredNumberScheduled": 2, "numberReady": 2, "numberUnavailable": 0}},
    ]
    pods = [pod("nvidia-operator-validator-abcde", init_waiting="CrashLoopBackOff"),
            pod("nvidia-device-plugin-daemonset-x", phase="Running", ready=True)]
    ns = {"metadata": {"name": "gpu-operator", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}
    lines, data = cp.diagnose(summary, daemonsets, pods, ns)
    text = "\n".join(lines)
    assert "state=notReady reason=OperandNotReady: " + NOT_READY_MSG in text
    assert "DaemonSet gpu-operator/nvidia-operator-validator: 1/2 ready, 1 unavailable" in text
    assert "nvidia-device-plugin-daemonset:" not in text  # healthy ones are not noise
    assert "pod gpu-operator/nvidia-operator-validator-abcde on gpu-1: Init:CrashLoopBackOff (container driver-validation)" in text
    assert "kubectl logs -n gpu-operator nvidia-operator-validator-abcde -c driver-validation" in text
    assert "enforce=privileged" in text and "'baseline'" in text
    assert data["daemonsets"][0]["unavailable"] == 1


@pytest.mark.parametrize("reason,needle", [("NoGPUNodes", "nvidia.com/gpu.present"),
                                           ("NFDLabelsMissing", "nfd.enabled")])
def test_diagnose_ready_but_no_gpu_hint(reason, needle):
    _done, summary = cp.evaluate(policy("ready", reason))
    lines = cp.diagnose(summary, [], [], None)[0]
    assert any(needle in line for line in lines)


def test_diagnose_missing_object_and_operator():
    lines = cp.diagnose(cp.evaluate(None)[1], [], [], None, operator_found=False)[0]
    assert "never created" in lines[0] and "no gpu-operator Deployment" in lines[1]


# --- watch loop with a fake dynamic client ----------------------------------------------------

class FakeList(object):
    def __init__(self, items, rv):
        self.data = {"items": items, "metadata": {"resourceVersion": rv}}

    def to_dict(self):
        return self.data


class FakeResource(object):
    def __init__(self, lists):
        self.lists = list(lists)
        self.calls = []

    def get(self, **params):
        self.calls.append(params)
        return self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]


class FakeResources(object):
    def __init__(self, resource):
        self.resource = resource

    def get(self, **_kw):
        return self.resource


class FakeClient(object):
    def __init__(self, resource):
        self.resources = FakeResources(resource)


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make_watch(batches, clock, step=0.5):
    """Each Watch().stream() yields the next batch of events, advancing the clock."""
    batches = list(batches)
    seen = []

    class W(object):
        def stream(self, func, **kw):
            seen.append(kw)
            batch = batches.pop(0) if batches else []
            for event in batch:
                clock.now += step
                if isinstance(event, Exception):
                    raise event
                yield event
            clock.now += kw["timeout_seconds"] if not batch else 0

        def stop(self):
            pass
    return W, seen


def test_wait_returns_on_the_event_that_makes_it_ready():
    clock = Clock()
    res = FakeResource([FakeList([], "10")])  # object not there yet
    events = [[{"type": "ADDED", "object": policy("notReady", "Error", "False", NOT_READY_MSG)},
               {"type": "MODIFIED", "object": policy("ready", "NoGPUNodes")},
               {"type": "MODIFIED", "object": policy("ready", "Reconciled")},
               {"type": "MODIFIED", "object": policy("notReady", "Error", "False")}]]
    W, seen = make_watch(events, clock)
    waiter = cp.ClusterPolicyWaiter(FakeClient(res), "cluster-policy", watch_factory=W, clock=clock)
    done, obj, summary, waited = waiter.wait(60)
    assert done and summary["reason"] == "Reconciled"
    assert waited == 1.5  # third event, not the fourth
    assert seen[0]["resource_version"] == "10"
    assert seen[0]["field_selector"] == "metadata.name=cluster-policy"


def test_wait_relists_after_410_and_times_out():
    clock = Clock()

    class Gone(Exception):
        status = 410
    res = FakeResource([FakeList([policy("notReady", "Error", "False")], "5"),
                        FakeList([policy("notReady", "Error", "False")], "50")])
    W, seen = make_watch([[Gone()], []], clock)
    waiter = cp.ClusterPolicyWaiter(FakeClient(res), "cluster-policy", watch_factory=W, clock=clock)
    done, _obj, summary, waited = waiter.wait(10)
    assert not done and summary["state"] == "notReady"
    assert seen[1]["resource_version"] == "50"  # resumed from the relist
    assert waited >= 10


def test_wait_other_api_errors_propagate():
    clock = Clock()

    class Forbidden(Exception):
        status = 403
    res = FakeResource([FakeList([], "1")])
    W, _seen = make_watch([[Forbidden()]], clock)
    waiter = cp.ClusterPolicyWaiter(FakeClient(res), "cluster-policy", watch_factory=W, clock=clock)
    with pytest.raises(Forbidden):
        waiter.wait(10)


def test_driver_not_ready_hint():
    _done, summary = cp.evaluate(policy("notReady", "DriverNotReady", "False", "driver pods not ready"))
    lines = cp.diagnose(summary, [], [], None)[0]
    assert any("nvidia.com/gpu.deploy.driver=false" in line for line in lines)


def test_wait_unexpected_errors_are_not_retried_forever():
    clock = Clock()
    res = FakeResource([FakeList([], "1")])
    W, seen = make_watch([[KeyError("kind")]], clock)
    waiter = cp.ClusterPolicyWaiter(FakeClient(res), "cluster-policy", watch_factory=W, clock=clock)
    with pytest.raises(KeyError):
        waiter.wait(10)
    assert seen[0]["serialize"] is False and seen[0]["deserialize"] is False


def test_stable_for_rejects_a_stale_ready_that_drops():
    """Right after helm: stale ready, then notReady while reconciling, then ready for good."""
    clock = Clock()
    res = FakeResource([FakeList([policy("ready", "Reconciled")], "3")])
    events = [[{"type": "MODIFIED", "object": policy("notReady", "OperandNotReady", "False", NOT_READY_MSG)}],
              [{"type": "MODIFIED", "object": policy("ready", "Reconciled")}],
              []]
    W, seen = make_watch(events, clock)
    waiter = cp.ClusterPolicyWaiter(FakeClient(res), "cluster-policy", watch_factory=W, clock=clock)
    done, _obj, summary, waited = waiter.wait(60, stable_for=5)
    assert done and summary["reason"] == "Reconciled"
    assert waited == 6.0  # ready again at t=1.0, then held 5 s (third stream ends by timeout)
    assert seen[2]["timeout_seconds"] == 5


def test_stable_for_zero_returns_at_once():
    clock = Clock()
    res = FakeResource([FakeList([policy("ready", "Reconciled")], "3")])
    W, seen = make_watch([], clock)
    waiter = cp.ClusterPolicyWaiter(FakeClient(res), "cluster-policy", watch_factory=W, clock=clock)
    assert waiter.wait(60)[0] is True and seen == []


def deployment(generation=2, observed=2, replicas=1, updated=1, available=1, total=1):
    return {"metadata": {"name": "gpu-operator", "namespace": "gpu-operator", "generation": generation},
            "spec": {"replicas": replicas},
            "status": {"observedGeneration": observed, "updatedReplicas": updated, "availableReplicas": available,
                       "replicas": total}}


@pytest.mark.parametrize("dep,pending", [
    (deployment(), None),
    (deployment(observed=1), "spec change not observed yet"),
    (deployment(updated=1, available=0, total=2), "1/1 updated, 0 available"),
    (deployment(updated=0, available=1, total=1), "0/1 updated, 1 available"),
])
def test_rollout_pending(dep, pending):
    assert cp.rollout_pending(dep) == pending


def test_diagnose_names_a_stuck_operator_rollout():
    _done, summary = cp.evaluate(policy("ready", "Reconciled"))
    lines = cp.diagnose(summary, [], [], None, operator_pending="0/1 updated, 0 available")[0]
    assert any("not rolled out (0/1 updated, 0 available)" in line and "cannot be trusted" in line for line in lines)


def test_diagnose_pull_failure_hint():
    _done, summary = cp.evaluate(policy("notReady", "OperandNotReady", "False", NOT_READY_MSG))
    lines = cp.diagnose(summary, [], [pod("gpu-operator-abc", waiting="ImagePullBackOff")], None)[0]
    assert any(line.startswith("hint: images cannot be pulled (gpu-operator-abc)") for line in lines)
