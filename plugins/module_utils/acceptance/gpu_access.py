# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hand-over check gpu-access-by-request: GPUs only through a resource request.

1. In the test namespace (no admission policy), the CUDA sample with NVIDIA_VISIBLE_DEVICES=all and
   no GPU request runs on a GPU node - through the RuntimeClass nvidia when the cluster has it (with
   CDI, the GPU Operator's default, that is the way to the NVIDIA runtime hook). It must find no
   CUDA device: the toolkit ignores the variable in unprivileged containers.
2. Where the team namespaces carry the GPU access policy, the same pod in the first team's namespace
   (a dry run: nothing is created) must be refused, and the refusal says why.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.runner import FAIL, PASS, SKIP, Result, check
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.checks import (
    _pod_failure, ensure_test_namespace, pod_log, test_pod, wait_for)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants.gpu_access import policy_name

CHECK = "gpu-access-by-request"
POD = "acceptance-gpu-envvar"
FIX = ("set gpu_operator_gpu_access_by_request: true (operator-managed toolkit) or "
       "node_prereqs_gpu_access_by_request: true (toolkit installed on the hosts) and re-run the site")


def _probe(ctx, namespace, node):
    pod = test_pod(ctx, POD, {}, node_selector={"kubernetes.io/hostname": node})
    pod["metadata"]["namespace"] = namespace
    container = pod["spec"]["containers"][0]
    container["env"] = [{"name": upstream.NVIDIA_VISIBLE_DEVICES, "value": "all"}]
    # small cpu/memory: a team quota on cpu or memory refuses a pod that states none
    container["resources"] = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
    return pod


@check(CHECK)
def gpu_access_by_request(ctx):
    nodes = ctx.params.get("gpu_nodes") or []
    if not nodes:
        return Result(CHECK, SKIP, "no GPU node to probe: the group acceptance_gpu_hosts names is empty")
    node = nodes[0]["name"]
    ns = ensure_test_namespace(ctx)
    pod = _probe(ctx, ns, node)
    runtime_class = ctx.kube.get("node.k8s.io/v1", "RuntimeClass", upstream.NVIDIA_RUNTIME_CLASS)
    if runtime_class is not None:
        pod["spec"]["runtimeClassName"] = upstream.NVIDIA_RUNTIME_CLASS
    ctx.kube.create(pod)
    ctx.track(pod)
    final = wait_for(ctx, "v1", "Pod", POD, ns,
                     lambda p: (p.get("status") or {}).get("phase") in upstream.POD_DONE_PHASES,
                     ctx.params["pod_timeout"])
    phase = ((final or {}).get("status") or {}).get("phase")
    how = "runtimeClassName %s" % upstream.NVIDIA_RUNTIME_CLASS if runtime_class else "the default runtime"
    evidence = ["pod %s/%s on %s, %s=all, no GPU request, %s, image %s: %s" % (
        ns, POD, node, upstream.NVIDIA_VISIBLE_DEVICES, how, ctx.params["cuda_image"], phase)]
    if phase not in upstream.POD_DONE_PHASES:
        evidence.append(_pod_failure(final or {}))
        return Result(CHECK, FAIL, "the probe pod did not finish within %ss" % ctx.params["pod_timeout"], evidence)
    log = pod_log(ctx, ns, POD)
    evidence.append("log: %s" % " | ".join(line for line in log.splitlines() if line.strip())[-200:])
    if "Test PASSED" in log:
        return Result(CHECK, FAIL, "a pod that requests no GPU ran CUDA on %s: %s=all granted the node's GPUs "
                      "past the device plugin and the quota; %s" % (node, upstream.NVIDIA_VISIBLE_DEVICES, FIX),
                      evidence)
    if "no CUDA-capable device" not in log:
        return Result(CHECK, FAIL, "the probe pod ended %s without the CUDA sample's verdict" % phase, evidence)
    summary = "%s=all without a request sees no GPU on %s" % (upstream.NVIDIA_VISIBLE_DEVICES, node)
    teams = ctx.params.get("teams") or []
    if not teams:
        return Result(CHECK, PASS, summary, evidence)
    team = teams[0]
    policy = ctx.kube.get(upstream.VAP_API_VERSION, "ValidatingAdmissionPolicy", policy_name(team))
    attempt = _probe(ctx, team, node)
    attempt["spec"].pop("runtimeClassName", None)
    if runtime_class is not None:
        attempt["spec"]["runtimeClassName"] = upstream.NVIDIA_RUNTIME_CLASS
    try:
        ctx.kube.create(attempt, dry_run=True)
    except ApiError as err:
        evidence.append("team %s, dry run of the same pod: HTTP %s: %s" % (team, err.status, err.message))
        if err.status == 403 and upstream.NVIDIA_VISIBLE_DEVICES in err.message:
            return Result(CHECK, PASS, summary + "; in %s such a pod is refused with the reason" % team, evidence)
        return Result(CHECK, FAIL, "the team pod was refused, but not for %s" % upstream.NVIDIA_VISIBLE_DEVICES,
                      evidence)
    if policy is not None:
        evidence.append("team %s, dry run of the same pod: admitted" % team)
        return Result(CHECK, FAIL, "ValidatingAdmissionPolicy %s exists but admitted a pod with %s=all and no "
                      "GPU request in %s" % (policy_name(team), upstream.NVIDIA_VISIBLE_DEVICES, team), evidence)
    evidence.append("team %s: no GPU access policy (tenants_gpu_access_policy: false); the pod is admitted and "
                    "gets no GPU from the runtime" % team)
    return Result(CHECK, PASS, summary, evidence)
