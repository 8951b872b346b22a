# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The queue backends in DRA mode (queues_allocation_api: dra): what each counts of a ResourceClaim,
and what is refused because the backend cannot count it (pure).

    check(backend, tenants, kai_gpu_sharing, kai_fraction_pools)   # raises DomainError
    device_class_mappings()                                          # Kueue's resources.deviceClassMappings

Kueue v0.19 (KueueDRAIntegration, beta, on by default since v0.18) charges a claim from a
ResourceClaimTemplate to the ClusterQueue under the resource name its Configuration's
`resources.deviceClassMappings` gives the claim's DeviceClass: the request's count, ExactCount only
(allocationMode All, firstAvailable, constraints and adminAccess make the Workload inadmissible),
templates only (a pod naming a ResourceClaim directly is inadmissible). We map gpu.nvidia.com to
nvidia.com/gpu, so a team's flavors keep their nvidia.com/gpu rows, and mig.nvidia.com to
nvidia.com/mig (one DeviceClass for every profile: Kueue cannot tell 1g.10gb from 7g.80gb;
counter-based quota needs Kubernetes 1.35 and DRAPartitionableDevices).

KAI v0.17 detects DRA by discovery (resource.k8s.io served, no flag) and charges a pod's claims to
its queue as GPUs only when the DeviceClass name contains "gpu" (pkg/common/resources/dra.go
IsGPUDeviceClass): gpu.nvidia.com counts (its ExactCount count), mig.nvidia.com is never charged,
and an All claim counts as one GPU whatever the node has; its GPU fractions reserve a GPU with a
reservation pod asking nvidia.com/gpu, which no device plugin serves in DRA mode.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError

DRA = "dra"
VARIABLE = "queues_allocation_api"
KUEUE_MIG_RESOURCE = "nvidia.com/mig"
# DeviceClass -> the resource name Kueue charges (ClusterQueue coveredResources)
KUEUE_DEVICE_CLASS_MAPPINGS = ((upstream.GPU_RESOURCE, (upstream.DEVICE_CLASS_GPU,)),
                               (KUEUE_MIG_RESOURCE, (upstream.DEVICE_CLASS_MIG,)))


def is_dra(allocation_api):
    return allocation_api == DRA


def claim_quota_resource(key):
    """A team's ResourceQuota key on claims -> the Kueue resource it caps (nvidia.com/gpu, nvidia.com/mig)."""
    for resource, classes in KUEUE_DEVICE_CLASS_MAPPINGS:
        for device_class in classes:
            if key == device_class + upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX:
                return resource
    return None


def _templates(team):
    raw = team.get("claim_templates") if isinstance(team, dict) else None
    return [t for t in raw if isinstance(t, dict)] if isinstance(raw, list) else []


def _refuse(var, value, problem, fix):
    raise DomainError("%s = %r: %s; %s" % (var, value, problem, fix), variable=var)


def check(backend, tenants, kai_gpu_sharing=None, kai_fraction_pools=None):
    """Refuse what the backend cannot count in DRA mode, naming the team, the value and the fix."""
    if backend == "kai":
        if kai_gpu_sharing or kai_fraction_pools:
            _refuse("queues_kai_gpu_sharing", kai_gpu_sharing or kai_fraction_pools,
                    "KAI's GPU fractions reserve a GPU with a reservation pod that asks %s, which no device plugin "
                    "serves in DRA mode (%s: dra), so every fractional pod would stay Pending"
                    % (upstream.GPU_RESOURCE, VARIABLE),
                    "turn queues_kai_gpu_sharing off (and queues_kai_fraction_pools null), or keep the "
                    "device-plugin mode where fractions are wanted")
    for index, team in enumerate(tenants or []):
        if not isinstance(team, dict) or not isinstance(team.get("queue"), dict):
            continue
        for j, template in enumerate(_templates(team)):
            var = "tenants_list[%d].claim_templates[%d]" % (index, j)
            if backend == "kai" and template.get("mig_profile"):
                _refuse(var, template, "KAI v0.17 charges a claim to the queue only when its DeviceClass name "
                        "contains 'gpu': claims of %s are never counted, so queue %s would not limit them"
                        % (upstream.DEVICE_CLASS_MIG, team.get("name")),
                        "drop the MIG template for teams with a KAI queue (the ResourceQuota on %s%s still counts "
                        "them) or use Kueue" % (upstream.DEVICE_CLASS_MIG, upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX))
            if backend == "kai" and template.get("all_gpus"):
                _refuse(var, template, "KAI v0.17 counts an allocationMode All claim as one GPU in queue %s, "
                        "whatever the node has" % team.get("name"),
                        "use gpus: <the node's GPU count> for teams with a KAI queue")
            if backend == "kueue" and template.get("all_gpus"):
                _refuse(var, template, "Kueue charges only ExactCount requests; a Workload whose claim asks "
                        "allocationMode All is inadmissible",
                        "use gpus: <the node's GPU count> for teams with a Kueue queue")
        if backend == "kueue":
            for j, flavor in enumerate(team["queue"].get("flavors") or []):
                for resource in sorted((flavor or {}).get("resources") or {} if isinstance(flavor, dict) else {}):
                    if str(resource).startswith(upstream.MIG_RESOURCE_PREFIX):
                        _refuse("tenants_list[%d].queue.flavors[%d].resources" % (index, j), resource,
                                "in DRA mode no pod requests %s; Kueue charges MIG claims under one name for every "
                                "profile (DeviceClass %s -> %s)"
                                % (resource, upstream.DEVICE_CLASS_MIG, KUEUE_MIG_RESOURCE),
                                "name the row %s" % KUEUE_MIG_RESOURCE)


def device_class_mappings():
    """Kueue's resources.deviceClassMappings: the DeviceClass of a claim -> the resource it is charged as."""
    return [{"name": resource, "deviceClassNames": list(classes)} for resource, classes in KUEUE_DEVICE_CLASS_MAPPINGS]
