"""Unknown-field detection for built-in kinds (the server's strict decoding).

Uses the Kubernetes 1.35 OpenAPI definitions shipped by the kubernetes-validate
package (loaded once, lazily; about 50 ms), read as files from <venv>/simcluster-lib
(simcluster/requirements.txt says why there) or wherever the package is importable;
the package itself is never imported here. A real server decodes built-ins
into Go structs: unknown fields are dropped, reported as warnings
(fieldValidation=Warn, the default) or refused with 400 (Strict). Without the
package this check is skipped (documented in docs/simcluster-fidelity.md).
"""

import importlib.util
import json
import os
import sys
import threading

SCHEMA_DIR = "v1.35.0-local-strict"
KUBERNETES_VALIDATE_LIB = os.path.join(sys.prefix, "simcluster-lib")
_LOCK = threading.Lock()
_STATE = {"loaded": False, "defs": None, "by_gvk": {}}


def _load():
    with _LOCK:
        if _STATE["loaded"]:
            return _STATE["defs"]
        _STATE["loaded"] = True
        package = _package_dir()
        if package is None:
            return None
        path = os.path.join(package, "kubernetes-json-schema", SCHEMA_DIR, "_definitions.json")
        if not os.path.exists(path):
            return None
        with open(path) as fh:
            defs = json.load(fh).get("$defs") or {}
        by_gvk = {}
        for name, d in defs.items():
            for gvk in d.get("x-kubernetes-group-version-kind") or ():
                by_gvk[(gvk.get("group", ""), gvk.get("version"), gvk.get("kind"))] = name
        _STATE["defs"], _STATE["by_gvk"] = defs, by_gvk
        return defs


def _package_dir():
    lib = os.path.join(KUBERNETES_VALIDATE_LIB, "kubernetes_validate")
    if os.path.isdir(lib):
        return lib
    spec = importlib.util.find_spec("kubernetes_validate")
    return os.path.dirname(spec.origin) if spec and spec.origin else None


def available():
    return _load() is not None


def _resolve(node, defs):
    while isinstance(node, dict) and "$ref" in node:
        node = defs.get(node["$ref"].rsplit("/", 1)[-1]) or {}
    return node if isinstance(node, dict) else {}


def prune_unknown(obj, group, version, kind):
    """Drop fields the kind does not declare; returns their paths ("spec.replicass")."""
    defs = _load()
    if defs is None:
        return []
    name = _STATE["by_gvk"].get((group, version, kind))
    if name is None:
        return []
    unknown = []
    root = defs[name]
    props = root.get("properties") or {}
    for key in list(obj):
        if key in props:
            if key not in ("apiVersion", "kind"):
                _walk(obj[key], props[key], key, defs, unknown)
        else:
            del obj[key]
            unknown.append(key)
    return unknown


def _walk(value, node, path, defs, unknown):
    node = _resolve(node, defs)
    if isinstance(value, dict):
        props = node.get("properties")
        add = node.get("additionalProperties")
        if props is not None:
            for k in list(value):
                if k in props:
                    _walk(value[k], props[k], path + "." + k, defs, unknown)
                elif isinstance(add, dict):
                    _walk(value[k], add, path + "." + k, defs, unknown)
                elif add is False or add is None:
                    del value[k]
                    unknown.append(path + "." + k)
        elif isinstance(add, dict):
            for k, v in value.items():
                _walk(v, add, path + "." + k, defs, unknown)
    elif isinstance(value, list):
        items = node.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(value):
                if isinstance(v, (dict, list)):
                    _walk(v, items, "%s[%d]" % (path, i), defs, unknown)
