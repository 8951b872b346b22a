"""The resource verbs of the simulated API server: one request on one resource type.

ResourceContext checks the verb (allowed, counted, injected faults), then gets, lists
(simcluster/paging.py), creates, updates, patches (JSON, merge, strategic), applies
(server-side apply, simcluster/managed.py), deletes or deletes a collection; watches are
simcluster/watch.py, the scale/log/eviction/binding subresources simcluster/subresources.py.
"""

import json

from . import managed, paging, subresources, tables, watch
from .errors import ApiError, bad_request, not_found_path
from .patch import json_patch, merge_patch, strategic_merge
from .registry import VIRTUAL
from .request import PATCH_TYPES, decode_body
from .store import Gone, TooLarge


def _manager_from_agent(agent):
    return (agent or "unknown").split("/")[0][:128] or "unknown"


class ResourceContext:
    """One request on one resource type."""

    def __init__(self, handler, req, info, version, namespace, name, sub):
        self.h = handler
        self.req = req
        self.info = info
        self.version = version
        self.api_version = info.api_version(version)
        self.namespace = namespace
        self.name = name
        self.sub = sub
        self.store = handler.server.store
        self.stats = handler.server.stats

    # common write options
    def write_options(self, manager_default=True):
        fm = self.req.q("fieldManager")
        if not fm and manager_default:
            fm = _manager_from_agent(self.req.headers.get("User-Agent"))
        fv = self.req.q("fieldValidation") or "Warn"
        if fv not in ("Strict", "Warn", "Ignore"):
            raise bad_request('fieldValidation: Unsupported value: "%s": supported values: "Ignore", '
                              '"Strict", "Warn"' % fv)
        dr = self.req.q("dryRun")
        if dr and dr != "All":
            raise bad_request('dryRun: Unsupported value: "%s": supported values: "All"' % dr)
        return {"dry_run": self.req.dry_run, "field_manager": fm, "field_validation": fv,
                "warnings": self.req.warnings}

    def present(self, obj):
        """Present a stored object in the requested version."""
        if obj.get("apiVersion") != self.api_version:
            obj = dict(obj)
            obj["apiVersion"] = self.api_version
        return obj

    def check_verb(self, verb):
        if verb not in self.info.verbs and self.sub is None:
            raise ApiError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource")
        dry = self.req.dry_run or (self.req.method == "DELETE" and b'"All"' in (self.req.body or b"")
                                   and b"dryRun" in (self.req.body or b""))
        self.stats.count(verb, self.info.key + ("/" + self.sub if self.sub else ""), dry)
        self.h.server.api_faults.check(verb, self.info, self.namespace, self.name, self.sub)

    def serve(self):
        m = self.req.method
        if self.name is None:
            if m in ("GET", "HEAD"):
                if self.req.flag("watch"):
                    self.check_verb("watch")
                    return watch.serve(self)
                self.check_verb("list")
                return self.list()
            if self.namespace is None and self.info.namespaced:
                raise not_found_path()
            if m == "POST":
                self.check_verb("create")
                return self.create()
            if m == "DELETE":
                self.check_verb("deletecollection")
                return self.delete_collection()
            raise ApiError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource")
        if self.namespace is None and self.info.namespaced:
            raise not_found_path()
        if self.sub in (None, "status") or (self.sub == "finalize" and m == "PUT"):
            if m in ("GET", "HEAD"):
                if self.req.flag("watch"):
                    self.check_verb("watch")
                    self.req.query["fieldSelector"] = "metadata.name=" + self.name
                    return watch.serve(self)
                self.check_verb("get")
                return self.get()
            if m == "PUT":
                self.check_verb("update")
                return self.update()
            if m == "PATCH":
                self.check_verb("patch")
                return self.patch()
            if m == "DELETE" and self.sub is None:
                self.check_verb("delete")
                return self.delete()
        if self.sub == "scale":
            return subresources.scale(self)
        if self.sub == "log" and m == "GET":
            self.check_verb("get")
            return subresources.log(self)
        if self.sub == "eviction" and m == "POST":
            self.check_verb("create")
            return subresources.eviction(self)
        if self.sub == "binding" and m == "POST":
            self.check_verb("create")
            return subresources.binding(self)
        raise ApiError(405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource")

    # --- reads -------------------------------------------------------------------

    def get(self):
        obj = self.store.get(self.info.key, self.namespace, self.name)
        if obj is None:
            raise self.not_found()
        obj = self.present(obj)
        if tables.wants_table(self.req.accept):
            rv = self.store.resource_version
            return self.h.send_json(200, tables.table(self.info, [obj], rv, self.req,
                                                      self.version),
                                    self.req)
        self.h.send_json(200, obj, self.req)

    def not_found(self):
        from .errors import not_found
        return not_found(self.info.plural, self.name, self.info.group)

    def list(self):
        """LIST with the API server's chunking (simcluster/paging.py): limit/continue over a
        consistent snapshot, resourceVersion/resourceVersionMatch semantics."""
        q = self.req.query
        at, start, limit = paging.list_options(q, self.store.resource_version)
        try:
            items, rv = self.store.list_with_rv(self.info.key, self.namespace,
                                                q.get("labelSelector"), q.get("fieldSelector"),
                                                copy=False, at=at)
        except Gone:
            if q.get("continue"):
                raise paging.expired_continue(self.store.resource_version, start)
            raise ApiError(410, "Expired", "too old resource version: %s (%s)"
                           % (at, self.store.oldest_resource_version))
        except TooLarge as exc:
            raise paging.too_large(at, exc.args[0])
        items, meta = paging.page(items, rv, start, limit, q.get("labelSelector") or q.get("fieldSelector"))
        items = [self.present(o) for o in items]
        if tables.wants_table(self.req.accept):
            table = tables.table(self.info, items, rv, self.req, self.version)
            table["metadata"] = meta
            return self.h.send_json(200, table, self.req)
        body = {"kind": self.info.list_kind, "apiVersion": self.api_version, "metadata": meta,
                "items": items}
        self.h.send_json(200, body, self.req)

    # --- writes ------------------------------------------------------------------

    def _body_object(self):
        obj = decode_body(self.req, allow_yaml=True)
        if not isinstance(obj, dict):
            raise bad_request("the body of the request must be an object")
        kind = obj.get("kind")
        if kind and kind != self.info.kind and not self.sub:
            raise bad_request('the kind of the provided object (%s) does not match the expected '
                              'kind (%s)' % (kind, self.info.kind))
        meta = obj.get("metadata")
        if meta is None:
            obj["metadata"] = meta = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if self.info.namespaced:
            ns = meta.get("namespace")
            if ns and ns != self.namespace:
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = self.namespace
        obj["apiVersion"] = self.api_version
        return obj

    def create(self):
        obj = self._body_object()
        if self.info.key in VIRTUAL:
            obj["status"] = {"allowed": True, "reason": "simcluster allows everything"}
            return self.h.send_json(201, obj, self.req)
        opts = self.write_options()
        created = self.store.create(self.info.key, obj, drop_status=True,
                                    api_version=self.api_version, **opts)
        self.h.send_json(201, self.present(created), self.req)

    def update(self):
        obj = self._body_object()
        meta = obj["metadata"]
        if meta.get("name") and meta["name"] != self.name:
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                              % (meta["name"], self.name))
        meta["name"] = self.name
        opts = self.write_options()
        if self.sub == "finalize":
            cur = self.store.get(self.info.key, None, self.name)
            if cur is None:
                raise self.not_found()
            cur["spec"] = obj.get("spec") or {}
            obj = cur
        try:
            updated = self.store.update(self.info.key, obj, subresource=self.sub
                                        if self.sub == "status" else None,
                                        api_version=self.api_version, **opts)
        except ApiError as exc:
            if exc.code == 404 and self.info.key in ("leases.coordination.k8s.io", "endpoints") \
                    and not self.sub:
                updated = self.store.create(self.info.key, obj, api_version=self.api_version,
                                            **opts)
                return self.h.send_json(201, self.present(updated), self.req)
            raise
        self.h.send_json(200, self.present(updated), self.req)

    def patch(self):
        kind = PATCH_TYPES.get(self.req.content_type)
        if kind is None:
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media "
                           "types include: application/json-patch+json, application/"
                           "merge-patch+json, application/apply-patch+yaml")
        if kind == "strategic" and self.info.crd is not None:
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media "
                           "types include: application/json-patch+json, application/"
                           "merge-patch+json, application/apply-patch+yaml")
        if kind == "apply":
            return self.apply()
        body = decode_body(self.req)
        opts = self.write_options()
        sub = self.sub if self.sub == "status" else None

        def fn(cur):
            if kind == "json":
                return json_patch(cur, body)
            if not isinstance(body, dict):
                raise bad_request("the patch must be a JSON object")
            if kind == "merge":
                return merge_patch(cur, body)
            return strategic_merge(cur, body)

        updated = self.store.patch(self.info.key, self.namespace, self.name, fn, subresource=sub,
                                   api_version=self.api_version, **opts)
        self.h.send_json(200, self.present(updated), self.req)

    def apply(self):
        applied = decode_body(self.req, allow_yaml=True)
        if not isinstance(applied, dict):
            raise bad_request("the applied configuration must be an object")
        opts = self.write_options(manager_default=False)
        manager = opts.pop("field_manager")
        if not manager:
            raise ApiError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: '
                           "fieldManager: Required value: is required for apply patch",
                           {"kind": "PatchOptions", "group": "meta.k8s.io", "causes": [
                               {"reason": "FieldValueRequired", "message": "Required value: "
                                "is required for apply patch", "field": "fieldManager"}]})
        for field in ("apiVersion", "kind"):
            if not applied.get(field):
                raise bad_request("invalid object type: /, Kind=" if field == "kind" else
                                  "Object 'apiVersion' is missing in '%s'" % json.dumps(applied))
        if applied["kind"] != self.info.kind:
            raise bad_request('the kind of the provided object (%s) does not match the expected kind '
                              '(%s)' % (applied["kind"], self.info.kind))
        meta = applied.setdefault("metadata", {}) or {}
        applied["metadata"] = meta
        if meta.get("name") and meta["name"] != self.name:
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                              % (meta["name"], self.name))
        meta["name"] = self.name
        if self.info.namespaced:
            if meta.get("namespace") and meta["namespace"] != self.namespace:
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = self.namespace
        applied["apiVersion"] = self.api_version
        sub = "status" if self.sub == "status" else None
        if sub is None and self.info.has_status:
            applied.pop("status", None)
        force = self.req.flag("force")
        current = self.store.get(self.info.key, self.namespace, self.name)
        if current is None:
            if sub:
                raise self.not_found()
            new = managed.apply(None, applied, manager, self.api_version, force,
                                strategic_merge)
            mf = new["metadata"].pop("managedFields", None)
            created = self.store.create(self.info.key, new, api_version=self.api_version,
                                        managed_fields=mf, **opts)
            return self.h.send_json(201, self.present(created), self.req)

        def fn(cur):
            return managed.apply(cur, applied, manager, self.api_version, force,
                                 strategic_merge, sub)

        updated = self.store.patch(self.info.key, self.namespace, self.name, fn, subresource=sub,
                                   api_version=self.api_version, ssa=True,
                                   precondition_rv=True, **opts)
        self.h.send_json(200, self.present(updated), self.req)

    def _delete_options(self):
        opts = {}
        if self.req.body:
            try:
                opts = decode_body(self.req) or {}
            except ApiError:
                opts = {}
        if not isinstance(opts, dict):
            opts = {}
        q = self.req.query
        if q.get("propagationPolicy"):
            opts["propagationPolicy"] = q["propagationPolicy"]
        if q.get("orphanDependents", "").lower() == "true":
            opts["propagationPolicy"] = "Orphan"
        if opts.get("orphanDependents") is True:
            opts["propagationPolicy"] = "Orphan"
        dry = q.get("dryRun") == "All" or "All" in (opts.get("dryRun") or [])
        return opts, dry

    def delete(self):
        opts, dry = self._delete_options()
        obj, gone = self.store.delete(self.info.key, self.namespace, self.name, dry_run=dry,
                                      propagation=opts.get("propagationPolicy"),
                                      preconditions=opts.get("preconditions"),
                                      warnings=self.req.warnings)
        if gone and self.info.key not in ("namespaces", "pods") and \
                self.info.crd is None:
            meta = obj["metadata"]
            body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": meta["name"], "group": self.info.group,
                                "kind": self.info.plural, "uid": meta.get("uid")}}
            return self.h.send_json(200, body, self.req)
        if self.info.key == "namespaces" and gone:
            obj = dict(obj)
            obj["status"] = {"phase": "Terminating"}
        self.h.send_json(200, self.present(obj), self.req)

    def delete_collection(self):
        opts, dry = self._delete_options()
        items = self.store.delete_collection(self.info.key, self.namespace,
                                             self.req.q("labelSelector"),
                                             self.req.q("fieldSelector"), dry_run=dry,
                                             propagation=opts.get("propagationPolicy"))
        body = {"kind": self.info.list_kind, "apiVersion": self.api_version,
                "metadata": {"resourceVersion": self.store.resource_version},
                "items": [self.present(o) for o in items]}
        self.h.send_json(200, body, self.req)
