# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge the monitoring objects (PrometheusRule, dashboard ConfigMaps) with the converge engine
(core/converge.py): one LIST per kind and namespace (our part-of label), one server-side apply
per object that differs, nothing written when all match. A same-named object without our label
is read by GET and taken over by the apply."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import converge as engine
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError

FIELD_MANAGER = "skaffon.gpu_platform"


class MonitoringStrategy(engine.Strategy):
    """The engine's defaults (labels/annotations we set and spec/data compared exactly, server-side
    apply, server dry runs in check mode); our objects carry the part-of label."""

    owner = engine.PART_OF

    def __init__(self, field_manager=FIELD_MANAGER):
        self.field_manager = field_manager


def differs(desired, current):
    """True when applying desired would change current (labels/annotations we set, content)."""
    return current is None or bool(MonitoringStrategy().compare(desired, current)[0])


def _key(obj):
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), meta.get("name")


def converge(kube, objects, check_mode=False, field_manager=FIELD_MANAGER, diff=True):
    """-> the engine's result ({changed, objects, requests[, diff]}). Validates all objects before any call."""
    seen = set()
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict) or None in _key(obj):
            raise DomainError("objects[%d]: needs apiVersion, kind, metadata.name and metadata.namespace "
                              "(render them with the skaffon.gpu_platform.monitoring_objects filter)" % i,
                              index=i)
        if _key(obj) in seen:
            raise DomainError("objects[%d]: %s %s/%s is listed twice" % ((i,) + _key(obj)[1:]), index=i)
        seen.add(_key(obj))
    return engine.converge(kube, objects, MonitoringStrategy(field_manager), check_mode=check_mode, diff=diff,
                           get_missing=True)
