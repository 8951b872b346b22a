# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sharing-verified for KAI GPU fractions: two probe pods of half a GPU each, submitted through a
team's queue on a pool that takes fractions, must share ONE GPU of one node.

What KAI Scheduler v0.17.0 writes and the probe reads (kai-scheduler/KAI-Scheduler):

- a fractional pod carries the annotation `gpu-fraction` and requests no nvidia.com/gpu
  (pkg/common/constants/constants.go);
- the binder labels it `runai-gpu-group: <group>`: one group is one shared GPU of one node;
- per group one reservation pod (labels app=<binder resourceReservation appLabel> and the
  group, namespace kai-resource-reservation by default) holds `nvidia.com/gpu: 1` on the node, and
  its process writes the UUID of the GPU it got into `run.ai/reserve_for_gpu_index`
  (pkg/binder/binding/resourcereservation, pkg/resourcereservation/patcher);
- the binder writes that UUID as NVIDIA_VISIBLE_DEVICES into the ConfigMap
  `<annotation runai/shared-gpu-configmap>-0-evar` the pod's container reads
  (pkg/binder/plugins/gpusharing).

So two halves on one GPU are: one node, one group, one reservation pod of that group, and the
same GPU UUID in both pods' ConfigMaps. That is what binpack does; spread (the design's choice for
inference pools) gives each half a whole idle GPU first (KAI's gpuspread scores a whole GPU 1, a
half-used one 0.5), so there each half must hold its own GPU, with its own reservation pod.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream

FRACTION = "0.5"
PROBES = ("acceptance-fraction-1", "acceptance-fraction-2")
# A team namespace's ResourceQuota on cpu/memory refuses a pod that states none.
PROBE_RESOURCES = {"cpu": "10m", "memory": "32Mi"}


def _meta(obj):
    return (obj or {}).get("metadata") or {}


def _labels(obj):
    return _meta(obj).get("labels") or {}


def _annotations(obj):
    return _meta(obj).get("annotations") or {}


def _shard_labels(ctx, team):
    """The team Queue's pool label when KAI shards per pool (global.nodePoolLabelKey): without it the
    pod-grouper puts the PodGroup into the default shard, which has no such queue."""
    config = ctx.kube.get(upstream.KAI_SHARD_API_VERSION, "Config", upstream.KAI_CONFIG_NAME) or {}
    key = ((config.get("spec") or {}).get("global") or {}).get("nodePoolLabelKey")
    if not key:
        return {}
    queue = ctx.kube.get(upstream.KAI_QUEUE_API_VERSION, "Queue", team) or {}
    value = _labels(queue).get(key)
    return {key: value} if value else {}


def probe_pod(ctx, tools, probe, name, shard):
    """A long-running agnhost pod of half a GPU in the team's namespace, through its KAI queue."""
    pod = tools.test_pod(ctx, name, {}, image=ctx.params["probe_image"])
    pod["metadata"]["namespace"] = probe["team"]
    pod["metadata"]["labels"][upstream.KAI_QUEUE_LABEL] = probe["team"]
    pod["metadata"]["labels"].update(shard)
    pod["metadata"]["annotations"] = {upstream.KAI_GPU_FRACTION_ANNOTATION: FRACTION}
    spec = pod["spec"]
    spec["schedulerName"] = upstream.KAI_SCHEDULER_NAME
    container = spec["containers"][0]
    container["args"] = ["pause"]
    container["resources"] = {"limits": dict(PROBE_RESOURCES), "requests": dict(PROBE_RESOURCES)}
    if probe.get("node_selector"):
        spec["nodeSelector"] = dict(probe["node_selector"])
    tolerations = list(probe.get("tolerations") or [])
    for tol in ctx.params.get("tolerations") or []:
        if tol not in tolerations:
            tolerations.append(tol)
    if tolerations:
        spec["tolerations"] = tolerations
    else:
        spec.pop("tolerations", None)
    return pod


def _visible_devices(ctx, pod):
    """NVIDIA_VISIBLE_DEVICES the binder wrote for the pod's first container, or None."""
    prefix = _annotations(pod).get(upstream.KAI_SHARED_GPU_CONFIGMAP_ANNOTATION)
    if not prefix:
        return None
    cm = ctx.kube.get("v1", "ConfigMap", "%s-0-evar" % prefix, _meta(pod).get("namespace")) or {}
    return (cm.get("data") or {}).get(upstream.NVIDIA_VISIBLE_DEVICES)


def run_probe(ctx, tools, probe):
    """(ok, summary, evidence) of one fraction pool."""
    team, pool = probe.get("team"), probe.get("pool") or "(any pool)"
    if probe.get("problem"):
        return False, "the fraction pool's team cannot be found: %s" % probe["problem"], []
    if not team:
        return False, "no team with a queue on fraction pool %s (tenants_list queue.pool or " \
                      "queues_kai_pool_teams)" % pool, []
    shard = _shard_labels(ctx, team)
    names = []
    for name in PROBES:
        pod = probe_pod(ctx, tools, probe, name, shard)
        ctx.kube.create(pod)
        ctx.track(pod)
        names.append(name)

    def bound(p):
        return bool((p.get("spec") or {}).get("nodeName")) and \
            (p.get("status") or {}).get("phase") in (upstream.POD_RUNNING,) + upstream.POD_DONE_PHASES

    pods = [tools.wait_for(ctx, "v1", "Pod", name, team, bound, ctx.params["pod_timeout"]) or {} for name in names]
    evidence = []
    for name, pod in zip(names, pods):
        evidence.append("pod %s/%s %s=%s through queue %s: %s on %s, %s %s" % (
            team, name, upstream.KAI_GPU_FRACTION_ANNOTATION, FRACTION, team, (pod.get("status") or {}).get("phase"),
            (pod.get("spec") or {}).get("nodeName") or "no node", upstream.KAI_GPU_GROUP_LABEL,
            _labels(pod).get(upstream.KAI_GPU_GROUP_LABEL) or "none"))
    waiting = [(n, p) for n, p in zip(names, pods) if not bound(p)]
    if waiting:
        evidence += ["%s: %s" % (n, tools.pod_failure(p)) for n, p in waiting]
        return False, "the half-GPU pods of %s on %s did not run within %ss (%s)" % (
            team, pool, ctx.params["pod_timeout"], ", ".join(n for n, _p in waiting)), evidence
    nodes = sorted(set(p["spec"]["nodeName"] for p in pods))
    if probe.get("nodes") and not set(nodes) <= set(probe["nodes"]):
        return False, "the half-GPU pods of %s ran on %s, outside pool %s (%s)" % (
            team, ", ".join(nodes), pool, ", ".join(probe["nodes"])), evidence
    groups = [_labels(p).get(upstream.KAI_GPU_GROUP_LABEL) for p in pods]
    if not all(groups):
        return False, "the half-GPU pods of %s run without a GPU group (%s): KAI did not bind them as fractions" % (
            team, upstream.KAI_GPU_GROUP_LABEL), evidence
    held = {}
    for group, pod in sorted(zip(groups, pods), key=lambda gp: gp[0]):
        if group in held:
            continue
        node = pod["spec"]["nodeName"]
        holders = [h for h in ctx.kube.list("v1", "Pod", label_selector="%s=%s" % (
            upstream.KAI_GPU_GROUP_LABEL, group))[0] if _meta(h).get("namespace") != team]
        for holder in holders:
            evidence.append("reservation pod %s/%s on %s: %s %s" % (
                _meta(holder).get("namespace"), _meta(holder).get("name"), (holder.get("spec") or {}).get("nodeName"),
                upstream.KAI_RESERVATION_GPU_ANNOTATION,
                _annotations(holder).get(upstream.KAI_RESERVATION_GPU_ANNOTATION) or "not yet written"))
        if len(holders) != 1:
            return False, "GPU group %s on %s has %d reservation pods, KAI keeps one per shared GPU" % (
                group, node, len(holders)), evidence
        gpu = _annotations(holders[0]).get(upstream.KAI_RESERVATION_GPU_ANNOTATION)
        if not gpu or holders[0]["spec"].get("nodeName") != node:
            return False, "the reservation pod of GPU group %s holds no GPU of %s" % (group, node), evidence
        held[group] = (node, gpu)
    seen = [_visible_devices(ctx, p) for p in pods]
    evidence.append("%s of the pods (their GPU-sharing ConfigMaps): %s" % (
        upstream.NVIDIA_VISIBLE_DEVICES, ", ".join(s or "none" for s in seen)))
    for group, visible in zip(groups, seen):
        if visible is not None and visible != held[group][1]:
            return False, "a pod of GPU group %s sees %s, the reservation holds %s" % (
                group, visible, held[group][1]), evidence
    strategy = placement(ctx, shard)
    evidence.append("placement of the pool's KAI scheduling shard: %s" % strategy)
    if len(held) == 1:
        node, gpu = list(held.values())[0]
        return True, "2 x %s GPU of %s share %s of %s (pool %s, %s)" % (
            FRACTION, team, gpu, node, pool, strategy), evidence
    if strategy == "binpack":
        return False, "two halves of %s took %d GPUs (%s) under binpack: KAI did not pack them onto one GPU" % (
            team, len(held), ", ".join("%s of %s" % (g, n) for n, g in sorted(held.values()))), evidence
    # spread orders a whole idle GPU before a shared one (KAI's gpuspread): one GPU each while GPUs are idle
    return True, "2 x %s GPU of %s on a GPU each (%s), as spread places them (pool %s)" % (
        FRACTION, team, ", ".join("%s of %s" % (g, n) for n, g in sorted(held.values())), pool), evidence


def placement(ctx, shard):
    """The GPU placement strategy (binpack or spread) of the SchedulingShard the probes' queue is in: the one of
    its pool label value when KAI shards per pool, else the chart's default shard (binpack without one)."""
    name = list(shard.values())[0] if shard else "default"
    obj = ctx.kube.get(upstream.KAI_SHARD_API_VERSION, "SchedulingShard", name) or {}
    return (((obj.get("spec") or {}).get("placementStrategy") or {}).get("gpu")) or "binpack"


def verify(ctx, tools):
    """(ok, [summaries], evidence) of every fraction probe; the probe pods are removed after the check."""
    ok, summaries, evidence = True, [], []
    for probe in ctx.params.get("fraction_probes") or []:
        good, summary, lines = run_probe(ctx, tools, probe)
        ok = ok and good
        summaries.append(summary)
        evidence += ["KAI fractions: %s" % line for line in lines]
        # the next pool's probes start without these; the runner reports what it could not remove
        leftovers = ctx.cleanup()
        if leftovers:
            evidence.append("KAI fractions: cleanup failed: %s" % "; ".join(leftovers))
    return ok, summaries, evidence
