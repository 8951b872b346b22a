# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge the queue objects rendered by queues.render() with the converge engine (core/converge.py).

The queue rules plugged into it: every kind must be served (the backend's CRDs installed)
before anything is written (or, allow_missing_kinds, reported as to be created); an object
is unchanged when everything we render is already there (`contains`: the server adds
defaults, e.g. KAI `priority`, Kueue `flavorFungibility`); a changed one is written with
server-side apply under our field manager, so a key we stop rendering (a dropped
borrowingLimit) is removed too; a quota lowered below what the queue uses is refused
unless allowed; writes go one by one in the given order (parents before children).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import converge as engine
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import overrides
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues.objects import quantity
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import GPU_RESOURCE

FIELD_MANAGER = "skaffon.gpu_platform.queues"
BACKEND_HINT = {
    "kai": "install the KAI Scheduler first (roles/queues with queues_install: true installs the chart)",
    "kueue": "install Kueue first (roles/queues with queues_install: true installs the chart)",
}


def contains(have, want):
    """True when every key/value of want is in have (lists: same length, pairwise)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and contains(have[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(
            contains(h, w) for h, w in zip(have, want))
    if isinstance(want, bool) or isinstance(have, bool):
        return isinstance(want, bool) and isinstance(have, bool) and have == want
    if isinstance(want, (int, float)) and isinstance(have, (int, float)):
        return float(have) == float(want)
    return have == want


class QueueStrategy(engine.Strategy):
    """Subset compare, server-side apply under the queues' field manager, values a quota change
    raised kept (and their record dropped once the inventory caught up)."""

    field_manager = FIELD_MANAGER
    honour_overrides = True

    def compare(self, desired, live):
        writes, fields = [], []
        if overrides.entries(live) and not overrides.entries(desired):
            # the inventory caught up with every value a quota change raised: drop the record
            # (a merge patch: the quota job wrote it, so server-side apply would leave it)
            writes.append(("patch", {"metadata": {"annotations": {overrides.ANNOTATION: None}}}))
            fields.append("metadata.annotations")
        meta = desired["metadata"]
        owned_meta = {"labels": meta["labels"]}
        if meta.get("annotations"):
            owned_meta["annotations"] = meta["annotations"]
        if not contains(live, {"metadata": owned_meta, "spec": desired.get("spec", {})}):
            writes.append(("apply",))
            fields += [f for f in ("metadata", "spec") if not contains(
                live.get(f), owned_meta if f == "metadata" else desired.get("spec", {}))]
        return writes, fields

    def view(self, obj, desired=None):
        """What a diff shows: the fields we manage."""
        if obj is None:
            return {}
        meta = obj.get("metadata") or {}
        out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
               "metadata": dict((k, meta[k]) for k in ("name", "namespace", "labels") if k in meta)}
        if "spec" in obj:
            out["spec"] = obj["spec"]
        return out

    def after(self, change):
        return change.response or change.desired    # the server's answer shows its defaults too

    def skip_error(self, change, err, dry_run):
        # check mode before the team namespace exists (the tenants role creates it): report only
        return dry_run and err.status == 404 and bool(change.obj["metadata"].get("namespace"))


def _num(value):
    try:
        return quantity("status", value)
    except DomainError:
        return 0.0


def quota_decreases(have, want):
    """Lowered quotas/limits below what the queue uses now: [(what, new, used)].

    Neither KAI nor Kueue evicts running work when a quota goes down, so such a
    change leaves the queue over its quota until enough of its work ends on its own.
    """
    out = []
    status = have.get("status") or {}
    if want["kind"] == "Queue":
        used = _num((status.get("allocated") or {}).get(GPU_RESOURCE))
        old = ((have.get("spec") or {}).get("resources") or {}).get("gpu") or {}
        new = ((want.get("spec") or {}).get("resources") or {}).get("gpu") or {}
        for key in ("quota", "limit"):
            n, o = new.get(key), old.get(key)
            if n is None or n == -1 or (o is not None and o != -1 and n >= o):
                continue
            if n < used:
                out.append(("gpu %s" % key, n, used))
    elif want["kind"] == "ClusterQueue":
        usage = {}
        for fl in status.get("flavorsUsage") or []:
            for r in fl.get("resources") or []:
                usage[(fl.get("name"), r.get("name"))] = _num(r.get("total"))
        olds = {}
        for rg in (have.get("spec") or {}).get("resourceGroups") or []:
            for fl in rg.get("flavors") or []:
                for r in fl.get("resources") or []:
                    olds[(fl["name"], r["name"])] = _num(r.get("nominalQuota"))
        for rg in want["spec"].get("resourceGroups") or []:
            for fl in rg.get("flavors") or []:
                for r in fl.get("resources") or []:
                    key = (fl["name"], r["name"])
                    n = _num(r.get("nominalQuota"))
                    if key in olds and n < olds[key] and n < usage.get(key, 0.0):
                        out.append(("nominalQuota of %s in flavor %s" % key[::-1], r.get("nominalQuota"),
                                    usage[key]))
    return out


def refuse_decreases(changes):
    lowered = []
    for change in changes:
        if change.live is None or change.desired is None:
            continue
        for what, new, used in quota_decreases(change.live, change.desired):
            lowered.append("%s %s: %s %s is below the %s in use" % (
                change.desired["kind"], change.desired["metadata"]["name"], what, new, _fmt(used)))
    if lowered:
        raise DomainError(
            "queues_allow_quota_decrease: quota lowered below current use (%s): neither KAI nor Kueue evicts "
            "running work, so the queue would stay over its quota; drain the work first, or set "
            "queues_allow_quota_decrease: true to lower it anyway" % "; ".join(lowered), lowered=lowered)


def converge(kube, backend, objects, check_mode=False, allow_missing_kinds=False, allow_quota_decrease=False,
             diff=True):
    """-> the engine's result plus `overrides` (notes on values a quota change raised)."""
    desired = [engine.with_label(o, engine.MANAGED_BY) for o in objects]
    run = engine.Converge(kube, QueueStrategy(), check_mode=check_mode, diff=diff, workers=1)
    kinds = engine.scopes_of(desired, namespaced=False)
    missing = [s for s in kinds if not run.kube.served(s.api_version, s.kind)]
    later = []
    if missing and allow_missing_kinds:
        # check mode before the chart is installed: everything of those kinds would be created
        unserved = [(s.api_version, s.kind) for s in missing]
        later = [engine.Change(engine.CREATED, o) for o in desired if (o["apiVersion"], o["kind"]) in unserved]
        for change in later:
            change.done = True      # reported, never written
        desired = [o for o in desired if (o["apiVersion"], o["kind"]) not in unserved]
        kinds = [s for s in kinds if s not in missing]
        missing = []
    if missing:
        raise DomainError(
            "tenants_queue_backend: %s is chosen but the cluster does not serve %s: %s" % (
                backend, ", ".join("%s %s" % (s.kind, s.api_version) for s in missing),
                BACKEND_HINT.get(backend, "install the backend first")),
            missing=["%s/%s" % (s.api_version, s.kind) for s in missing])
    changes = run.plan(desired, run.read(kinds))
    if not allow_quota_decrease:
        refuse_decreases(changes)
    run.apply(changes, fail_fast=True)
    result = run.result(later + changes)
    result["overrides"] = run.overrides
    return result


def _fmt(v):
    return str(int(v)) if float(v).is_integer() else str(v)
