"""Shared state of the twins: the store, the cluster spec and a few lookups."""

import threading

from ..errors import ApiError

CLUSTER_POLICIES = "clusterpolicies.nvidia.com"
# What makes a pod "the GPU Operator" here: its container runs the operator binary
# (the chart's Deployment: `command: ["gpu-operator"]`). Labels are the chart's business;
# a real operator reconciles whatever its Deployment is labelled.
OPERATOR_COMMAND = "gpu-operator"


def pod_ready(pod):
    st = pod.get("status") or {}
    return st.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])


def runs_command(pod, command):
    """True if a container of the pod runs `command` (basename of command[0])."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        cmd = c.get("command") or []
        if cmd and cmd[0].rsplit("/", 1)[-1] == command:
            return True
    return False


class Ctx:
    def __init__(self, store, spec, runtime):
        self.store = store
        self.spec = spec
        self.runtime = runtime
        self.faults = spec.get("faults") or {}
        self.timings = spec["timings"]
        self.facts = {n["name"]: n for n in spec["nodes"]}
        self.kubelet = None          # set by start(); other twins register pod behaviours
        self._events_seen = set()
        # list cache: store reads deep-copy every object, and every pass of every twin
        # lists pods and nodes; a resource's entry is dropped on each of its store events.
        self._cache = {}
        self._cache_ver = {}
        self._cache_lock = threading.Lock()

    def invalidate(self, resource):
        with self._cache_lock:
            self._cache_ver[resource] = self._cache_ver.get(resource, 0) + 1
            self._cache.pop(resource, None)

    def list(self, resource, namespace=None):
        """All objects of a resource (optionally one namespace); shared, do not mutate them."""
        with self._cache_lock:
            items = self._cache.get(resource)
            ver = self._cache_ver.get(resource, 0)
        if items is None:
            try:
                items = self.store.list(resource, None)
            except (ApiError, KeyError):     # unknown resource (CRD not installed)
                items = []
            with self._cache_lock:
                if self._cache_ver.get(resource, 0) == ver:
                    self._cache[resource] = items
        if namespace is None:
            return list(items)
        return [o for o in items if o["metadata"].get("namespace") == namespace]

    def get_cached(self, resource, name, namespace=None):
        for obj in self.list(resource, namespace):
            if obj["metadata"]["name"] == name:
                return obj
        return None

    def safe_list(self, resource, namespace=None):
        """list() that treats an unknown resource (CRD not installed) as empty."""
        return self.list(resource, namespace)

    def running_pods(self, command, namespace=None):
        """Ready pods whose container runs `command`, oldest first (leader election)."""
        pods = [p for p in self.list("pods", namespace) if runs_command(p, command) and pod_ready(p)]
        return sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                           p["metadata"]["name"]))

    def operator_pod(self):
        """The running GPU Operator pod (the leader), or None."""
        pods = self.running_pods(OPERATOR_COMMAND)
        return pods[0] if pods else None

    def operator_deployment(self, ready=True):
        """The Deployment whose pod runs the GPU Operator (any namespace, any labels).

        ready=True: only while that pod runs (it is the pod that reconciles); ready=False:
        any Deployment whose template runs the operator binary."""
        if not ready:
            for dep in self.safe_list("deployments.apps"):
                if runs_command({"spec": (dep["spec"].get("template") or {}).get("spec") or {}},
                                OPERATOR_COMMAND):
                    return dep
            return None
        pod = self.operator_pod()
        if pod is None:
            return None
        ns = pod["metadata"]["namespace"]
        rs_name = next((r.get("name") for r in pod["metadata"].get("ownerReferences") or []
                        if r.get("kind") == "ReplicaSet"), None)
        rs = self.get_cached("replicasets.apps", rs_name, ns) if rs_name else None
        dep_name = next((r.get("name") for r in (rs or {}).get("metadata", {}).get("ownerReferences") or []
                         if r.get("kind") == "Deployment"), None)
        dep = self.get_cached("deployments.apps", dep_name, ns) if dep_name else None
        # a bare operator pod (no Deployment) still reconciles: describe it like one
        return dep or {"metadata": {"name": pod["metadata"]["name"], "namespace": ns},
                       "spec": {"template": {"spec": pod["spec"]}}}

    def cluster_policies(self):
        return sorted(self.safe_list(CLUSTER_POLICIES),
                      key=lambda o: (o["metadata"].get("creationTimestamp") or "",
                                     o["metadata"]["name"]))

    def event_once(self, obj, reason, message, type_="Normal", key=None):
        """Record an Event unless the same one was already recorded for this object."""
        ident = (obj["metadata"].get("uid"), reason, key if key is not None else message)
        if ident in self._events_seen:
            return
        self._events_seen.add(ident)
        try:
            self.store.record_event(obj["metadata"].get("namespace") or "default", obj, reason,
                                    message, type_)
        except ApiError:
            pass
