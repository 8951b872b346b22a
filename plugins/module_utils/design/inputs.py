# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Design inputs of the platform_design filter: schema, validation, normalisation (pure).

Everything a person writes is checked here before any decision is made; a
DesignError names the variable path, the value and the fix. The schema is
documented in docs/design.md ("Design inputs").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.plain import plain
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import DNS1123_LABEL_FIX, is_dns_label
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.pools import (
    HOST_VARIABLE,
    POOL_VARIABLE,
    SITE_VARIABLE,
    TAINTS_VARIABLE,
    node_name,
    site_prefix,
)

ALLOCATIONS = ("exclusive", "time-slicing", "mps", "mig", "fraction")
PLACEMENTS = ("binpack", "spread")
# cmd/mps-control-daemon/mps/device.go maxClients (NVIDIA/k8s-device-plugin): 48 clients per GPU
MPS_MAX_REPLICAS = 48
BACKENDS = ("none", "kai", "kueue")
WORKLOADS = ("training", "inference", "interactive", "batch", "mixed")
TRUST_MIXED = "mixed"

POOL_KEYS = {
    "gpu_product": "nvidia.com/gpu.product of the pool's GPUs (e.g. NVIDIA-H100-80GB-HBM3)",
    "gpus_per_node": "GPUs per node (integer >= 1)",
    "nodes": "number of nodes; default: the hosts of the inventory group",
    "teams": "teams (tenants_list names) that run on the pool",
    "workload": "training | inference | interactive | batch | mixed; default node_prereqs_pool.workload",
    "trust": "mixed | single; default node_prereqs_pool.trust",
    "allocation": "explicit choice: exclusive | time-slicing | mps | mig | fraction (null = recommendation)",
    "mig_profile": "explicit mig-parted config for every node of the pool",
    "time_slicing_replicas": "replicas per GPU when time-sliced (integer >= 2, default 4)",
    "mps_replicas": "MPS clients per GPU when shared by MPS (integer 2..48, default 4)",
    "placement": "binpack | spread (default: binpack for training/batch/mixed, spread for inference/interactive)",
}
TEAM_KEYS = {
    "trust": "trust level of the team (teams of different levels never share a time-sliced GPU)",
    "workload": "training | inference | interactive | batch | mixed",
    "production": "true when the team serves production traffic (inference)",
    "gang": "distributed training that needs all pods started together",
    "gang_size": "pods of the gang job template (integer >= 2, default 2)",
    "borrow": "may use idle GPUs of other teams above its quota",
    "lend": "lends its idle quota to others (default true)",
    "preempts": "teams whose work this team may preempt (reclaim)",
    "priority": "queue priority (integer; higher wins); default queue.priority",
    "mig_slices": "MIG slices wanted per profile, e.g. {1g.10gb: 14}; default the requests.nvidia.com/mig-* quota",
    "whole_gpus": "whole GPUs wanted on a MIG pool, per pool: {pool_x: 8}",
    "checkpoint_claim": "PersistentVolumeClaim for checkpoints in the job templates (default checkpoints)",
}
REQUIREMENT_KEYS = {
    "queue_backend": "explicit choice: none | kai | kueue (null = recommendation)",
    "air_gapped": "the cluster pulls images only from a mirror",
    "image_mirror": "registry/path the mirror serves (templates pull from it when air_gapped)",
    "security": "free text: security requirements for the architecture document",
    "teams": "per team design needs (see team keys)",
    "cuda_image": "image of the job templates (default the CUDA vectorAdd sample)",
    "inference_image": "image of the inference Deployment template",
    "allocation_api": "device-plugin (default) | dra: how pods get GPUs, one per cluster (docs/design.md)",
    "kubernetes_version": "the cluster's Kubernetes version, e.g. \"1.34\" (required with allocation_api: dra)",
    "dra_experimental": "true: accept that the chart marks the DRA stack experimental (required with dra)",
}

_PROFILE_RE = re.compile(r"^\d+g\.\d+gb(\+me)?$")


class DesignError(DomainError):
    """A design input that cannot be decided on; the message names the field and the fix."""


def _mapping(where, value, allow_none=True):
    if value is None and allow_none:
        return {}
    if not isinstance(value, dict):
        raise DesignError("%s must be a mapping, got %s %r" % (where, type(value).__name__, value))
    return value


def _unknown(where, value, known):
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise DesignError("%s: unknown key(s) %s; known keys: %s"
                          % (where, ", ".join(map(str, unknown)), ", ".join(sorted(known))))


def _int(where, value, minimum, default=None):
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        else:
            raise DesignError("%s must be an integer >= %d, got %r" % (where, minimum, value))
    if value < minimum:
        raise DesignError("%s must be an integer >= %d, got %r" % (where, minimum, value))
    return value


def _bool(where, value, default):
    # nested in platform_requirements: a YAML boolean (core/validation.py parses scalar variables only)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise DesignError("%s must be true or false, got %r" % (where, value))
    return value


def _choice(where, value, choices):
    if value is None:
        return None
    if value not in choices:
        raise DesignError("%s is %r; choose one of %s (or null for the recommendation)"
                          % (where, value, ", ".join(choices)))
    return value


def _str_list(where, value):
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DesignError("%s must be a list of names, got %r" % (where, value))
    return list(value)


def quota_int(value):
    """A ResourceQuota quantity of a countable resource as an int (None when it is no count)."""
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return int(value)
        text = str(value).strip()
        return int(text) if text.isdigit() else None
    except (TypeError, ValueError):
        return None


def normalize_pools(pools, inventory):
    """platform_pools merged with the node_prereqs pool definitions from the inventory."""
    pools = _mapping("platform_pools", plain(pools), allow_none=False)
    inventory = plain(inventory or {})
    if not pools:
        raise DesignError("platform_pools is empty: describe at least one GPU pool "
                          "(gpu_product, gpus_per_node, teams) keyed by its inventory group")
    result = {}
    for name in sorted(pools):
        where = "platform_pools.%s" % name
        spec = _mapping(where, pools[name])
        _unknown(where, spec, POOL_KEYS)
        inv = inventory.get(name) or {}
        labels = dict(inv.get("labels") or {})
        product = spec.get("gpu_product")
        if not isinstance(product, str) or not product:
            raise DesignError("%s.gpu_product is required: the nvidia.com/gpu.product value of the pool's GPUs "
                              "(e.g. NVIDIA-H100-80GB-HBM3, NVIDIA-L40S)" % where)
        hosts = list(inv.get("hosts") or [])
        nodes = _int(where + ".nodes", spec.get("nodes"), 1, default=len(hosts) or None)
        if hosts and nodes != len(hosts):
            raise DesignError("%s.nodes is %d, but inventory group %s has %d host(s) (%s): drop nodes or fix the "
                              "group" % (where, nodes, name, len(hosts), ", ".join(hosts)))
        if nodes is None:
            raise DesignError("%s.nodes: the pool has no hosts in inventory group %s; list them there "
                              "or set nodes: <count>" % (where, name))
        workload = spec.get("workload") or labels.get("workload") or "mixed"
        if workload not in WORKLOADS:
            raise DesignError("%s.workload is %r; choose one of %s" % (where, workload, ", ".join(WORKLOADS)))
        trust = spec.get("trust") or labels.get("trust")
        allocation = _choice(where + ".allocation", spec.get("allocation"), ALLOCATIONS)
        mig_profile = spec.get("mig_profile")
        if mig_profile is not None and not isinstance(mig_profile, str):
            raise DesignError("%s.mig_profile must be a mig-parted config name, got %r" % (where, mig_profile))
        if mig_profile and allocation == "mps":
            raise DesignError(
                "%s.allocation mps refused with mig_profile %r: the NVIDIA device plugin does not share MIG devices "
                "by MPS (\"sharing using MPS is not supported for MIG devices\"); drop mig_profile (MPS shares whole "
                "GPUs) or choose allocation mig" % (where, mig_profile))
        if mig_profile and allocation == "fraction":
            raise DesignError(
                "%s.allocation fraction refused with mig_profile %r: KAI GPU fractions share whole GPUs "
                "(nvidia.com/gpu); a MIG pool offers slices instead. Drop mig_profile or choose allocation mig"
                % (where, mig_profile))
        if mig_profile and allocation not in (None, "mig"):
            raise DesignError("%s.mig_profile %r contradicts allocation %r: drop one of them"
                              % (where, mig_profile, allocation))
        mps_replicas = _int(where + ".mps_replicas", spec.get("mps_replicas"), 2, default=4)
        if mps_replicas > MPS_MAX_REPLICAS:
            raise DesignError("%s.mps_replicas is %d: an MPS server takes at most %d clients per GPU (the MPS control "
                              "daemon refuses more); choose 2..%d"
                              % (where, mps_replicas, MPS_MAX_REPLICAS, MPS_MAX_REPLICAS))
        result[name] = {
            "name": name,
            "gpu_product": product,
            "gpus_per_node": _int(where + ".gpus_per_node", _required(where + ".gpus_per_node",
                                                                      spec.get("gpus_per_node"), "GPUs per node, e.g. 8"), 1),
            "nodes": nodes,
            "hosts": hosts,
            "node_names": list(inv.get("nodes") or hosts),
            "labels": labels,
            "label_prefix": site_prefix(inv.get("label_prefix")),
            "labels_known": inv.get("labels_known", True),
            "taints": list(inv.get("taints") or []),
            "teams": _str_list(where + ".teams", spec.get("teams")),
            "workload": workload,
            "trust": trust,
            "allocation": allocation,
            "mig_profile": mig_profile or None,
            "time_slicing_replicas": _int(where + ".time_slicing_replicas", spec.get("time_slicing_replicas"), 2,
                                          default=4),
            "mps_replicas": mps_replicas,
            "placement": _choice(where + ".placement", spec.get("placement"), PLACEMENTS),
        }
    return result


def _required(where, value, what):
    if value is None:
        raise DesignError("%s is required: %s" % (where, what))
    return value


def normalize_tenants(tenants):
    """tenants_list (the tenants role's variable, as that role reads it) as {name: entry}; only what the
    design reads is checked (the tenants role validates the rest when it applies the teams)."""
    tenants = plain(tenants) if tenants is not None else []
    if not isinstance(tenants, list):
        raise DesignError("tenants_list must be a list of teams, got %s" % type(tenants).__name__)
    result = {}
    for index, team in enumerate(tenants):
        where = "tenants_list[%d]" % index
        team = _mapping(where, team, allow_none=False)
        name = team.get("name")
        if not is_dns_label(name):
            raise DesignError("%s.name %r must be a DNS-1123 label (the namespace): %s"
                              % (where, name, DNS1123_LABEL_FIX))
        if name in result:
            raise DesignError("%s.name %r is listed twice" % (where, name))
        for key in ("quota", "queue", "labels"):
            _mapping("%s (%s).%s" % (where, name, key), team.get(key))
        result[name] = team
    return result


def normalize_requirements(requirements, tenants, pools):
    req = _mapping("platform_requirements", plain(requirements))
    _unknown("platform_requirements", req, REQUIREMENT_KEYS)
    teams_in = _mapping("platform_requirements.teams", req.get("teams"))
    known_teams = set(tenants) | set(t for p in pools.values() for t in p["teams"])
    teams = {}
    for name in sorted(known_teams | set(teams_in)):
        where = "platform_requirements.teams.%s" % name
        spec = _mapping(where, teams_in.get(name))
        _unknown(where, spec, TEAM_KEYS)
        if name not in known_teams:
            raise DesignError("%s: team %r is neither in tenants_list nor in any platform_pools.*.teams; "
                              "fix the name or add the team" % (where, name))
        mig = _mapping(where + ".mig_slices", spec.get("mig_slices"))
        for profile, count in mig.items():
            if not _PROFILE_RE.match(str(profile)):
                raise DesignError("%s.mig_slices key %r is not a MIG profile (e.g. 1g.10gb)" % (where, profile))
            _int("%s.mig_slices.%s" % (where, profile), count, 0)
        whole = _mapping(where + ".whole_gpus", spec.get("whole_gpus"))
        for pool, count in whole.items():
            if pool not in pools:
                raise DesignError("%s.whole_gpus names pool %r, not one of platform_pools: %s"
                                  % (where, pool, ", ".join(sorted(pools))))
            _int("%s.whole_gpus.%s" % (where, pool), count, 0)
        preempts = _str_list(where + ".preempts", spec.get("preempts"))
        for other in preempts:
            if other not in known_teams or other == name:
                raise DesignError("%s.preempts names %r, which is not another team (%s)"
                                  % (where, other, ", ".join(sorted(known_teams - {name}))))
        workload = spec.get("workload")
        if workload is not None and workload not in WORKLOADS:
            raise DesignError("%s.workload is %r; choose one of %s" % (where, workload, ", ".join(WORKLOADS)))
        priority = spec.get("priority")
        if priority is not None:
            priority = _int(where + ".priority", priority, 0)
        teams[name] = {
            "trust": spec.get("trust"),
            "workload": workload,
            "production": _bool(where + ".production", spec.get("production"), False),
            "gang": _bool(where + ".gang", spec.get("gang"), False),
            "gang_size": _int(where + ".gang_size", spec.get("gang_size"), 2, default=2),
            "borrow": _bool(where + ".borrow", spec.get("borrow"), False),
            "lend": _bool(where + ".lend", spec.get("lend"), True),
            "preempts": preempts,
            "priority": priority,
            "mig_slices": dict((str(k), int(v)) for k, v in mig.items()),
            "whole_gpus": dict((k, int(v)) for k, v in whole.items()),
            "checkpoint_claim": spec.get("checkpoint_claim") or "checkpoints",
        }
    for pool in pools.values():
        for team in pool["teams"]:
            if tenants and team not in tenants:
                raise DesignError("platform_pools.%s.teams names %r, which tenants_list does not define "
                                  "(teams: %s)" % (pool["name"], team, ", ".join(sorted(tenants))))
    return {
        "queue_backend": _choice("platform_requirements.queue_backend", req.get("queue_backend"), BACKENDS),
        "air_gapped": _bool("platform_requirements.air_gapped", req.get("air_gapped"), False),
        "image_mirror": req.get("image_mirror") or None,
        "security": req.get("security") or None,
        "cuda_image": req.get("cuda_image") or "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
        "inference_image": req.get("inference_image") or "nvcr.io/nvidia/tritonserver:25.01-py3",
        # checked by design/dra.py, which knows what the allocation API needs
        "allocation": dict((k, req.get(k)) for k in ("allocation_api", "kubernetes_version", "dra_experimental")),
        "teams": teams,
    }


def inventory_pools(groups, hostvars=None, prefix="pool_"):
    """{pool group: {hosts, nodes, labels, taints, label_prefix}} from the node_prereqs variables.

    Without hostvars (a variable read through another host's hostvars cannot see hostvars)
    only the hosts are known: `labels_known` is false and the design skips label checks;
    the MIG layout, which depends on the hosts only, stays the same."""
    result = {}
    for group in sorted(g for g in groups if str(g).startswith(prefix)):
        hosts = sorted(str(h) for h in groups[group])
        pool = {"hosts": hosts, "nodes": [], "labels": {}, "taints": [], "label_prefix": None,
                "labels_known": hostvars is not None}
        for host in hosts:
            if hostvars is None:
                pool["nodes"].append(host)
                continue
            hv = hostvars[host]
            pool["nodes"].append(node_name(hv, host))
            # a pool is one group_vars file: the first host speaks for all. The design reads the
            # variables as written (it checks them against the requirements itself).
            if host == hosts[0]:
                pool["labels"] = plain(hv.get(POOL_VARIABLE) or {})
                pool["taints"] = plain(list(hv.get(TAINTS_VARIABLE) or []))
                # node_prereqs_label_prefix defaults to the site-wide gpu_platform_label_prefix
                pool["label_prefix"] = hv.get(HOST_VARIABLE) or hv.get(SITE_VARIABLE)
        result[str(group)] = pool
    return result
