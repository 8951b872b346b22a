"""Shared state of the twins: the store, the cluster spec and a few lookups."""

from ..errors import ApiError
from .runtime import Informer

CLUSTER_POLICIES = "clusterpolicies.nvidia.com"
# the DRA stack's CR (nvidia.com/v1alpha1 GPUCluster): served once the chart's CRD is applied
GPU_CLUSTERS = "gpuclusters.nvidia.com"
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
        # informer: the twins read from caches kept current by store events (a read
        # from the store deep-copies every object; a pass reads pods and nodes often)
        self.informer = Informer(store)
        self.informer.add_index("pods", "node", lambda p: [(p.get("spec") or {}).get("nodeName")])
        self.informer.add_index("pods", "owner", lambda p: [
            r.get("uid") for r in p["metadata"].get("ownerReferences") or [] if r.get("uid")])

    def invalidate(self, event_type, resource=None, obj=None):
        """Store event -> informer (runtime.on_change). The old one-argument form
        invalidate(resource) drops that cache; the next read lists it again."""
        if resource is None:
            self.informer.forget(event_type)
            return
        self.informer.on_event(event_type, resource, obj)

    def list(self, resource, namespace=None):
        """All objects of a resource (optionally one namespace); shared, do not mutate them."""
        items = self.informer.list(resource)
        if namespace is None:
            return list(items)
        return [o for o in items if o["metadata"].get("namespace") == namespace]

    def get_cached(self, resource, name, namespace=None):
        """One cached object; namespace None on a namespaced resource: the first by name."""
        obj = self.informer.get(resource, namespace, name)
        if obj is None and namespace is None:
            obj = next((o for o in self.informer.list(resource)
                        if o["metadata"]["name"] == name), None)
        return obj

    def by_index(self, resource, index, value):
        """Cached objects whose index value is `value` ("pods": "node", "owner" uid)."""
        return self.informer.by_index(resource, index, value)

    def pods_on(self, node):
        return self.informer.by_index("pods", "node", node)

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
            for dep in self.list("deployments.apps"):
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
        return sorted(self.list(CLUSTER_POLICIES),
                      key=lambda o: (o["metadata"].get("creationTimestamp") or "",
                                     o["metadata"]["name"]))

    def gpu_clusters(self):
        """GPUCluster objects, oldest first; [] while the CRD is not installed."""
        return sorted(self.list(GPU_CLUSTERS),
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
