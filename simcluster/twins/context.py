"""Shared state of the twins: the store, the cluster spec and a few lookups."""

import threading

from ..errors import ApiError

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
