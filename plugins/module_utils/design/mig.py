# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG layout of a pool: which mig-parted config each node gets so the teams' slices fit (pure).

A node gets one mig-parted config (the mig role sets one `mig_profile` per host), so the
search picks, per node, one config that splits every GPU of the node the same way.
Candidates are the configs of the cluster's mig-parted config when one is given, else
the upstream naming rule of default-mig-parted-config.yaml: `all-disabled` (whole GPUs)
and `all-<profile>` = as many instances of <profile> as fit on one GPU (mig.GPU_MODELS).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig import profiles as mig
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream

WHOLE = upstream.MIG_CONFIG_ALL_DISABLED
# Where default-mig-parted-config.yaml breaks its own naming rule (checked by a unit test
# against the real file): its all-1g.35gb entry filters only the H200 SXM, not the H200 NVL.
NOT_IN_DEFAULT_CONFIG = {"0x233B10DE": ("all-1g.35gb",)}


def derived_configs(model, device_id=None):
    """{config name: per-GPU {profile: n}} following default-mig-parted-config's names; None = whole GPU."""
    configs = {WHOLE: None}
    gaps = NOT_IN_DEFAULT_CONFIG.get(device_id, ())
    for profile, info in model["profiles"].items():
        name = upstream.MIG_CONFIG_ALL_PREFIX + mig.resource_suffix(profile)
        if name not in gaps:
            configs[name] = {profile: info["max"]}
    return configs


def configs_from(parted, model, device_id, gpus_per_node):
    """Uniform configs of a MigPartedConfig that apply to this GPU without problems."""
    configs = {}
    for name in parted.names():
        if parted.problems(name, model, device_id, gpus_per_node):
            continue
        layout = parted.layout(name, device_id, gpus_per_node)
        first = layout[0]
        if any(item != first for item in layout) or first is None:
            continue  # per-index layouts do not fit the one-config-per-node model
        if not first["mig_enabled"]:
            configs[name] = None
        elif first["devices"]:
            configs[name] = dict((p, int(n)) for p, n in first["devices"].items())
    return configs


def _score(choice, configs, need, whole_need, gpus):
    got, whole, mig_nodes, offered_slices = {}, 0, 0, 0
    for name, count in choice.items():
        per_gpu = configs[name]
        if per_gpu is None:
            whole += count * gpus
            continue
        mig_nodes += count
        for profile, n in per_gpu.items():
            got[profile] = got.get(profile, 0) + n * gpus * count
            offered_slices += mig.compute_slices(profile) * n * gpus * count
    # the slices are why the pool runs MIG: cover them first, then the whole GPUs
    unmet_slices = sum(max(0, want - got.get(p, 0)) * mig.compute_slices(p) for p, want in need.items())
    unmet_whole = max(0, whole_need - whole)
    needed_slices = sum(mig.compute_slices(p) * n for p, n in need.items())
    return (unmet_slices, unmet_whole, mig_nodes, offered_slices - needed_slices), got, whole


def search(configs, need, whole_need, nodes, gpus):
    """Best {config: node count}: cover the slices, then the whole GPUs, then use the fewest MIG nodes,
    then waste the fewest compute slices."""
    useful = sorted(n for n, per_gpu in configs.items()
                    if per_gpu is not None and set(per_gpu) & set(need))
    whole_name = next((n for n in sorted(configs) if configs[n] is None), None)
    bounds = []
    for name in useful:
        per_gpu = configs[name]
        bound = max(-(-need[p] // (per_gpu[p] * gpus)) for p in per_gpu if p in need)
        bounds.append(min(bound, nodes))
    best = [None]

    def visit(index, left, choice):
        if index == len(useful):
            full = dict(choice)
            if left:
                if whole_name is None:
                    return
                full[whole_name] = left
            score = _score(full, configs, need, whole_need, gpus)
            key = (score[0], sorted(full.items()))
            if best[0] is None or key < best[0][0]:
                best[0] = (key, full, score[1], score[2])
            return
        for count in range(min(bounds[index], left) + 1):
            if count:
                choice[useful[index]] = count
            else:
                choice.pop(useful[index], None)
            visit(index + 1, left - count, choice)
        choice.pop(useful[index], None)

    visit(0, nodes, {})
    if best[0] is None:
        return None
    key, choice, got, whole = best[0][0], best[0][1], best[0][2], best[0][3]
    return {"choice": choice, "unmet": key[0][0] + key[0][1], "offered": got, "whole_gpus": whole}


def layout(model_name, model, device_id, need, whole_need, hosts, gpus, parted=None):
    """The pool's MIG layout: per host a config, what it offers, and whether it covers the need."""
    configs = configs_from(parted, model, device_id, gpus) if parted is not None else derived_configs(model, device_id)
    unknown = sorted(p for p in need if p not in model["profiles"])
    if unknown:
        return {"covered": False, "profiles": {}, "profile": None, "offered": {}, "whole_gpus": 0,
                "requested": dict(need), "whole_requested": whole_need, "configs": {},
                "reason": "profile(s) %s do not exist on %s (it has %s)"
                          % (", ".join(unknown), model_name, ", ".join(sorted(model["profiles"])))}
    nodes = len(hosts)
    found = search(configs, need, whole_need, nodes, gpus)
    if found is None:
        return {"covered": False, "profiles": {}, "profile": None, "offered": {}, "whole_gpus": 0,
                "requested": dict(need), "whole_requested": whole_need, "configs": {},
                "reason": "the mig-parted config has no config for %s that leaves GPUs whole" % model_name}
    # Nodes in host order: MIG configs first (by name), the whole-GPU config last.
    order = sorted(found["choice"].items(), key=lambda item: (configs[item[0]] is None, item[0]))
    profiles, index = {}, 0
    for name, count in order:
        for host in hosts[index:index + count]:
            profiles[host] = name
        index += count
    uniform = sorted(set(profiles.values()))
    result = {
        "covered": found["unmet"] == 0,
        "profiles": profiles,
        "profile": uniform[0] if len(uniform) == 1 else None,
        "offered": found["offered"],
        "whole_gpus": found["whole_gpus"],
        "requested": dict(need),
        "whole_requested": whole_need,
        "configs": dict((name, configs[name]) for name in sorted(found["choice"])),
        "reason": None,
    }
    if not result["covered"]:
        more = None
        for extra in range(1, 65):
            bigger = search(configs, need, whole_need, nodes + extra, gpus)
            if bigger and bigger["unmet"] == 0:
                more = extra
                break
        want = ", ".join("%d x %s" % (n, p) for p, n in sorted(need.items()))
        if whole_need:
            want += ", %d whole GPU(s)" % whole_need
        result["reason"] = (
            "no layout of one config per node covers %s on %d node(s) x %d GPU(s); the closest offers %s. %s"
            % (want, nodes, gpus, describe(result), "%d more node(s) like these would cover it" % more if more
               else "lower the requests or add nodes"))
    return result


def describe(result):
    parts = ["%d x %s" % (n, p) for p, n in sorted(result["offered"].items())]
    if result["whole_gpus"]:
        parts.append("%d whole GPU(s)" % result["whole_gpus"])
    return ", ".join(parts) or "nothing"
