# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Retention of the teams' checkpoint and scratch claims.

A team keeps a PersistentVolumeClaim for `RETENTION_LABEL` days after its creation (the job
templates set it on the checkpoint claim; teams change the value). `expired_claims` picks the
claims past that age that no pod still uses; playbooks/storage_retention.yml deletes them.
Node-local scratch needs no rule: the templates mount it as an emptyDir, which the kubelet
removes with the pod, and the LimitRange caps it through ephemeral-storage.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

RETENTION_LABEL = "gpu-platform.skaffon.io/retention-days"
# Pods in these phases no longer hold their volumes mounted.
DONE_PHASES = ("Succeeded", "Failed")


def _created(claim):
    stamp = ((claim.get("metadata") or {}).get("creationTimestamp") or "").replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(stamp)


def claims_in_use(pods):
    """{(namespace, claim name)} mounted by a pod that has not finished."""
    used = set()
    for pod in pods or ():
        if ((pod.get("status") or {}).get("phase")) in DONE_PHASES:
            continue
        namespace = (pod.get("metadata") or {}).get("namespace")
        for volume in ((pod.get("spec") or {}).get("volumes") or ()):
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                used.add((namespace, claim))
    return used


def expired_claims(claims, pods, now):
    """{expired: [{namespace, name, age_days, retention_days}], kept_in_use: [...], errors: [...],
    delete: the expired claims as objects to delete}.

    `now` is an aware datetime. A label value that is not a whole number of days >= 0 is an error
    naming the claim (the claim is kept)."""
    used = claims_in_use(pods)
    out = {"expired": [], "kept_in_use": [], "errors": []}
    for claim in claims or ():
        meta = claim.get("metadata") or {}
        value = (meta.get("labels") or {}).get(RETENTION_LABEL)
        if value is None:
            continue
        where = "%s/%s" % (meta.get("namespace"), meta.get("name"))
        try:
            days = int(str(value))
            if days < 0 or str(days) != str(value).strip():
                raise ValueError(value)
        except ValueError:
            out["errors"].append("PersistentVolumeClaim %s: label %s=%r is not a whole number of days "
                                 "(e.g. \"30\"); the claim is kept" % (where, RETENTION_LABEL, value))
            continue
        age = now - _created(claim)
        if age < datetime.timedelta(days=days):
            continue
        entry = {"namespace": meta.get("namespace"), "name": meta.get("name"),
                 "age_days": round(age.total_seconds() / 86400.0, 2), "retention_days": days}
        (out["kept_in_use"] if (meta.get("namespace"), meta.get("name")) in used else out["expired"]).append(entry)
    for key in ("expired", "kept_in_use"):
        out[key].sort(key=lambda e: (e["namespace"], e["name"]))
    # what kubernetes.core.k8s state=absent takes as one definition list
    out["delete"] = [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                      "metadata": {"name": e["name"], "namespace": e["namespace"]}} for e in out["expired"]]
    return out
