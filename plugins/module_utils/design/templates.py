# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each team's job templates are rendered with (pure): pool, node selector, tolerations,
the GPU resource to request, the queue labels of the chosen backend, the cost labels.

docs/templates/*.yaml.j2 read the `job` variable this module returns (one per team and template).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.design import claim_templates
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig import profiles as mig
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import kai_sharing
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import storage_retention
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream

# Our labels: the team label is the one roles/tenants puts on a team's objects.
TEAM_LABEL = "gpu-platform.skaffon.io/team"
POOL_LABEL = "gpu-platform.skaffon.io/pool"
TEMPLATES = ("checkpoint-pvc", "single-gpu-job", "gang-job", "inference-deployment", "fractional-inference",
             "training-job", "nccl-allreduce-job", "data-stage-job", "load-job")
# Templates of a part of one GPU by KAI's gpu-fraction annotation: only for a team on a pool whose
# allocation is fraction (roles/queues refuses fractions in the other teams' namespaces).
FRACTION_ONLY = ("fractional-inference",)
GPU_FRACTION = "0.5"
# Multi-node templates: one pod per node with its whole GPUs (NCCL does not span MIG slices).
WHOLE_GPU_ONLY = ("training-job", "nccl-allreduce-job")
# Images of the templates the design inputs do not name (teams replace them with their own).
TRAINING_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
NCCL_IMAGE = "ghcr.io/coreweave/nccl-tests:12.8.1-devel-ubuntu22.04-nccl2.26.2-1-0708d2e"
DATA_CLAIM = "data"


def _whole(pool):
    if pool["allocation"] in ("exclusive", "time-slicing", "mps", "fraction"):
        return True
    return bool((pool["mig"] or {}).get("whole_gpus")) or (pool["mig"] or {}).get("covered") is None


def _slice_for(team, pool):
    """The smallest MIG slice the team asked for that the pool offers (None = none)."""
    if pool["allocation"] != "mig":
        return None
    offered = (pool["mig"] or {}).get("offered") or {}
    mine = [p for p in team["mig_slices"] if p in offered or (pool["mig"] or {}).get("covered") is None]
    if not mine:
        return None
    return sorted(mine, key=lambda p: (mig.compute_slices(p), p))[0]


def _wants_whole(team):
    gpus = team["quota"].get(upstream.QUOTA_ENFORCED_PREFIX + upstream.GPU_RESOURCE)
    try:
        gpus = int(gpus or 0)
    except (TypeError, ValueError):
        gpus = 1
    return gpus > 0 or any(team["needs"]["whole_gpus"].values()) or not team["mig_slices"]


def _placement(design, team, kind):
    """(pool, resource) of one template: whole GPUs where the team has a GPU quota, its smallest
    MIG slice where it only has slices, and a slice or a shared GPU for inference when it has one."""
    names = list(team["pools"])
    if not names:
        return None, None
    pools = design["pools"]
    if kind == "fraction":
        # the pod requests no GPU resource: KAI's reservation pod holds the shared GPU
        fraction = [n for n in names if pools[n]["allocation"] == "fraction"]
        return (fraction[0], None) if fraction else (None, None)
    whole = [n for n in names if _whole(pools[n])] if _wants_whole(team) else []
    sliced = [n for n in names if _slice_for(team, pools[n])]
    shared = [n for n in names if pools[n]["allocation"] in ("time-slicing", "mps")]
    if kind == "inference":
        order = shared + sliced + whole
    else:
        order = whole + sliced
    choice = (order or names)[0]
    profile = _slice_for(team, pools[choice])
    if profile and (kind == "inference" or choice not in whole):
        return choice, upstream.MIG_RESOURCE_PREFIX + mig.resource_suffix(profile)
    return choice, upstream.GPU_RESOURCE


def _whole_gpu_nodes(pool):
    """(nodes, GPUs per node) that run whole GPUs: a MIG pool's nodes laid out all-disabled."""
    gpu = pool["gpu"]
    if pool["allocation"] != "mig" or not pool["mig"]:
        return gpu["nodes"], gpu["gpus_per_node"]
    profiles = pool["mig"].get("profiles") or {}
    if not profiles:
        return gpu["nodes"], gpu["gpus_per_node"]
    return len([h for h in profiles.values() if h == "all-disabled"]), gpu["gpus_per_node"]


def _replicas(team, resource):
    """2 serving replicas (a drain or a rollout keeps one ready) when the team's quota leaves room for
    the rollout's extra pod, else 1 (a GPU fraction requests no resource a quota counts: 2)."""
    if resource is None:
        return 2
    quota = team["quota"].get(upstream.QUOTA_ENFORCED_PREFIX + resource)
    try:
        return 2 if quota is None or int(quota) >= 3 else 1
    except (TypeError, ValueError):
        return 2


def _shard_labels(design):
    """{pool: {key: value}}: with KAI shards per pool (placement differs), the pool label the pods carry
    so that the pod-grouper puts their PodGroup into the shard of the team's queue."""
    if design["scheduler"]["backend"] != "kai":
        return {}
    pools = {}
    for name, pool in design["pools"].items():
        prefix = ""
        for key in pool["node_selector"]:
            if "/" in key:
                prefix = key.rsplit("/", 1)[0] + "/"
                break
        pools[name] = {"labels": dict((prefix + k, str(v)) for k, v in (pool.get("labels") or {}).items())}
    plan = kai_sharing.placement_plan(design.get("roles", {}).get("queues_kai_placement"), pools)
    if not plan["label_key"]:
        return {}
    return dict((name, {plan["label_key"]: value}) for name, value in plan["pool_value"].items())


def _mirror(req, image):
    if req["air_gapped"] and req["image_mirror"]:
        return "%s/%s" % (req["image_mirror"].rstrip("/"), image.split("/", 1)[1])
    return image


def contexts(design, team_label=TEAM_LABEL, pool_label=POOL_LABEL):
    """[{team, template, job}] for every team and template, in a stable order."""
    backend = design["scheduler"]["backend"]
    req = design["requirements"]
    image = _mirror(req, req["cuda_image"])
    serve = _mirror(req, req["inference_image"])
    shards = _shard_labels(design)
    out = []
    for name in sorted(design["teams"]):
        team = design["teams"][name]
        for template in TEMPLATES:
            kind = {"single-gpu-job": "single", "gang-job": "gang", "inference-deployment": "inference",
                    "training-job": "gang", "nccl-allreduce-job": "gang", "load-job": "inference"}.get(
                template, "fraction" if template in FRACTION_ONLY else "single")
            pool_name, resource = _placement(design, team, kind)
            if pool_name is None:
                continue
            pool = design["pools"][pool_name]
            nodes, gpus_per_node = _whole_gpu_nodes(pool)
            if template in WHOLE_GPU_ONLY and (resource != upstream.GPU_RESOURCE or nodes < 1
                                               or pool["allocation"] in ("time-slicing", "mps", "fraction")):
                continue
            labels = dict((str(k), str(v)) for k, v in sorted(team["labels"].items()))
            labels.update({team_label: name, pool_label: pool_name})
            queue_labels = {}
            if backend == "kai":
                queue_labels[upstream.KAI_QUEUE_LABEL] = team["queue_name"]
                queue_labels.update(shards.get(pool_name) or {})
            elif backend == "kueue":
                queue_labels[upstream.KUEUE_QUEUE_LABEL] = team["queue_name"]
            out.append({"team": name, "template": template, "job": {
                "team": name,
                "name": name,
                "namespace": team["namespace"],
                "pool": pool_name,
                "backend": backend,
                "scheduler_name": upstream.KAI_SCHEDULER_NAME if backend == "kai" else None,
                "labels": labels,
                "queue_labels": queue_labels,
                "node_selector": dict(pool["node_selector"]),
                "tolerations": list(pool["tolerations"]),
                "resource": resource,
                "gang_size": team["needs"]["gang_size"],
                "gang_annotation": upstream.KAI_BATCH_MIN_MEMBER if backend == "kai" else None,
                "nodes": nodes,
                "gpus_per_node": gpus_per_node,
                "replicas": _replicas(team, resource),
                "gpu_fraction": GPU_FRACTION if template in FRACTION_ONLY else None,
                "checkpoint_claim": team["needs"]["checkpoint_claim"],
                "data_claim": DATA_CLAIM,
                "retention_label": storage_retention.RETENTION_LABEL,
                "image": image,
                "inference_image": serve,
                "training_image": _mirror(req, TRAINING_IMAGE),
                "nccl_image": _mirror(req, NCCL_IMAGE),
            }})
    if claim_templates.is_dra(design):
        # pods claim devices: the templates asking nvidia.com/gpu or nvidia.com/mig-* would never schedule
        return claim_templates.contexts(design, out, _placement, _slice_for, pool_label)
    return out
