# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge the queue objects rendered by queues.render(): one LIST per kind, one write per change.

Every kind must be served (the backend's CRDs installed) before anything is
written. An object is unchanged when everything we render is already there
(the server adds defaults, e.g. KAI `priority`, Kueue `flavorFungibility`);
a changed one is written with server-side apply under our field manager, so
a key we stop rendering (a dropped borrowingLimit) is removed too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import overrides
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues.objects import quantity
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import GPU_RESOURCE

FIELD_MANAGER = "skaffon.gpu_platform.queues"
MANAGED_BY = ("app.kubernetes.io/managed-by", "skaffon.gpu_platform")
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


def _labelled(obj):
    obj = dict(obj)
    meta = dict(obj.get("metadata") or {})
    labels = dict(meta.get("labels") or {})
    labels.setdefault(MANAGED_BY[0], MANAGED_BY[1])
    meta["labels"] = labels
    obj["metadata"] = meta
    return obj


def _key(obj):
    meta = obj["metadata"]
    return (meta.get("namespace"), meta["name"])


def _view(obj):
    """What a diff shows: the fields we manage."""
    if obj is None:
        return {}
    meta = obj.get("metadata") or {}
    out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
           "metadata": dict((k, meta[k]) for k in ("name", "namespace", "labels") if k in meta)}
    if "spec" in obj:
        out["spec"] = obj["spec"]
    return out


def _num(value):
    try:
        return quantity("status", value)
    except DomainError:
        return 0.0


def quota_decreases(have, want):
    """Lowered quotas/limits below what the queue uses now: [(what, new, used)].

    Neither KAI nor Kueue evicts running work when a quota goes down, so such a
    change leaves the queue over its quota (FACTS.md, quota changes).
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


def converge(kube, backend, objects, check_mode=False, allow_missing_kinds=False, allow_quota_decrease=False):
    desired = [_labelled(o) for o in objects]
    kinds = []
    for o in desired:
        k = (o["apiVersion"], o["kind"])
        if k not in kinds:
            kinds.append(k)
    missing = [k for k in kinds if not kube.served(*k)]
    if missing and allow_missing_kinds:
        # check mode before the chart is installed: everything of those kinds would be created
        later = [o for o in desired if (o["apiVersion"], o["kind"]) in missing]
        results = [{"kind": o["kind"], "name": o["metadata"]["name"], "action": "create"} for o in later]
        diffs = [{"before": {}, "after": _view(o)} for o in later]
        desired = [o for o in desired if (o["apiVersion"], o["kind"]) not in missing]
        kinds = [k for k in kinds if k not in missing]
        missing = []
    else:
        results, diffs = [], []
    if missing:
        raise DomainError(
            "tenants_queue_backend: %s is chosen but the cluster does not serve %s: %s" % (
                backend, ", ".join("%s %s" % (k[1], k[0]) for k in missing),
                BACKEND_HINT.get(backend, "install the backend first")),
            missing=["%s/%s" % k for k in missing])
    existing = {}
    for api, kind in kinds:
        items, _rv = kube.list(api, kind)
        existing[(api, kind)] = dict((_key(i), i) for i in items)
    kept = []
    # values a quota change raised stay until the inventory catches up (overrides.py)
    honoured = []
    for o in desired:
        have = existing[(o["apiVersion"], o["kind"])].get(_key(o))
        if have is not None:
            o, notes = overrides.honour(o, have)
            kept.extend(notes)
        honoured.append(o)
    desired = honoured
    if not allow_quota_decrease:
        lowered = []
        for o in desired:
            have = existing[(o["apiVersion"], o["kind"])].get(_key(o))
            for what, new, used in quota_decreases(have or {}, o) if have else ():
                lowered.append("%s %s: %s %s is below the %s in use" % (
                    o["kind"], o["metadata"]["name"], what, new, _fmt(used)))
        if lowered:
            raise DomainError(
                "queues_allow_quota_decrease: quota lowered below current use (%s): neither KAI nor Kueue evicts "
                "running work, so the queue would stay over its quota; drain the work first, or set "
                "queues_allow_quota_decrease: true to lower it anyway" % "; ".join(lowered), lowered=lowered)
    for o in desired:
        have = existing[(o["apiVersion"], o["kind"])].get(_key(o))
        meta = o["metadata"]
        row = {"kind": o["kind"], "name": meta["name"]}
        if meta.get("namespace"):
            row["namespace"] = meta["namespace"]
        owned_meta = {"labels": meta["labels"]}
        if meta.get("annotations"):
            owned_meta["annotations"] = meta["annotations"]
        if have is not None and overrides.entries(have) and not overrides.entries(o):
            # the inventory caught up with every value a quota change raised: drop the record
            # (a merge patch: the quota job wrote it, so server-side apply would leave it)
            kube.patch(o["apiVersion"], o["kind"], meta["name"], {"metadata": {"annotations": {
                overrides.ANNOTATION: None}}}, namespace=meta.get("namespace"), dry_run=check_mode)
            results.append({"kind": o["kind"], "name": meta["name"], "action": "update"})
        if have is not None and contains(have, {"metadata": owned_meta, "spec": o.get("spec", {})}):
            row["action"] = "unchanged"
            results.append(row)
            continue
        row["action"] = "create" if have is None else "update"
        try:
            after = kube.apply(o, FIELD_MANAGER, force=True, dry_run=check_mode)
        except ApiError as err:
            # check mode before the team namespace exists (the tenants role creates it): report only
            if not (check_mode and err.status == 404 and o["metadata"].get("namespace")):
                raise
            after = o
        diffs.append({"before": _view(have), "after": _view(after or o)})
        results.append(row)
    changed = any(r["action"] != "unchanged" for r in results)
    return {"changed": changed, "objects": results, "diff": diffs, "overrides": kept}


def _fmt(v):
    return str(int(v)) if float(v).is_integer() else str(v)
