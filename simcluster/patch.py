"""PATCH bodies: JSON merge patch, JSON patch and strategic merge patch.

Strategic merge patch needs each list's merge key; the real server reads
them from the Go types. We keep a table keyed by field name (the same field
name has the same strategy everywhere in the types we serve), which is what
`merge_key_for` returns. Lists not in the table are replaced whole, like
atomic lists (`tolerations`, `args`, ...).
"""

import json

from .jsoncopy import clone
from .errors import ApiError

# field name -> merge key candidates (first one present in the items wins).
MERGE_KEYS = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "ports": ("containerPort", "port"),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "taints": ("key",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "hostAliases": ("ip",),
    "addresses": ("type",),
    "topologySpreadConstraints": ("topologyKey",),
    "resourceClaims": ("name",),
    "secrets": ("name",),
    "schedulingGates": ("name",),
}

# Lists of scalars merged as sets (patchStrategy merge on []string).
SET_LISTS = {"finalizers"}


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


def unsupported_patch(msg):
    return ApiError(422, "Invalid", msg)


def merge_key_for(field, items):
    keys = MERGE_KEYS.get(field)
    if not keys:
        return None
    for item in items or []:
        if isinstance(item, dict):
            for k in keys:
                if k in item:
                    return k
            return keys[0]
    return keys[0]


# --- RFC 7386 -----------------------------------------------------------------

def merge_patch(target, patch):
    """RFC 7386. Copies only the maps along the patch's paths: the parts of `target` the
    patch does not touch are shared with the result (a deep copy of every level made a
    label patch of a 1000-node cluster's Node cost milliseconds)."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- RFC 6902 -----------------------------------------------------------------

def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request('the server rejected our request due to an error in our request')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts, op):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict):
            if p not in cur:
                raise _jp_missing(op, parts)
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                cur = cur[int(p)]
            except (ValueError, IndexError):
                raise _jp_missing(op, parts)
        else:
            raise _jp_missing(op, parts)
    return cur


def _jp_missing(op, parts):
    path = "/" + "/".join(parts)
    if op == "remove" or op == "replace":
        return unsupported_patch(
            'the server rejected our request due to an error in our request')
    return unsupported_patch('jsonpatch %s operation does not apply: doc is missing path: "%s"'
                             % (op, path))


def _get(doc, parts, op):
    if not parts:
        return doc
    parent = _walk(doc, parts, op)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _jp_missing(op, parts)
        return parent[last]
    try:
        return parent[int(last)]
    except (ValueError, IndexError, TypeError):
        raise _jp_missing(op, parts)


def _remove(doc, parts, op):
    parent = _walk(doc, parts, op)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise unsupported_patch('jsonpatch %s operation does not apply: doc is missing key: '
                                    '%s' % (op, "/" + "/".join(parts)))
        return parent.pop(last)
    try:
        return parent.pop(int(last))
    except (ValueError, IndexError, TypeError, AttributeError):
        raise unsupported_patch('jsonpatch %s operation does not apply: doc is missing key: %s'
                                % (op, "/" + "/".join(parts)))


def _add(doc, parts, value, op):
    if not parts:
        return value
    parent = _walk(doc, parts, op)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                idx = int(last)
            except ValueError:
                raise _jp_missing(op, parts)
            if idx < 0 or idx > len(parent):
                raise unsupported_patch("add operation does not apply: doc is missing path: %s"
                                        % "/" + "/".join(parts))
            parent.insert(idx, value)
    else:
        raise _jp_missing(op, parts)
    return doc


def json_patch(doc, ops):
    if not isinstance(ops, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = clone(doc)
    for op in ops:
        kind = op.get("op")
        parts = _pointer(op.get("path", ""))
        if kind == "add":
            doc = _add(doc, parts, clone(op.get("value")), kind)
        elif kind == "remove":
            _remove(doc, parts, kind)
        elif kind == "replace":
            if not parts:
                doc = clone(op.get("value"))
                continue
            _get(doc, parts, kind)
            parent = _walk(doc, parts, kind)
            if isinstance(parent, dict):
                parent[parts[-1]] = clone(op.get("value"))
            else:
                parent[int(parts[-1])] = clone(op.get("value"))
        elif kind == "move":
            value = _remove(doc, _pointer(op.get("from", "")), kind)
            doc = _add(doc, parts, value, kind)
        elif kind == "copy":
            value = clone(_get(doc, _pointer(op.get("from", "")), kind))
            doc = _add(doc, parts, value, kind)
        elif kind == "test":
            if _get(doc, parts, kind) != op.get("value"):
                raise unsupported_patch("testing value %s failed" % op.get("path"))
        else:
            raise bad_request("Unexpected kind: %s" % kind)
    return doc


# --- strategic merge patch ----------------------------------------------------

def strategic_merge(original, patch):
    """Apply a strategic merge patch (directives $patch, $retainKeys,
    $setElementOrder/, $deleteFromPrimitiveList/)."""
    if not isinstance(patch, dict):
        return clone(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = clone(original) if isinstance(original, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [x for x in result[field] if x not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = clone(value)
    if isinstance(retain, list):
        for key in list(result):
            if key not in retain and key not in patch:
                result.pop(key)
    return result


def _merge_list(field, original, patch):
    original = original if isinstance(original, list) else []
    # a {"$patch": "replace"} element replaces the whole list
    if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
        return [clone(x) for x in patch
                if not (isinstance(x, dict) and x.get("$patch") == "replace")]
    if field in SET_LISTS and all(not isinstance(x, (dict, list)) for x in patch):
        out = list(original)
        for x in patch:
            if x not in out:
                out.append(x)
        return out
    key = merge_key_for(field, patch or original)
    if key is None or not all(isinstance(x, dict) for x in patch):
        return [clone(x) for x in patch if not (isinstance(x, dict) and "$patch" in x)]
    out = [clone(x) for x in original]
    for item in patch:
        if item.get("$patch") == "delete":
            out = [x for x in out if not (isinstance(x, dict) and x.get(key) == item.get(key))]
            continue
        if key not in item:
            raise bad_request("map: %s does not contain declared merge key: %s" % (item, key))
        for i, x in enumerate(out):
            if isinstance(x, dict) and x.get(key) == item[key]:
                out[i] = strategic_merge(x, item)
                break
        else:
            out.append(strategic_merge({}, item))
    return out


def parse_json_body(body):
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise bad_request("error decoding patch: %s" % exc)
