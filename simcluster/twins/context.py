"""Shared state of the twins: the store, the cluster spec and a few lookups."""

from ..errors import ApiError
from .runtime import Informer

CLUSTER_POLICIES = "clusterpolicies.nvidia.com"
OPERATOR_LABELS = {"app": "gpu-operator", "app.kubernetes.io/component": "gpu-operator"}


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

    def operator_deployment(self, ready=True):
        """The gpu-operator Deployment (any namespace); with ready=True only when its pod runs."""
        for dep in self.list("deployments.apps"):
            labels = dep["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in OPERATOR_LABELS.items()):
                if not ready or ((dep.get("status") or {}).get("readyReplicas") or 0) >= 1:
                    return dep
        return None

    def cluster_policies(self):
        return sorted(self.list(CLUSTER_POLICIES),
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
