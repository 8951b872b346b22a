"""A tiny in-memory Store (store_api.Store) so simcluster's admission is testable on its own.

The simcluster test_validation_* / test_admission_* modules build their stores with it;
simcluster/tests/test_admission_fake.py pins the fake's own contract (admit before commit,
events after).
"""
import copy
import os

import pytest

from kit.paths import UPSTREAM
from simcluster import admission, controllers
from simcluster.errors import already_exists, not_found

CRD = "customresourcedefinitions.apiextensions.k8s.io"


class FakeStore:
    """Store protocol in ~60 lines: admit() before commit, subscribers after."""

    def __init__(self, namespaces=("default",)):
        self.objs = {}
        self.rv = 0
        self.subscribers = []
        self.pod_logs = {}
        self.events = []
        for ns in namespaces:
            self.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": ns}}, admit=False)
        controllers.attach(self)     # quota and budget status, as on the real Store

    def _key(self, resource, ns, name):
        return (resource, ns, name)

    def get(self, resource, namespace, name):
        obj = self.objs.get(self._key(resource, namespace, name))
        return copy.deepcopy(obj)

    def list(self, resource, namespace=None, label_selector=None):
        return [copy.deepcopy(o) for (r, ns, _name), o in sorted(self.objs.items())
                if r == resource and (namespace is None or ns == namespace)]

    def _write(self, op, resource, obj, admit, dry_run=False, subresource=None,
               field_validation="Warn"):
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        key = self._key(resource, meta.get("namespace"), meta.get("name"))
        old = self.objs.get(key)
        if op == "CREATE" and old is not None:
            raise already_exists(resource.split(".")[0], meta.get("name"))
        if op == "UPDATE":
            if old is None:
                raise not_found(resource.split(".")[0], meta.get("name"))
            if subresource == "status":
                status = obj.get("status")
                obj = copy.deepcopy(old)
                obj["status"] = status
            else:
                obj["status"] = copy.deepcopy(old.get("status"))
                if obj["status"] is None:
                    del obj["status"]
        warnings = []
        if admit:
            warnings = admission.admit(self, op, resource, obj, copy.deepcopy(old),
                                       dry_run=dry_run, subresource=subresource,
                                       field_validation=field_validation)
        if dry_run:
            return obj, warnings
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        meta.setdefault("generation", 1)
        self.objs[key] = obj
        self._notify("ADDED" if op == "CREATE" else "MODIFIED", resource, obj)
        return copy.deepcopy(obj), warnings

    def create(self, resource, obj, *, admit=True, dry_run=False, field_validation="Warn"):
        return self._write("CREATE", resource, obj, admit, dry_run,
                           field_validation=field_validation)[0]

    def create_w(self, resource, obj, **kw):
        """create() that also returns the warnings (the HTTP layer's Warning headers)."""
        return self._write("CREATE", resource, obj, True, **kw)

    def update(self, resource, obj, *, admit=True, field_validation="Warn"):
        return self._write("UPDATE", resource, obj, admit, field_validation=field_validation)[0]

    def update_w(self, resource, obj, **kw):
        return self._write("UPDATE", resource, obj, True, **kw)

    def update_status(self, resource, obj):
        return self._write("UPDATE", resource, obj, True, subresource="status")[0]

    def merge_patch(self, resource, namespace, name, patch, *, subresource=None):
        cur = self.get(resource, namespace, name)
        for k, v in patch.items():
            cur[k] = v
        return self.update_status(resource, cur) if subresource else self.update(resource, cur)

    def delete(self, resource, namespace, name):
        key = self._key(resource, namespace, name)
        if key not in self.objs:
            raise not_found(resource.split(".")[0], name)
        obj = self.objs.pop(key)
        if resource == "namespaces":
            for k in [k for k in self.objs if k[1] == name]:
                self._notify("DELETED", k[0], self.objs.pop(k))
        self._notify("DELETED", resource, obj)

    def subscribe(self, callback):
        self.subscribers.append(callback)

    def _notify(self, event, resource, obj):
        for cb in list(self.subscribers):
            cb(event, resource, copy.deepcopy(obj))

    def record_event(self, namespace, involved, reason, message, type_="Normal"):
        self.events.append((namespace, reason, message, type_))


_CRD_CACHE = {}


def upstream_crd(relpath):
    """The real CRD document from ../shared/upstream (parsed once), or skip."""
    yaml = pytest.importorskip("yaml")
    path = os.path.join(UPSTREAM, relpath)
    if not os.path.exists(path):
        pytest.skip("upstream snapshot absent: %s (needs <repo>/../shared)" % path)
    if path not in _CRD_CACHE:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        with open(path) as fh:
            _CRD_CACHE[path] = [d for d in yaml.load_all(fh, Loader=loader) if d][0]
    return copy.deepcopy(_CRD_CACHE[path])


def install_crd(store, relpath):
    crd = upstream_crd(relpath)
    store.create(CRD, crd)
    return crd


def pod(name="p", ns="default", **spec_overrides):
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    spec.update(spec_overrides)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def gpu_pod(name, gpus, ns="default", request=None):
    res = {"limits": {"nvidia.com/gpu": gpus}}
    if request is not None:
        res["requests"] = {"nvidia.com/gpu": request}
    return pod(name, ns, containers=[{"name": "c", "image": "cuda", "resources": res}])
