# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the hand-over checks expect, read from the inventory the roles applied.

The same variables the roles read (mig_profile per pool, gpu_operator_time_slicing,
node_prereqs_pool_taints, tenants_list) say what each GPU node must offer, so the
protocol checks the configuration that was applied, not a second description of it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.pools import host_pool, toleration
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.sharing.time_slicing import render

GPU_QUOTA_KEY = upstream.QUOTA_ENFORCED_PREFIX + upstream.GPU_RESOURCE


def gpu_nodes(hostvars, hosts, time_slicing=None):
    """[{name, mode, replicas, mig_config, gpu_count}] for the GPU hosts, and the tolerations they need."""
    rendered = render(time_slicing) if time_slicing else None
    nodes, tolerations = [], []
    for host in hosts:
        hv = hostvars.get(host) or {}
        pool = host_pool(hv, host)
        name = pool["name"]
        entry = {"name": name, "mode": "exclusive"}
        facts = hv.get("gpu_node") or {}
        if facts.get("gpu_count"):
            entry["gpu_count"] = int(facts["gpu_count"])
        profile = hv.get("mig_profile")
        key = rendered["nodes"].get(name) or rendered["nodes"].get(host) if rendered else None
        if not key and rendered and rendered["effective_default"]:
            key = rendered["effective_default"]
        if profile and profile != "all-disabled":
            entry.update(mode="mig", mig_config=profile)
        elif key and (rendered["expected"].get(key) or {}).get("replicas"):
            want = rendered["expected"][key]
            # the config's sharing.mps or sharing.timeSlicing (one rendering, sharing/time_slicing.py)
            entry.update(mode="mps" if want.get("strategy") == "mps" else "time-slicing",
                         replicas=int(want["replicas"]))
            if want.get("strategy") == "mps":
                entry["resource"] = want["resource"]
        nodes.append(entry)
        for taint in pool["taints"]:
            tol = toleration(taint)
            if tol not in tolerations:
                tolerations.append(tol)
    gpu_tol = {"key": upstream.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
    if gpu_tol not in tolerations:
        tolerations.append(gpu_tol)
    return {"gpu_nodes": nodes, "tolerations": tolerations}


def quota_team(tenants, allocation_api=None):
    """The first team with a GPU quota (namespace and key), or None. In DRA mode a quota on claims of a
    DeviceClass (whole GPUs first, as Kubernetes 1.34 counts them)."""
    if allocation_api == "dra":
        keys = [upstream.DEVICE_CLASS_GPU + upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX,
                upstream.DEVICE_CLASS_MIG + upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX]
        for key in keys:
            for team in tenants or []:
                if key in (team.get("quota") or {}):
                    return {"namespace": team["name"], "resource": key}
        return None
    for team in tenants or []:
        if GPU_QUOTA_KEY in ((team.get("quota") or {})):
            return {"namespace": team["name"], "resource": GPU_QUOTA_KEY}
    return None


def registry_policies(tenants, allowed_registries=None):
    """[{namespace, registries, require_digest}] of the teams the tenants role gives a registry policy."""
    out = []
    for team in tenants or []:
        images = team.get("images") if isinstance(team.get("images"), dict) else {}
        registries = images.get("registries")
        registries = list(allowed_registries or []) if registries is None else list(registries)
        if registries:
            out.append({"namespace": team["name"], "registries": registries,
                        "require_digest": bool(images.get("require_digest"))})
    return out


def checks_input(hostvars, hosts, time_slicing=None, tenants=None, allowed_registries=None, allocation_api=None):
    out = gpu_nodes(hostvars, hosts, time_slicing)
    out["quota_team"] = quota_team(tenants, allocation_api)
    out["teams"] = [t["name"] for t in tenants or []]
    # the teams roles/queues gives a queue (a queue: block); queues-fair picks its two teams among them
    out["queue_teams"] = [t["name"] for t in tenants or [] if isinstance(t.get("queue"), dict)]
    out["registry_policy"] = registry_policies(tenants, allowed_registries)
    return out
