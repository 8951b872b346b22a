"""ResourceQuota controller: status.hard and status.used of every quota, kept current.

Recounts a namespace's quotas when a quota is created or its spec.hard changes, when a pod's
usage signature changes (requests, priority class, activeDeadlineSeconds, terminal phase),
when a PersistentVolumeClaim changes, and when an object a quota counts is added or deleted.
"""

import threading

from simcluster.controllers.status import write_status
from simcluster.quota_usage import UsageMemo, claims_in, count_keys, object_counts, refs
from simcluster.validation import quota as quota_mod

CLAIMS = "resourceclaims.resource.k8s.io"


def _pod_signature(pod):
    if not quota_mod.pod_counts(pod):
        return None
    return tuple(sorted((k, str(v)) for k, v in quota_mod.pod_usage(pod).items())), \
        (pod.get("spec") or {}).get("priorityClassName"), \
        (pod.get("spec") or {}).get("activeDeadlineSeconds")


class QuotaController:
    def __init__(self, store):
        self.store = store
        self.lock = threading.Lock()     # caches only; never held while calling the store
        self.sync_lock = threading.RLock()   # serialises status recomputation
        self.quotas = {}                 # namespace -> {name: quota}
        self.pod_sig = {}                # (namespace, name) -> usage signature
        self.usage_of = UsageMemo()

    def sync(self):
        quotas = {}
        for q in self.store.list("resourcequotas"):
            meta = q.get("metadata") or {}
            quotas.setdefault(meta.get("namespace"), {})[meta.get("name")] = q
        with self.lock:
            self.quotas, self.pod_sig = quotas, {}

    def refresh(self, ns, names_=None):
        """Write status.hard/used of the namespace's quotas when they changed."""
        store = self.store
        with self.lock:
            quotas = dict(self.quotas.get(ns) or {})
        if not quotas:
            return
        with self.sync_lock:
            pods = None
            for name in sorted(quotas):
                if names_ is not None and name not in names_:
                    continue
                q = store.get("resourcequotas", ns, name)
                if q is None:
                    continue
                hard = (q.get("spec") or {}).get("hard") or {}
                if pods is None and any(quota_mod.is_pod_key(k) for k in hard):
                    pods = refs(store, "pods", ns)
                try:
                    pvcs = (refs(store, "persistentvolumeclaims", ns)
                            if any(quota_mod.is_pvc_key(k) for k in hard) else ())
                    claims = (claims_in(store, ns)
                              if any(quota_mod.is_claim_key(k) for k in hard) else ())
                    status = quota_mod.status_of(q, pods or [], object_counts(store, ns, q),
                                                 self.usage_of, pvcs, claims)
                except (AttributeError, TypeError):
                    continue  # malformed quota stored without admission: leave it alone
                if q.get("status") == status:
                    continue
                write_status(store, "resourcequotas", q, status)

    def on_event(self, event, resource, obj):
        meta = (obj or {}).get("metadata") or {}
        ns, name = meta.get("namespace"), meta.get("name")
        if resource == "resourcequotas":
            with self.lock:
                if event == "DELETED":
                    (self.quotas.get(ns) or {}).pop(name, None)
                else:
                    self.quotas.setdefault(ns, {})[name] = obj
            # Our own status writes come back as MODIFIED: recount only for spec changes.
            hard = (obj.get("spec") or {}).get("hard") or {}
            if event == "ADDED" or (event == "MODIFIED"
                                    and (obj.get("status") or {}).get("hard") != hard):
                self.refresh(ns, {name})
            return
        if not ns:
            return
        with self.lock:
            has_quota = bool(self.quotas.get(ns))
        if resource == "pods":
            key = (ns, name)
            # Only pods in namespaces with a quota are tracked (a new quota recounts anyway).
            sig = None if event == "DELETED" or not has_quota else _pod_signature(obj)
            with self.lock:
                changed = self.pod_sig.get(key) != sig
                if sig is None:
                    self.pod_sig.pop(key, None)
                else:
                    self.pod_sig[key] = sig
            if has_quota and changed:
                self.refresh(ns)
            return
        if not has_quota:
            return
        keys = count_keys(resource)
        if resource == "persistentvolumeclaims":     # counts and storage (a resize too)
            def hits(hard):
                return any(k in keys or quota_mod.is_pvc_key(k) for k in hard)
        elif resource == CLAIMS:
            if event not in ("ADDED", "DELETED"):
                return                               # a claim's spec is immutable
            def hits(hard):
                return any(quota_mod.is_claim_key(k) for k in hard)
        elif event in ("ADDED", "DELETED"):
            def hits(hard):
                return bool(keys & set(hard))
        else:
            return
        with self.lock:
            hit = [qn for qn, q in (self.quotas.get(ns) or {}).items()
                   if hits((q.get("spec") or {}).get("hard") or {})]
        if hit:
            self.refresh(ns, set(hit))
