# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness of the GPU Operator ClusterPolicy: evaluation, watch, diagnostics.

`state: ready` alone is not enough: with reason NoGPUNodes or NFDLabelsMissing
the operator is "ready" while serving no GPU (FACTS.md trap), so the Ready
condition's reason decides. The wait watches the object (resourceVersion
resume) instead of polling, so it returns as soon as the status changes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.upstream import (
    CLUSTER_POLICY_API_VERSION,
    CLUSTER_POLICY_KIND,
    COND_ERROR,
    COND_READY,
    CP_STATE_READY,
    OPERATOR_APP_SELECTOR,
    PSA_LABEL_PREFIX,
    REASON_DRIVER_NOT_READY,
    REASON_NFD_LABELS_MISSING,
    REASON_NO_GPU_NODES,
    REASON_RECONCILED,
)

# Reasons a Ready=True condition can carry; only Reconciled means GPUs are served.
READY_REASONS = (REASON_RECONCILED, REASON_NO_GPU_NODES, REASON_NFD_LABELS_MISSING)
OPERATOR_SELECTOR = OPERATOR_APP_SELECTOR

HINTS = {
    REASON_NO_GPU_NODES: (
        "reason NoGPUNodes: the operator sees no node labelled nvidia.com/gpu.present=true "
        "(no GPU node joined, or NFD/GFD did not label it): nothing is served although state is ready"),
    REASON_NFD_LABELS_MISSING: (
        "reason NFDLabelsMissing: no node carries NFD labels; NFD is disabled (nfd.enabled=false) "
        "without an external NFD, or the NFD worker pods do not run"),
    REASON_DRIVER_NOT_READY: (
        "reason DriverNotReady: the driver DaemonSet is not ready; on nodes with a host driver set "
        "driver.enabled=false (all nodes) or label them nvidia.com/gpu.deploy.driver=false (mixed fleet)"),
}
VALIDATOR_HINT = (
    "nvidia-operator-validator runs its init containers in order (driver, toolkit, cuda, plugin): "
    "the crashing one names the layer that is broken ({containers}); read its log with "
    "kubectl logs -n {ns} {pod} -c {container}")
PULL_HINT = (
    "images cannot be pulled ({pods}): on an air-gapped site every image must exist in the mirror "
    "(gpu_operator_image_mirror rewrites all repositories, including the operator image the CRD upgrade "
    "hook runs) and the pull secrets (gpu_operator_image_pull_secrets) must exist in {ns}")
PSA_HINT = (
    "namespace {ns} is not labelled pod-security.kubernetes.io/enforce=privileged (has {level!r}): "
    "operand pods are refused by Pod Security Admission; label it before installing the chart")


def find_condition(obj, cond_type):
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == cond_type:
            return cond
    return None


def evaluate(obj, accept_reasons=(REASON_RECONCILED,)):
    """(done, summary) for one ClusterPolicy dict (None when it does not exist)."""
    if obj is None:
        return False, {"exists": False, "state": None, "reason": None, "message": "ClusterPolicy does not exist yet"}
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
    done = (state == CP_STATE_READY and ready.get("status") == "True"
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


def pod_ready(pod):
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


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
    return None


def diagnose(summary, daemonsets, pods, namespace_obj=None, operator_found=True, operator_pending=None):
    """Lines an operator can act on, plus structured data, from plain dicts."""
    lines = []
    ns = summary.get("namespace") or (namespace_obj or {}).get("metadata", {}).get("name")
    if not summary.get("exists"):
        lines.append("ClusterPolicy cluster-policy was never created (chart not installed, or "
                     "clusterPolicy.deployCR=false)")
    else:
        lines.append("ClusterPolicy state=%s reason=%s: %s" % (
            summary.get("state"), summary.get("reason"), summary.get("message") or "no message"))
    if not operator_found:
        lines.append("no gpu-operator Deployment (label app.kubernetes.io/component=gpu-operator) found: nothing reconciles the ClusterPolicy")
    elif operator_pending:
        lines.append("operator Deployment %s/%s not rolled out (%s): the ClusterPolicy status still comes from "
                     "the previous operator and cannot be trusted" % (ns, "gpu-operator", operator_pending))
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
    crashing_validators = []
    for pod in pods:
        state, container = pod_state(pod)
        info = {"name": pod["metadata"]["name"], "node": (pod.get("spec") or {}).get("nodeName"),
                "state": state, "container": container}
        pod_info.append(info)
        if state in ("Running", "Succeeded") and (state == "Succeeded" or pod_ready(pod)):
            continue
        lines.append("pod %s/%s on %s: %s%s" % (ns, info["name"], info["node"] or "<unscheduled>", state,
                                                " (container %s)" % container if container else ""))
        if "validator" in info["name"] and state.startswith("Init:"):
            crashing_validators.append(info)
    pulls = [p["name"] for p in pod_info if p["state"].split(":")[-1] in ("ErrImagePull", "ImagePullBackOff")]
    if pulls:
        lines.append("hint: " + PULL_HINT.format(pods=", ".join(pulls[:3]), ns=ns))
    reason = summary.get("reason")
    if reason in HINTS and not (reason == REASON_RECONCILED):
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


class ClusterPolicyWaiter(object):
    """Watch-based wait on one ClusterPolicy through a kubernetes DynamicClient."""

    def __init__(self, dynamic_client, name, accept_reasons=(REASON_RECONCILED,), watch_factory=None,
                 clock=time.monotonic, operator_namespace=None, check_operator=False):
        self.client = dynamic_client
        self.name = name
        self.operator_namespace = operator_namespace
        self.check_operator = check_operator
        self.accept_reasons = tuple(accept_reasons)
        self.clock = clock
        if watch_factory is None:
            from kubernetes import watch as k8s_watch  # imported by the module with HAS_K8S guard
            watch_factory = k8s_watch.Watch
        self.watch_factory = watch_factory
        self.resource = dynamic_client.resources.get(api_version=CLUSTER_POLICY_API_VERSION,
                                                     kind=CLUSTER_POLICY_KIND)

    def _list(self):
        """(object or None, resourceVersion of the list) via a field-selected list."""
        result = self.resource.get(field_selector="metadata.name=%s" % self.name)
        data = result.to_dict()
        items = data.get("items") or []
        return (items[0] if items else None), data["metadata"].get("resourceVersion")

    def current(self):
        return self._list()[0]

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
            rolled, pending = self.wait_operator_rollout(timeout)
            if not rolled:
                obj = self.current()
                _done, summary = evaluate(obj, self.accept_reasons)
                summary["operator_pending"] = pending
                return False, obj, summary, round(self.clock() - began, 3)
            start = self.clock()
            timeout = max(0, timeout - (start - began))
        obj, rv = self._list()
        done, summary = evaluate(obj, self.accept_reasons)
        ready_since = start if done else None
        while True:
            now = self.clock()
            if done and now - ready_since >= stable_for:
                break
            deadline = start + timeout
            if done:
                deadline = min(deadline, ready_since + stable_for)
            remaining = deadline - now
            if remaining <= 0:
                break
            watcher = self.watch_factory()
            try:
                for event in watcher.stream(
                        self.resource.get, field_selector="metadata.name=%s" % self.name,
                        resource_version=rv, serialize=False, deserialize=False, allow_watch_bookmarks=True,
                        timeout_seconds=max(1, int(remaining + 0.999)),
                        _request_timeout=(10, remaining + 5)):
                    etype = event.get("type")
                    raw = event.get("object") or event.get("raw_object") or {}
                    if hasattr(raw, "to_dict"):
                        raw = raw.to_dict()
                    rv = (raw.get("metadata") or {}).get("resourceVersion") or rv
                    if etype == "BOOKMARK":
                        continue
                    obj = None if etype == "DELETED" else raw
                    was_done = done
                    done, summary = evaluate(obj, self.accept_reasons)
                    if done and not was_done:
                        ready_since = self.clock()
                    if done != was_done or self.clock() >= deadline:
                        break
            except Exception as exc:  # noqa: BLE001 - a dropped stream is resumed by relisting
                # 410 Gone (resourceVersion too old) and dropped streams: relist and rewatch.
                if getattr(exc, "status", None) not in (410, 500, 503, 504) and not _is_timeout(exc):
                    raise
                obj, rv = self._list()
                was_done = done
                done, summary = evaluate(obj, self.accept_reasons)
                if done and not was_done:
                    ready_since = self.clock()
            finally:
                watcher.stop()
            if not done and self.clock() - start >= timeout:
                break
        return done, obj, summary, round(self.clock() - began, 3)

    def wait_operator_rollout(self, timeout):
        """Watch the operator Deployment(s) until rolled out: (ok, reason when not)."""
        start = self.clock()
        deployments = self.client.resources.get(api_version="apps/v1", kind="Deployment")
        params = {"label_selector": OPERATOR_SELECTOR}
        if self.operator_namespace:
            params["namespace"] = self.operator_namespace
        data = deployments.get(**params).to_dict()
        items = dict((d["metadata"]["namespace"] + "/" + d["metadata"]["name"], d) for d in data.get("items") or [])
        rv = data["metadata"].get("resourceVersion")

        def pending():
            if not items:
                return "no Deployment labelled %s yet" % OPERATOR_SELECTOR
            why = [k + ": " + r for k, r in ((k, rollout_pending(d)) for k, d in sorted(items.items())) if r]
            return "; ".join(why) or None

        while pending():
            remaining = timeout - (self.clock() - start)
            if remaining <= 0:
                break
            watcher = self.watch_factory()
            try:
                for event in watcher.stream(deployments.get, resource_version=rv, serialize=False, deserialize=False,
                                            timeout_seconds=max(1, int(remaining + 0.999)),
                                            _request_timeout=(10, remaining + 5), **params):
                    raw = event.get("object") or {}
                    meta = raw.get("metadata") or {}
                    rv = meta.get("resourceVersion") or rv
                    if event.get("type") == "BOOKMARK" or "name" not in meta:
                        continue
                    key = meta.get("namespace", "") + "/" + meta["name"]
                    if event.get("type") == "DELETED":
                        items.pop(key, None)
                    else:
                        items[key] = raw
                    if not pending():
                        break
            except Exception as exc:  # noqa: BLE001
                if getattr(exc, "status", None) not in (410, 500, 503, 504) and not _is_timeout(exc):
                    raise
                data = deployments.get(**params).to_dict()
                items = dict((d["metadata"]["namespace"] + "/" + d["metadata"]["name"], d)
                             for d in data.get("items") or [])
                rv = data["metadata"].get("resourceVersion")
            finally:
                watcher.stop()
        reason = pending()
        return reason is None, reason

    def diagnostics(self, obj, summary):
        """Read the operand DaemonSets, pods and namespace for a failure report."""
        namespace = summary.get("namespace") or self.operator_namespace
        summary = dict(summary, namespace=namespace)
        deployments = self._get("apps/v1", "Deployment", label_selector=OPERATOR_SELECTOR,
                                namespace=namespace)
        if not namespace and deployments:
            namespace = deployments[0]["metadata"]["namespace"]
            summary = dict(summary, namespace=namespace)
        daemonsets, pods, ns_obj = [], [], None
        if namespace:
            daemonsets = self._get("apps/v1", "DaemonSet", namespace=namespace)
            pods = self._get("v1", "Pod", namespace=namespace)
            ns_list = self._get("v1", "Namespace", field_selector="metadata.name=%s" % namespace)
            ns_obj = ns_list[0] if ns_list else None
        pending = summary.get("operator_pending") or next(
            (rollout_pending(d) for d in deployments if rollout_pending(d)), None)
        return diagnose(summary, daemonsets, pods, ns_obj, operator_found=bool(deployments),
                        operator_pending=pending)

    def _get(self, api_version, kind, **params):
        params = dict((k, v) for k, v in params.items() if v)
        try:
            resource = self.client.resources.get(api_version=api_version, kind=kind)
            return resource.get(**params).to_dict().get("items") or []
        except Exception:  # noqa: BLE001 - diagnostics must never hide the real failure
            return []


def _is_timeout(exc):
    name = type(exc).__name__
    return "Timeout" in name or "ProtocolError" in name or "ConnectionError" in name
