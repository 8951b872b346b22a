"""The object store of the simulated API server (implements store_api.Store).

One RLock guards everything. Stored objects are never mutated in place: every
write stores a new dict, so the watch history can keep references and reads
only copy. Admission (simcluster.admission.admit) runs under the lock, right
before the commit, so that check-then-commit (quota) is atomic.
"""

import collections
import itertools
import random
import string
import threading
import time
import uuid

from . import admission as default_admission, controllers, errors, managed
from .clock import now
from .errors import ApiError
from .jsoncopy import clone
from .registry import Registry
from .selectors import match_fields, match_labels, parse_field_selector, parse_label_selector
from .validation.qos import pod_qos

WATCH_HISTORY = 50000
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Gone(Exception):
    """The requested resourceVersion left the watch history (410)."""


class TooLarge(Exception):
    """The requested resourceVersion is newer than the store's (504 in the real server)."""


def _no_admit(store, op, resource, obj, old, **kw):
    return []


def assign_pod(pod, node, name):
    """What a Binding does to its pod (assignPod in pkg/registry/core/pod/storage): spec.nodeName
    and the PodScheduled=True condition, one write, so nobody sees a bound pod not yet
    scheduled. 409 when the pod is already assigned."""
    assigned = (pod.get("spec") or {}).get("nodeName")
    if assigned:
        raise ApiError(409, "Conflict", "Operation cannot be fulfilled on pods/binding \"%s\": pod %s is "
                       "already assigned to node \"%s\"" % (name, name, assigned))
    pod.setdefault("spec", {})["nodeName"] = node
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    old = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    since = old.get("lastTransitionTime") if old.get("status") == "True" else None
    conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                  "lastTransitionTime": since or now()})
    status["conditions"] = conds
    return pod


class _AdmissionHook:
    """The admission chain the Store calls before each commit: `_mod` is a module (or object)
    with admit(store, op, resource, obj, old, **kw); False for none (tests of the store alone)."""

    def __init__(self, mod):
        self._mod = mod

    def admit(self, *args, **kw):
        fn = getattr(self._mod, "admit", None) if self._mod else None
        return (fn or _no_admit)(*args, **kw) or []


def _spec_part(obj):
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _without_managed(obj):
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in ("managedFields", "resourceVersion")}
    out = dict(obj)
    out["metadata"] = meta
    return out


class Store:
    def __init__(self, registry=None, history=WATCH_HISTORY, admission=None):
        self.registry = registry or Registry()
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._objs = collections.defaultdict(dict)     # resource -> {(ns, name): obj}
        self._dependents = {}                          # owner uid -> {(resource, key)}
        self._rv = 0
        self._history = collections.deque()
        self._history_max = history
        self._dropped_upto = 0
        self._subscribers = []
        self._ip = itertools.count(10)
        self.admission = _AdmissionHook(default_admission if admission is None else admission)
        self.pod_logs = {}
        self.crd_listeners = []                        # fn() after CRD changes
        self.journal = None                            # persist.Journal with --state
        for ns in SYSTEM_NAMESPACES:
            self.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": ns}}, admit=False)
        self.create("services", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                "targetPort": 6443}]}}, admit=False)
        # kube-controller-manager's quota and disruption controllers: the status they write
        # is part of what the API serves (quota used, a budget's disruptionsAllowed)
        controllers.attach(self)

    # --- helpers ------------------------------------------------------------

    def info(self, resource):
        info = self.registry.get(resource)
        if info is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource",
                           {"kind": resource})
        return info

    @property
    def resource_version(self):
        with self._lock:
            return str(self._rv)

    def _ns_key(self, info, namespace):
        return namespace if info.namespaced else None

    def _check_namespace(self, info, namespace):
        if not info.namespaced:
            return
        if not namespace:
            raise ApiError(400, "BadRequest", "an empty namespace may not be set during creation")
        if (None, namespace) not in self._objs["namespaces"]:
            raise errors.not_found("namespaces", namespace)
        ns = self._objs["namespaces"][(None, namespace)]
        if (ns.get("metadata") or {}).get("deletionTimestamp"):
            raise errors.forbidden(info.plural, "", "unable to create new content in namespace "
                                   "%s because it is being terminated" % namespace, info.group)

    # --- reads ----------------------------------------------------------------

    def get(self, resource, namespace, name):
        info = self.registry.get(resource)
        if info is None:            # e.g. a custom resource whose CRD is not there (yet)
            return None
        with self._lock:
            obj = self._objs[resource].get((self._ns_key(info, namespace), name))
            return clone(obj) if obj is not None else None

    def list(self, resource, namespace=None, label_selector=None, field_selector=None):
        if self.registry.get(resource) is None:
            return []
        return self.list_with_rv(resource, namespace, label_selector, field_selector)[0]

    def list_with_rv(self, resource, namespace=None, label_selector=None, field_selector=None,
                     copy=True, at=None):
        """Items (sorted by namespace, name) and the list's resourceVersion; with `at`
        the state at that resourceVersion (rebuilt from the watch history; Gone
        when it reaches back further, TooLarge when `at` is in the future)."""
        info = self.info(resource)
        lreq = parse_label_selector(label_selector) if isinstance(label_selector, str) \
            else label_selector
        freq = parse_field_selector(field_selector, resource, self._selectable(info)) \
            if isinstance(field_selector, str) else field_selector
        with self._lock:
            items = []
            table = self._objs[resource]
            if at is not None:
                table = self._table_at(info, resource, int(at))
            for (ns, _name), obj in table.items():
                if namespace and info.namespaced and ns != namespace:
                    continue
                if lreq and not match_labels(lreq, obj["metadata"].get("labels")):
                    continue
                if freq and not match_fields(freq, obj):
                    continue
                items.append(clone(obj) if copy else obj)
            rv = str(self._rv) if at is None else str(int(at))
        items.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
        return items, rv

    def _table_at(self, info, resource, at):
        """{key: obj} of `resource` as it was at resourceVersion `at` (under the lock)."""
        if at > self._rv:
            raise TooLarge(self._rv)
        if at < self._dropped_upto:
            raise Gone(self._history[0][0] if self._history else self._rv)
        table = dict(self._objs[resource])
        for erv, etype, eres, obj, old in reversed(self._history):
            if erv <= at:
                break
            if eres != resource:
                continue
            meta = obj["metadata"]
            key = (meta.get("namespace") if info.namespaced else None, meta["name"])
            if etype == "ADDED":
                table.pop(key, None)
            else:                   # MODIFIED, DELETED: the version before the event
                table[key] = old
        return table

    @property
    def oldest_resource_version(self):
        """The oldest resourceVersion a list or watch can still start from."""
        with self._lock:
            return self._dropped_upto

    def _selectable(self, info):
        if info.crd is None:
            return ()
        out = []
        for v in info.crd.get("spec", {}).get("versions") or []:
            for f in v.get("selectableFields") or []:
                out.append(f.get("jsonPath", "").lstrip("."))
        return out

    # --- writes ---------------------------------------------------------------

    def _admit(self, op, resource, obj, old, dry_run, subresource, field_validation, user,
               warnings):
        kw = {"dry_run": dry_run, "field_validation": field_validation, "user": user}
        if subresource:
            kw["subresource"] = subresource
        got = self.admission.admit(self, op, resource, obj, old, **kw)
        if warnings is not None and got:
            warnings.extend(got)

    def _put(self, resource, key, obj):
        old = self._objs[resource].get(key)
        if old is not None:
            self._unindex(resource, key, old)
        self._objs[resource][key] = obj
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("uid"):
                self._dependents.setdefault(ref["uid"], set()).add((resource, key))

    def _unindex(self, resource, key, obj):
        for ref in obj["metadata"].get("ownerReferences") or []:
            deps = self._dependents.get(ref.get("uid"))
            if deps is not None:
                deps.discard((resource, key))
                if not deps:
                    del self._dependents[ref.get("uid")]

    def _pop(self, resource, key):
        obj = self._objs[resource].pop(key)
        self._unindex(resource, key, obj)
        return obj

    def _next_rv(self):
        self._rv += 1
        return str(self._rv)

    def _record(self, etype, resource, obj, old, pending):
        """Append to the watch history (under the lock) and queue subscriber calls."""
        self._history.append((int(obj["metadata"]["resourceVersion"]), etype, resource, obj, old))
        if self.journal is not None:
            self.journal.append(etype, resource, obj)
        if len(self._history) > self._history_max:
            dropped = self._history.popleft()
            self._dropped_upto = dropped[0]
        pending.append((etype, resource, obj))

    def _notify(self, pending):
        if not pending:
            return
        with self._cond:
            self._cond.notify_all()
        for etype, resource, obj in pending:
            if resource == "customresourcedefinitions.apiextensions.k8s.io":
                self._sync_crds()
            for cb in list(self._subscribers):
                try:
                    # the stored object itself: stored objects are never mutated in place,
                    # subscribers must not mutate it either (a copy per event per
                    # subscriber was the largest cost of a 1000-node cluster's writes)
                    cb(etype, resource, obj)
                except Exception:  # a broken subscriber must not break writers
                    import traceback
                    traceback.print_exc()
            if resource == "namespaces" and etype == "ADDED":
                self._namespace_added(obj)

    def _sync_crds(self):
        with self._lock:
            crds = [o for o in self._objs["customresourcedefinitions.apiextensions.k8s.io"]
                    .values() if not o["metadata"].get("deletionTimestamp")]
        self.registry.sync_crds(crds)
        for fn in list(self.crd_listeners):
            fn()

    def _namespace_added(self, ns):
        """The serviceaccount and root-ca-publisher controllers of a real cluster."""
        name = ns["metadata"]["name"]
        for resource, obj in (
                ("serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
                                     "metadata": {"name": "default", "namespace": name}}),
                ("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "kube-root-ca.crt", "namespace": name},
                                "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nsimcluster\n"
                                                   "-----END CERTIFICATE-----\n"}})):
            try:
                self.create(resource, obj, admit=False)
            except ApiError:
                pass

    def _defaults(self, info, obj):
        _decode_check(info, obj)
        meta = obj["metadata"]
        if info.key == "namespaces":
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj.setdefault("status", {})["phase"] = "Active"
        elif info.key == "pods":
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        elif info.key == "services":
            spec = obj.setdefault("spec", {})
            spec.setdefault("type", "ClusterIP")
            if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
                n = next(self._ip)
                spec["clusterIP"] = "10.96.%d.%d" % (n // 250, n % 250 + 1)
            if spec.get("clusterIP") and spec["clusterIP"] != "None":
                spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("sessionAffinity", "None")
            for p in spec.get("ports") or []:
                p.setdefault("protocol", "TCP")
                p.setdefault("targetPort", p.get("port"))
        elif info.key == "customresourcedefinitions.apiextensions.k8s.io":
            # the apiextensions controllers: names accepted, established at once
            spec = obj.get("spec") or {}
            ts = now()
            storage = [v.get("name") for v in spec.get("versions") or [] if v.get("storage")]
            obj["status"] = {
                "acceptedNames": clone(spec.get("names") or {}),
                "storedVersions": storage,
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "message": "no conflicts found", "lastTransitionTime": ts},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "message": "the initial names have been accepted",
                     "lastTransitionTime": ts}]}
        elif info.key == "secrets":
            obj.setdefault("type", "Opaque")
            sd = obj.pop("stringData", None)
            if sd:
                import base64
                data = obj.get("data") or {}
                for k, v in sd.items():
                    data[k] = base64.b64encode(str(v).encode()).decode()
                obj["data"] = data

    def create(self, resource, obj, *, admit=True, dry_run=False, field_manager=None,
               field_validation="Warn", warnings=None, user="admin", drop_status=False,
               api_version=None, managed_fields=None):
        info = self.info(resource)
        obj = clone(obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        pending = []
        with self._lock:
            if info.namespaced:
                self._check_namespace(info, meta.get("namespace"))
            else:
                meta.pop("namespace", None)
            if not meta.get("name"):
                if meta.get("generateName"):
                    meta["name"] = meta["generateName"] + "".join(
                        random.choice(string.ascii_lowercase + string.digits[:]) for _ in range(5))
                else:
                    raise errors.invalid(info.kind, "", [errors.FieldError(
                        "Required value", "metadata.name",
                        detail="name or generateName is required")], info.group)
            key = (self._ns_key(info, meta.get("namespace")), meta["name"])
            if key in self._objs[resource]:
                raise errors.already_exists(info.plural, meta["name"], info.group)
            obj["apiVersion"] = api_version or obj.get("apiVersion") or info.api_version()
            obj["kind"] = info.kind
            if drop_status and info.has_status:
                obj.pop("status", None)
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion",
                      "managedFields", "selfLink"):
                meta.pop(k, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now()
            if info.has_generation:
                meta["generation"] = 1
            else:
                meta.pop("generation", None)
            self._defaults(info, obj)
            if admit:
                self._admit("CREATE", resource, obj, None, dry_run, None, field_validation,
                            user, warnings)
            if info.key == "pods":       # PrepareForCreate, after mutating admission (LimitRanger)
                obj.setdefault("status", {})["qosClass"] = pod_qos(obj.get("spec"))
            if managed_fields is not None:
                meta["managedFields"] = managed_fields
            else:
                managed.record_update(obj, None, field_manager, obj["apiVersion"])
            if dry_run:
                return obj
            meta["resourceVersion"] = self._next_rv()
            self._put(resource, key, obj)
            self._record("ADDED", resource, obj, None, pending)
            result = clone(obj)
        self._notify(pending)
        return result

    def update(self, resource, obj, *, admit=True, dry_run=False, field_manager=None,
               field_validation="Warn", warnings=None, user="admin", subresource=None,
               api_version=None):
        info = self.info(resource)
        if subresource == "status" and isinstance(obj, dict):
            # a /status write takes only metadata (name, resourceVersion) and status
            obj = {"metadata": clone(obj.get("metadata") or {}),
                   **({"status": clone(obj["status"])} if "status" in obj else {})}
        else:
            obj = clone(obj)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        pending = []
        with self._lock:
            key = (self._ns_key(info, meta.get("namespace")), name)
            old = self._objs[resource].get(key)
            if old is None:
                raise errors.not_found(info.plural, name, info.group)
            # the object's uid and resourceVersion are the update's preconditions, uid first
            # (rest.DefaultUpdatedObjectInfo.Preconditions): a write for an object that was deleted
            # and created again under its name does not land on the new one
            if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
                raise errors.uid_precondition(info.plural, name, meta["uid"], old["metadata"]["uid"], info.group)
            rv = meta.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(info.plural, name, info.group)
            new = self._merge_update(info, old, obj, subresource, api_version)
            if admit:
                self._admit("UPDATE", resource, new, old, dry_run, subresource,
                            field_validation, user, warnings)
            result = self._commit_update(info, resource, old, new, subresource, field_manager,
                                         dry_run, pending)
        self._notify(pending)
        return result

    def _merge_update(self, info, old, obj, subresource, api_version=None):
        ometa = old["metadata"]
        if subresource == "status":
            # spec and the other parts stay shared with the stored (immutable) old object
            new = dict(old)
            new["metadata"] = clone(ometa)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            return new
        if subresource and subresource != "status":
            return obj
        new = obj
        new["apiVersion"] = api_version or obj.get("apiVersion") or old.get("apiVersion")
        new["kind"] = info.kind
        meta = new["metadata"]
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "namespace", "generation", "managedFields"):
            if k in ometa:
                meta[k] = ometa[k]
            else:
                meta.pop(k, None)
        if info.has_status or info.key == "namespaces":
            if "status" in old:
                new["status"] = clone(old["status"])
            else:
                new.pop("status", None)
        if info.key == "namespaces":
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        if info.key == "secrets":
            self._defaults(info, new)
        return new

    def _commit_update(self, info, resource, old, new, subresource, field_manager, dry_run,
                       pending):
        meta = new["metadata"]
        if info.has_generation and _spec_part(new) != _spec_part(old):
            meta["generation"] = int(old["metadata"].get("generation") or 1) + 1
        managed.record_update(new, old, field_manager, new.get("apiVersion"), subresource)
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if _without_managed(new) == _without_managed(old):
            return clone(old)        # no-op: no new resourceVersion, no event
        if dry_run:
            return new
        key = (self._ns_key(info, meta.get("namespace")), meta["name"])
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(info, resource, key, pending)
            return clone(new)
        meta["resourceVersion"] = self._next_rv()
        self._put(resource, key, new)
        self._record("MODIFIED", resource, new, old, pending)
        return clone(new)

    def update_status(self, resource, obj, **kw):
        kw.setdefault("subresource", "status")
        return self.update(resource, obj, **kw)

    def patch(self, resource, namespace, name, fn, *, subresource=None, admit=True,
              dry_run=False, field_manager=None, field_validation="Warn", warnings=None,
              user="admin", api_version=None, precondition_rv=True, ssa=False):
        """new = fn(copy of current); then update. fn may raise ApiError."""
        info = self.info(resource)
        pending = []
        with self._lock:
            key = (self._ns_key(info, namespace), name)
            old = self._objs[resource].get(key)
            if old is None:
                raise errors.not_found(info.plural, name, info.group)
            candidate = fn(clone(old))
            if not isinstance(candidate, dict):
                raise ApiError(422, "Invalid", "the patch result must be an object")
            cmeta = candidate.setdefault("metadata", {})
            if not isinstance(cmeta, dict):
                raise ApiError(422, "Invalid", "metadata must be an object")
            if cmeta.get("name") != name:
                raise errors.invalid(info.kind, name, [errors.FieldError(
                    "Invalid value", "metadata.name", cmeta.get("name"),
                    "field is immutable")], info.group)
            rv = cmeta.get("resourceVersion")
            if precondition_rv and rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(info.plural, name, info.group)
            if info.namespaced:
                cmeta["namespace"] = namespace
            keep_mf = cmeta.get("managedFields") if ssa else None
            new = self._merge_update(info, old, candidate, subresource, api_version)
            if keep_mf is not None:
                new["metadata"]["managedFields"] = keep_mf
            if admit:
                self._admit("UPDATE", resource, new, old, dry_run, subresource,
                            field_validation, user, warnings)
            if keep_mf is not None:
                # server-side apply computed managedFields itself
                meta = new["metadata"]
                if info.has_generation and _spec_part(new) != _spec_part(old):
                    meta["generation"] = int(old["metadata"].get("generation") or 1) + 1
                meta["resourceVersion"] = old["metadata"]["resourceVersion"]
                result = self._commit_raw(info, resource, old, new, dry_run, pending)
            else:
                result = self._commit_update(info, resource, old, new, subresource,
                                             field_manager, dry_run, pending)
        self._notify(pending)
        return result

    def _commit_raw(self, info, resource, old, new, dry_run, pending):
        if _without_managed(new) == _without_managed(old) and \
                _strip_times(new) == _strip_times(old):
            return clone(old)
        if dry_run:
            return new
        meta = new["metadata"]
        key = (self._ns_key(info, meta.get("namespace")), meta["name"])
        meta["resourceVersion"] = self._next_rv()
        self._put(resource, key, new)
        self._record("MODIFIED", resource, new, old, pending)
        return clone(new)

    def bind(self, namespace, name, node, *, admit=False, field_manager="kube-scheduler", warnings=None):
        """The pods/binding subresource: spec.nodeName and PodScheduled=True in one write."""
        return self.patch("pods", namespace, name, lambda cur: assign_pod(cur, node, name),
                          subresource="binding", admit=admit, field_manager=field_manager,
                          warnings=warnings)

    def merge_patch(self, resource, namespace, name, patch, *, subresource=None, **kw):
        from .patch import merge_patch

        def fn(cur):
            if subresource == "status":
                return merge_patch(cur, {"status": patch.get("status")} if "status" in patch
                                   else {})
            return merge_patch(cur, patch)
        return self.patch(resource, namespace, name, fn, subresource=subresource, **kw)

    def delete(self, resource, namespace, name, *, admit=True, dry_run=False,
               propagation=None, preconditions=None, user="admin", warnings=None):
        """Delete; returns (object, gone). gone=False while finalizers hold it."""
        info = self.info(resource)
        pending = []
        with self._lock:
            key = (self._ns_key(info, namespace), name)
            old = self._objs[resource].get(key)
            if old is None:
                raise errors.not_found(info.plural, name, info.group)
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise errors.uid_precondition(info.plural, name, pre["uid"], old["metadata"]["uid"], info.group)
            if pre.get("resourceVersion") and \
                    pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict",
                               "Precondition failed: ResourceVersion in precondition: %s, "
                               "ResourceVersion in object meta: %s"
                               % (pre["resourceVersion"], old["metadata"]["resourceVersion"]))
            if admit:
                self._admit("DELETE", resource, clone(old), clone(old), dry_run, None,
                            "Ignore", user, warnings)
            if dry_run:
                return clone(old), True
            if old["metadata"].get("finalizers") and info.key != "namespaces":
                if old["metadata"].get("deletionTimestamp"):
                    return clone(old), False
                new = clone(old)
                new["metadata"]["deletionTimestamp"] = now()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                new["metadata"]["resourceVersion"] = self._next_rv()
                self._put(resource, key, new)
                self._record("MODIFIED", resource, new, old, pending)
                result = (clone(new), False)
            else:
                gone = self._remove(info, resource, key, pending, propagation)
                result = (clone(gone), True)
        self._notify(pending)
        return result

    def _remove(self, info, resource, key, pending, propagation=None):
        old = self._pop(resource, key)
        if info.key == "namespaces":
            ns = key[1]
            for res, objs in list(self._objs.items()):
                rinfo = self.registry.get(res)
                if rinfo is None or not rinfo.namespaced:
                    continue
                for k in [k for k in objs if k[0] == ns]:
                    if k in objs:
                        self._remove(rinfo, res, k, pending, propagation)
            self.pod_logs = {k: v for k, v in self.pod_logs.items() if k[0] != ns}
        if info.key == "customresourcedefinitions.apiextensions.k8s.io":
            names = (old.get("spec") or {}).get("names") or {}
            served = "%s.%s" % (names.get("plural"), (old.get("spec") or {}).get("group"))
            sinfo = self.registry.get(served)
            for k in list(self._objs.get(served, {}) if sinfo is not None else ()):
                self._remove(sinfo, served, k, pending, propagation)
        gone = clone(old)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        self._record("DELETED", resource, gone, old, pending)
        self._collect_garbage(old, pending, propagation)
        return gone

    def _collect_garbage(self, owner, pending, propagation):
        """The garbage collector: dependents go (or are orphaned) with their owner."""
        uid = owner["metadata"]["uid"]
        for res, k in sorted(self._dependents.get(uid, ())):
            objs = self._objs[res]
            obj = objs.get(k)
            rinfo = self.registry.get(res)
            if obj is None or rinfo is None:
                continue
            refs = obj["metadata"].get("ownerReferences") or []
            if propagation == "Orphan":
                new = clone(obj)
                new["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
                if not new["metadata"]["ownerReferences"]:
                    del new["metadata"]["ownerReferences"]
                new["metadata"]["resourceVersion"] = self._next_rv()
                self._put(res, k, new)
                self._record("MODIFIED", res, new, obj, pending)
            elif len(refs) == 1 or all(self._owner_gone(r, obj) for r in refs):
                self._remove(rinfo, res, k, pending, propagation)

    def _owner_gone(self, ref, obj):
        info = self.registry.by_kind((ref.get("apiVersion") or "").rpartition("/")[0]
                                     if "/" in (ref.get("apiVersion") or "") else "",
                                     ref.get("kind"))
        if info is None:
            return True
        ns = obj["metadata"].get("namespace") if info.namespaced else None
        cur = self._objs[info.key].get((ns, ref.get("name")))
        return cur is None or cur["metadata"]["uid"] != ref.get("uid")

    def delete_collection(self, resource, namespace=None, label_selector=None,
                          field_selector=None, **kw):
        items, _ = self.list_with_rv(resource, namespace, label_selector, field_selector)
        out = []
        for obj in items:
            try:
                out.append(self.delete(resource, obj["metadata"].get("namespace"),
                                       obj["metadata"]["name"], **kw)[0])
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return out

    # --- events and subscriptions ---------------------------------------------

    def subscribe(self, callback):
        self._subscribers.append(callback)

    def unsubscribe(self, callback):
        try:
            self._subscribers.remove(callback)
        except ValueError:
            pass

    def events_since(self, rv, timeout):
        """Events (rv, type, resource, obj, old) with rv > `rv`; waits up to timeout
        when there are none. Raises Gone if the history no longer reaches back."""
        with self._cond:
            if rv < self._dropped_upto:
                raise Gone(self._history[0][0] if self._history else self._rv)
            if self._rv <= rv and timeout > 0:
                self._cond.wait(timeout)
            if rv < self._dropped_upto:
                raise Gone(self._history[0][0] if self._history else self._rv)
            if self._rv <= rv:
                return []
            out = []
            for ev in reversed(self._history):
                if ev[0] <= rv:
                    break
                out.append(ev)
            out.reverse()
            return out

    def record_event(self, namespace, involved, reason, message, type_="Normal",
                     component="simcluster"):
        meta = involved.get("metadata") or {}
        ns = meta.get("namespace") or namespace or "default"
        ts = now()
        obj = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "%s.%x" % (meta.get("name", "unknown"), time.time_ns()),
                         "namespace": ns},
            "involvedObject": {"kind": involved.get("kind"), "namespace": meta.get("namespace"),
                               "name": meta.get("name"), "uid": meta.get("uid"),
                               "apiVersion": involved.get("apiVersion"),
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": component}, "firstTimestamp": ts, "lastTimestamp": ts,
            "count": 1, "reportingComponent": component, "reportingInstance": "",
        }
        if obj["involvedObject"]["namespace"] is None:
            del obj["involvedObject"]["namespace"]
        try:
            self.create("events", obj, admit=False)
        except ApiError:
            pass


def _strip_times(obj):
    mf = [{k: v for k, v in e.items() if k != "time"}
          for e in (obj.get("metadata") or {}).get("managedFields") or []]
    return mf


_GO_TYPES = {str: "string", int: "number", float: "number", bool: "bool", list: "array",
             dict: "object", type(None): "null"}


def _decode_check(info, obj):
    """What the real server's JSON decoder refuses in ObjectMeta (400, not a 500 here)."""
    meta = obj.get("metadata")
    for field, want, ok in (
            ("labels", "map[string]string", lambda v: isinstance(v, dict)
             and all(isinstance(x, str) for x in v.values())),
            ("annotations", "map[string]string", lambda v: isinstance(v, dict)
             and all(isinstance(x, str) for x in v.values())),
            ("name", "string", lambda v: isinstance(v, str)),
            ("namespace", "string", lambda v: isinstance(v, str)),
            ("finalizers", "[]string", lambda v: isinstance(v, list))):
        value = meta.get(field)
        if value is None or ok(value):
            continue
        bad = value if not isinstance(value, dict) else next(
            v for v in value.values() if not isinstance(v, str))
        raise errors.ApiError(400, "BadRequest",
                       '%s in version "%s" cannot be handled as a %s: json: cannot unmarshal %s '
                       "into Go struct field ObjectMeta.metadata.%s of type %s"
                       % (info.kind, info.storage_version, info.kind, _GO_TYPES.get(type(bad), "value"),
                          field if not isinstance(value, dict) else field + ".value", want))

