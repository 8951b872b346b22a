# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one stand-in for core.kube.Kube in the unit tests: an in-memory cluster with Kube's signatures.

    kube = FakeKube([obj, ...], served=True, fail={("CREATE", "Namespace", "team-b"): 500})
    kube.calls       # [Call(verb, kind, name, namespace, label_selector, dry_run)], verbs as Kube names them
    kube.writes()    # the CREATE/PATCH/APPLY/DELETE calls

Every public method of Kube that talks to the API exists here with the same parameters
(test_fakekube.py compares the signatures), so a test cannot pass against a call the real
client would refuse. Objects are stored by (kind, namespace, name); writes change the store
unless they are dry runs, as the API server does. `fail` maps (VERB, kind, name), (VERB, kind)
or VERB to an HTTP status or an ApiError raised for that call.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
from collections import namedtuple

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import MERGE_PATCH

Call = namedtuple("Call", "verb kind name namespace label_selector dry_run")
WRITES = ("CREATE", "PATCH", "APPLY", "DELETE")
REASONS = {403: "Forbidden", 404: "Not Found", 409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests",
           500: "Internal Server Error"}


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _terms(selector):
    """(key, op, value) of each term of an equality-based selector: k=v, k==v, k!=v, k, !k."""
    out = []
    for term in (selector or "").split(","):
        term = term.strip()
        if not term:
            continue
        if " in " in term or " notin " in term or "(" in term:
            raise NotImplementedError("FakeKube reads equality-based selectors only: %r" % term)
        for op in ("!=", "==", "="):
            if op in term:
                key, value = term.split(op, 1)
                out.append((key.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            out.append((term.lstrip("!"), "!exists" if term.startswith("!") else "exists", None))
    return out


def _field(obj, path):
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _selected(obj, label_selector, field_selector=None):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key, op, value in _terms(label_selector):
        if (op == "=" and labels.get(key) != value) or (op == "!=" and labels.get(key) == value) or (
                op == "exists" and key not in labels) or (op == "!exists" and key in labels):
            return False
    for path, op, value in _terms(field_selector):
        if op not in ("=", "!=") or (_field(obj, path) == value) != (op == "="):
            return False
    return True


class FakeKube(object):
    def __init__(self, objects=(), served=True, fail=None, logs=None):
        self.objects = {}
        for obj in objects:
            self.put(obj)
        self._served = served       # True/False, or the kinds that are served
        self.fail = dict(fail or {})
        self.logs = dict(logs or {})   # (namespace, pod name) -> text
        self.calls = []

    # -- the store and the record ----------------------------------------------------------
    @staticmethod
    def key(obj):
        meta = obj.get("metadata") or {}
        return obj.get("kind"), meta.get("namespace"), meta.get("name")

    def put(self, obj):
        self.objects[self.key(obj)] = copy.deepcopy(obj)

    def writes(self):
        return [c for c in self.calls if c.verb in WRITES]

    def _call(self, verb, kind, name=None, namespace=None, label_selector=None, dry_run=False):
        self.calls.append(Call(verb, kind, name, namespace, label_selector, dry_run))
        for key in ((verb, kind, name), (verb, kind), verb):
            failure = self.fail.get(key)
            if failure is None:
                continue
            if isinstance(failure, Exception):
                raise failure
            raise ApiError(verb, kind, name, namespace, status=failure, reason=REASONS.get(failure), message="boom")

    # -- Kube's reads ----------------------------------------------------------------------
    def served(self, api_version, kind):
        self.calls.append(Call("SERVED", kind, None, None, None, False))
        if isinstance(self._served, bool):
            return self._served
        return kind in self._served

    def get(self, api_version, kind, name, namespace=None):
        self._call("GET", kind, name, namespace)
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        self._call("LIST", kind, None, namespace, label_selector)
        items = [copy.deepcopy(o) for (k, ns, _name), o in sorted(self.objects.items(), key=lambda kv: (
            kv[0][0], kv[0][1] or "", kv[0][2])) if k == kind and (namespace is None or ns == namespace)]
        return [o for o in items if _selected(o, label_selector, field_selector)], "1"

    def list_if_served(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        if not self.served(api_version, kind):
            return [], None
        return self.list(api_version, kind, namespace, label_selector, field_selector)

    def log(self, name, namespace, container=None, tail_lines=None):
        self._call("GET", "Pod log", name, namespace)
        return self.logs.get((namespace, name), "")

    # -- Kube's writes -----------------------------------------------------------------------
    def evict(self, name, namespace, dry_run=False):
        self._call("CREATE", "Pod eviction", name, namespace, dry_run=dry_run)
        if not dry_run:
            self.objects.pop(("Pod", namespace, name), None)
        return {}

    def create(self, body, dry_run=False):
        kind, namespace, name = self.key(body)
        self._call("CREATE", kind, name, namespace, dry_run=dry_run)
        if (kind, namespace, name) in self.objects:
            raise ApiError("CREATE", kind, name, namespace, status=409, reason="Conflict",
                           message='%s "%s" already exists' % (kind, name))
        if not dry_run:
            self.put(body)
        return copy.deepcopy(body)

    def patch(self, api_version, kind, name, patch, namespace=None, content_type=MERGE_PATCH, dry_run=False):
        self._call("PATCH", kind, name, namespace, dry_run=dry_run)
        current = self.objects.get((kind, namespace, name))
        if current is None:
            raise ApiError("PATCH", kind, name, namespace, status=404, reason="Not Found",
                           message='%s "%s" not found' % (kind, name))
        after = merge_patch(current, patch) if content_type == MERGE_PATCH else current
        if not dry_run:
            self.objects[(kind, namespace, name)] = after
        return copy.deepcopy(after)

    def apply(self, body, field_manager, force=True, dry_run=False):
        kind, namespace, name = self.key(body)
        self._call("APPLY", kind, name, namespace, dry_run=dry_run)
        current = self.objects.get((kind, namespace, name))
        after = copy.deepcopy(body)
        if current is not None and "status" in current:
            after["status"] = copy.deepcopy(current["status"])
        if not dry_run:
            self.objects[(kind, namespace, name)] = after
        return copy.deepcopy(after)

    def delete(self, api_version, kind, name, namespace=None, propagation="Background", dry_run=False):
        self._call("DELETE", kind, name, namespace, dry_run=dry_run)
        current = self.objects.get((kind, namespace, name))
        if current is not None and not dry_run:
            del self.objects[(kind, namespace, name)]
        return copy.deepcopy(current)
