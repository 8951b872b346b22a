"""OpenAPI v3 documents, enough for kubectl and helm.

Both binaries check, in the OpenAPI v3 document of a group-version, that the
PATCH operation of a kind (x-kubernetes-group-version-kind) declares the
`fieldValidation` query parameter; then they leave validation to the server
instead of validating client-side against /openapi/v2 (protobuf, not served).

Built-in kinds get a placeholder schema (type object, unknown fields kept):
the PATCH operations do not list application/strategic-merge-patch+json, so
kubectl computes strategic patches from its compiled-in types, not from these
schemas. CRD kinds get their openAPIV3Schema.
"""

import hashlib
import json
import threading

from .registry import crd_version

_PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
                "application/apply-patch+yaml", "application/apply-patch+cbor"]


def _reverse_group(group):
    if not group:
        return "io.k8s.api.core"
    if group.endswith(".k8s.io"):
        return "io.k8s.api." + group[:-len(".k8s.io")].split(".")[0]
    return ".".join(reversed(group.split(".")))


def schema_name(info, version):
    base = _reverse_group(info.group)
    if info.crd is None and info.group and not info.group.endswith(".k8s.io"):
        base = "io.k8s.api." + info.group
    return "%s.%s.%s" % (base, version, info.kind)


def _param(name, schema_type="string", desc=""):
    return {"name": name, "in": "query", "description": desc,
            "schema": {"type": schema_type, "uniqueItems": True}}


def _ref(name):
    return {"$ref": "#/components/schemas/" + name}


def _op(action, gvk, name, op_id, body=None, params=()):
    op = {"operationId": op_id, "x-kubernetes-action": action,
          "x-kubernetes-group-version-kind": gvk,
          "parameters": list(params),
          "responses": {"200": {"description": "OK", "content": {
              "application/json": {"schema": _ref(name)}}}}}
    if body:
        op["requestBody"] = {"content": {ct: {"schema": body} for ct in
                                         (_PATCH_TYPES if action == "patch"
                                          else ["*/*"])}, "required": True}
    return op


def build_gv_doc(registry, group, version):
    infos = registry.in_group_version(group, version)
    paths = {}
    schemas = {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch": {
            "type": "object", "description": "Patch is provided to give a concrete name "
                                             "and type to the Kubernetes PATCH request body."},
    }
    prefix = "/api/%s" % version if not group else "/apis/%s/%s" % (group, version)
    write_params = [_param("dryRun"), _param("fieldManager"),
                    _param("fieldValidation", desc="fieldValidation instructs the server on "
                           "how to handle objects in the request containing unknown or "
                           "duplicate fields. Valid values are: Ignore, Warn, Strict.")]
    for info in infos:
        name = schema_name(info, version)
        gvk = {"group": info.group, "version": version, "kind": info.kind}
        schema = {"type": "object", "x-kubernetes-group-version-kind": [gvk]}
        if info.crd is not None:
            v = crd_version(info.crd, version) or {}
            s = ((v.get("schema") or {}).get("openAPIV3Schema")) or {}
            schema = json.loads(json.dumps(s)) if s else {"type": "object"}
            schema["x-kubernetes-group-version-kind"] = [gvk]
        else:
            schema["x-kubernetes-preserve-unknown-fields"] = True
        schemas[name] = schema
        schemas[name + "List"] = {"type": "object", "x-kubernetes-group-version-kind": [
            {"group": info.group, "version": version, "kind": info.list_kind}],
            "properties": {"items": {"type": "array", "items": _ref(name)}}}
        ns = "/namespaces/{namespace}" if info.namespaced else ""
        coll = "%s%s/%s" % (prefix, ns, info.plural)
        item = coll + "/{name}"
        scope = "Namespaced" if info.namespaced else ""
        base = "%s%s" % (scope, info.kind)
        tag = (group.split(".")[0].capitalize() if group else "Core") + version.capitalize()
        paths[coll] = {
            "get": _op("list", gvk, name + "List", "list%s%s" % (tag, base),
                       params=[_param("labelSelector"), _param("fieldSelector"),
                               _param("watch", "boolean"), _param("resourceVersion")]),
            "post": _op("post", gvk, name, "create%s%s" % (tag, base), _ref(name),
                        write_params),
        }
        paths[item] = {
            "get": _op("get", gvk, name, "read%s%s" % (tag, base)),
            "put": _op("put", gvk, name, "replace%s%s" % (tag, base), _ref(name),
                       write_params),
            "patch": _op("patch", gvk, name, "patch%s%s" % (tag, base),
                         _ref("io.k8s.apimachinery.pkg.apis.meta.v1.Patch"),
                         write_params + [_param("force", "boolean")]),
            "delete": _op("delete", gvk, name, "delete%s%s" % (tag, base),
                          params=[_param("dryRun"), _param("propagationPolicy")]),
        }
        if "status" in info.subresources:
            paths[item + "/status"] = {
                "get": _op("get", gvk, name, "read%s%sStatus" % (tag, base)),
                "put": _op("put", gvk, name, "replace%s%sStatus" % (tag, base), _ref(name),
                           write_params),
                "patch": _op("patch", gvk, name, "patch%s%sStatus" % (tag, base),
                             _ref("io.k8s.apimachinery.pkg.apis.meta.v1.Patch"),
                             write_params + [_param("force", "boolean")]),
            }
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.35.0"},
            "paths": paths, "components": {"schemas": schemas}}


class OpenAPI:
    """Caches /openapi/v3 and its per-group-version documents."""

    def __init__(self, registry):
        self.registry = registry
        self._lock = threading.Lock()
        self._gen = None
        self._docs = {}
        self._index = None

    def _refresh(self):
        if self._gen == self.registry.generation:
            return
        docs = {}
        groups = self.registry.groups()
        for group, versions in groups.items():
            for v in versions:
                key = "api/" + v if not group else "apis/%s/%s" % (group, v)
                docs[key] = json.dumps(build_gv_doc(self.registry, group, v)).encode()
        paths = {}
        for key, body in sorted(docs.items()):
            digest = hashlib.sha512(body).hexdigest().upper()
            paths[key] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (key, digest)}
        self._docs = docs
        self._index = json.dumps({"paths": paths}).encode()
        self._gen = self.registry.generation

    def index(self):
        with self._lock:
            self._refresh()
            return self._index

    def document(self, key):
        with self._lock:
            self._refresh()
            return self._docs.get(key)


# --- /openapi/v2 ------------------------------------------------------------------
# kubectl validates the items of a `kind: List` client-side against /openapi/v2
# (its v3 field-validation check always answers "unsupported" for v1 List), and a
# 404 there fails `kubectl apply -f list.yaml`. The real server serves the whole
# Swagger 2.0 spec; ours has no paths and no definitions: kubectl finds no model
# for any kind and skips client-side checks, each item is still sent with
# fieldValidation=Strict and validated by the server.

# client-go asks with "@v1.0"; the real server answers with ".v1.0" (Go's mime
# parser refuses the "@" in a Content-Type).
V2_PROTOBUF_ACCEPT = ("com.github.proto-openapi.spec.v2@v1.0+protobuf",
                      "com.github.proto-openapi.spec.v2.v1.0+protobuf")
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
V2_INFO = {"title": "Kubernetes", "version": "v1.35.0"}


def v2_json():
    return json.dumps({"swagger": "2.0", "info": V2_INFO, "paths": {},
                       "definitions": {}}).encode()


def v2_protobuf():
    """gnostic openapi_v2.Document: swagger=1, info=2 {title=1, version=2}, paths=8."""
    from .protobuf import _ld
    info = _ld(1, V2_INFO["title"].encode()) + _ld(2, V2_INFO["version"].encode())
    return _ld(1, b"2.0") + _ld(2, info) + _ld(8, b"")
