# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge the monitoring objects (PrometheusRule, dashboard ConfigMaps): one LIST per kind and
namespace, one server-side apply per object that differs, nothing written when all match."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream as U
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError

FIELD_MANAGER = "skaffon.gpu_platform"
CONTENT_KEYS = ("spec", "data")   # what the objects carry besides metadata


def _key(obj):
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), meta.get("name")


def differs(desired, current):
    """True when applying desired would change current (labels/annotations we set, content)."""
    if current is None:
        return True
    for part in ("labels", "annotations"):
        want = (desired["metadata"].get(part) or {})
        have = (current["metadata"].get(part) or {})
        if any(have.get(k) != v for k, v in want.items()):
            return True
    return any(desired.get(k) != current.get(k) for k in CONTENT_KEYS if k in desired)


def _view(obj):
    if obj is None:
        return {}
    meta = obj["metadata"]
    out = {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                        "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}}}
    for k in CONTENT_KEYS:
        if k in obj:
            out[k] = obj[k]
    return out


def converge(kube, objects, check_mode=False, field_manager=FIELD_MANAGER):
    """-> (changed, [{kind, name, namespace, action}], diffs). Validates all objects before any call."""
    seen = set()
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict) or None in _key(obj):
            raise DomainError("objects[%d]: needs apiVersion, kind, metadata.name and metadata.namespace "
                              "(render them with the skaffon.gpu_platform.monitoring_objects filter)" % i,
                              index=i)
        if _key(obj) in seen:
            raise DomainError("objects[%d]: %s %s/%s is listed twice" % ((i,) + _key(obj)[1:]), index=i)
        seen.add(_key(obj))
    groups = {}
    for obj in objects:
        groups.setdefault(_key(obj)[:3], []).append(obj)
    results, diffs, changed = [], [], False
    for (api_version, kind, namespace), wanted in groups.items():
        items, _rv = kube.list(api_version, kind, namespace=namespace,
                               label_selector="%s=%s" % (U.LABEL_PART_OF, U.PART_OF_VALUE))
        current = dict((o["metadata"]["name"], o) for o in items)
        for obj in wanted:
            name = obj["metadata"]["name"]
            have = current.get(name)
            if have is None:
                # a same-named object we did not label: read it, apply takes it over
                have = kube.get(api_version, kind, name, namespace)
            if not differs(obj, have):
                results.append({"kind": kind, "name": name, "namespace": namespace, "action": "unchanged"})
                continue
            changed = True
            action = "created" if have is None else "updated"
            kube.apply(obj, field_manager, force=True, dry_run=check_mode)
            results.append({"kind": kind, "name": name, "namespace": namespace, "action": action})
            diffs.append({"before": _view(have), "after": _view(obj),
                          "before_header": "%s %s/%s" % (kind, namespace, name),
                          "after_header": "%s %s/%s" % (kind, namespace, name)})
    return changed, results, diffs
