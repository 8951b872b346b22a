# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values a quota change raised on a live object, kept until the inventory catches up.

The quota job (quota_change) cannot write the inventory (in AWX it is a Git checkout), so it
records on each object it raised an annotation listing the paths and values it set. The
roles that converge from the inventory (tenants, queues) pass their desired objects through
honour(): where the inventory asks for less than the job set, the raised value stays and a
note says so; where the inventory asks for as much or more, the entry is dropped (the
annotation disappears with the last entry). Lowering below a recorded value needs the quota
job (quota_force), never a silent take-back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.quantity import QuantityError, parse_quantity

ANNOTATION = "gpu-platform.skaffon.io/quota-override"


def entries(obj):
    text = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    try:
        data = json.loads(text) if text else []
    except ValueError:
        return []
    return [e for e in data if isinstance(e, dict) and isinstance(e.get("path"), list)] if isinstance(data, list) else []


def _step(node, key):
    if isinstance(key, dict) and isinstance(node, list):   # {"name": x}: the list element with that name
        for item in node:
            if isinstance(item, dict) and all(item.get(k) == v for k, v in key.items()):
                return item
        return None
    if isinstance(key, int) and isinstance(node, list):
        return node[key] if -len(node) <= key < len(node) else None
    if isinstance(node, dict):
        return node.get(key)
    return None


def get_path(obj, path):
    node = obj
    for key in path:
        node = _step(node, key)
        if node is None:
            return None
    return node


def set_path(obj, path, value):
    node = obj
    for key in path[:-1]:
        nxt = _step(node, key)
        if nxt is None:
            if not isinstance(node, dict) or isinstance(key, (dict, int)):
                return False
            nxt = node[key] = {}
        node = nxt
    if isinstance(node, dict) and not isinstance(path[-1], (dict, int)):
        node[path[-1]] = value
        return True
    return False


def _number(value):
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def _label(path):
    return ".".join(("[%s]" % ",".join("%s=%s" % kv for kv in p.items())) if isinstance(p, dict) else str(p)
                    for p in path)


def honour(desired, live):
    """(desired with the raised values kept, notes) for one object."""
    recorded = entries(live)
    if not recorded:
        return desired, []
    out = copy.deepcopy(desired)
    kept, notes = [], []
    meta = desired.get("metadata") or {}
    name = "%s %s" % (desired.get("kind"), "/".join(x for x in (meta.get("namespace"), meta.get("name")) if x))
    for entry in recorded:
        want = get_path(out, entry["path"])
        raised, inventory = _number(entry.get("value")), _number(want)
        if raised is None or (inventory is not None and inventory >= raised):
            notes.append("%s %s: the inventory (%s) has caught up with the quota change %s (%s)" % (
                name, _label(entry["path"]), want, entry.get("ticket"), entry.get("value")))
            continue
        if set_path(out, entry["path"], json.loads(json.dumps(entry["value"]))):
            kept.append(entry)
            notes.append("%s %s: the inventory says %s, the cluster keeps %s from the quota change %s (%s); "
                         "update the inventory" % (name, _label(entry["path"]), want, entry.get("value"),
                                                   entry.get("ticket"), entry.get("at")))
    if kept:
        meta = out.setdefault("metadata", {})
        meta.setdefault("annotations", {})[ANNOTATION] = json.dumps(kept, sort_keys=True)
    return out, notes


def record(obj, path, value, ticket, at):
    """The annotation value after recording one more raised value on `obj` (one entry per path)."""
    kept = [e for e in entries(obj) if e["path"] != path]
    kept.append({"path": path, "value": value, "ticket": ticket, "at": at})
    return json.dumps(kept, sort_keys=True)
