# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform design decision (pure): allocation mode and MIG layout per pool, queue backend,
warnings for the common mistakes, and the values the roles take.

Decision matrix per pool (docs/design.md):
  tenants of different trust + time-slicing, mps or fraction -> refused (no memory or fault isolation)
  MIG-capable GPU + teams asking for MIG slices       -> mig
  one team (single trust), inference or interactive   -> time-slicing
  otherwise                                           -> exclusive
mps and fraction are explicit choices (`allocation`), each with its refusals: mps next to a MIG pool
(the design then sets the mixed MIG strategy, which the device plugin refuses with MPS), fraction
without the KAI queue backend. An explicit `allocation` wins otherwise and is reported.
Placement per pool: binpack for training, batch and mixed pools (whole nodes stay free for gangs),
spread for inference and interactive pools (latency: fewer pods per node and GPU).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.design import dra
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.design import mig as design_mig
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig import profiles as mig
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.design.inputs import (
    TRUST_MIXED,
    DesignError,
    normalize_pools,
    normalize_requirements,
    normalize_tenants,
    quota_int,
)

QUOTA_PREFIX = upstream.QUOTA_ENFORCED_PREFIX
TIME_SLICING_CONFIGMAP = "time-slicing-config"

TRADE_OFFS = {
    "exclusive": "whole GPUs: full isolation and performance; a GPU a pod holds idle is wasted for everyone, "
                 "small jobs waste most of its memory and compute",
    "time-slicing": "more pods per GPU for small, bursty work; no memory or fault isolation between replicas and "
                    "no proportional compute (a replica gets time slices, not a fixed fraction), one pod can take "
                    "all the memory",
    "mig": "hardware-isolated slices (memory, cache, faults) with a fixed compute share; rigid profiles waste what "
           "does not fit a slice, reconfiguring needs idle GPUs (drain), no NVLink/P2P between slices, so "
           "multi-GPU training needs whole GPUs",
    # NVIDIA/k8s-device-plugin cmd/mps-control-daemon/mps/daemon.go sets the default active thread percentage
    # 100/replicas and a pinned device memory limit per client; the MPS docs' "Error Containment": a fatal GPU
    # exception of one client reaches every client of that GPU.
    "mps": "kernels of several pods run concurrently on one GPU, each client limited to 1/replicas of the SMs and "
           "of the memory (set by the device plugin's MPS control daemon); a fatal fault of one client stops every "
           "client of that GPU, one MPS server per GPU; not with MIG, and not under the mixed MIG strategy "
           "anywhere in the cluster",
    # KAI-Scheduler docs/gpu-sharing/README.md: "KAI Scheduler does not enforce memory allocation limit or
    # performs memory isolation between processes"; fractions are reserved by a reservation pod per shared GPU.
    "fraction": "pods ask KAI for a part of a GPU (annotation gpu-fraction or gpu-memory) and KAI packs them onto "
                "shared GPUs and counts the fractions in the queues; nothing enforces the memory a pod uses (a "
                "process that allocates more hurts its neighbours), the shared GPU is held by a reservation pod, "
                "and ResourceQuota cannot count fractions",
}
SHARING_LABEL = {"exclusive": "exclusive", "time-slicing": "time-slicing", "mig": "mig", "mps": "mps",
                 "fraction": "fraction"}
PLACEMENT_SPREAD = ("inference", "interactive")
# What a team's pods get, written on its namespace by roles/tenants (docs/design.md)
ALLOCATION_ANNOTATION = "gpu-platform.skaffon.io/gpu-allocation"


def _warn(warnings, code, message, **where):
    item = {"code": code, "message": message}
    item.update(where)
    warnings.append(item)


def team_slices(tenant, needs):
    """MIG slices a team wants: its design needs, else its requests.nvidia.com/mig-* quota."""
    if needs["mig_slices"]:
        return dict(needs["mig_slices"])
    result = {}
    prefix = QUOTA_PREFIX + upstream.MIG_RESOURCE_PREFIX
    for key, value in ((tenant or {}).get("quota") or {}).items():
        if str(key).startswith(prefix):
            count = quota_int(value)
            if count:
                # resource names spell '+me' as '.me'
                profile = str(key)[len(prefix):]
                if profile.endswith(".me"):
                    profile = profile[:-3] + "+me"
                result[profile] = count
    return result


def _gpu_of(pool):
    model_name, model = mig.model_for_product(pool["gpu_product"])
    device_id = model["products"][mig.base_product(pool["gpu_product"])] if model else None
    return model_name, model, device_id


def _effective_trust(pool, teams):
    levels = sorted(set(teams[t]["trust"] for t in pool["teams"] if teams[t]["trust"]))
    if pool["trust"] == TRUST_MIXED or len(levels) > 1:
        return TRUST_MIXED, levels
    if pool["trust"]:
        return pool["trust"], levels
    return ("single" if len(pool["teams"]) <= 1 else "unknown"), levels


def _recommend(pool, gpu_model, slices_wanted, trust):
    reasons = []
    several = len(pool["teams"]) > 1
    if gpu_model and slices_wanted:
        reasons.append("the %s supports MIG and the teams ask for slices (%s): hardware isolation with a fixed "
                       "share per team" % (pool["gpu_product"], ", ".join(
                           "%d x %s" % (n, p) for p, n in sorted(slices_wanted.items()))))
        return "mig", reasons
    if gpu_model is None:
        reasons.append("the %s has no MIG" % pool["gpu_product"])
    else:
        reasons.append("no team asks for MIG slices on this pool")
    if trust == TRUST_MIXED:
        reasons.append("tenants of different trust: time-slicing is never allowed (no memory or fault isolation)")
        return "exclusive", reasons
    if several:
        reasons.append("several teams: time-slicing gives no proportional compute and no per-team isolation, "
                       "so whole GPUs with quotas share fairly")
        return "exclusive", reasons
    if pool["workload"] in ("inference", "interactive"):
        reasons.append("one team with %s work: time-slicing packs small, bursty pods (%d per GPU)"
                       % (pool["workload"], pool["time_slicing_replicas"]))
        return "time-slicing", reasons
    reasons.append("%s work uses whole GPUs" % pool["workload"])
    return "exclusive", reasons


def _whole_wanted(team, pool, tenants, teams, pools_of):
    """Whole GPUs a team wants on a MIG pool: its design need, else its requests.nvidia.com/gpu
    quota when this is its only pool (a quota over several pools cannot be split by guessing)."""
    needs = teams[team]["whole_gpus"]
    if needs:
        return needs.get(pool, 0)
    if pools_of.get(team) == [pool]:
        return quota_int(((tenants.get(team) or {}).get("quota") or {}).get(QUOTA_PREFIX + upstream.GPU_RESOURCE)) or 0
    return 0


def decide_pool(pool, tenants, teams, parted, warnings, pools_of):
    model_name, model, device_id = _gpu_of(pool)
    trust, levels = _effective_trust(pool, teams)
    if pool["trust"] and pool["trust"] != TRUST_MIXED and len(levels) > 1:
        _warn(warnings, "trust_label_wrong", "pool %s is labelled trust=%s but its teams have different trust "
              "levels (%s): set node_prereqs_pool.trust: mixed" % (pool["name"], pool["trust"], ", ".join(levels)),
              pool=pool["name"])
    slices_wanted = {}
    for team in pool["teams"]:
        for profile, count in team_slices(tenants.get(team), teams[team]).items():
            if model and profile in model["profiles"]:
                slices_wanted[profile] = slices_wanted.get(profile, 0) + count
    recommended, reasons = _recommend(pool, model, slices_wanted, trust)
    allocation = pool["allocation"] or recommended
    if pool["mig_profile"] and not pool["allocation"]:
        allocation = "mig"
    if allocation == "time-slicing" and trust == TRUST_MIXED:
        raise DesignError(
            "platform_pools.%s.allocation: time-slicing refused: the pool's tenants have different trust (%s), and "
            "time-sliced replicas share GPU memory and faults. Use allocation: mig (on MIG-capable GPUs) or "
            "exclusive, or give the teams separate pools"
            % (pool["name"], "trust=mixed" if pool["trust"] == TRUST_MIXED else "teams " + ", ".join(levels)))
    sharing_risks = (
        ("mps", "MPS clients of one GPU share its MPS server, and a fatal GPU exception of one client reaches all "
                "of them (MPS docs, Error Containment)"),
        ("fraction", "KAI does not enforce the memory a fractional pod uses nor isolate processes on a shared GPU "
                     "(KAI docs/gpu-sharing), and pods of different namespaces share it"),
    )
    for mode, why in sharing_risks:
        if allocation == mode and trust == TRUST_MIXED:
            raise DesignError(
                "platform_pools.%s.allocation: %s refused: the pool's tenants have different trust (%s), and %s. "
                "Use allocation: mig (on MIG-capable GPUs) or exclusive, or give the teams separate pools"
                % (pool["name"], mode, "trust=mixed" if pool["trust"] == TRUST_MIXED else "teams " + ", ".join(levels),
                   why))
    if allocation == "mig" and model is None:
        raise DesignError("platform_pools.%s.%s: mig is impossible, %s has no MIG (MIG-capable: %s)"
                          % (pool["name"], "allocation" if pool["allocation"] else "mig_profile",
                             pool["gpu_product"], ", ".join(mig.known_products())))
    hosts = pool["hosts"] or ["%s-%d" % (pool["name"], i + 1) for i in range(pool["nodes"])]
    result = {
        "allocation": allocation,
        "recommended": recommended,
        "explicit": pool["allocation"] or ("mig" if pool["mig_profile"] else None),
        "differs": allocation != recommended,
        "reasons": reasons,
        "trade_offs": TRADE_OFFS[allocation],
        "gpu": {"product": pool["gpu_product"], "mig_model": model_name, "mig_capable": model is not None,
                "gpus_per_node": pool["gpus_per_node"], "nodes": pool["nodes"],
                "gpus": pool["gpus_per_node"] * pool["nodes"]},
        "teams": list(pool["teams"]),
        "trust": trust,
        "workload": pool["workload"],
        "labels": dict(pool["labels"]),
        "node_selector": dict((pool["label_prefix"] + k, str(v)) for k, v in sorted(pool["labels"].items())
                              if k in ("accelerator", "workload")),
        "tolerations": [_toleration(t, pool["label_prefix"]) for t in pool["taints"]],
        "hosts": hosts,
        "node_names": pool["node_names"] or hosts,
        "mig": None,
        "mig_profile": None,
        "mig_profiles": {},
        "time_slicing": None,
        "mps": None,
        "fraction": allocation == "fraction",
        "sharing_label": SHARING_LABEL[allocation],
    }
    result["placement"], result["placement_reason"] = _placement(pool)
    if result["differs"]:
        _warn(warnings, "explicit_differs", "pool %s: the inventory chooses %s, the recommendation is %s (%s)"
              % (pool["name"], allocation, recommended, "; ".join(reasons)), pool=pool["name"])
    if allocation == "mig":
        whole = sum(_whole_wanted(t, pool["name"], tenants, teams, pools_of) for t in pool["teams"])
        known = (design_mig.configs_from(parted, model, device_id, pool["gpus_per_node"]) if parted is not None
                 else design_mig.derived_configs(model, device_id))
        if pool["mig_profile"] and pool["mig_profile"] not in known:
            _warn(warnings, "mig_profile_unknown", "pool %s: mig_profile %s is not a uniform config of the %s for %s "
                  "(known: %s); the mig role refuses a profile the cluster's config lacks" % (
                      pool["name"], pool["mig_profile"], "cluster's mig-parted config" if parted is not None
                      else "default mig-parted config", model_name, ", ".join(sorted(known))), pool=pool["name"])
        if pool["mig_profile"]:
            layout = {"covered": None, "profiles": dict((h, pool["mig_profile"]) for h in hosts),
                      "profile": pool["mig_profile"], "requested": slices_wanted, "whole_requested": whole,
                      "offered": {}, "whole_gpus": 0, "configs": {},
                      "reason": "explicit mig_profile %s (not checked against the requests)" % pool["mig_profile"]}
        else:
            layout = design_mig.layout(model_name, model, device_id, slices_wanted, whole, hosts,
                                       pool["gpus_per_node"], parted)
        result["mig"] = layout
        result["mig_profile"] = layout["profile"]
        result["mig_profiles"] = layout["profiles"]
        if layout["covered"] is False:
            _warn(warnings, "mig_layout_short", "pool %s: %s" % (pool["name"], layout["reason"]), pool=pool["name"])
    if allocation == "time-slicing":
        result["time_slicing"] = {"config": "shared-%d" % pool["time_slicing_replicas"],
                                  "replicas": pool["time_slicing_replicas"]}
    if allocation == "mps":
        result["mps"] = {"config": "mps-%d" % pool["mps_replicas"], "replicas": pool["mps_replicas"]}
    result["pods_get"] = _pods_get(result, slices_wanted)
    if not pool["labels_known"]:
        return result  # read through hostvars: the roles' values only, no label checks
    sharing = pool["labels"].get("sharing")
    if sharing and sharing != result["sharing_label"]:
        _warn(warnings, "sharing_label_differs", "pool %s: node label sharing=%s, the design decides %s: set "
              "node_prereqs_pool.sharing: %s" % (pool["name"], sharing, allocation, result["sharing_label"]),
              pool=pool["name"])
    if not result["node_selector"]:
        _warn(warnings, "pool_without_labels", "pool %s has no accelerator/workload labels "
              "(node_prereqs_pool): jobs cannot select it and land anywhere a GPU is free" % pool["name"],
              pool=pool["name"])
    return result


def _placement(pool):
    """KAI placement strategy of the pool's scheduling shard, with the reason."""
    if pool["placement"]:
        return pool["placement"], "explicit in the inventory"
    if pool["workload"] in PLACEMENT_SPREAD:
        return "spread", ("%s work is latency-sensitive: spread pods over nodes and GPUs so one busy GPU or node "
                          "slows fewer of them" % pool["workload"])
    return "binpack", ("%s work: pack pods onto the fewest nodes and GPUs so whole nodes stay free for gangs of "
                       "whole-node pods" % pool["workload"])


def _pods_get(result, slices_wanted):
    """What a pod on this pool gets, in the words the team's namespace carries."""
    allocation = result["allocation"]
    if allocation == "mig":
        profiles = sorted((result["mig"] or {}).get("offered") or slices_wanted or {})
        return "MIG slice %s" % ", ".join(profiles) if profiles else "MIG slice"
    if allocation == "mps":
        n = result["mps"]["replicas"]
        return "MPS share (1/%d of a GPU's memory and compute)" % n
    if allocation == "time-slicing":
        return "time-slice (1/%d, no isolation)" % result["time_slicing"]["replicas"]
    if allocation == "fraction":
        return "GPU fraction (KAI)"
    return "full GPU"


def _toleration(taint, prefix):
    key = taint.get("key", "")
    if "/" not in key:
        key = prefix + key
    tol = {"key": key, "operator": "Equal", "value": str(taint.get("value", "")), "effect": taint["effect"]}
    if not tol["value"]:
        tol = {"key": key, "operator": "Exists", "effect": taint["effect"]}
    return tol


def _team_priority(tenant, needs):
    if needs["priority"] is not None:
        return needs["priority"]
    value = ((tenant or {}).get("queue") or {}).get("priority")
    return quota_int(value)


def _team_share(queue, backend):
    """Over-quota weight (KAI queue.gpu.over_quota_weight, default 1 as roles/queues renders it)
    or Kueue fair-sharing weight (queue.fair_sharing_weight, Kueue's default 1)."""
    if backend == "kai":
        return ((queue.get("gpu") or {}).get("over_quota_weight", 1))
    if backend == "kueue":
        return queue.get("fair_sharing_weight", 1)
    return None


def _pool_needs(pool, teams):
    needs = []
    if len(pool["teams"]) > 1:
        needs.append("several teams compete for pool %s (%s): quotas alone leave idle GPUs unused, a queue lends "
                     "them by share and takes them back" % (pool["name"], ", ".join(pool["teams"])))
    gang = [t for t in pool["teams"] if teams[t]["gang"]]
    if gang:
        needs.append("distributed training on pool %s (%s) needs gang starts: all pods or none"
                     % (pool["name"], ", ".join(gang)))
    borrow = [t for t in pool["teams"] if teams[t]["borrow"]]
    if borrow and len(pool["teams"]) > 1:
        needs.append("borrowing between teams on pool %s (%s borrow idle GPUs)" % (pool["name"], ", ".join(borrow)))
    return needs, bool(gang), bool(borrow and len(pool["teams"]) > 1)


def decide_scheduler(pools, teams, explicit):
    reasons, gang, borrow = [], False, False
    for pool in pools.values():
        r, g, b = _pool_needs(pool, teams)
        reasons += r
        gang = gang or g
        borrow = borrow or b
    fractions = sorted(p["name"] for p in pools.values() if p["allocation"] == "fraction")
    if fractions:
        reasons.append("GPU fractions on pool %s: only KAI Scheduler hands out and accounts parts of a GPU "
                       "(global.gpuSharing)" % ", ".join(fractions))
    if not reasons:
        recommended = "none"
        why = ["one team per pool, no gang starts and no borrowing: namespace quotas and the default "
               "scheduler are enough"]
    elif gang or fractions:
        recommended = "kai"
        why = ["KAI Scheduler: gang starts for any pod set (PodGroup minMember), hierarchical queues with quota, "
               "over-quota weight and priority, reclaim of over-quota work"]
        if fractions:
            why.append("KAI GPU sharing: pods annotated gpu-fraction or gpu-memory share a GPU that a reservation "
                       "pod holds, and their fractions count in the queues")
    elif borrow:
        recommended = "kueue"
        why = ["Kueue: cohorts with explicit borrowing and lending limits per team, Jobs admitted whole against "
               "quota, pods scheduled by the default scheduler"]
    else:
        recommended = "kai"
        why = ["KAI Scheduler: fair share of idle GPUs by over-quota weight, priorities between queues"]
    backend = explicit or recommended
    return {"backend": backend, "recommended": recommended, "explicit": explicit,
            "differs": backend != recommended, "reasons": reasons + why,
            "scheduler_name": upstream.KAI_SCHEDULER_NAME if backend == "kai" else upstream.DEFAULT_SCHEDULER_NAME}


def decide_teams(pools, decided, tenants, teams, backend, warnings):
    result = {}
    for name in sorted(teams):
        tenant = tenants.get(name)
        needs = teams[name]
        quota = dict(((tenant or {}).get("quota") or {}))
        queue = dict(((tenant or {}).get("queue") or {}))
        # in DRA mode the GPU quota counts claimed devices per DeviceClass (tenants: claim quotas)
        gpu_quota = dict((k, v) for k, v in sorted(quota.items())
                         if str(k).startswith(QUOTA_PREFIX + "nvidia.com/")
                         or str(k).endswith(upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX))
        team_pools = [p for p in sorted(pools) if name in pools[p]["teams"]]
        if tenant is None:
            _warn(warnings, "team_without_tenant", "team %s is not in tenants_list: no namespace, no quota"
                  % name, team=name)
        elif not gpu_quota:
            _warn(warnings, "team_without_quota", "team %s has no requests.nvidia.com/* quota (nor one on claims, "
                  "<class>%s): it can take every GPU of its pools" % (name, upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX), team=name)
        if tenant is not None and backend != "none" and not queue:
            _warn(warnings, "team_without_queue", "team %s has no queue block, but the queue backend is %s: "
                  "give tenants_list[%s].queue its %s (roles/queues)" % (
                      name, backend, name, "parent, priority and gpu quota/limit/over_quota_weight"
                      if backend == "kai" else "cohort, flavors and fair_sharing_weight"), team=name)
        if needs["preempts"] and backend == "none":
            _warn(warnings, "preemption_without_queue", "team %s may preempt %s, but without a queue backend "
                  "nothing preempts" % (name, ", ".join(needs["preempts"])), team=name)
        wants_whole = bool(quota_int(quota.get(QUOTA_PREFIX + upstream.GPU_RESOURCE))) or any(
            needs["whole_gpus"].values())
        offers_whole = any(decided[p]["allocation"] != "mig" or (decided[p]["mig"] or {}).get("whole_gpus")
                           for p in team_pools)
        if needs["gang"] and team_pools and not (wants_whole and offers_whole):
            _warn(warnings, "gang_without_whole_gpus", "team %s needs gang starts for distributed training, but %s: "
                  "its gang runs on MIG slices (no NVLink/P2P between slices); give it a requests.nvidia.com/gpu "
                  "quota and platform_requirements.teams.%s.whole_gpus" % (
                      name, "its pools (%s) offer only MIG slices" % ", ".join(team_pools) if not offers_whole
                      else "it has no whole-GPU quota", name), team=name)
        slices = team_slices(tenant, needs)
        for profile in sorted(slices):
            offered = any(profile in ((decided[p]["mig"] or {}).get("offered") or {})
                          or profile in ((decided[p]["mig"] or {}).get("requested") or {}) for p in team_pools)
            if not offered:
                _warn(warnings, "slices_not_offered", "team %s wants %d x %s, which none of its pools (%s) offers"
                      % (name, slices[profile], profile, ", ".join(team_pools) or "none"), team=name)
        result[name] = {
            "pools": team_pools,
            "namespace": name,
            "quota": gpu_quota,
            "queue": queue,
            # roles/queues names the KAI leaf queue, the ClusterQueue and the LocalQueue after the team
            "queue_name": name,
            "priority": _team_priority(tenant, needs),
            "share": _team_share(queue, backend),
            "mig_slices": slices,
            "labels": dict(((tenant or {}).get("labels") or {})),
            "borrows_from": sorted(t for t in teams if t != name and needs["borrow"] and teams[t]["lend"]
                                   and set(team_pools) & set(p for p in pools if t in pools[p]["teams"])),
            "preempts": list(needs["preempts"]),
            "preempted_by": sorted(t for t in teams if name in teams[t]["preempts"]),
            "needs": needs,
            "gpu_allocation": _team_allocation(team_pools, decided, slices, dict(
                (p, _whole_wanted(name, p, tenants, teams, {name: team_pools})) for p in team_pools)),
        }
    return result


def _team_allocation(team_pools, decided, slices, whole_wanted):
    """The namespace annotation: what the team's pods get, per pool when it has several."""
    texts = []
    for pool in team_pools:
        d = decided[pool]
        text = d["pods_get"]
        if d["allocation"] == "mig":
            layout = d["mig"] or {}
            parts = []
            if whole_wanted.get(pool) and (layout.get("whole_gpus") or layout.get("covered") is None):
                parts.append("full GPU")
            if slices:
                mine = sorted(p for p in slices if p in (layout.get("offered") or slices))
                parts.append("MIG slice %s" % ", ".join(mine or sorted(slices)))
            text = " or ".join(parts) or text
        texts.append((pool, text))
    if not texts:
        return None
    if len(texts) == 1:
        return texts[0][1]
    return "; ".join("%s: %s" % t for t in texts)


def _check_cluster_wide(decided, scheduler):
    """Refusals that depend on other pools or on the queue backend."""
    mig_pools = sorted(n for n, d in decided.items() if d["allocation"] == "mig")
    for name in sorted(decided):
        d = decided[name]
        if d["allocation"] == "mps" and mig_pools:
            raise DesignError(
                "platform_pools.%s.allocation: mps refused: pool %s uses MIG, so the design sets "
                "gpu_operator_mig_strategy: mixed, and the GPU Operator passes that strategy to every device plugin "
                "(MIG_STRATEGY), which refuses MPS with it (\"using --mig-strategy=mixed is not supported with "
                "MPS\"). Use allocation: time-slicing or exclusive for %s, or run the MIG pool in another cluster"
                % (name, ", ".join(mig_pools), name))
        if d["allocation"] == "fraction" and scheduler["backend"] != "kai":
            raise DesignError(
                "platform_pools.%s.allocation: fraction refused: GPU fractions are KAI Scheduler's GPU sharing "
                "(global.gpuSharing, pods annotated gpu-fraction), but the queue backend is %s. Set "
                "platform_requirements.queue_backend: kai, or choose allocation: mps or time-slicing for %s"
                % (name, scheduler["backend"], name))


def _mixed_priority_warnings(pools, decided_teams, teams, backend, warnings):
    for pool in pools.values():
        kinds = dict((t, teams[t]["workload"] or pool["workload"]) for t in pool["teams"])
        training = [t for t in pool["teams"] if kinds[t] in ("training", "batch")]
        serving = [t for t in pool["teams"] if kinds[t] == "inference"]
        if not training or not serving:
            continue
        prio = dict((t, decided_teams[t]["priority"]) for t in training + serving)
        ordered = (backend != "none" and all(prio[t] is not None for t in prio)
                   and min(prio[t] for t in serving) > max(prio[t] for t in training))
        if not ordered:
            _warn(warnings, "training_and_inference_without_priority",
                  "pool %s runs training (%s) and inference (%s) without a higher queue priority for inference: "
                  "a training burst can starve serving; give the inference teams a higher priority (queue.priority) "
                  "with a queue backend, or separate pools" % (pool["name"], ", ".join(training), ", ".join(serving)),
                  pool=pool["name"])


def role_values(decided, scheduler, decided_teams=None):
    """The values the existing roles take (docs/design.md, "Wiring the roles")."""
    configs, nodes = {}, {}
    for name in sorted(decided):
        ts = decided[name]["time_slicing"]
        mps = decided[name]["mps"]
        if ts:
            configs[ts["config"]] = {"replicas": ts["replicas"], "fail_requests_greater_than_one": True}
        elif mps:
            # one ConfigMap, one selection label: sharing.mps instead of sharing.timeSlicing
            configs[mps["config"]] = {"replicas": mps["replicas"], "strategy": "mps",
                                      "fail_requests_greater_than_one": True}
        else:
            continue
        for node in decided[name]["node_names"]:
            nodes[node] = (ts or mps)["config"]
    time_slicing = {"configmap": TIME_SLICING_CONFIGMAP, "configs": configs, "nodes": nodes} if configs else None
    any_mig = any(d["allocation"] == "mig" for d in decided.values())
    mig_by_host = {}
    for name in sorted(decided):
        mig_by_host.update(decided[name]["mig_profiles"])
    return {
        "gpu_operator_time_slicing": time_slicing,
        # mixed: teams' quotas name nvidia.com/mig-<profile> resources (single would expose nvidia.com/gpu)
        "gpu_operator_mig_strategy": "mixed" if any_mig else None,
        "mig_profile_by_host": mig_by_host,
        "tenants_queue_backend": scheduler["backend"],
        # roles/tenants: annotation gpu-platform.skaffon.io/gpu-allocation on each team's namespace
        "tenants_gpu_allocation": dict((t, v["gpu_allocation"]) for t, v in sorted((decided_teams or {}).items())
                                       if v["gpu_allocation"]),
        # roles/queues (KAI): global.gpuSharing when a pool uses fractions; placement per pool (its shard)
        "queues_kai_gpu_sharing": any(d["allocation"] == "fraction" for d in decided.values()),
        "queues_kai_placement": dict((n, decided[n]["placement"]) for n in sorted(decided)),
        # the admission policy lets only these pools' teams ask for fractions
        "queues_kai_fraction_pools": sorted(n for n in decided if decided[n]["allocation"] == "fraction"),
    }


def decide(pools, tenants=None, requirements=None, inventory=None, mig_parted_config=None):
    """The whole design: see the module docstring and docs/design.md for the output keys."""
    pools = normalize_pools(pools, inventory)
    tenants = normalize_tenants(tenants)
    req = normalize_requirements(requirements, tenants, pools)
    teams = req["teams"]
    parted = None
    if mig_parted_config:
        try:
            parted = mig.MigPartedConfig(mig_parted_config, source="mig_parted_config")
        except mig.MigError as exc:
            raise DesignError("mig_parted_config: %s" % exc)
    warnings = []
    pools_of = dict((t, sorted(p for p in pools if t in pools[p]["teams"])) for t in teams)
    decided = dict((name, decide_pool(pool, tenants, teams, parted, warnings, pools_of))
                   for name, pool in sorted(pools.items()))
    scheduler = decide_scheduler(pools, teams, req["queue_backend"])
    if scheduler["differs"]:
        _warn(warnings, "explicit_differs", "queue backend: the inventory chooses %s, the recommendation is %s"
              % (scheduler["backend"], scheduler["recommended"]))
    # first: with DRA the device plugin's own refusals (MPS next to the mixed strategy) do not apply
    allocation = dra.decide(decided, pools, dra.normalize(req["allocation"]), warnings, _warn)
    _check_cluster_wide(decided, scheduler)
    decided_teams = decide_teams(pools, decided, tenants, teams, scheduler["backend"], warnings)
    _mixed_priority_warnings(pools, decided_teams, teams, scheduler["backend"], warnings)
    for name in sorted(pools):
        decided[name]["scheduler_needs"] = _pool_needs(pools[name], teams)[0]
    return {
        "pools": decided,
        "scheduler": scheduler,
        "queue_backend": scheduler["backend"],
        "teams": decided_teams,
        "allocation_api": allocation,
        "roles": dra.role_values(role_values(decided, scheduler, decided_teams), allocation),
        "requirements": dict((k, v) for k, v in req.items() if k not in ("teams", "allocation")),
        "warnings": warnings,
    }
