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
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.pools import host_pool, node_name, toleration
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import kai_sharing
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues.objects import (
    pool_groups, pools_from_hostvars, team_queues)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.sharing.time_slicing import render

GPU_QUOTA_KEY = upstream.QUOTA_ENFORCED_PREFIX + upstream.GPU_RESOURCE


def gpu_nodes(hostvars, hosts, time_slicing=None):
    """[{name, mode, replicas, mig_config, gpu_count, pool}] for the GPU hosts, and the tolerations they need."""
    rendered = render(time_slicing) if time_slicing else None
    nodes, tolerations = [], []
    for host in hosts:
        hv = hostvars.get(host) or {}
        pool = host_pool(hv, host)
        name = pool["name"]
        entry = {"name": name, "mode": "exclusive"}
        found = list(pools_from_hostvars(hostvars, [host])) if hv.get("node_prereqs_pool") else []
        if found:
            entry["pool"] = found[0]   # named as roles/queues names it (the protocol says where each mode is)
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


def fraction_probes(hostvars, hosts, tenants=None, groups=None, queue_backend=None, kai_gpu_sharing=None,
                    kai_fraction_pools=None, kai_pool_teams=None):
    """[{team, pool, nodes, node_selector, tolerations}]: per pool that takes KAI GPU fractions, the
    first team whose queue is on it, as roles/queues decides it (the same team_pools and fraction_teams
    over the pools of the GPU hosts); [] when the backend is not KAI or GPU sharing is off. With
    queues_kai_fraction_pools null every team may ask for fractions: one probe, the first team's."""
    if queue_backend != "kai" or not kai_sharing.gpu_sharing(kai_gpu_sharing):
        return []
    hosts = [h for h in hosts or () if h in hostvars]
    try:
        pools = pools_from_hostvars(hostvars, hosts)
        aliases = pool_groups(hostvars, groups or {}, hosts)
        teams = team_queues(tenants)
        pool_of = kai_sharing.team_pools(teams, pools, aliases, kai_pool_teams)
        allowed, _refused = kai_sharing.fraction_teams(teams, True, kai_fraction_pools, pools, aliases, pool_of)
    except DomainError as err:
        # the check says it (FAIL with the cause) instead of the filter stopping every other check
        return [{"team": None, "pool": None, "nodes": [], "node_selector": {}, "tolerations": [],
                 "problem": err.msg}]
    if kai_fraction_pools is None:
        wanted = [pool_of.get(allowed[0])] if allowed else []
    else:
        wanted = sorted(set(kai_sharing.canonical(name, pools, aliases) for name in kai_fraction_pools))
    out = []
    for pool in wanted:
        team = next((t for t in allowed if pool is None or pool_of.get(t) == pool), None)
        members = [h for h in hosts if pool is None or pool in pools_from_hostvars(hostvars, [h])]
        out.append({"team": team, "pool": pool, "nodes": [node_name(hostvars[h], h) for h in members],
                    "node_selector": dict(pools[pool]["labels"]) if pool else {},
                    "tolerations": [toleration(t) for t in pools[pool]["taints"]] if pool else []})
    return out


def checks_input(hostvars, hosts, time_slicing=None, tenants=None, allowed_registries=None, allocation_api=None,
                 fractions=None):
    """What the checks expect; fractions: the keyword arguments of fraction_probes past hostvars, hosts
    and tenants (groups, queue_backend, kai_gpu_sharing, kai_fraction_pools, kai_pool_teams)."""
    out = gpu_nodes(hostvars, hosts, time_slicing)
    out["fraction_probes"] = fraction_probes(hostvars, hosts, tenants, **(fractions or {}))
    out["quota_team"] = quota_team(tenants, allocation_api)
    out["teams"] = [t["name"] for t in tenants or []]
    # the teams roles/queues gives a queue (a queue: block); queues-fair picks its two teams among them
    out["queue_teams"] = [t["name"] for t in tenants or [] if isinstance(t.get("queue"), dict)]
    out["registry_policy"] = registry_policies(tenants, allowed_registries)
    return out
