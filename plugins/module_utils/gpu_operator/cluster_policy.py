# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness of the GPU Operator's custom resource: evaluation, watch, diagnostics.

The ClusterPolicy (device plugin stack) and the GPUCluster (DRA stack, gpu_cluster.py) report
alike: status.state plus the conditions Ready and Error set by the same conditions package, so
one evaluation and one wait serve both (Stack names the resource); what "a node is served"
means differs and is a method of the waiter.

`state: ready` alone is not enough: with reason NoGPUNodes or NFDLabelsMissing
the operator is "ready" while serving no GPU, so the Ready condition's reason
decides; and a ready ClusterPolicy says nothing about a node whose taint the
operand DaemonSets do not tolerate (they are never scheduled there), so the nodes the
caller expects must offer their GPUs too. Every wait is a watch (watch.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.kubernetes.core.plugins.module_utils.k8s.waiter import deployment_ready
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import as_kube
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import (
    CLUSTER_POLICY_API_VERSION,
    CLUSTER_POLICY_CRD,
    CLUSTER_POLICY_KIND,
    COND_ERROR,
    GPUCLUSTER_KIND,
    COND_POD_READY,
    COND_READY,
    CP_STATE_READY,
    DEVICE_PLUGIN_DAEMONSET,
    GPU_OPERATOR_COMPONENT_SELECTOR,
    GPU_RESOURCE,
    GPU_SHARED_RESOURCE,
    LABEL_DEPLOY_PREFIX,
    LABEL_GPU_PRESENT,
    LABEL_NFD_NVIDIA_PCI,
    MIG_RESOURCE_PREFIX,
    OPERATOR_VALIDATOR_PREFIX,
    POD_DONE_PHASES,
    POD_RUNNING,
    PSA_LABEL_PREFIX,
    REASON_DRIVER_NOT_READY,
    REASON_NFD_LABELS_MISSING,
    REASON_NO_GPU_NODES,
    REASON_PREREQUISITE_NOT_MET,
    REASON_RECONCILED,
    TAINT_EFFECTS_REPELLING,
    WAITING_CRASH_LOOP,
    WAITING_PULL_FAILURES,
)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.watch import ObjectWatch, instance
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import dns_subdomain_problem, is_dns_subdomain

# Reasons a Ready=True condition can carry; only Reconciled means GPUs are served.
READY_REASONS = (REASON_RECONCILED, REASON_NO_GPU_NODES, REASON_NFD_LABELS_MISSING)
OPERATOR_SELECTOR = GPU_OPERATOR_COMPONENT_SELECTOR
LOGS_READ = 3   # crashing pods whose last log line is read for the report

HINTS = {
    REASON_NO_GPU_NODES: (
        "reason NoGPUNodes: the operator sees no node labelled %s=true "
        "(no GPU node joined, or NFD/GFD did not label it): nothing is served although state is ready"
        % LABEL_GPU_PRESENT),
    REASON_NFD_LABELS_MISSING: (
        "reason NFDLabelsMissing: no node carries NFD labels; NFD is disabled (nfd.enabled=false) "
        "without an external NFD, or the NFD worker pods do not run"),
    REASON_DRIVER_NOT_READY: (
        "reason DriverNotReady: the driver DaemonSet is not ready; on nodes with a host driver set "
        "driver.enabled=false (all nodes) or label them %sdriver=false (mixed fleet)" % LABEL_DEPLOY_PREFIX),
}
HINTS[REASON_PREREQUISITE_NOT_MET] = (
    "reason PrerequisiteNotMet: a ClusterPolicy exists, and the operator runs no GPUCluster next to it; "
    "uninstall the release (its hooks remove both custom resources) and install with one stack")
VALIDATOR_HINT = (
    "%s runs its init containers in order (driver, toolkit, cuda, plugin): "
    "the crashing one names the layer that is broken ({containers}); read its log with "
    "kubectl logs -n {ns} {pod} -c {container}" % OPERATOR_VALIDATOR_PREFIX)
PULL_HINT = (
    "images cannot be pulled ({images}): on an air-gapped site every image must exist in the mirror "
    "(gpu_operator_image_mirror rewrites all repositories, including the operator image the CRD upgrade "
    "hook runs) and the pull secrets (gpu_operator_image_pull_secrets) must exist in {ns}")
PSA_HINT = (
    "namespace {ns} is not labelled %senforce=privileged (has {level!r}): "
    "operand pods are refused by Pod Security Admission; label it before installing the chart" % PSA_LABEL_PREFIX)
NVML_HINT = (
    "the device plugin on {node} cannot load NVML, so the driver does not answer inside its container: with a "
    "host driver run nvidia-smi on {node} (repair or reboot until it answers); with the operator's driver read "
    "kubectl logs -n {ns} -l app=nvidia-driver-daemonset --field-selector spec.nodeName={node}; in both cases the "
    "nvidia container runtime must be configured there (toolkit). Then delete the device plugin pod on {node} "
    "so it starts again")
TAINT_HINT = (
    "taint {taint} is not tolerated by the operand DaemonSets {daemonsets}: the operator runs no device "
    "plugin there; add a toleration for it to the chart value daemonsets.tolerations")


class Stack(object):
    """The custom resource that carries one stack's readiness."""

    def __init__(self, api_version, kind, crd, ready_state, switch):
        self.api_version = api_version
        self.kind = kind
        self.crd = crd
        self.ready_state = ready_state
        self.switch = switch          # the chart value that turns the resource off


CLUSTER_POLICY = Stack(CLUSTER_POLICY_API_VERSION, CLUSTER_POLICY_KIND, CLUSTER_POLICY_CRD, CP_STATE_READY,
                       "clusterPolicy.deployCR=false")


def find_condition(obj, cond_type):
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == cond_type:
            return cond
    return None


def evaluate(obj, accept_reasons=(REASON_RECONCILED,), name=None, stack=CLUSTER_POLICY):
    """(done, summary) for one ClusterPolicy (or stack.kind) dict (None when it does not exist)."""
    if obj is None:
        return False, {"exists": False, "state": None, "reason": None,
                       "message": "%s %s does not exist yet" % (stack.kind, name or "")}
    status = obj.get("status") or {}
    state = status.get("state")
    ready = find_condition(obj, COND_READY) or {}
    error = find_condition(obj, COND_ERROR) or {}
    summary = {
        "exists": True,
        "state": state,
        "reason": ready.get("reason"),
        "ready_condition": ready.get("status"),
        "message": ready.get("message", ""),
        "namespace": status.get("namespace"),
    }
    if ready.get("status") != "True" and error.get("status") == "True":
        # Failure pairs Ready=False/Error with Error=True carrying the real reason and message.
        summary["reason"] = error.get("reason") or summary["reason"]
        summary["message"] = error.get("message") or summary["message"]
    generation = (obj.get("metadata") or {}).get("generation")
    observed = ready.get("observedGeneration")
    if observed is not None and generation is not None and observed < generation:
        summary["message"] = "Ready condition is stale (observedGeneration %s < generation %s)" % (observed, generation)
        return False, summary
    done = (state == stack.ready_state and ready.get("status") == "True"
            and ready.get("reason") in accept_reasons)
    return done, summary


def pod_state(pod):
    """kubectl-like STATUS column: Init:CrashLoopBackOff, CrashLoopBackOff, Running..."""
    status = pod.get("status") or {}
    for cs in status.get("initContainerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return "Init:%s" % waiting["reason"], cs.get("name")
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            return "Init:Error", cs.get("name")
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return waiting["reason"], cs.get("name")
    return status.get("phase") or "Unknown", None


def unschedulable_message(pod):
    """The PodScheduled=False message of a pod the scheduler could not place ('' when none)."""
    cond = find_condition(pod, "PodScheduled") or {}
    return (cond.get("message") or "") if cond.get("status") == "False" else ""


def pull_failure(pod):
    """(container, image, message) of the first container whose image cannot be pulled, or None."""
    status = pod.get("status") or {}
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in WAITING_PULL_FAILURES:
            return cs.get("name"), cs.get("image"), waiting.get("message")
    return None


def pod_ready(pod):
    cond = find_condition(pod, COND_POD_READY) or {}
    return cond.get("status") == "True"


def pod_healthy(pod):
    phase = (pod.get("status") or {}).get("phase")
    return phase == POD_DONE_PHASES[0] or (phase == POD_RUNNING and pod_ready(pod))


def rollout_pending(deployment):
    """None when the Deployment is fully rolled out (kubectl rollout status), else why not."""
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    st = deployment.get("status") or {}
    want = spec.get("replicas", 1)
    if st.get("observedGeneration", 0) < meta.get("generation", 0):
        return "spec change not observed yet"
    if st.get("updatedReplicas", 0) < want or st.get("replicas", 0) > st.get("updatedReplicas", 0) \
            or st.get("availableReplicas", 0) < want:
        return "%s/%s updated, %s available" % (st.get("updatedReplicas", 0), want, st.get("availableReplicas", 0))
    if not deployment_ready(instance(deployment, "Deployment")):   # kubernetes.core's predicate
        return "%s unavailable" % st.get("unavailableReplicas", 0)
    return None


# --- nodes that must offer GPUs ----------------------------------------------------

def gpu_offer(node):
    """{resource: quantity > 0} of the GPU resources a node offers (whole, shared, MIG)."""
    offer = {}
    for name, value in (((node or {}).get("status") or {}).get("allocatable") or {}).items():
        if name in (GPU_RESOURCE, GPU_SHARED_RESOURCE) or name.startswith(MIG_RESOURCE_PREFIX):
            try:
                count = int(str(value))
            except ValueError:
                continue
            if count > 0:
                offer[name] = count
    return offer


def tolerates(tolerations, taint):
    """Kubernetes toleration semantics (k8s.io/api/core/v1 Toleration.ToleratesTaint)."""
    for tol in tolerations or []:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if (tol.get("operator") or "Equal") == "Exists":
            if not tol.get("key") or tol["key"] == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def taint_text(taint):
    value = taint.get("value")
    return "%s%s:%s" % (taint.get("key"), ("=" + value) if value else "", taint.get("effect"))


def operand_daemonsets(daemonsets):
    """The DaemonSets the operator owns (ownerReference ClusterPolicy or GPUCluster, or a gpu.deploy selector)."""
    found = []
    for ds in daemonsets:
        owners = [r.get("kind") for r in (ds.get("metadata") or {}).get("ownerReferences") or []]
        selector = (((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
        if CLUSTER_POLICY_KIND in owners or GPUCLUSTER_KIND in owners or any(k.startswith(LABEL_DEPLOY_PREFIX) for k in selector):
            found.append(ds)
    return found


def untolerated(node, daemonsets):
    """[(taint text, names of the operand DaemonSets that do not tolerate it)] of the node's repelling taints."""
    operands = operand_daemonsets(daemonsets)
    out = []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in TAINT_EFFECTS_REPELLING:
            continue
        refused = sorted(ds["metadata"]["name"] for ds in operands if not tolerates(
            ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("tolerations"), taint))
        if refused:
            out.append((taint_text(taint), refused))
    return out


def why_no_gpus(name, node, daemonsets, pods, logs=None):
    """Reasons a node offers no GPU resource, most likely first."""
    if node is None:
        return ["node %s does not exist" % name]
    labels = (node.get("metadata") or {}).get("labels") or {}
    operands = operand_daemonsets(daemonsets)
    why = [TAINT_HINT.format(taint=taint, daemonsets=", ".join(refused))
           for taint, refused in untolerated(node, operands)]
    if labels.get(LABEL_NFD_NVIDIA_PCI) != "true":
        why.append("NFD label %s=true is missing: NFD does not run on the node (or it has no NVIDIA PCI "
                   "device)" % LABEL_NFD_NVIDIA_PCI)
    elif labels.get(LABEL_GPU_PRESENT) != "true":
        why.append("label %s=true is missing: the operator does not treat it as a GPU node" % LABEL_GPU_PRESENT)
    on_node = [p for p in pods if (p.get("spec") or {}).get("nodeName") == name]
    plugin = [p for p in on_node if p["metadata"]["name"].startswith(DEVICE_PLUGIN_DAEMONSET)]
    if not plugin:
        if operands and not why:
            why.append("no %s pod is scheduled on it" % DEVICE_PLUGIN_DAEMONSET)
        elif operands:
            why.append("operand pods not scheduled on it (no %s pod)" % DEVICE_PLUGIN_DAEMONSET)
    for pod in plugin:
        if not pod_healthy(pod):
            state, container = pod_state(pod)
            line = (logs or {}).get(pod["metadata"]["name"])
            why.append("device plugin pod %s is %s%s" % (pod["metadata"]["name"], state,
                                                         (": last log line: %s" % line) if line else ""))
            if line and "NVML" in line:
                why.append(NVML_HINT.format(node=name, ns=pod["metadata"].get("namespace") or "<operator namespace>"))
    return why or ["the device plugin registered no GPU resource (allocatable has no %s)" % GPU_RESOURCE]


def diagnose(summary, daemonsets, pods, namespace_obj=None, operator_found=True, operator_pending=None,
             name=None, operator_namespace=None, logs=None, nodes=None, stack=CLUSTER_POLICY, node_problem="offers no GPU"):
    """Lines an operator can act on, plus structured data, from plain dicts.

    name / operator_namespace: the module's parameters (never assumed); logs: {pod: last log line};
    nodes: {node: [reasons it offers no GPU]} for expected nodes that do not."""
    lines = []
    logs = logs or {}
    policy = ("%s %s" % (stack.kind, name)) if name else stack.kind
    ns = summary.get("namespace") or (namespace_obj or {}).get("metadata", {}).get("name") or operator_namespace
    if not summary.get("exists"):
        lines.append("%s was never created (chart not installed, or %s)" % (policy, stack.switch))
    else:
        lines.append("%s state=%s reason=%s: %s" % (
            policy, summary.get("state"), summary.get("reason"),
            summary.get("message") or "no message"))
    if not operator_found:
        lines.append("no operator Deployment labelled %s found%s: nothing reconciles the %s"
                     % (OPERATOR_SELECTOR, (" in namespace %s" % operator_namespace) if operator_namespace else "",
                        stack.kind))
    elif operator_pending:
        lines.append("operator Deployment %s not rolled out (%s): the %s status still comes from "
                     "the previous operator and cannot be trusted"
                     % (operator_pending[0], operator_pending[1], stack.kind))
    ds_info = []
    for ds in daemonsets:
        st = ds.get("status") or {}
        info = {
            "name": ds["metadata"]["name"],
            "desired": st.get("desiredNumberScheduled", 0),
            "ready": st.get("numberReady", 0),
            "unavailable": st.get("numberUnavailable", 0),
        }
        ds_info.append(info)
        if info["unavailable"] or info["ready"] < info["desired"]:
            lines.append("DaemonSet %s/%s: %s/%s ready, %s unavailable" % (
                ns, info["name"], info["ready"], info["desired"], info["unavailable"]))
    pod_info = []
    said = set()
    crashing_validators = []
    for pod in pods:
        state, container = pod_state(pod)
        info = {"name": pod["metadata"]["name"], "node": (pod.get("spec") or {}).get("nodeName"),
                "state": state, "container": container}
        if info["name"] in logs:
            info["last_log_line"] = logs[info["name"]]
        pod_info.append(info)
        if pod_healthy(pod):
            continue
        pull = pull_failure(pod)
        if pull:
            info["image"], info["pull_error"] = pull[1], pull[2]
        unscheduled = "" if info["node"] else unschedulable_message(pod)
        if unscheduled:
            # the scheduler's reason (untolerated taint, claims it cannot allocate), once per distinct text
            info["unschedulable"] = unscheduled
            unscheduled = (": the scheduler says: %s" % unscheduled if unscheduled not in said
                           else ": the same scheduler message")
            said.add(info["unschedulable"])
        lines.append("pod %s/%s on %s: %s%s%s%s%s" % (
            ns, info["name"], info["node"] or "<unscheduled>", state,
            " (container %s)" % container if container else "",
            (": image %s: %s" % (pull[1] or "<unknown>", pull[2] or "no message")) if pull else "",
            (": last log line: %s" % logs[info["name"]]) if info["name"] in logs else "", unscheduled))
        # a validator that cannot pull its image has no log to read: the pull hint says what to do
        if info["name"].startswith(OPERATOR_VALIDATOR_PREFIX) and state.startswith("Init:") and not pull:
            crashing_validators.append(info)
    for node, reasons in sorted((nodes or {}).items()):
        lines.append("node %s %s: %s" % (node, node_problem, "; ".join(reasons)))
    pulls = [p for p in pod_info if p["state"].split(":")[-1] in WAITING_PULL_FAILURES]
    if pulls:
        images = sorted(set("%s (pod %s)" % (p.get("image") or "<unknown image>", p["name"]) for p in pulls[:3]))
        lines.append("hint: " + PULL_HINT.format(images=", ".join(images), ns=ns))
    reason = summary.get("reason")
    if reason in HINTS:
        lines.append("hint: " + HINTS[reason])
    for info in crashing_validators[:1]:
        lines.append("hint: " + VALIDATOR_HINT.format(
            containers="%s fails on %s" % (info["container"], info["node"]), ns=ns, pod=info["name"],
            container=info["container"]))
    if namespace_obj is not None:
        level = ((namespace_obj.get("metadata") or {}).get("labels") or {}).get(PSA_LABEL_PREFIX + "enforce")
        if level not in (None, "privileged"):
            lines.append("hint: " + PSA_HINT.format(ns=ns, level=level))
    return lines, {"daemonsets": ds_info, "pods": pod_info}


def last_log_line(kube, pod):
    """The last non-empty log line of a pod's failing container (None when unreadable)."""
    state, container = pod_state(pod)
    if not container:
        return None
    try:
        text = kube.log(pod["metadata"]["name"], pod["metadata"].get("namespace"), container, tail_lines=20)
    except ApiError:
        return None
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else None


class ClusterPolicyWaiter(object):
    """Watch-based wait on one ClusterPolicy (and the nodes that must offer GPUs) through kube.Kube.

    Subclasses name another Stack and say what a served node is (wait_nodes, node_reasons_for)."""

    stack = CLUSTER_POLICY
    node_problem = "offers no GPU"
    nodes_problem = "offer no GPU"
    node_result_key = "nodes_without_gpus"
    extra_params = ()

    def __init__(self, kube, name, accept_reasons=(REASON_RECONCILED,), watch_factory=None,
                 clock=time.monotonic, operator_namespace=None, check_operator=False, expect_nodes=()):
        self.kube = as_kube(kube)
        self.name = name
        self.operator_namespace = operator_namespace
        self.check_operator = check_operator
        self.accept_reasons = tuple(accept_reasons)
        self.expect_nodes = list(expect_nodes or [])
        self.clock = clock
        self.watch_factory = watch_factory
        self.node_reasons = {}

    def _watch(self, api_version, kind, **kw):
        return ObjectWatch(self.kube, api_version, kind, watch_factory=self.watch_factory, clock=self.clock, **kw)

    def current(self):
        return self.kube.get(self.stack.api_version, self.stack.kind, self.name)

    def _evaluate(self, obj):
        return evaluate(obj, self.accept_reasons, self.name, self.stack)

    def wait(self, timeout, stable_for=0):
        """Return (done, obj, summary, waited_seconds).

        stable_for: the accepted state must hold that many seconds. Right after
        a Helm change the status still shows the previous reconcile (the
        operator sets no observedGeneration), so a wait that trusts the first
        `ready` may return before the operator has even seen the change.
        """
        began = start = self.clock()
        if self.check_operator:
            # A new operator that does not run (image pull, crash) leaves the old status in place.
            pending = self.wait_operator_rollout(timeout)
            if pending:
                obj = self.current()
                _done, summary = self._evaluate(obj)
                summary["operator_pending"] = pending
                return False, obj, summary, round(self.clock() - began, 3)
            start = self.clock()
            timeout = max(0, timeout - (start - began))
        follow = self._watch(self.stack.api_version, self.stack.kind, name=self.name)
        obj = next(iter(follow.sync().values()), None)
        done, summary = self._evaluate(obj)
        ready_since = start if done else None
        while True:
            now = self.clock()
            if done and now - ready_since >= stable_for:
                break
            deadline = start + timeout
            if done:
                deadline = min(deadline, ready_since + stable_for)
            if deadline - now <= 0:
                break
            for etype, event_obj in follow.events(deadline):
                obj = None if etype == "DELETED" else event_obj
                was_done = done
                done, summary = self._evaluate(obj)
                if done and not was_done:
                    ready_since = self.clock()
                if done != was_done:
                    break
            if not done and self.clock() - start >= timeout:
                break
        if done and self.expect_nodes:
            done = self.wait_nodes(start + timeout)
            if not done:
                summary = dict(summary, nodes_without_gpus=sorted(self.node_reasons))
        return done, obj, summary, round(self.clock() - began, 3)

    def wait_nodes(self, deadline):
        """Watch the nodes until every expected one offers GPUs; False (reasons kept) at the deadline."""
        follow = self._watch("v1", "Node")
        nodes = dict((o["metadata"]["name"], o) for o in follow.sync().values())

        def missing():
            return [n for n in self.expect_nodes if not gpu_offer(nodes.get(n))]
        if missing():
            for etype, obj in follow.events(deadline):
                if etype == "DELETED":
                    nodes.pop(obj["metadata"]["name"], None)
                else:
                    nodes[obj["metadata"]["name"]] = obj
                if not missing():
                    break
        self.node_reasons = dict((n, []) for n in missing())
        return not self.node_reasons

    def wait_operator_rollout(self, timeout):
        """Watch the operator Deployment(s) until rolled out: None, or (name, why not)."""
        deadline = self.clock() + timeout
        follow = self._watch("apps/v1", "Deployment", label_selector=OPERATOR_SELECTOR,
                             namespace=self.operator_namespace)
        follow.sync()

        def pending():
            if not follow.objects:
                where = (" in namespace %s" % self.operator_namespace) if self.operator_namespace else ""
                return ("%s%s" % (OPERATOR_SELECTOR, where), "no Deployment labelled so yet")
            for key, dep in sorted(follow.objects.items()):
                why = rollout_pending(dep)
                if why:
                    return key, why
            return None
        if pending():
            for _etype, _obj in follow.events(deadline):
                if not pending():
                    break
        return pending()

    def diagnostics(self, obj, summary):
        """Read the operand DaemonSets, pods, nodes and namespace for a failure report."""
        namespace = summary.get("namespace") or self.operator_namespace
        summary = dict(summary, namespace=namespace)
        deployments = self._items("apps/v1", "Deployment", label_selector=OPERATOR_SELECTOR, namespace=namespace)
        if not namespace and deployments:
            namespace = deployments[0]["metadata"]["namespace"]
            summary = dict(summary, namespace=namespace)
        daemonsets, pods, ns_obj = [], [], None
        if namespace:
            daemonsets = self._items("apps/v1", "DaemonSet", namespace=namespace)
            pods = self._items("v1", "Pod", namespace=namespace)
            ns_obj = self._read(lambda: self.kube.get("v1", "Namespace", namespace))
        logs = {}
        for pod in [p for p in pods if not pod_healthy(p) and pod_state(p)[0].endswith(WAITING_CRASH_LOOP)][:LOGS_READ]:
            line = last_log_line(self.kube, pod)
            if line:
                logs[pod["metadata"]["name"]] = line
        nodes = {}
        if self.expect_nodes:
            nodes = self.node_reasons_for(daemonsets, pods, logs)
            self.node_reasons = nodes
        pending = summary.get("operator_pending")
        if not pending:
            pending = next((("%s/%s" % (d["metadata"]["namespace"], d["metadata"]["name"]), rollout_pending(d))
                            for d in deployments if rollout_pending(d)), None)
        return diagnose(summary, daemonsets, pods, ns_obj, operator_found=bool(deployments),
                        operator_pending=pending, name=self.name, operator_namespace=namespace, logs=logs,
                        nodes=nodes, stack=self.stack, node_problem=self.node_problem)

    def extra_result(self):
        """What a subclass adds to the module's result."""
        return {}

    def node_reasons_for(self, daemonsets, pods, logs):
        """{node: [why it offers no GPU]} for the expected nodes that offer none (one Node LIST)."""
        known = dict((n["metadata"]["name"], n) for n in self._items("v1", "Node"))
        return dict((node, why_no_gpus(node, known.get(node), daemonsets, pods, logs))
                    for node in self.expect_nodes if not gpu_offer(known.get(node)))

    def _items(self, api_version, kind, **params):
        params = dict((k, v) for k, v in params.items() if v)
        return self._read(lambda: self.kube.list(api_version, kind, **params)[0]) or []

    @staticmethod
    def _read(fn):
        try:
            return fn()
        except ApiError:  # diagnostics must never hide the real failure
            return None


def run(module, waiter_class=ClusterPolicyWaiter, prerequisites=None):
    """The body of the cluster_policy_wait module (and, with its waiter, of gpu_cluster_wait): a
    result dict, or DomainError/ApiError. prerequisites(module) may raise before anything is read."""
    params = module.params
    stack = waiter_class.stack
    accept_reasons = params.get("accept_reasons") or [REASON_RECONCILED]
    for key in ("timeout", "stable_for"):
        if params[key] < 0:
            raise DomainError("%s must be >= 0 seconds, got %s: give a number of seconds" % (key, params[key]))
    bad = [n for n in params["expect_nodes"] if not is_dns_subdomain(n)]
    if bad:
        raise DomainError("expect_nodes: %s %s not a valid node name (%s): give the Kubernetes node names" % (
            ", ".join(repr(n) for n in bad), "is" if len(bad) == 1 else "are", dns_subdomain_problem(bad[0])))
    if prerequisites is not None:
        prerequisites(module)
    if not module.kube.served(stack.api_version, stack.kind):
        if module.check_mode:
            # A check-mode install has not created the CRD: nothing to wait for yet.
            return dict(changed=False, ready=False, state=None, reason=None, status={}, waited=0.0,
                        msg="%s CRD not installed yet (check mode)" % stack.kind)
        raise DomainError("The %s CRD (%s) is not installed: install the GPU Operator chart before waiting "
                          "on %s %s" % (stack.kind, stack.crd, stack.kind, params["name"]), ready=False)
    extra = dict((k, params[k]) for k in getattr(waiter_class, "extra_params", ()))
    waiter = waiter_class(module.kube, params["name"], accept_reasons,
                          operator_namespace=params["operator_namespace"], check_operator=params["wait_operator"],
                          expect_nodes=params["expect_nodes"], **extra)
    if module.check_mode:
        obj = waiter.current()
        done, summary = evaluate(obj, accept_reasons, params["name"], stack)
        return dict(changed=False, ready=done, state=summary["state"], reason=summary["reason"],
                    status=(obj or {}).get("status") or {}, waited=0.0)
    done, obj, summary, waited = waiter.wait(params["timeout"], params["stable_for"])
    result = dict(changed=False, ready=done, state=summary["state"], reason=summary["reason"],
                  status=(obj or {}).get("status") or {}, waited=waited)
    result.update(waiter.extra_result())
    if done:
        return result
    lines, operands = waiter.diagnostics(obj, summary)
    result.update(diagnostics=lines, operands=operands)
    result.update(waiter.extra_result())
    if waiter.node_reasons:
        result[waiter.node_result_key] = waiter.node_reasons
    what = "%s %s not ready" % (stack.kind, params["name"])
    if summary.get("exists") and waiter.node_reasons and evaluate(obj, accept_reasons, stack=stack)[0]:
        what = "%s %s is ready but %d expected node(s) %s (%s)" % (
            stack.kind, params["name"], len(waiter.node_reasons), waiter.nodes_problem,
            ", ".join(sorted(waiter.node_reasons)))
    raise DomainError("%s after %ss: %s" % (what, params["timeout"], " | ".join(lines)), **result)
