# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's allocation API: the device plugin (default) or Dynamic Resource Allocation.

One choice per cluster, because the GPU Operator runs one stack: a ClusterPolicy (device plugin,
MIG manager, time-slicing and MPS configs) or a GPUCluster (NVIDIA's DRA driver publishing
ResourceSlices); the chart refuses both CRs at once and the operator keeps each not ready while the
other exists. DRA is an explicit choice with its refusals, never a recommendation: the chart
v26.7.0 marks the GPUCluster stack experimental.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.design.inputs import DesignError

DEVICE_PLUGIN = "device-plugin"
DRA = "dra"
ALLOCATION_APIS = (DEVICE_PLUGIN, DRA)
# Allocations that are device plugin configs (time-slicing, MPS) or KAI's sharing of nvidia.com/gpu
# GPUs (fraction, reservation pods): none exists without the device plugin.
DEVICE_PLUGIN_ONLY = ("time-slicing", "mps", "fraction")
EXPERIMENTAL = ("the GPU Operator chart v26.7.0 marks the GPUCluster (DRA) stack experimental and disabled by "
                "default (values.yaml gpuCluster.deployCR)")
_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(\.\d+)?$")

MIG_CONFIG_ALL_DISABLED = upstream.MIG_CONFIG_ALL_DISABLED
# k8s-dra-driver-gpu (cmd/gpu-kubelet-plugin/nvlib.go) announces a MIG-enabled GPU only as its MIG devices;
# the GPUCluster's validator, DCGM and DCGM exporter claim gpu.nvidia.com devices on every GPU node
# (manifests state-dra-validation, state-dcgm, state-dcgm-exporter; the node labelling sets their deploy labels
# on all GPU nodes).
DRA_ALL_MIG = (
    "pool %s: on %s every GPU runs MIG (one mig-parted config per node), so the DRA driver publishes no whole GPU "
    "there, while the GPUCluster's validator, DCGM and DCGM exporter pods claim a gpu.nvidia.com device on every "
    "GPU node: they stay Pending and the GPUCluster stays notReady (OperandNotReady). Leave at least one GPU of "
    "each such node whole (a per-GPU mig-parted config), or use allocation: exclusive for the pool")

REASONS_DRA = [
    "the inventory chooses Dynamic Resource Allocation (platform_requirements.allocation_api: dra): pods claim "
    "devices through ResourceClaims, the DeviceClasses %s and %s select whole GPUs and MIG devices by the "
    "attributes NVIDIA's DRA driver publishes per node (productName, profile, uuid), quotas count claims per "
    "device class" % (upstream.DEVICE_CLASS_GPU, upstream.DEVICE_CLASS_MIG),
    EXPERIMENTAL + "; the inventory accepts that (platform_requirements.dra_experimental: true)",
]
TRADE_OFFS_DRA = (
    "experimental upstream (chart, driver v0.5.0, GPUCluster v1alpha1); no time-slicing, MPS or KAI fractions "
    "(all three are device plugin configurations); the GPUCluster stack runs no MIG manager, so MIG layouts are "
    "set on the hosts and the driver publishes what it finds; workloads request claims instead of "
    "nvidia.com/gpu limits, so existing job specs must change; switching an installed cluster between the two "
    "stacks is refused (uninstall, then install the other)")
REASONS_DEVICE_PLUGIN = [
    "default: the NVIDIA device plugin (ClusterPolicy stack) serves nvidia.com/gpu, MIG and sharing resources; "
    "Dynamic Resource Allocation is an explicit, experimental choice (platform_requirements.allocation_api: dra)",
]


def kubernetes_version(value, field="platform_requirements.kubernetes_version"):
    """(major, minor) of 'v1.34', '1.34' or '1.34.2'."""
    match = _VERSION_RE.match(str(value).strip()) if value is not None else None
    if not match:
        raise DesignError("%s is %r: give the cluster's Kubernetes version, e.g. \"1.34\"" % (field, value))
    return int(match.group(1)), int(match.group(2))


def normalize(req):
    """The allocation API inputs of platform_requirements (already checked for unknown keys)."""
    api = req.get("allocation_api")
    if api is None:
        api = DEVICE_PLUGIN
    if api not in ALLOCATION_APIS:
        raise DesignError("platform_requirements.allocation_api is %r; choose one of %s"
                          % (api, ", ".join(ALLOCATION_APIS)))
    version = req.get("kubernetes_version")
    experimental = req.get("dra_experimental")
    if experimental is not None and not isinstance(experimental, bool):
        raise DesignError("platform_requirements.dra_experimental is %r; write true or false (unquoted)"
                          % (experimental,))
    return {"api": api, "kubernetes_version": None if version is None else str(version),
            "dra_experimental": bool(experimental)}


def decide(decided, pools, alloc, warnings, warn):
    """The allocation API with its reasons; refusals raise DesignError naming the field and the fix.
    decided: the pools' decisions (allocation, mig layout); pools: their inputs (explicit mig_profile)."""
    if alloc["api"] == DEVICE_PLUGIN:
        return {"api": DEVICE_PLUGIN, "experimental": False, "reasons": list(REASONS_DEVICE_PLUGIN),
                "trade_offs": None, "kubernetes_version": alloc["kubernetes_version"]}
    if not alloc["dra_experimental"]:
        raise DesignError(
            "platform_requirements.allocation_api: dra refused: %s. Set platform_requirements.dra_experimental: "
            "true to choose it knowingly, or remove allocation_api (device plugin)" % EXPERIMENTAL)
    if alloc["kubernetes_version"] is None:
        raise DesignError(
            "platform_requirements.allocation_api: dra needs platform_requirements.kubernetes_version (e.g. "
            "\"1.34\"): Kubernetes serves DRA as %s from %d.%d only" % (
                upstream.RESOURCE_API_VERSION, upstream.DRA_MIN_KUBERNETES[0], upstream.DRA_MIN_KUBERNETES[1]))
    version = kubernetes_version(alloc["kubernetes_version"])
    if version < upstream.DRA_MIN_KUBERNETES:
        raise DesignError(
            "platform_requirements.allocation_api: dra refused: Kubernetes %d.%d serves no %s (DRA is GA from "
            "%d.%d, and the chart refuses a GPUCluster on a cluster without DeviceClasses). Upgrade the cluster "
            "first, or keep the device plugin" % (version + (upstream.RESOURCE_API_VERSION,)
                                                  + upstream.DRA_MIN_KUBERNETES))
    for name in sorted(decided):
        d = decided[name]
        if d["allocation"] in DEVICE_PLUGIN_ONLY:
            raise DesignError(
                "platform_pools.%s: allocation %s%s refused with allocation_api: dra: %s is a device plugin "
                "configuration%s, and the GPUCluster stack runs no device plugin (one stack per cluster: the "
                "chart refuses a ClusterPolicy next to a GPUCluster). Set platform_pools.%s.allocation: "
                "exclusive%s, or keep the device plugin for the cluster" % (
                    name, d["allocation"], "" if d["explicit"] else " (the recommendation)", d["allocation"],
                    " of KAI on nvidia.com/gpu" if d["allocation"] == "fraction" else "", name,
                    " (or mig)" if d["gpu"]["mig_capable"] else ""))
        if d["allocation"] == "mig" and pools[name].get("mig_profile"):
            raise DesignError(
                "platform_pools.%s.mig_profile: %s refused with allocation_api: dra: the mig role applies it "
                "through the MIG manager (label %s), which the GPUCluster stack does not run. Remove "
                "mig_profile and set the MIG layout on the hosts; the DRA driver publishes the MIG devices it "
                "finds (attribute profile)" % (name, d["mig_profile"], upstream.LABEL_MIG_CONFIG))
        if d["allocation"] == "mig":
            profiles = d["mig_profiles"] or {}
            layout = ", ".join("%s: %s" % hp for hp in sorted(profiles.items())) or "none"
            warn(warnings, "dra_mig_layout_on_hosts",
                 "pool %s: the GPUCluster stack runs no MIG manager; set the MIG layout on the hosts before the "
                 "DRA driver starts (%s), it publishes the MIG devices it finds" % (name, layout), pool=name)
            all_mig = sorted(h for h, p in profiles.items() if p and p != MIG_CONFIG_ALL_DISABLED)
            if all_mig:
                warn(warnings, "dra_node_without_whole_gpu", DRA_ALL_MIG % (name, ", ".join(all_mig)), pool=name)
    return {"api": DRA, "experimental": True, "reasons": list(REASONS_DRA), "trade_offs": TRADE_OFFS_DRA,
            "kubernetes_version": alloc["kubernetes_version"]}


def role_values(roles, allocation):
    """The roles' values for the allocation API: the operator's stack and the teams' claims; with DRA
    no device plugin settings and no MIG manager labels."""
    dra = allocation["api"] == DRA
    roles = dict(roles)
    roles["gpu_operator_allocation_api"] = allocation["api"]
    roles["gpu_operator_dra_experimental"] = dra
    roles["tenants_allocation_api"] = allocation["api"]
    if dra:
        roles["gpu_operator_time_slicing"] = None
        roles["gpu_operator_mig_strategy"] = None
        roles["mig_profile_by_host"] = {}
    return roles
