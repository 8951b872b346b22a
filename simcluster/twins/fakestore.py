"""A minimal in-memory Store (store_api.Store) for unit tests of the twins.

Subscribers are called synchronously after each commit, like the real store.
`admit`, if given, is called as admit(op, resource, obj, old) and may raise
ApiError (tests use it to imitate Pod Security Admission).
"""

import threading
import uuid

from ..clock import now_micro
from ..jsoncopy import clone
from .. import errors
from ..errors import ApiError
from ..selectors import match_labels, parse_label_selector
from ..store import assign_pod

CLUSTER_SCOPED = {"nodes", "namespaces", "clusterpolicies.nvidia.com", "persistentvolumes",
                  "storageclasses.storage.k8s.io",
                  "customresourcedefinitions.apiextensions.k8s.io", "priorityclasses.scheduling.k8s.io",
                  "clusterroles.rbac.authorization.k8s.io",
                  "clusterrolebindings.rbac.authorization.k8s.io"}


def _merge(target, patch):
    if not isinstance(patch, dict):
        return clone(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


class FakeStore:
    def __init__(self, admit=None):
        self._lock = threading.RLock()
        self._objs = {}
        self._rv = 0
        self._subs = []
        self.admit = admit
        self.pod_logs = {}
        self.events = []

    def _key(self, resource, namespace, name):
        return (None if resource in CLUSTER_SCOPED else namespace, name)

    def _notify(self, etype, resource, obj):
        for cb in list(self._subs):
            cb(etype, resource, clone(obj))

    def _next(self):
        self._rv += 1
        return str(self._rv)

    def get(self, resource, namespace, name):
        with self._lock:
            obj = self._objs.get(resource, {}).get(self._key(resource, namespace, name))
            return clone(obj)

    def list(self, resource, namespace=None, label_selector=None, **_kw):
        reqs = parse_label_selector(label_selector) if label_selector else []
        with self._lock:
            out = [clone(o) for (ns, _n), o in sorted(self._objs.get(resource, {}).items(),
                                                               key=lambda kv: str(kv[0]))
                   if (namespace is None or ns == namespace)
                   and match_labels(reqs, o["metadata"].get("labels"))]
        return out

    def create(self, resource, obj, *, admit=True):
        obj = clone(obj)
        meta = obj.setdefault("metadata", {})
        with self._lock:
            key = self._key(resource, meta.get("namespace"), meta["name"])
            table = self._objs.setdefault(resource, {})
            if key in table:
                raise errors.already_exists(resource.split(".")[0], meta["name"])
            if admit and self.admit:
                self.admit("CREATE", resource, obj, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_micro()
            meta["generation"] = 1
            meta["resourceVersion"] = self._next()
            if resource == "pods":   # as the API server's PrepareForCreate: no pod is ever read without a phase
                obj.setdefault("status", {}).setdefault("phase", "Pending")
            table[key] = obj
            out = clone(obj)
        self._notify("ADDED", resource, out)
        return out

    def _replace(self, resource, obj, status_only, admit):
        meta = obj["metadata"]
        with self._lock:
            table = self._objs.setdefault(resource, {})
            key = self._key(resource, meta.get("namespace"), meta["name"])
            old = table.get(key)
            if old is None:
                raise errors.not_found(resource, meta["name"])
            rv = meta.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(resource, meta["name"])
            if status_only == "all":          # a binding: spec and status in one write
                new = clone(obj)
            elif status_only:
                new = clone(old)
                new["status"] = clone(obj.get("status"))
            else:
                new = clone(obj)
                for k in ("uid", "creationTimestamp", "generation"):
                    new["metadata"][k] = old["metadata"][k]
                if "status" in old:
                    new["status"] = clone(old["status"])
                if {k: v for k, v in new.items() if k not in ("metadata", "status")} != \
                        {k: v for k, v in old.items() if k not in ("metadata", "status")}:
                    new["metadata"]["generation"] = old["metadata"]["generation"] + 1
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            if new == old:
                return clone(old)
            if admit and self.admit:
                self.admit("UPDATE", resource, new, old)
            new["metadata"]["resourceVersion"] = self._next()
            table[key] = new
            out = clone(new)
        self._notify("MODIFIED", resource, out)
        return out

    def update(self, resource, obj, *, admit=True):
        return self._replace(resource, clone(obj), False, admit)

    def update_status(self, resource, obj):
        return self._replace(resource, clone(obj), True, False)

    def bind(self, namespace, name, node):
        with self._lock:
            cur = self.get("pods", namespace, name)
            if cur is None:
                raise errors.not_found("pods", name)
            return self._replace("pods", assign_pod(cur, node, name), "all", False)

    def merge_patch(self, resource, namespace, name, patch, *, subresource=None):
        with self._lock:      # read-modify-write must be atomic, as in the real store
            cur = self.get(resource, namespace, name)
            if cur is None:
                raise errors.not_found(resource, name)
            new = _merge(cur, patch)
            new["metadata"].pop("resourceVersion", None)
            return self._replace(resource, new, subresource == "status", True)

    def delete(self, resource, namespace, name):
        with self._lock:
            table = self._objs.setdefault(resource, {})
            key = self._key(resource, namespace, name)
            old = table.pop(key, None)
            if old is None:
                raise errors.not_found(resource, name)
            if resource == "namespaces":
                for res, objs in self._objs.items():
                    for k in [k for k in objs if k[0] == name]:
                        gone = objs.pop(k)
                        self._notify("DELETED", res, gone)
        self._notify("DELETED", resource, old)

    def subscribe(self, callback):
        self._subs.append(callback)

    def unsubscribe(self, callback):
        if callback in self._subs:
            self._subs.remove(callback)

    def record_event(self, namespace, involved, reason, message, type_="Normal"):
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "%s.%s" % (involved["metadata"]["name"], uuid.uuid4().hex[:16]),
                           "namespace": namespace},
              "involvedObject": {"kind": involved.get("kind"), "name": involved["metadata"]["name"],
                                 "namespace": involved["metadata"].get("namespace"),
                                 "uid": involved["metadata"].get("uid")},
              "reason": reason, "message": message, "type": type_}
        self.events.append(ev)
        try:
            self.create("events", ev, admit=False)
        except ApiError:
            pass
