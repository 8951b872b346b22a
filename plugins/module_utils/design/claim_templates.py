# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job templates of a cluster in DRA mode (pure): pods get GPUs through ResourceClaims, so the templates
that request nvidia.com/gpu or nvidia.com/mig-* are replaced by claim templates:

- claim-gpu-job: one whole GPU (DeviceClass gpu.nvidia.com, ExactCount 1);
- claim-mig-job: one MIG device of the team's smallest profile, chosen by the CEL selector on the
  attribute `profile` the driver publishes (DeviceClass mig.nvidia.com);
- claim-node-gpus-job: every GPU of one node: allocationMode All without a queue backend; with KAI or
  Kueue ExactCount <GPUs per node>, because KAI v0.17 counts an All claim as one GPU and Kueue admits
  none (queues/dra.py).

Each rendered file carries its own ResourceClaimTemplate (named <team>-<kind>) and the Job whose pod
names it, so it applies as is; templates without a GPU (the checkpoint claim, data staging) stay as
they are.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream

DRA = "dra"
CLAIM_TEMPLATES = ("claim-gpu-job", "claim-mig-job", "claim-node-gpus-job")
# device-plugin templates that need no GPU resource (kept in DRA mode); load-job is not: it loads the
# inference Deployment's Service, and that Deployment asks nvidia.com/gpu
NO_GPU = ("checkpoint-pvc", "data-stage-job")


def is_dra(design):
    return ((design or {}).get("allocation_api") or {}).get("api") == DRA


def _profile_selector(profile):
    return "device.attributes['%s'].%s == '%s'" % (upstream.DRA_DRIVER_NAME, upstream.DRA_ATTR_PROFILE, profile)


def _claim(team, kind, device_class, mode, count, selectors=(), profile=None):
    request = {"gpu": "gpu", "mig": "mig", "node-gpus": "gpus"}[kind]
    return {"template": "%s-%s" % (team, kind), "request": request, "device_class": device_class,
            "allocation_mode": mode, "count": count, "selectors": list(selectors), "profile": profile}


def contexts(design, out, placement, slice_for, pool_label):
    """The contexts of a DRA cluster from the device-plugin ones (`out`): GPU-free templates kept, the
    claim templates added per team. placement(design, team, kind) and slice_for(team, pool) are
    templates.py's own rules for pool and MIG profile."""
    kept = [c for c in out if c["template"] in NO_GPU]
    base = dict((c["team"], c) for c in out if c["template"] == "single-gpu-job")
    added = []
    for name in sorted(design["teams"]):
        team = design["teams"][name]
        if name not in base:
            continue
        whole_pool, resource = placement(design, team, "single")
        candidates = [whole_pool] + [p for p in team["pools"] if p != whole_pool]
        mig_pool = next((p for p in candidates if slice_for(team, design["pools"][p])), None)
        if resource == upstream.GPU_RESOURCE:
            pool = design["pools"][whole_pool]
            job = _job(base[name], whole_pool, pool, pool_label)
            added.append(_context(name, "claim-gpu-job", job, _claim(
                name, "gpu", upstream.DEVICE_CLASS_GPU, upstream.ALLOCATION_MODE_EXACT, 1)))
            per_node = pool["gpu"]["gpus_per_node"]
            if design["scheduler"]["backend"] in ("kai", "kueue"):
                node = _claim(name, "node-gpus", upstream.DEVICE_CLASS_GPU, upstream.ALLOCATION_MODE_EXACT, per_node)
            else:
                node = _claim(name, "node-gpus", upstream.DEVICE_CLASS_GPU, upstream.ALLOCATION_MODE_ALL, None)
            added.append(_context(name, "claim-node-gpus-job", _job(base[name], whole_pool, pool, pool_label), node))
        if mig_pool is not None:
            profile = slice_for(team, design["pools"][mig_pool])
            job = _job(base[name], mig_pool, design["pools"][mig_pool], pool_label)
            added.append(_context(name, "claim-mig-job", job, _claim(
                name, "mig", upstream.DEVICE_CLASS_MIG, upstream.ALLOCATION_MODE_EXACT, 1,
                [_profile_selector(profile)], profile)))
    order = dict((t, i) for i, t in enumerate(NO_GPU + CLAIM_TEMPLATES))
    return sorted(kept + added, key=lambda c: (c["team"], order[c["template"]]))


def _job(base, pool_name, pool, pool_label):
    job = copy.deepcopy(base["job"])
    if job["pool"] != pool_name:
        job["labels"][pool_label] = pool_name
        job["pool"] = pool_name
        job["node_selector"] = dict(pool["node_selector"])
        job["tolerations"] = list(pool["tolerations"])
    job["resource"] = None
    job.setdefault("name", job["team"])
    return job


def _context(team, template, job, claim):
    job = dict(job, claim=claim)
    return {"team": team, "template": template, "job": job}
