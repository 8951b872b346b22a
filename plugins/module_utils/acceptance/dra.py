# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hand-over checks in DRA mode (acceptance_allocation_api: dra): GPUs are devices in the
ResourceSlices the NVIDIA DRA driver publishes (one pool per node, named after it), pods get them
through ResourceClaims, and the team quota counts claims.

    gpus_visible(ctx, tools)        # every GPU host publishes GPUs (MIG devices on MIG nodes), none via nvidia.com/gpu
    cuda_test(ctx, tools)           # vectorAdd with a claim from a ResourceClaimTemplate
    wrong_node_excluded(ctx, tools) # a claim for a MIG profile the node's slices lack stays Pending Unschedulable
    quota_enforced(ctx, tools)      # a claim over the team's per-class quota is refused (403 exceeded quota)
    queues_fair(ctx)                # SKIP: the fairness probe asks nvidia.com/gpu, says why

`tools` carries the helpers of checks.py (test_pod, wait_for, pod_log, ensure_test_namespace,
pod_failure, condition), so this module needs nothing from it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.runner import FAIL, PASS, SKIP, Result
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError

DRA = "dra"
NO_SUCH_PROFILE = "7g.999gb"     # a profile no GPU has: the claim can be allocated nowhere
CLAIM_NAME = "gpu"               # the pod's name for its claim (spec.resourceClaims[].name)


def is_dra(ctx):
    return ctx.params.get("allocation_api") == DRA


def _string(device, attr):
    return ((device.get("attributes") or {}).get(attr) or {}).get("string")


def node_devices(ctx):
    """{node: [device]} of the driver's ResourceSlices (one LIST)."""
    slices = ctx.kube.list(upstream.RESOURCE_API_VERSION, upstream.RESOURCE_SLICE_KIND)[0]
    out = {}
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != upstream.DRA_DRIVER_NAME or not spec.get("nodeName"):
            continue
        out.setdefault(spec["nodeName"], []).extend(spec.get("devices") or [])
    return out


def _summary(devices):
    gpus = [d for d in devices if _string(d, upstream.DRA_ATTR_TYPE) == upstream.DRA_TYPE_GPU]
    migs = [d for d in devices if _string(d, upstream.DRA_ATTR_TYPE) == upstream.DRA_TYPE_MIG]
    products = sorted(set(_string(d, upstream.DRA_ATTR_PRODUCT) or "?" for d in gpus + migs))
    profiles = {}
    for d in migs:
        profile = _string(d, upstream.DRA_ATTR_PROFILE) or "?"
        profiles[profile] = profiles.get(profile, 0) + 1
    return gpus, migs, products, profiles


def gpus_visible(ctx, tools):
    nodes = ctx.params["gpu_nodes"]
    if not nodes:
        return Result("gpus-visible", FAIL, "the inventory names no GPU node: the group acceptance_gpu_hosts names "
                      "(default gpu_nodes) is empty or missing")
    published = node_devices(ctx)
    ctx.dra_devices = published
    evidence, missing = [], []
    cluster_nodes = ctx.nodes()
    for spec in nodes:
        node = cluster_nodes.get(spec["name"])
        if node is None:
            missing.append(spec["name"])
            evidence.append("%s: no such Kubernetes node" % spec["name"])
            continue
        gpus, migs, products, profiles = _summary(published.get(spec["name"], []))
        # a GPU in MIG mode is published as its MIG devices (the layout is set on the host in this mode)
        physical = len(gpus) + len(set(_string(d, upstream.DRA_ATTR_PARENT_UUID) for d in migs))
        problems = []
        if spec.get("mode") == "mig" and not migs:
            problems.append("its slices publish no MIG device")
        elif not gpus and not migs:
            problems.append("its slices publish no GPU")
        if spec.get("gpu_count") and physical != int(spec["gpu_count"]):
            problems.append("publishes %d physical GPUs, the host reported %d" % (physical, int(spec["gpu_count"])))
        plugin = ((node.get("status") or {}).get("allocatable") or {}).get(upstream.GPU_RESOURCE)
        if plugin not in (None, "0", 0):
            problems.append("also offers %s=%s: a device plugin hands out the same GPUs beside the DRA driver"
                            % (upstream.GPU_RESOURCE, plugin))
        evidence.append("%s: %d GPU(s), %d MIG device(s)%s, %s%s" % (
            spec["name"], len(gpus), len(migs),
            (" (" + ", ".join("%s x%d" % kv for kv in sorted(profiles.items())) + ")") if profiles else "",
            ", ".join(products) or "no product", (" -- " + "; ".join(problems)) if problems else ""))
        if problems:
            missing.append(spec["name"])
    if missing:
        return Result("gpus-visible", FAIL, "GPU nodes whose ResourceSlices do not publish what they should: %s"
                      % ", ".join(missing), evidence)
    return Result("gpus-visible", PASS, "all %d GPU nodes publish their GPUs in ResourceSlices (driver %s)"
                  % (len(nodes), upstream.DRA_DRIVER_NAME), evidence)


def claim_template(ctx, name, namespace, device_class, selectors=(), count=1):
    exactly = {"deviceClassName": device_class, "allocationMode": upstream.ALLOCATION_MODE_EXACT, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"apiVersion": upstream.RESOURCE_API_VERSION, "kind": upstream.RESOURCE_CLAIM_TEMPLATE_KIND,
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {upstream.LABEL_MANAGED_BY: upstream.MANAGED_BY, upstream.LABEL_ACCEPTANCE: name}},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def profile_selector(profile):
    return "device.attributes['%s'].%s == '%s'" % (upstream.DRA_DRIVER_NAME, upstream.DRA_ATTR_PROFILE, profile)


def claiming_pod(tools, ctx, name, template, node_selector=None):
    """A test pod without extended resources whose one container uses the claim made from `template`."""
    pod = tools.test_pod(ctx, name, {}, node_selector=node_selector)
    container = pod["spec"]["containers"][0]
    container["resources"] = {"claims": [{"name": CLAIM_NAME}]}
    pod["spec"]["resourceClaims"] = [{"name": CLAIM_NAME, "resourceClaimTemplateName": template}]
    return pod


def _devices(ctx):
    if getattr(ctx, "dra_devices", None) is None:
        ctx.dra_devices = node_devices(ctx)
    return ctx.dra_devices


def cuda_test(ctx, tools):
    nodes = ctx.params["gpu_nodes"]
    if not nodes:
        return Result("cuda-test", SKIP, "no GPU node to run the CUDA test on: the group acceptance_gpu_hosts names "
                      "(default gpu_nodes) is empty (gpus-visible fails for it)")
    published = _devices(ctx)
    target = next((n for n in nodes if n.get("mode") != "mig" and _summary(published.get(n["name"], []))[0]), None)
    selectors, device_class, what = [], upstream.DEVICE_CLASS_GPU, "one GPU"
    if target is None:
        target = next((n for n in nodes if _summary(published.get(n["name"], []))[1]), nodes[0])
        profiles = sorted(_summary(published.get(target["name"], []))[3])
        if profiles:
            device_class, what = upstream.DEVICE_CLASS_MIG, "one MIG device %s" % profiles[0]
            selectors = [profile_selector(profiles[0])]
    ns = tools.ensure_test_namespace(ctx)
    template = claim_template(ctx, "acceptance-cuda-claim", ns, device_class, selectors)
    ctx.kube.create(template)
    ctx.track(template)
    pod = claiming_pod(tools, ctx, "acceptance-cuda-vectoradd", template["metadata"]["name"],
                       node_selector={"kubernetes.io/hostname": target["name"]})
    ctx.kube.create(pod)
    ctx.track(pod)
    final = tools.wait_for(ctx, "v1", "Pod", pod["metadata"]["name"], ns,
                           lambda p: (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
                           ctx.params["pod_timeout"])
    phase = ((final or {}).get("status") or {}).get("phase")
    claims = ((final or {}).get("status") or {}).get("resourceClaimStatuses") or []
    evidence = ["pod %s/%s on %s with a claim from ResourceClaimTemplate %s (%s, class %s), image %s: %s" % (
        ns, pod["metadata"]["name"], target["name"], template["metadata"]["name"], what, device_class,
        ctx.params["cuda_image"], phase)]
    if claims:
        evidence.append("claims: %s" % ", ".join("%s -> %s" % (c.get("name"), c.get("resourceClaimName"))
                                                 for c in claims))
    if phase != "Succeeded":
        evidence.append(tools.pod_failure(final or {}))
        return Result("cuda-test", FAIL, "the CUDA sample with a claim did not complete within %ss"
                      % ctx.params["pod_timeout"], evidence)
    log = tools.pod_log(ctx, ns, pod["metadata"]["name"])
    evidence.append("log: %s" % " | ".join([line for line in log.splitlines() if line.strip()][-3:]))
    if "Test PASSED" not in log:
        return Result("cuda-test", FAIL, "the CUDA sample ran but its log has no 'Test PASSED'", evidence)
    return Result("cuda-test", PASS, "vectorAdd on %s with a ResourceClaim (%s) logged Test PASSED"
                  % (target["name"], what), evidence)


def wrong_node_excluded(ctx, tools):
    published = _devices(ctx)
    names = [n["name"] for n in ctx.params["gpu_nodes"]]
    offered = dict((n, set(_summary(published.get(n, []))[3])) for n in names)
    # a profile one GPU node publishes, pinned to a GPU node that lacks it; else a profile nobody has
    profile, node = None, None
    for have in names:
        for candidate in sorted(offered[have]):
            lacking = [n for n in names if candidate not in offered[n]]
            if lacking and profile is None:
                profile, node = candidate, lacking[0]
    if profile is None:
        profile = NO_SUCH_PROFILE
    ns = tools.ensure_test_namespace(ctx)
    template = claim_template(ctx, "acceptance-wrong-node-claim", ns, upstream.DEVICE_CLASS_MIG,
                              [profile_selector(profile)])
    ctx.kube.create(template)
    ctx.track(template)
    pod = claiming_pod(tools, ctx, "acceptance-wrong-node", template["metadata"]["name"],
                       node_selector={"kubernetes.io/hostname": node} if node else None)
    ctx.kube.create(pod)
    ctx.track(pod)
    final = tools.wait_for(ctx, "v1", "Pod", pod["metadata"]["name"], ns,
                           lambda p: (tools.condition(p, "PodScheduled") or {}).get("status") in ("True", "False"),
                           ctx.params["pod_timeout"])
    sched = tools.condition(final or {}, "PodScheduled") or {}
    placed = ((final or {}).get("spec") or {}).get("nodeName")
    where = ("pinned to %s, whose slices lack it (published there: %s)" % (
        node, ", ".join(sorted(offered[node])) or "no MIG device")) if node else "a profile no node publishes"
    evidence = ["pod %s/%s claiming a %s device with profile %s, %s: phase %s, PodScheduled %s %s: %s" % (
        ns, pod["metadata"]["name"], upstream.DEVICE_CLASS_MIG, profile, where,
        ((final or {}).get("status") or {}).get("phase"), sched.get("status"), sched.get("reason"),
        sched.get("message"))]
    if placed:
        return Result("wrong-node-excluded", FAIL, "the pod was placed on %s" % placed, evidence)
    if sched.get("status") == "False" and sched.get("reason") == "Unschedulable":
        return Result("wrong-node-excluded", PASS, "a claim for MIG profile %s stays Pending, Unschedulable%s"
                      % (profile, (" on %s" % node) if node else ""), evidence)
    return Result("wrong-node-excluded", FAIL, "the scheduler gave no Unschedulable verdict", evidence)


def quota_enforced(ctx, tools):
    team = ctx.params.get("quota_team")
    if not team or not str(team.get("resource", "")).endswith(upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX):
        return Result("quota-enforced", SKIP, "no team in tenants_list has a quota on claims (<class>%s, e.g. "
                      "%s%s)" % (upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX, upstream.DEVICE_CLASS_GPU,
                                 upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX))
    ns, resource = team["namespace"], team["resource"]
    device_class = resource[:-len(upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX)]
    hard, used = None, 0
    for quota in ctx.kube.list("v1", "ResourceQuota", namespace=ns)[0]:
        status = quota.get("status") or {}
        value = (status.get("hard") or (quota.get("spec") or {}).get("hard") or {}).get(resource)
        if value is not None:
            hard, used = int(value), int((status.get("used") or {}).get(resource) or 0)
    if hard is None:
        return Result("quota-enforced", FAIL, "namespace %s has no ResourceQuota on %s" % (ns, resource))
    ask = hard - used + 1
    claim = {"apiVersion": upstream.RESOURCE_API_VERSION, "kind": upstream.RESOURCE_CLAIM_KIND,
             "metadata": {"name": "acceptance-over-quota", "namespace": ns,
                          "labels": {upstream.LABEL_MANAGED_BY: upstream.MANAGED_BY,
                                     upstream.LABEL_ACCEPTANCE: "acceptance-over-quota"}},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": device_class, "allocationMode": upstream.ALLOCATION_MODE_EXACT, "count": ask}}]}}}
    evidence = ["ResourceQuota %s=%d (used %d) in %s; dry-run ResourceClaim asking %d device(s) of class %s"
                % (resource, hard, used, ns, ask, device_class)]
    try:
        ctx.kube.create(claim, dry_run=True)
    except ApiError as err:
        evidence.append("HTTP %s: %s" % (err.status, err.message))
        if err.status == 403 and "exceeded quota" in err.message:
            return Result("quota-enforced", PASS, "a claim over the quota of %s is refused (403 exceeded quota)" % ns,
                          evidence)
        return Result("quota-enforced", FAIL, "refused, but not by the quota", evidence)
    return Result("quota-enforced", FAIL, "a claim over the quota was admitted", evidence)


def queues_fair(ctx):
    """The fairness probe (queues.py) competes with Jobs that ask nvidia.com/gpu and counts free GPUs in the
    nodes' allocatable: with the GPUCluster stack no device plugin serves that resource, so its Jobs would
    never run. Said as a SKIP with what the queues do count here, not as a pool without GPUs."""
    teams = ctx.params.get("queue_teams") or []
    return Result("queues-fair", SKIP, "DRA mode: the fairness probe competes with Jobs asking %s, which no device "
                  "plugin serves next to the GPUCluster stack; %s charges the teams' claims to their queues (docs/"
                  "queues.md, Queues with DRA), and no probe with claims is written yet: submit the teams' claim Jobs "
                  "(docs/templates/claim-*.yaml.j2) to see the queues share" % (
                      upstream.GPU_RESOURCE, ctx.params.get("queue_backend")),
                  ["queue backend %s; teams with a queue: %s" % (ctx.params.get("queue_backend"),
                                                                 ", ".join(teams) or "none")])
