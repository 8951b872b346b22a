# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one converge engine of the collection: plan, diff, apply, prune.

    engine = Converge(kube, strategy, check_mode=..., diff=..., workers=8)
    live = engine.read([Scope(api_version, kind, namespace, label_selector), ...])   # one LIST each
    changes = engine.plan(desired, live, prunable=None)     # [Change], in the order of `desired`
    engine.apply(changes)                                   # one write per object that differs
    result = engine.result(changes)      # {changed, objects: [{kind, name, namespace, action}], diff, requests}

A domain plugs in its rules as a Strategy: how desired and live compare and which requests
turn one into the other (compare), what a diff shows (view), how an object is created
(POST or server-side apply), the field manager, the label that marks objects as ours (only
those are ever pruned), and whether check mode sends server dry runs or nothing at all.
Actions are always one of ACTIONS, whatever the requests were (a RoleBinding whose roleRef
changed is deleted and created again: `updated`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import overrides
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError

CREATED, UPDATED, UNCHANGED, DELETED = "created", "updated", "unchanged", "deleted"
ACTIONS = (CREATED, UPDATED, UNCHANGED, DELETED)
MASK = "********"          # what a diff shows of a Secret's values
MANAGED_BY = (upstream.LABEL_MANAGED_BY, upstream.MANAGED_BY)    # tenants, queues, quota
PART_OF = (upstream.LABEL_PART_OF, upstream.PART_OF_VALUE)        # monitoring
CONTENT_KEYS = ("spec", "data")
DRY_RUN, NO_WRITE = "dry-run", "no-write"   # what check mode does with a write

# One LIST: label_selector None lists every object of the kind (in the namespace, or all).
Scope = namedtuple("Scope", "api_version kind namespace label_selector")


def key(obj):
    meta = obj.get("metadata") or {}
    return obj.get("kind"), meta.get("namespace"), meta.get("name")


def ref(obj):
    kind, namespace, name = key(obj)
    return "%s %s/%s" % (kind, namespace, name) if namespace else "%s %s" % (kind, name)


def target(api_version, kind, name, namespace=None):
    """The reference of an object to write (a LIST's items may lack apiVersion and kind)."""
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def selector(label):
    return "%s=%s" % label


def carries(obj, label):
    """True when obj has the label (name, value): ownership, for pruning and adoption."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(label[0]) == label[1]


def with_label(obj, label):
    """A copy of obj with the label set unless the object sets it already."""
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    labels = dict(meta.get("labels") or {})
    labels.setdefault(label[0], label[1])
    meta["labels"] = labels
    out["metadata"] = meta
    return out


def mask_secret(view, kind):
    if kind != "Secret" or not isinstance(view, dict):
        return view
    out = dict(view)
    for field in ("data", "stringData"):
        if isinstance(out.get(field), dict):
            out[field] = dict((k, MASK) for k in out[field])
    return out


def metadata_differs(desired, live, parts=("labels", "annotations")):
    """Names of the metadata parts where a label/annotation we set has another value live."""
    out = []
    for part in parts:
        want = (desired.get("metadata") or {}).get(part) or {}
        have = (live.get("metadata") or {}).get(part) or {}
        if any(have.get(k) != v for k, v in want.items()):
            out.append("metadata.%s" % part)
    return out


class Counted(object):
    """A Kube that counts the requests it is asked for, by verb (thread-safe); the rest passes through."""

    VERBS = {"get": "GET", "list": "LIST", "create": "CREATE", "patch": "PATCH",
             "apply": "APPLY", "delete": "DELETE", "evict": "CREATE", "log": "GET"}

    def __init__(self, kube):
        self.kube = kube
        self.requests = {}
        self._lock = threading.Lock()

    def count(self, verb):
        with self._lock:
            self.requests[verb] = self.requests.get(verb, 0) + 1

    def __getattr__(self, name):
        target = getattr(self.kube, name)
        verb = self.VERBS.get(name)
        if verb is None:
            return target

        def counted(*args, **kwargs):
            self.count(verb)
            return target(*args, **kwargs)
        return counted


class Change(object):
    """One object's part of a plan: its action, the desired and live object, the requests
    (("create",), ("apply",), ("patch", body), ("delete",)) and the fields that differ."""

    __slots__ = ("action", "desired", "live", "writes", "fields", "response", "error", "done")

    def __init__(self, action, desired=None, live=None, writes=(), fields=()):
        if action not in ACTIONS:
            raise ValueError("action %r is not one of %s" % (action, ", ".join(ACTIONS)))
        self.action = action
        self.desired = desired
        self.live = live
        self.writes = list(writes)
        self.fields = list(fields)
        self.response = None
        self.error = None
        self.done = action == UNCHANGED

    @property
    def obj(self):
        return self.desired if self.desired is not None else self.live

    def row(self):
        kind, namespace, name = key(self.obj)
        out = {"kind": kind, "name": name}
        if namespace:
            out["namespace"] = namespace
        out["action"] = self.action
        return out


class Strategy(object):
    """A domain's rules. The defaults: labels/annotations we set and spec/data compared exactly,
    server-side apply to create and update, server dry runs in check mode."""

    owner = MANAGED_BY          # the label of our objects: nothing else is pruned
    field_manager = "skaffon.gpu_platform"
    create = "apply"            # "create" (POST) or "apply" (server-side apply)
    check_mode = DRY_RUN        # or NO_WRITE: check mode sends nothing
    honour_overrides = False    # keep values a quota change raised (overrides.py)
    content_keys = CONTENT_KEYS

    def compare(self, desired, live):
        """(writes, fields) turning live into desired; ([], []) when live matches."""
        fields = metadata_differs(desired, live)
        fields += [k for k in self.content_keys if k in desired and desired.get(k) != live.get(k)]
        return ([("apply",)] if fields else []), fields

    def view(self, obj, desired=None):
        """What a diff shows of obj (desired: the object it is compared with, for a live one)."""
        if obj is None:
            return {}
        meta = obj.get("metadata") or {}
        out = {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                            "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}}}
        for k in self.content_keys:
            if k in obj:
                out[k] = obj[k]
        return out

    def after(self, change):
        """The object a diff shows after the change: what we sent (a strategy may prefer the answer)."""
        return change.desired

    def skip_error(self, change, err, dry_run):
        """True when a failed write is no failure (e.g. a dry run into a namespace not created yet)."""
        return False


class Converge(object):
    def __init__(self, kube, strategy, check_mode=False, diff=False, workers=8):
        self.kube = kube if isinstance(kube, Counted) else Counted(kube)
        self.strategy = strategy
        self.check_mode = check_mode
        self.want_diff = diff
        self.workers = max(1, int(workers or 1))
        self.overrides = []     # notes of values a quota change raised (strategy.honour_overrides)

    @property
    def requests(self):
        return dict(self.kube.requests)

    # -- plan ---------------------------------------------------------------------------
    def read(self, scopes):
        """{(kind, namespace, name): live} from one LIST per scope."""
        live = {}
        for scope in scopes:
            items, dummy = self.kube.list(scope.api_version, scope.kind, namespace=scope.namespace,
                                          label_selector=scope.label_selector)
            for item in items:
                item.setdefault("kind", scope.kind)
                item.setdefault("apiVersion", scope.api_version)
                live[key(item)] = item
        return live

    def plan(self, desired, live, prunable=None, get_missing=False):
        """[Change] for every desired object (in order), then deletes of live objects that carry
        our label, are not desired and that prunable(obj) accepts (None: nothing is pruned).
        get_missing: GET a desired object the (label-selected) LIST did not return."""
        changes, wanted = [], set()
        for obj in desired:
            k = key(obj)
            wanted.add(k)
            current = live.get(k)
            if current is None and get_missing:
                current = self.kube.get(obj["apiVersion"], k[0], k[2], k[1])
            if current is None:
                changes.append(Change(CREATED, obj, None, [(self.strategy.create,)]))
                continue
            if self.strategy.honour_overrides:
                obj, notes = overrides.honour(obj, current)
                self.overrides.extend(notes)
            writes, fields = self.strategy.compare(obj, current)
            changes.append(Change(UPDATED if writes else UNCHANGED, obj, current, writes, fields))
        if prunable is not None:
            for k in sorted(live, key=lambda k: (k[0], k[1] or "", k[2])):
                obj = live[k]
                if k not in wanted and carries(obj, self.strategy.owner) and prunable(obj):
                    changes.append(Change(DELETED, None, obj, [("delete",)]))
        return changes

    # -- apply --------------------------------------------------------------------------
    def dry_run(self):
        return bool(self.check_mode) and self.strategy.check_mode == DRY_RUN

    def write(self, change):
        """Send the change's requests in order; the last answer is change.response."""
        if self.check_mode and self.strategy.check_mode == NO_WRITE:
            return None
        dry = self.dry_run()
        kube = self.kube
        for request in change.writes:
            verb = request[0]
            if verb == "create":
                change.response = kube.create(change.desired, dry_run=dry)
            elif verb == "apply":
                change.response = kube.apply(change.desired, self.strategy.field_manager, force=True, dry_run=dry)
            elif verb == "patch":
                obj = change.obj
                kind, namespace, name = key(obj)
                change.response = kube.patch(obj["apiVersion"], kind, name, request[1], namespace=namespace,
                                             dry_run=dry)
            elif verb == "delete":
                obj = change.live if change.live is not None else change.desired
                kind, namespace, name = key(obj)
                change.response = kube.delete(obj["apiVersion"], kind, name, namespace, dry_run=dry)
            else:
                raise ValueError("unknown write %r" % (verb,))
        return change.response

    def update(self, obj, patch):
        """One merge patch of obj outside a plan (a step of the caller's own ordered change, e.g. a
        quota change and its undo): the Change, written (or, in check mode, as the strategy says)."""
        change = Change(UPDATED, None, obj, [("patch", patch)])
        self.write(change)
        change.done = True
        return change

    def _one(self, change, failed_namespaces):
        if change.obj["metadata"].get("namespace") in failed_namespaces:
            change.error = "skipped: its namespace could not be written"
            return change
        try:
            self.write(change)
            change.done = True
        except ApiError as err:
            if self.strategy.skip_error(change, err, self.dry_run()):
                change.done = True
            else:
                change.error = err
        return change

    def apply(self, changes, fail_fast=False):
        """Write every change that is not unchanged: Namespaces first, then the other objects,
        deletes last; objects of a namespace that failed are skipped. Parallel within
        `workers` (1: in the given order). fail_fast: the first ApiError is raised as is.
        Returns the error texts ("<ref>: <error>")."""
        pending = [c for c in changes if c.action != UNCHANGED]
        if self.check_mode and self.strategy.check_mode == NO_WRITE:
            for change in pending:
                change.done = True
            return []
        namespaces = [c for c in pending if c.action != DELETED and c.obj["kind"] == "Namespace"]
        rest = [c for c in pending if c.action != DELETED and c.obj["kind"] != "Namespace"]
        deletes = [c for c in pending if c.action == DELETED]
        errors, failed = [], set()
        for batch in (namespaces, rest, deletes):
            if not batch:
                continue
            if self.workers == 1 or len(batch) == 1:
                done = []
                for change in batch:
                    done.append(self._one(change, failed))
                    if fail_fast and isinstance(change.error, ApiError):
                        raise change.error
            else:
                with ThreadPoolExecutor(max_workers=min(self.workers, len(batch))) as pool:
                    done = list(pool.map(lambda c: self._one(c, failed), batch))
            for change in done:
                if change.error is None:
                    continue
                if fail_fast and isinstance(change.error, ApiError):
                    raise change.error
                errors.append("%s: %s" % (ref(change.obj), change.error))
                if change.action != DELETED and change.obj["kind"] == "Namespace":
                    failed.add(change.obj["metadata"]["name"])
        return errors

    # -- result -------------------------------------------------------------------------
    def diff(self, change):
        view = self.strategy.view
        after = self.strategy.after(change)
        kind = change.obj["kind"]
        return {"before_header": ref(change.obj), "after_header": ref(change.obj),
                "before": mask_secret(view(change.live, change.desired) if change.live is not None else {}, kind),
                "after": mask_secret(view(after) if after is not None else {}, kind)}

    def result(self, changes):
        """The one return shape: {changed, objects: [{kind, name, namespace, action}], requests, diff}.
        Only changes that were made (or in check mode would be) are listed, in plan order."""
        made = [c for c in changes if c.done]
        out = {"changed": any(c.action != UNCHANGED for c in made),
               "objects": [c.row() for c in made], "requests": self.requests}
        if self.want_diff:
            out["diff"] = [self.diff(c) for c in made if c.action != UNCHANGED]
        return out


def converge(kube, desired, strategy, scopes=None, check_mode=False, diff=False, workers=8, prunable=None,
             get_missing=False, fail_fast=True):
    """read + plan + apply + result for callers without rules between the steps.
    scopes default: one LIST per (apiVersion, kind, namespace) of `desired`, by the strategy's owner label
    when get_missing (a same-named object without it is read by GET), else unfiltered."""
    engine = Converge(kube, strategy, check_mode=check_mode, diff=diff, workers=workers)
    if scopes is None:
        scopes = scopes_of(desired, selector(strategy.owner) if get_missing else None)
    changes = engine.plan(desired, engine.read(scopes), prunable=prunable, get_missing=get_missing)
    engine.apply(changes, fail_fast=fail_fast)
    return engine.result(changes)


def scopes_of(desired, label_selector=None, namespaced=True):
    """One Scope per (apiVersion, kind[, namespace]) of the desired objects, in their order."""
    out = []
    for obj in desired:
        scope = Scope(obj["apiVersion"], obj["kind"], (obj.get("metadata") or {}).get("namespace") if namespaced
                      else None, label_selector)
        if scope not in out:
            out.append(scope)
    return out
