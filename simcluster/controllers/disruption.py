"""PodDisruptionBudget controller (status) and the pods/eviction subresource it guards.

The status follows pkg/controller/disruption (simcluster/validation/disruption.py computes
it); it is recomputed when a budget is created or changed and when a pod of its namespace
changes. evict() is POST pods/{name}/eviction (pkg/registry/core/pod/storage/eviction.go).
"""

import threading

from simcluster.clock import now
from simcluster.errors import ApiError, not_found
from simcluster.quota_usage import refs
from simcluster.controllers.status import write_status
from simcluster.validation import disruption

_SCALED = {"ReplicaSet": "replicasets.apps", "StatefulSet": "statefulsets.apps",
           "ReplicationController": "replicationcontrollers", "Deployment": "deployments.apps"}


class DisruptionController:
    def __init__(self, store):
        self.store = store
        self.lock = threading.Lock()     # the cache only; never held while calling the store
        self.sync_lock = threading.RLock()   # serialises status recomputation
        self.pdbs = {}                   # namespace -> set(names)

    def sync(self):
        pdbs = {}
        for p in self.store.list("poddisruptionbudgets.policy"):
            meta = p.get("metadata") or {}
            pdbs.setdefault(meta.get("namespace"), set()).add(meta.get("name"))
        with self.lock:
            self.pdbs = pdbs

    def refresh(self, ns, names_=None):
        store = self.store
        with self.sync_lock:
            pods = None
            for pdb in store.list("poddisruptionbudgets.policy", ns):
                if names_ is not None and pdb["metadata"]["name"] not in names_:
                    continue
                if pods is None:
                    pods = refs(store, "pods", ns)
                try:
                    status = disruption.status_of(pdb, pods, now(), scale_getter(store))
                except (AttributeError, TypeError, ValueError):
                    continue  # malformed budget stored without admission: leave it alone
                old = dict(pdb.get("status") or {})
                old.pop("disruptedPods", None)
                if old == status:
                    continue
                write_status(store, "poddisruptionbudgets.policy", pdb, status)

    def on_event(self, event, resource, obj):
        meta = (obj or {}).get("metadata") or {}
        ns, name = meta.get("namespace"), meta.get("name")
        if resource == "poddisruptionbudgets.policy":
            with self.lock:
                if event == "DELETED":
                    self.pdbs.get(ns, set()).discard(name)
                else:
                    self.pdbs.setdefault(ns, set()).add(name)
            if event != "DELETED":
                self.refresh(ns, {name})
            return
        if resource == "pods" and ns:
            with self.lock:
                has_pdb = bool(self.pdbs.get(ns))
            if has_pdb:
                self.refresh(ns)


def scale_getter(store):
    """Replicas of a pod's controller; a ReplicaSet owned by a Deployment uses the Deployment."""
    def scale_of(ns, ref):
        res = _SCALED.get(ref.get("kind"))
        obj = store.get(res, ns, ref.get("name")) if res else None
        if obj is None:
            return None
        if ref.get("kind") == "ReplicaSet":
            owner = next((r for r in (obj.get("metadata") or {}).get("ownerReferences") or ()
                          if r.get("controller") and r.get("kind") == "Deployment"), None)
            if owner is not None:
                dep = scale_of(ns, owner)
                if dep is not None:
                    return dep
        return int((obj.get("spec") or {}).get("replicas", 1))
    return scale_of


def evict(store, namespace, name, body):
    """POST pods/{name}/eviction (policy/v1 Eviction), honouring PodDisruptionBudgets."""
    body = body or {}
    bname = (body.get("metadata") or {}).get("name")
    if bname and bname != name:
        raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
    pod = store.get("pods", namespace, name)
    if pod is None:
        raise not_found("pods", name)
    opts = body.get("deleteOptions") or {}
    dry_run = "All" in (opts.get("dryRun") or ())
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed", "Pending") or \
            (pod.get("metadata") or {}).get("deletionTimestamp"):
        return _evict_delete(store, namespace, name, dry_run)
    pdbs = [p for p in store.list("poddisruptionbudgets.policy", namespace)
            if disruption.matching_pods(p, [pod])]
    if len(pdbs) > 1:
        raise ApiError(500, "InternalError", "This pod has more than one PodDisruptionBudget, "
                       "which the eviction subresource does not support.")
    if not pdbs:
        return _evict_delete(store, namespace, name, dry_run)
    pdb = pdbs[0]
    pods = store.list("pods", namespace)
    nums = disruption.budget(pdb, pods, scale_getter(store))
    if not disruption.pod_healthy(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        if policy == "AlwaysAllow" or (nums["currentHealthy"] >= nums["desiredHealthy"]
                                       and nums["desiredHealthy"] > 0):
            return _evict_delete(store, namespace, name, dry_run)
    if nums["disruptionsAllowed"] <= 0:
        raise ApiError(429, "TooManyRequests",
                       "Cannot evict pod as it would violate the pod's disruption budget.",
                       {"causes": [{"reason": "DisruptionBudget",
                                    "message": "The disruption budget %s needs %d healthy pods "
                                    "and has %d currently" % (pdb["metadata"]["name"],
                                                              nums["desiredHealthy"],
                                                              nums["currentHealthy"])}]})
    return _evict_delete(store, namespace, name, dry_run)


def _evict_delete(store, namespace, name, dry_run):
    if not dry_run:
        store.delete("pods", namespace, name)
    return None
