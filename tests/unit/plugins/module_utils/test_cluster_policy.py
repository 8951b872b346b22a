"""ClusterPolicy readiness: evaluation, kubectl-like pod states, diagnostics, watch loop."""
import pytest
from kubernetes.client.rest import ApiException
from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator import cluster_policy as cp
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import Kube
from ansible_collections.skaffon.gpu_platform.tests.unit.fakedynamic import Clock, FakeDynamic, FakeList, FakeResource


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
    lines = cp.diagnose(cp.evaluate(None)[1], [], [], None, operator_found=False, name="my-policy",
                        operator_namespace="ops")[0]
    assert lines[0].startswith("ClusterPolicy my-policy was never created")
    assert "no operator Deployment labelled app.kubernetes.io/component=gpu-operator found in namespace ops" in lines[1]


# --- watch loop through kube.Kube with a fake dynamic client --------------------------------


def make_kube(res, clock):
    fake = FakeDynamic(res)
    fake.client = fake
    return Kube(fake, retry_seconds=5, sleep=clock.sleep, clock=clock)


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


def waiter(res, W, clock, **kw):
    return cp.ClusterPolicyWaiter(make_kube(res, clock), "cluster-policy", watch_factory=W, clock=clock, **kw)


def test_wait_returns_on_the_event_that_makes_it_ready():
    clock = Clock()
    res = FakeResource([FakeList([], "10")])  # object not there yet
    events = [[{"type": "ADDED", "object": policy("notReady", "Error", "False", NOT_READY_MSG)},
               {"type": "MODIFIED", "object": policy("ready", "NoGPUNodes")},
               {"type": "MODIFIED", "object": policy("ready", "Reconciled")},
               {"type": "MODIFIED", "object": policy("notReady", "Error", "False")}]]
    W, seen = make_watch(events, clock)
    done, obj, summary, waited = waiter(res, W, clock).wait(60)
    assert done and summary["reason"] == "Reconciled"
    assert waited == 1.5  # third event, not the fourth
    assert seen[0]["resource_version"] == "10" and seen[0]["allow_watch_bookmarks"] is True
    assert seen[0]["field_selector"] == "metadata.name=cluster-policy"


def test_wait_relists_after_410_and_times_out():
    clock = Clock()
    res = FakeResource([FakeList([policy("notReady", "Error", "False")], "5"),
                        FakeList([policy("notReady", "Error", "False")], "50")])
    W, seen = make_watch([[ApiException(status=410, reason="Expired: too old resource version")], []], clock)
    done, _obj, summary, waited = waiter(res, W, clock).wait(10)
    assert not done and summary["state"] == "notReady"
    assert seen[1]["resource_version"] == "50"  # resumed from the relist
    assert waited >= 10


def test_wait_resumes_after_a_dropped_stream_and_a_restarting_api_server():
    clock = Clock()
    res = FakeResource([FakeList([policy("notReady", "Error", "False")], "5")])
    dropped = ProtocolError("Response ended prematurely")
    refused = MaxRetryError(None, "/apis", NewConnectionError(None, "[Errno 111] Connection refused"))
    W, seen = make_watch([[{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}}, dropped],
                          [refused], [refused],
                          [{"type": "MODIFIED", "object": policy("ready", "Reconciled")}]], clock)
    done, _obj, summary, _waited = waiter(res, W, clock).wait(60)
    assert done and summary["reason"] == "Reconciled"
    assert [kw["resource_version"] for kw in seen] == ["5", "8", "8", "8"]  # bookmark's version resumed
    assert len(res.calls) == 1   # no relist needed


def test_wait_gives_up_when_the_api_server_stays_away():
    clock = Clock()
    res = FakeResource([FakeList([], "5")])
    refused = MaxRetryError(None, "/apis", NewConnectionError(None, "[Errno 111] Connection refused"))
    W, _seen = make_watch([[refused]] * 50, clock)
    with pytest.raises(ApiError) as err:
        waiter(res, W, clock).wait(600)
    assert str(err.value).startswith("WATCH ClusterPolicy cluster-policy: cannot reach the API server: "
                                     "connection refused (is the API server running")
    assert clock.now < 20   # bounded by the outage allowance (5 s here), not the 600 s wait


def test_wait_other_api_errors_propagate_as_api_error():
    clock = Clock()
    res = FakeResource([FakeList([], "1")])
    W, _seen = make_watch([[ApiException(status=403, reason="Forbidden")]], clock)
    with pytest.raises(ApiError) as err:
        waiter(res, W, clock).wait(10)
    assert err.value.status == 403 and "RBAC verb 'watch' on clusterpolicies cluster-wide" in str(err.value)


def test_driver_not_ready_hint():
    _done, summary = cp.evaluate(policy("notReady", "DriverNotReady", "False", "driver pods not ready"))
    lines = cp.diagnose(summary, [], [], None)[0]
    assert any("nvidia.com/gpu.deploy.driver=false" in line for line in lines)


def test_stable_for_rejects_a_stale_ready_that_drops():
    """Right after helm: stale ready, then notReady while reconciling, then ready for good."""
    clock = Clock()
    res = FakeResource([FakeList([policy("ready", "Reconciled")], "3")])
    events = [[{"type": "MODIFIED", "object": policy("notReady", "OperandNotReady", "False", NOT_READY_MSG)}],
              [{"type": "MODIFIED", "object": policy("ready", "Reconciled")}],
              []]
    W, seen = make_watch(events, clock)
    done, _obj, summary, waited = waiter(res, W, clock).wait(60, stable_for=5)
    assert done and summary["reason"] == "Reconciled"
    assert waited == 6.0  # ready again at t=1.0, then held 5 s (third stream ends by timeout)
    assert seen[2]["timeout_seconds"] == 5


def test_stable_for_zero_returns_at_once():
    clock = Clock()
    res = FakeResource([FakeList([policy("ready", "Reconciled")], "3")])
    W, seen = make_watch([], clock)
    assert waiter(res, W, clock).wait(60)[0] is True and seen == []


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
    lines = cp.diagnose(summary, [], [], None, operator_pending=("ns/op", "0/1 updated, 0 available"))[0]
    assert any("not rolled out (0/1 updated, 0 available)" in line and "cannot be trusted" in line for line in lines)


def test_diagnose_pull_failure_hint():
    _done, summary = cp.evaluate(policy("notReady", "OperandNotReady", "False", NOT_READY_MSG))
    lines = cp.diagnose(summary, [], [pod("gpu-operator-abc", waiting="ImagePullBackOff")], None)[0]
    assert any(line.startswith("hint: images cannot be pulled (<unknown image> (pod gpu-operator-abc))") for line in lines)


# --- expected nodes: what keeps GPUs off a node ------------------------------------------------

def operand_ds(name, tolerations):
    return {"metadata": {"name": name, "ownerReferences": [{"kind": "ClusterPolicy", "name": "cluster-policy"}]},
            "spec": {"template": {"spec": {"nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "true"},
                                           "tolerations": tolerations}}}}


def gpu_node(name="gpu-1", taints=(), labels=None, alloc=None):
    return {"metadata": {"name": name, "labels": labels if labels is not None else {
        "feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true"}},
        "spec": {"taints": list(taints)}, "status": {"allocatable": alloc or {"cpu": "32"}}}


CHART_TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
POOL_TAINT = {"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}


@pytest.mark.parametrize("tolerations,taint,ok", [
    (CHART_TOLERATION, {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, True),
    (CHART_TOLERATION, POOL_TAINT, False),
    ([{"operator": "Exists"}], POOL_TAINT, True),                       # tolerates everything
    ([{"key": "gpu.skaffon.io/workload", "value": "training"}], POOL_TAINT, True),   # Equal, any effect
    ([{"key": "gpu.skaffon.io/workload", "value": "inference"}], POOL_TAINT, False),
    ([{"key": "gpu.skaffon.io/workload", "operator": "Exists", "effect": "NoExecute"}], POOL_TAINT, False),
])
def test_tolerates_like_kubernetes(tolerations, taint, ok):
    assert cp.tolerates(tolerations, taint) is ok


def test_gpu_offer_counts_whole_shared_and_mig_resources():
    assert cp.gpu_offer(gpu_node(alloc={"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "7"})) == {
        "nvidia.com/mig-1g.10gb": 7}
    assert cp.gpu_offer(gpu_node(alloc={"nvidia.com/gpu.shared": "16"})) == {"nvidia.com/gpu.shared": 16}
    assert cp.gpu_offer(None) == {}


def test_why_no_gpus_names_the_untolerated_taint_and_the_daemonsets():
    daemonsets = [operand_ds("nvidia-device-plugin-daemonset", CHART_TOLERATION),
                  operand_ds("nvidia-mig-manager", CHART_TOLERATION + [{"operator": "Exists"}]),
                  {"metadata": {"name": "gpu-operator-node-feature-discovery-worker"}, "spec": {}}]
    why = cp.why_no_gpus("gpu-1", gpu_node(taints=[POOL_TAINT]), daemonsets, [])
    assert why[0] == ("taint gpu.skaffon.io/workload=training:NoSchedule is not tolerated by the operand "
                      "DaemonSets nvidia-device-plugin-daemonset: the operator runs no device plugin there; "
                      "add a toleration for it to the chart value daemonsets.tolerations")
    assert why[1] == "operand pods not scheduled on it (no nvidia-device-plugin-daemonset pod)"


def test_why_no_gpus_nfd_label_and_crashing_plugin_with_its_last_log_line():
    why = cp.why_no_gpus("gpu-1", gpu_node(labels={}), [], [])
    assert why == ["NFD label feature.node.kubernetes.io/pci-10de.present=true is missing: NFD does not run on "
                   "the node (or it has no NVIDIA PCI device)"]
    crashing = pod("nvidia-device-plugin-daemonset-x", node="gpu-1", waiting="CrashLoopBackOff")
    why = cp.why_no_gpus("gpu-1", gpu_node(), [operand_ds("nvidia-device-plugin-daemonset", [])], [crashing],
                         {"nvidia-device-plugin-daemonset-x": "failed to initialize NVML: Unknown Error"})
    assert why[0] == ("device plugin pod nvidia-device-plugin-daemonset-x is CrashLoopBackOff: last log line: "
                      "failed to initialize NVML: Unknown Error")
    assert len(why) == 2 and "cannot load NVML" in why[1]
    assert cp.why_no_gpus("gpu-9", None, [], []) == ["node gpu-9 does not exist"]


def test_wait_nodes_watches_until_every_expected_node_offers_gpus():
    clock = Clock()
    res = FakeResource([FakeList([gpu_node("gpu-1"), gpu_node("gpu-2", alloc={"nvidia.com/gpu": "8"})], "3")])
    events = [[{"type": "MODIFIED", "object": gpu_node("gpu-1", alloc={"nvidia.com/gpu.shared": "4"})}]]
    W, _seen = make_watch(events, clock)
    w = waiter(res, W, clock, expect_nodes=["gpu-1", "gpu-2"])
    assert w.wait_nodes(clock.now + 30) is True and w.node_reasons == {}
    clock2 = Clock()
    W2 = make_watch([], clock2)[0]
    w2 = waiter(FakeResource([FakeList([gpu_node("gpu-1")], "3")]), W2, clock2, expect_nodes=["gpu-1", "gpu-3"])
    assert w2.wait_nodes(10) is False and sorted(w2.node_reasons) == ["gpu-1", "gpu-3"]


def test_watch_429_waits_retry_after_then_resumes():
    clock = Clock()
    slept = []
    real_sleep = clock.sleep

    def sleep(seconds):
        slept.append(seconds)
        real_sleep(seconds)
    clock.sleep = sleep
    res = FakeResource([FakeList([policy("notReady", "Error", "False")], "5")])
    limited = ApiException(status=429, reason="Too Many Requests")
    limited.headers = {"Retry-After": "3"}
    W, seen = make_watch([[limited], [{"type": "MODIFIED", "object": policy("ready", "Reconciled")}]], clock)
    done, _obj, _summary, _waited = waiter(res, W, clock).wait(60)
    assert done and slept == [3.0] and [kw["resource_version"] for kw in seen] == ["5", "5"]
