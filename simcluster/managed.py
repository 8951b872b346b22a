"""Approximate managedFields and server-side apply.

What is approximated (see docs/simcluster-api.md):
- A field set is the set of leaf paths of an object. Maps are owned per key,
  lists with a known merge key (patch.MERGE_KEYS) per item (`k:{...}` plus
  `.`), `finalizers` per value (`v:`), every other list as one atomic leaf.
  CRD `x-kubernetes-list-type: map` annotations are not read.
- Update/patch/create by a manager takes ownership of the leaves it changed
  (create: all leaves); other managers lose them. Server-set metadata is never
  owned.
- Apply: conflicts are leaves whose current value differs from the applied
  value and are owned by another manager (409 unless force=true; force moves
  ownership). Leaves this manager applied before and omits now are removed
  unless another manager also owns them.
"""

import json

from .clock import now
from .errors import ApiError
from .patch import MERGE_KEYS, SET_LISTS, merge_key_for

MISSING = object()
_SERVER_META = {"name", "namespace", "uid", "resourceVersion", "generation",
                "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp",
                "deletionGracePeriodSeconds", "generateName"}


def _key_token(item, key):
    return "k:" + json.dumps({key: item.get(key)}, separators=(",", ":"))


def fields_of(obj, subresource=None):
    """Leaf paths (tuples of fieldsV1 tokens) of an object."""
    out = set()
    if not isinstance(obj, dict):
        return out
    for k, v in obj.items():
        if k in ("apiVersion", "kind"):
            continue
        if subresource == "status" and k != "status":
            continue
        if subresource is None and k == "status":
            # status belongs to the status subresource's managers
            continue
        if k == "metadata" and isinstance(v, dict):
            for mk, mv in v.items():
                if mk in _SERVER_META:
                    continue
                _walk(("f:metadata", "f:" + mk), mk, mv, out)
            continue
        _walk(("f:" + k,), k, v, out)
    return out


def _walk(prefix, field, value, out):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _walk(prefix + ("f:" + k,), k, v, out)
    elif isinstance(value, list) and value and field in MERGE_KEYS and \
            all(isinstance(x, dict) for x in value):
        key = merge_key_for(field, value)
        for item in value:
            tok = _key_token(item, key)
            out.add(prefix + (tok, "."))
            for k, v in item.items():
                _walk(prefix + (tok, "f:" + k), k, v, out)
    elif isinstance(value, list) and value and field in SET_LISTS and \
            all(not isinstance(x, (dict, list)) for x in value):
        for item in value:
            out.add(prefix + ("v:" + json.dumps(item),))
    else:
        out.add(prefix)


def to_fieldsv1(paths):
    root = {}
    for p in sorted(paths):
        d = root
        for tok in p:
            d = d.setdefault(tok, {})
    return root


def from_fieldsv1(tree, prefix=()):
    out = set()
    if not isinstance(tree, dict):
        return out
    for tok, sub in tree.items():
        if sub:
            out |= from_fieldsv1(sub, prefix + (tok,))
        else:
            out.add(prefix + (tok,))
    return out


def get_path(obj, path):
    cur = obj
    for tok in path:
        if tok == ".":
            continue
        kind, rest = tok[:2], tok[2:]
        if kind == "f:":
            if not isinstance(cur, dict) or rest not in cur:
                return MISSING
            cur = cur[rest]
        elif kind == "k:":
            if not isinstance(cur, list):
                return MISSING
            want = json.loads(rest)
            for item in cur:
                if isinstance(item, dict) and all(item.get(a) == b for a, b in want.items()):
                    cur = item
                    break
            else:
                return MISSING
        elif kind == "v:":
            if not isinstance(cur, list):
                return MISSING
            val = json.loads(rest)
            if val not in cur:
                return MISSING
            cur = val
        else:
            return MISSING
    return cur


def remove_path(obj, path):
    """Remove one leaf (or list item for `k:...`/`.` and `v:` tokens)."""
    if not path:
        return
    if path[-1] == ".":
        path = path[:-1]
    parent = get_path(obj, path[:-1])
    tok = path[-1]
    kind, rest = tok[:2], tok[2:]
    if kind == "f:" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind == "k:" and isinstance(parent, list):
        want = json.loads(rest)
        parent[:] = [x for x in parent if not (isinstance(x, dict) and
                                               all(x.get(a) == b for a, b in want.items()))]
    elif kind == "v:" and isinstance(parent, list):
        val = json.loads(rest)
        parent[:] = [x for x in parent if x != val]


def path_text(path):
    parts = []
    for tok in path:
        if tok == ".":
            continue
        kind, rest = tok[:2], tok[2:]
        if kind == "f:":
            parts.append("." + rest)
        elif kind == "k:":
            want = json.loads(rest)
            parts.append("[" + ",".join("%s=%s" % (a, json.dumps(b)) for a, b in want.items()) + "]")
        elif kind == "v:":
            parts.append("[=%s]" % rest)
    return "".join(parts)


def _entries(obj):
    return list(((obj or {}).get("metadata") or {}).get("managedFields") or [])


def _owned(entry):
    return from_fieldsv1(entry.get("fieldsV1") or {})


def record_update(new, old, manager, api_version, subresource=None, operation="Update"):
    """Give `manager` the leaves that changed between old and new; mutates new."""
    if not manager:
        if old is not None:
            new.setdefault("metadata", {})["managedFields"] = _entries(old)
        return
    new_fields = fields_of(new, subresource)
    if old is None:
        changed = set(new_fields)
    else:
        old_fields = fields_of(old, subresource)
        changed = {p for p in new_fields if get_path(new, p) != get_path(old, p)}
        removed = old_fields - new_fields
        changed |= removed
    entries = _entries(old) if old is not None else []
    _assign(new, entries, manager, operation, api_version, subresource, changed,
            new_fields, replace=False)


def _assign(new, entries, manager, operation, api_version, subresource, take, new_fields,
            replace):
    """Set `manager`'s entry to `take` (replace) or add `take` to it; an Update
    (replace=False) also takes those fields away from the other managers."""
    out = []
    mine = set()
    for e in entries:
        if (e.get("subresource") or None) != subresource:
            out.append(e)
            continue
        owned = _owned(e)
        if e.get("manager") == manager and e.get("operation") == operation:
            mine = owned
            continue
        owned = {p for p in owned if (replace or p not in take) and p in new_fields}
        if owned:
            e = dict(e)
            e["fieldsV1"] = to_fieldsv1(owned)
            out.append(e)
    mine = set(take) if replace else ((mine & new_fields) | (set(take) & new_fields))
    if mine:
        entry = {"manager": manager, "operation": operation, "apiVersion": api_version,
                 "time": now(), "fieldsType": "FieldsV1", "fieldsV1": to_fieldsv1(mine)}
        if subresource:
            entry["subresource"] = subresource
        out.append(entry)
    new.setdefault("metadata", {})["managedFields"] = out


def apply(current, applied, manager, api_version, force, merge, subresource=None):
    """Server-side apply of `applied` onto `current` (None = create).

    `merge(base, patch)` merges maps recursively and lists by merge key.
    Returns the new object (managedFields set). Raises 409 on conflicts.
    """
    applied_fields = fields_of(applied, subresource)
    if current is None:
        new = merge({}, applied)
        _assign(new, [], manager, "Apply", api_version, subresource, applied_fields,
                fields_of(new, subresource), replace=True)
        return new
    entries = _entries(current)
    previous = set()
    others = {}
    for e in entries:
        if (e.get("subresource") or None) != subresource:
            continue
        if e.get("manager") == manager and e.get("operation") == "Apply":
            previous = _owned(e)
        elif e.get("manager") != manager:
            for p in _owned(e):
                others.setdefault(p, []).append(e)
    conflicts = []
    for p in sorted(applied_fields):
        if p[-1] == ".":
            continue
        if p in others and get_path(current, p) != get_path(applied, p):
            conflicts.append((p, others[p]))
    if conflicts and not force:
        raise _conflict_error(conflicts)
    new = merge(current, _strip_meta(applied))
    for p in previous - applied_fields:
        if p not in others:
            remove_path(new, p)
    taken = {p for p, _ in conflicts}
    kept = []
    for e in entries:
        if (e.get("subresource") or None) == subresource and e.get("manager") != manager:
            owned = _owned(e) - taken
            if not owned:
                continue
            e = dict(e)
            e["fieldsV1"] = to_fieldsv1(owned)
        kept.append(e)
    _assign(new, kept, manager, "Apply", api_version, subresource, applied_fields,
            fields_of(new, subresource), replace=True)
    return new


def _strip_meta(applied):
    applied = dict(applied)
    meta = dict(applied.get("metadata") or {})
    for k in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"):
        meta.pop(k, None)
    applied["metadata"] = meta
    return applied


def _conflict_error(conflicts):
    causes = []
    lines = []
    by_manager = {}
    for p, entries in conflicts:
        for e in entries:
            by_manager.setdefault((e.get("manager"), e.get("apiVersion")), []).append(p)
            causes.append({"reason": "FieldManagerConflict",
                           "message": 'conflict with "%s" using %s' % (e.get("manager"),
                                                                         e.get("apiVersion")),
                           "field": path_text(p)})
    n = len(causes)
    if n == 1:
        c = causes[0]
        msg = "Apply failed with 1 conflict: %s: %s" % (c["message"], c["field"])
    else:
        for (mgr, ver), paths in by_manager.items():
            lines.append('conflicts with "%s" using %s:' % (mgr, ver))
            lines.extend("- " + path_text(p) for p in paths)
        msg = "Apply failed with %d conflicts: %s" % (n, "\n".join(lines))
    return ApiError(409, "Conflict", msg, {"causes": causes})
