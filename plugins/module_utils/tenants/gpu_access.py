# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU access only through a request: a ValidatingAdmissionPolicy and its binding per team namespace.

    objects.extend(render(entry, settings, meta))     # part of tenants.render_team; meta(name) -> metadata

The NVIDIA container runtime reads NVIDIA_VISIBLE_DEVICES from a container's environment; with the
toolkit's defaults it grants the GPUs named there to any container, past the device plugin, the
ResourceQuota and the queue (docs/security.md). The runtime setting the platform makes
(gpu_operator_gpu_access_by_request, node_prereqs_gpu_access_by_request) closes that; this policy
refuses the attempt at admission with a reason, so a team learns why instead of getting no GPU:

- NVIDIA_VISIBLE_DEVICES in any container (init and ephemeral too) with a value other than
  `void`/`none` (which grant nothing), or from valueFrom: the device plugin sets it for the GPUs it
  allocated, a pod's own entry would replace that list;
- NVIDIA_DRIVER_CAPABILITIES in a container that requests no GPU;
- a volumeMount of a hostPath /dev, /dev/nvidia* in a container that requests no GPU.

A GPU request is a non-zero nvidia.com/gpu (any sharing suffix) or nvidia.com/mig-* in the
container's limits or requests, or (DRA mode) a claim in the container's resources.claims. What admission cannot see stays with the runtime setting: the
variable baked into an image (CUDA images set NVIDIA_VISIBLE_DEVICES=all) and envFrom.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants.pod_policy import pod_policy_spec, team_policy

POLICY_PREFIX = "skaffon-gpu-access-"
SETTING = "gpu_access_policy"
HARMLESS_VALUES = ("void", "none")   # the toolkit injects no device for these


def policy_name(team):
    return POLICY_PREFIX + team


def _gpu_request(var):
    """CEL: container `var` asks for a GPU in its limits or requests."""
    one = ("(has(%(v)s.resources) && has(%(v)s.resources.%(t)s) && %(v)s.resources.%(t)s.exists(k, "
           "(k.startsWith('%(gpu)s') || k.startsWith('%(mig)s')) && string(%(v)s.resources.%(t)s[k]) != '0'))")
    args = {"v": var, "gpu": upstream.GPU_RESOURCE, "mig": upstream.MIG_RESOURCE_PREFIX}
    claimed = "(has(%(v)s.resources) && has(%(v)s.resources.claims) && size(%(v)s.resources.claims) > 0)" % args
    return "(%s || %s || %s)" % (one % dict(args, t="limits"), one % dict(args, t="requests"), claimed)


def policy_spec():
    visible, caps = upstream.NVIDIA_VISIBLE_DEVICES, upstream.NVIDIA_DRIVER_CAPABILITIES
    harmless = "[%s]" % ", ".join("'%s'" % v for v in HARMLESS_VALUES)
    sets_visible = ("(has(c.env) && c.env.exists(e, e.name == '%s' && "
                    "(has(e.valueFrom) || !((has(e.value) ? e.value : '') in %s))))" % (visible, harmless))
    sets_caps = "(has(c.env) && c.env.exists(e, e.name == '%s'))" % caps
    mounts_dev = ("(has(c.volumeMounts) && c.volumeMounts.exists(m, m.name in variables.deviceVolumes))")
    variables = [
        {"name": "containers", "expression": (
            "(has(object.spec.initContainers) ? object.spec.initContainers : []) + "
            "(has(object.spec.containers) ? object.spec.containers : []) + "
            "(has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])")},
        {"name": "deviceVolumes", "expression": (
            "(has(object.spec.volumes) ? object.spec.volumes : [])"
            ".filter(v, has(v.hostPath) && (v.hostPath.path in ['/dev', '/dev/'] || "
            "v.hostPath.path.startsWith('/dev/nvidia')))"
            ".map(v, v.name)")},
        {"name": "offenders", "expression": (
            "variables.containers.filter(c, %s || (!%s && (%s || %s)))"
            % (sets_visible, _gpu_request("c"), sets_caps, mounts_dev))},
    ]
    rule = ("(%s ? 'sets %s (only %s grant nothing; the device plugin names the GPUs it allocated)' : "
            "%s ? 'sets %s without requesting a GPU' : "
            "'mounts a host path /dev or /dev/nvidia* without requesting a GPU')"
            % (sets_visible.replace("c.", "o."), visible, "/".join(HARMLESS_VALUES),
               sets_caps.replace("c.", "o."), caps))
    message = ("variables.offenders.map(o, 'container ' + o.name + ' ' + %s)[0] + "
               "': in namespace ' + request.namespace + ' GPUs come only through a resource request "
               "(%s or %s<profile> in resources.limits, or a ResourceClaim in resources.claims)'"
               % (rule, upstream.GPU_RESOURCE, upstream.MIG_RESOURCE_PREFIX))
    return pod_policy_spec(variables, [{"expression": "size(variables.offenders) == 0", "messageExpression": message,
                                        "reason": "Forbidden"}])


def render(entry, settings, meta):
    """[ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding] of a team, or [] when the site
    turned the policy off (tenants_gpu_access_policy: false)."""
    if not settings.get(SETTING, True):
        return []
    team = entry["name"]
    name = policy_name(team)
    return team_policy(name, team, meta, policy_spec())
