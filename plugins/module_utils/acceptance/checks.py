# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hand-over checks that read the cluster or run a test pod (registered in acceptance.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import dra, fractions
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.queues import QueueProbe
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.runner import CHECKS, FAIL, PASS, SKIP, Result, check
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.cluster_policy import CLUSTER_POLICY, evaluate
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.gpu_cluster import GPU_CLUSTER
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig.profiles import node_offer
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.watch import ObjectWatch

__all__ = ["CHECKS"]  # the registry, filled by the @check functions below

POD_OK_PHASES = ("Running", "Succeeded")
RUNBOOKS = ("node-failure", "driver-problem", "full-queue", "quota-increase")


def _meta(obj):
    return obj.get("metadata") or {}


def _labels(obj):
    return _meta(obj).get("labels") or {}


def _condition(obj, cond_type):
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == cond_type:
            return cond
    return None


def wait_for(ctx, api_version, kind, name, namespace, predicate, timeout):
    """The object once predicate(obj) holds, or the last one seen at the timeout (the shared watch)."""
    follow = ObjectWatch(ctx.kube, api_version, kind, namespace=namespace, name=name)
    obj = next(iter(follow.sync().values()), None)
    if obj is not None and predicate(obj):
        return obj
    for event_type, event_obj in follow.events(ctx.clock() + timeout):
        if event_type == "DELETED":
            obj = None
            continue
        obj = event_obj
        if predicate(obj):
            return obj
    return obj


def pod_log(ctx, namespace, name):
    """A test pod's log ("" when it has none yet)."""
    return ctx.kube.log(name, namespace) or ""


def test_pod(ctx, name, resources, node_selector=None, image=None):
    """A restartPolicy=Never pod in the test namespace that Pod Security restricted admits."""
    ns = ctx.params["test_namespace"]
    container = {
        "name": name, "image": image or ctx.params["cuda_image"],
        "resources": {"limits": dict(resources)},
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 1000,
                            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
    }
    spec = {"restartPolicy": "Never", "containers": [container]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    tolerations = ctx.params.get("tolerations") or []
    if tolerations:
        spec["tolerations"] = tolerations
    labels = {upstream.LABEL_MANAGED_BY: upstream.MANAGED_BY, upstream.LABEL_ACCEPTANCE: name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": spec}


def ensure_test_namespace(ctx):
    ns = ctx.params["test_namespace"]
    if ctx.kube.get("v1", "Namespace", ns) is None:
        body = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {upstream.LABEL_MANAGED_BY: upstream.MANAGED_BY,
                                                    upstream.PSA_LABEL_PREFIX + "enforce": "restricted"}}}
        ctx.kube.create(body)
        ctx.track_at_end(body)
    return ns


def gpu_request(node_spec):
    """The resource a one-GPU test pod asks for on this node."""
    if node_spec.get("mode") == "mig":
        offer = node_spec.get("_offer") or {}
        mig = sorted(r for r, n in offer.items() if r.startswith(upstream.MIG_RESOURCE_PREFIX) and n)
        if mig:
            return mig[0]
    return upstream.GPU_RESOURCE


def _tools():
    """The helpers the DRA-mode checks (dra.py) and the fraction probe (fractions.py) use, so that those
    modules import nothing from this one."""
    from collections import namedtuple
    tools = namedtuple("Tools", "test_pod wait_for pod_log ensure_test_namespace pod_failure condition")
    return tools(test_pod, wait_for, pod_log, ensure_test_namespace, _pod_failure, _condition)


# --- checks ------------------------------------------------------------------------------

@check("operator-healthy")
def operator_healthy(ctx):
    ns, name = ctx.params["operator_namespace"], ctx.params["cluster_policy"]
    evidence = []
    stack = CLUSTER_POLICY
    if dra.is_dra(ctx):
        # the GPUCluster stack: its singleton carries the readiness the ClusterPolicy carries otherwise
        stack, name = GPU_CLUSTER, upstream.GPUCLUSTER_NAME
    policy = ctx.kube.get(stack.api_version, stack.kind, name)
    done, summary = evaluate(policy, name=name, stack=stack)
    evidence.append("%s %s: state %s, Ready reason %s" % (stack.kind, name, summary["state"], summary["reason"]))
    pods = ctx.kube.list("v1", "Pod", namespace=ns)[0]
    bad = []
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        waiting = [c.get("state", {}).get("waiting", {}).get("reason") for c in
                   (pod.get("status") or {}).get("containerStatuses") or [] if c.get("state", {}).get("waiting")]
        if phase not in POD_OK_PHASES or waiting:
            bad.append("%s %s%s" % (_meta(pod)["name"], phase, (" " + ",".join(waiting)) if waiting else ""))
    evidence.append("%d pods in %s, %d not Running/Completed%s" % (
        len(pods), ns, len(bad), (": " + "; ".join(bad)) if bad else ""))
    if not pods:
        return Result("operator-healthy", FAIL, "no pod runs in namespace %s" % ns, evidence)
    if done and not bad:
        return Result("operator-healthy", PASS, "%s ready/Reconciled, all %d operator pods Running or "
                      "Completed" % (stack.kind, len(pods)), evidence)
    return Result("operator-healthy", FAIL, "operator not healthy", evidence)


@check("gpus-visible")
def gpus_visible(ctx):
    if dra.is_dra(ctx):
        return dra.gpus_visible(ctx, _tools())
    evidence, missing = [], []
    cluster_nodes = ctx.nodes()
    for spec in ctx.params["gpu_nodes"]:
        node = cluster_nodes.get(spec["name"])
        if node is None:
            missing.append(spec["name"])
            evidence.append("%s: no such Kubernetes node" % spec["name"])
            continue
        offer = node_offer(node)["allocatable"]
        spec["_offer"] = offer
        labels = _labels(node)
        physical = int(labels.get(upstream.LABEL_GPU_COUNT) or 0)
        problems = []
        if spec.get("mode") == "mig":
            if not any(n for r, n in offer.items() if r.startswith(upstream.MIG_RESOURCE_PREFIX)) \
                    and not offer.get(upstream.GPU_RESOURCE):
                problems.append("offers no MIG device")
        else:
            replicas = int(spec.get("replicas") or 1)
            have = offer.get(upstream.GPU_RESOURCE, 0) or int(
                ((node.get("status") or {}).get("allocatable") or {}).get(upstream.GPU_SHARED_RESOURCE, 0) or 0)
            want = physical * replicas
            if not have:
                problems.append("offers no %s" % upstream.GPU_RESOURCE)
            elif want and have != want:
                problems.append("offers %d, expected %d (%d GPUs x %d)" % (have, want, physical, replicas))
        if spec.get("gpu_count") and physical and spec.get("mode") != "mig" and physical != int(spec["gpu_count"]):
            problems.append("GFD counts %d GPUs, the host reported %d" % (physical, int(spec["gpu_count"])))
        evidence.append("%s: %s%s" % (spec["name"], ", ".join("%s=%s" % kv for kv in sorted(offer.items())) or
                                      "nothing", (" -- " + "; ".join(problems)) if problems else ""))
        if problems:
            missing.append(spec["name"])
    if not ctx.params["gpu_nodes"]:
        return Result("gpus-visible", FAIL, "the inventory names no GPU node: the group acceptance_gpu_hosts names "
                      "(default gpu_nodes) is empty or missing", evidence)
    if missing:
        return Result("gpus-visible", FAIL, "GPU nodes not offering what they should: %s" % ", ".join(missing),
                      evidence)
    return Result("gpus-visible", PASS, "all %d GPU nodes offer their GPUs" % len(ctx.params["gpu_nodes"]),
                  evidence)


def _pod_failure(pod):
    status = pod.get("status") or {}
    sched = _condition(pod, "PodScheduled") or {}
    if sched.get("status") == "False":
        return "Pending: %s %s" % (sched.get("reason"), sched.get("message"))
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting:
            return "%s: %s" % (waiting.get("reason"), waiting.get("message", ""))
    return "phase %s" % status.get("phase")


@check("cuda-test")
def cuda_test(ctx):
    if dra.is_dra(ctx):
        return dra.cuda_test(ctx, _tools())
    nodes = [n for n in ctx.params["gpu_nodes"] if n.get("mode") not in ("time-slicing", "mps")] or ctx.params["gpu_nodes"]
    if not nodes:
        return Result("cuda-test", SKIP, "no GPU node to run the CUDA test on: the group acceptance_gpu_hosts names "
                      "(default gpu_nodes) is empty (gpus-visible fails for it)")
    target = nodes[0]
    if "_offer" not in target:
        node = ctx.kube.get("v1", "Node", target["name"]) or {}
        target["_offer"] = node_offer(node)["allocatable"] if node else {}
    resource = gpu_request(target)
    ns = ensure_test_namespace(ctx)
    pod = test_pod(ctx, "acceptance-cuda-vectoradd", {resource: 1},
                   node_selector={"kubernetes.io/hostname": target["name"]})
    ctx.kube.create(pod)
    ctx.track(pod)
    final = wait_for(ctx, "v1", "Pod", pod["metadata"]["name"], ns,
                     lambda p: (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
                     ctx.params["pod_timeout"])
    phase = ((final or {}).get("status") or {}).get("phase")
    evidence = ["pod %s/%s on %s asking %s: 1, image %s: %s" % (ns, pod["metadata"]["name"], target["name"],
                                                                resource, ctx.params["cuda_image"], phase)]
    if phase != "Succeeded":
        evidence.append(_pod_failure(final or {}))
        return Result("cuda-test", FAIL, "the CUDA sample did not complete within %ss" % ctx.params["pod_timeout"],
                      evidence)
    log = pod_log(ctx, ns, pod["metadata"]["name"])
    last = [line for line in log.splitlines() if line.strip()][-3:]
    evidence.append("log: %s" % " | ".join(last))
    if "Test PASSED" not in log:
        return Result("cuda-test", FAIL, "the CUDA sample ran but its log has no 'Test PASSED'", evidence)
    return Result("cuda-test", PASS, "vectorAdd on %s (%s) logged Test PASSED" % (target["name"], resource), evidence)


@check("wrong-node-excluded")
def wrong_node_excluded(ctx):
    if dra.is_dra(ctx):
        return dra.wrong_node_excluded(ctx, _tools())
    ns = ensure_test_namespace(ctx)
    # a GPU product no node has: the scheduler must refuse every node, GPU and CPU alike
    pod = test_pod(ctx, "acceptance-wrong-node", {upstream.GPU_RESOURCE: 1},
                   node_selector={upstream.LABEL_GPU_PRODUCT: "acceptance-no-such-gpu"})
    ctx.kube.create(pod)
    ctx.track(pod)
    final = wait_for(ctx, "v1", "Pod", pod["metadata"]["name"], ns,
                     lambda p: (_condition(p, "PodScheduled") or {}).get("status") in ("True", "False"),
                     ctx.params["pod_timeout"])
    sched = _condition(final or {}, "PodScheduled") or {}
    node = ((final or {}).get("spec") or {}).get("nodeName")
    evidence = ["pod %s/%s with nodeSelector %s=acceptance-no-such-gpu: phase %s, PodScheduled %s %s: %s" % (
        ns, pod["metadata"]["name"], upstream.LABEL_GPU_PRODUCT, ((final or {}).get("status") or {}).get("phase"),
        sched.get("status"), sched.get("reason"), sched.get("message"))]
    if node:
        return Result("wrong-node-excluded", FAIL, "the pod was placed on %s" % node, evidence)
    if sched.get("status") == "False" and sched.get("reason") == "Unschedulable":
        return Result("wrong-node-excluded", PASS, "stays Pending, Unschedulable", evidence)
    return Result("wrong-node-excluded", FAIL, "the scheduler gave no Unschedulable verdict", evidence)


@check("quota-enforced")
def quota_enforced(ctx):
    if dra.is_dra(ctx):
        return dra.quota_enforced(ctx, _tools())
    team = ctx.params.get("quota_team")
    if not team:
        return Result("quota-enforced", SKIP, "no team in tenants_list has a quota on requests.nvidia.com/gpu")
    ns, resource = team["namespace"], team["resource"]
    quotas = ctx.kube.list("v1", "ResourceQuota", namespace=ns)[0]
    hard = None
    for quota in quotas:
        value = ((quota.get("status") or {}).get("hard") or (quota.get("spec") or {}).get("hard") or {}).get(resource)
        if value is not None:
            hard = int(value)
    if hard is None:
        return Result("quota-enforced", FAIL, "namespace %s has no ResourceQuota on %s" % (ns, resource))
    extended = resource[len(upstream.QUOTA_ENFORCED_PREFIX):]
    pod = test_pod(ctx, "acceptance-over-quota", {extended: hard + 1})
    pod["metadata"]["namespace"] = ns
    evidence = ["ResourceQuota %s=%d in %s; dry-run pod asking %s: %d" % (resource, hard, ns, extended, hard + 1)]
    try:
        ctx.kube.create(pod, dry_run=True)
    except ApiError as err:
        evidence.append("HTTP %s: %s" % (err.status, err.message))
        if err.status == 403 and "exceeded quota" in err.message:
            return Result("quota-enforced", PASS, "a pod over the quota of %s is refused (403 exceeded quota)" % ns,
                          evidence)
        return Result("quota-enforced", FAIL, "refused, but not by the quota", evidence)
    return Result("quota-enforced", FAIL, "a pod over the quota was admitted", evidence)


@check("sharing-verified")
def sharing_verified(ctx):
    if not ctx.params["gpu_nodes"]:
        return Result("sharing-verified", SKIP, "no GPU node whose sharing mode to check: the group "
                      "acceptance_gpu_hosts names (default gpu_nodes) is empty (gpus-visible fails for it)")
    ok, summary, evidence = _node_sharing(ctx)
    if not ctx.params.get("fraction_probes"):
        if ctx.params.get("queue_backend") == "kai":
            evidence.append("KAI GPU fractions: not applicable, no pool takes them (queues_kai_gpu_sharing, "
                            "queues_kai_fraction_pools)")
        return Result("sharing-verified", PASS if ok else FAIL, summary, evidence)
    frac_ok, frac_summaries, frac_evidence = fractions.verify(ctx, _tools())
    summary = "%s; KAI fractions: %s" % (summary, "; ".join(frac_summaries))
    return Result("sharing-verified", PASS if ok and frac_ok else FAIL, summary, evidence + frac_evidence)


def _mode_nodes(shared, mode):
    """'MPS (pool l40s-pcie-inference: gpu-l40s-1)': a mode and where it is configured."""
    where = {}
    for spec in shared:
        if spec.get("mode") == mode:
            where.setdefault(spec.get("pool"), []).append(spec["name"])
    parts = ["%s%s" % (("pool %s: " % pool) if pool else "", ", ".join(nodes)) for pool, nodes in sorted(
        where.items(), key=lambda kv: kv[0] or "")]
    return "%s (%s)" % ({"mps": "MPS", "mig": "MIG"}.get(mode, mode), "; ".join(parts))


def _node_sharing(ctx):
    """(ok, summary, evidence) of the device plugin's and MIG's sharing per node."""
    evidence, bad = [], []
    shared = [n for n in ctx.params["gpu_nodes"] if n.get("mode") in ("time-slicing", "mps", "mig")]
    if not shared:
        return True, "every GPU node is exclusive (whole GPUs), as configured", [
            "%s: exclusive" % n["name"] for n in ctx.params["gpu_nodes"]]
    cluster_nodes = ctx.nodes()
    for spec in ctx.params["gpu_nodes"]:
        node = cluster_nodes.get(spec["name"])
        if node is None:
            bad.append(spec["name"])
            continue
        labels = _labels(node)
        if spec.get("mode") == "time-slicing":
            replicas = labels.get(upstream.LABEL_GPU_REPLICAS)
            strategy = labels.get(upstream.LABEL_GPU_SHARING_STRATEGY)
            ok = replicas == str(spec.get("replicas")) and strategy == upstream.TIME_SLICING_STRATEGY
            evidence.append("%s: time-slicing, replicas label %s (expected %s), strategy %s" % (
                spec["name"], replicas, spec.get("replicas"), strategy))
        elif spec.get("mode") == "mps":
            # GFD: nvidia.com/gpu.replicas and sharing-strategy=mps; the device plugin advertises GPUs x replicas
            # only once the operator's MPS control daemon answers (k8s-device-plugin internal/plugin/server.go)
            replicas = labels.get(upstream.LABEL_GPU_REPLICAS)
            strategy = labels.get(upstream.LABEL_GPU_SHARING_STRATEGY)
            resource = spec.get("resource") or upstream.GPU_RESOURCE
            count = spec.get("gpu_count") or int(labels.get(upstream.LABEL_GPU_COUNT) or 0)
            advertised = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
            want = count * int(spec.get("replicas") or 0) if count else None
            ok = (replicas == str(spec.get("replicas")) and strategy == upstream.MPS_STRATEGY
                  and (want is None or str(advertised) == str(want)))
            evidence.append("%s: MPS, replicas label %s (expected %s), strategy %s, %s allocatable %s (expected %s = "
                            "%s GPUs x %s)" % (spec["name"], replicas, spec.get("replicas"), strategy, resource,
                                               advertised, want if want is not None else "?", count or "?",
                                               spec.get("replicas")))
        elif spec.get("mode") == "mig":
            config = labels.get(upstream.LABEL_MIG_CONFIG)
            state = labels.get(upstream.LABEL_MIG_CONFIG_STATE)
            offer = node_offer(node)["allocatable"]
            ok = config == spec.get("mig_config") and state == upstream.MIG_STATE_SUCCESS and (
                any(r.startswith(upstream.MIG_RESOURCE_PREFIX) for r in offer) or
                upstream.PRODUCT_SUFFIX_MIG in (labels.get(upstream.LABEL_GPU_PRODUCT) or ""))
            evidence.append("%s: MIG %s (expected %s), state %s, offers %s" % (
                spec["name"], config, spec.get("mig_config"), state,
                ", ".join("%s=%s" % kv for kv in sorted(offer.items()))))
        else:
            ok = not labels.get(upstream.LABEL_GPU_REPLICAS) or labels.get(upstream.LABEL_GPU_REPLICAS) == "1"
            evidence.append("%s: exclusive%s" % (spec["name"], "" if ok else ", but time-sliced"))
        if not ok:
            bad.append(spec["name"])
    if bad:
        return False, "nodes not in their configured mode: %s" % ", ".join(bad), evidence
    modes = [m for m in ("time-slicing", "mps", "mig") if any(n.get("mode") == m for n in shared)]
    return True, "%s as configured on %d node(s)" % (
        ", ".join(_mode_nodes(shared, m) for m in modes), len(shared)), evidence


def helm_history(ctx, release, namespace):
    """[(revision, status, description, chart version)] of a Helm 3/4 release, from its release Secrets."""
    import base64
    import gzip
    import json

    secrets = ctx.kube.list("v1", "Secret", namespace=namespace,
                            label_selector="owner=helm,name=%s" % release)[0]
    history = []
    for secret in secrets:
        labels = _labels(secret)
        try:
            raw = base64.b64decode(base64.b64decode((secret.get("data") or {}).get("release", "")))
            body = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        except (ValueError, TypeError, OSError):
            body = {}
        history.append((int(labels.get("version", 0)), labels.get("status"),
                        (body.get("info") or {}).get("description", ""),
                        ((body.get("chart") or {}).get("metadata") or {}).get("version", "?")))
    return sorted(history)


@check("update-rehearsed")
def update_rehearsed(ctx):
    release, ns = ctx.params.get("operator_release") or "gpu-operator", ctx.params["operator_namespace"]
    history = helm_history(ctx, release, ns)
    records = ctx.params.get("upgrade_records") or []
    evidence = ["Helm release %s/%s revision %d: %s, chart %s (%s)" % (ns, release, rev, status, version, desc)
                for rev, status, desc, version in history]
    evidence += ["record %s: %s %s -> %s%s" % (
        r.get("date", "?"), r.get("action", "upgrade"), r.get("from_version", "?"), r.get("to_version", "?"),
        (" (%s)" % r["result"]) if r.get("result") else "") for r in records]
    upgraded = [h for h in history if h[2].startswith("Upgrade complete")] + [
        r for r in records if r.get("action", "upgrade") == "upgrade" and r.get("result") == "success"]
    rolled = [h for h in history if h[2].startswith("Rollback to")] + [
        r for r in records if r.get("action") == "rollback" and r.get("result") == "success"]
    if not history and not records:
        return Result("update-rehearsed", FAIL, "release %s has no Helm history in namespace %s: install the GPU "
                      "Operator first, or name its release and namespace (gpu_operator_release_name, "
                      "acceptance_operator_namespace)" % (release, ns), evidence)
    if upgraded and rolled:
        return Result("update-rehearsed", PASS, "an upgrade and a rollback of %s are on record (Helm history)"
                      % release, evidence)
    # not a broken platform: the rehearsal has not been done yet, and the protocol says so
    return Result("update-rehearsed", SKIP, "not rehearsed yet: on record %d upgrade(s), %d rollback(s) of %s (Helm "
                  "history%s); rehearse with playbooks/gpu_operator_upgrade.yml then "
                  "playbooks/gpu_operator_rollback.yml" % (
                      len(upgraded), len(rolled), release,
                      ", %s" % ctx.params["upgrade_record_file"] if ctx.params.get("upgrade_record_file") else ""),
                  evidence)


@check("runbooks")
def runbooks(ctx):
    directory = ctx.params.get("runbooks_dir")
    evidence, missing = [], []
    for name in RUNBOOKS:
        path = os.path.join(directory or "", name + ".md")
        if directory and os.path.isfile(path):
            evidence.append("%s: present" % path)
        else:
            missing.append(name)
    links = ctx.params.get("alert_runbook_links")
    if links is None and ctx.kube.served(upstream.PROMETHEUS_RULE_API_VERSION, "PrometheusRule"):
        rules = ctx.kube.list(upstream.PROMETHEUS_RULE_API_VERSION, "PrometheusRule",
                              label_selector="%s=%s" % (upstream.LABEL_PART_OF, upstream.PART_OF_VALUE))[0]
        links = dict((rule["alert"], (rule.get("annotations") or {}).get("runbook_url"))
                     for item in rules for group in (item.get("spec") or {}).get("groups") or []
                     for rule in group.get("rules") or [] if rule.get("alert")) or None
    if links is not None:
        unlinked = sorted(alert for alert, url in links.items()
                          if not url or os.path.splitext(os.path.basename(url.split("#")[0]))[0] not in RUNBOOKS
                          and not os.path.isfile(os.path.join(directory or "", os.path.basename(url.split("#")[0]))))
        evidence.append("%d alerts, %d without a runbook link to an existing runbook%s" % (
            len(links), len(unlinked), (": " + ", ".join(unlinked)) if unlinked else ""))
    else:
        unlinked = []
        evidence.append("no alert rules given (monitoring not part of this site)")
    if missing or unlinked:
        return Result("runbooks", FAIL, "missing runbooks: %s" % (", ".join(missing) or "none"), evidence)
    return Result("runbooks", PASS, "the four runbooks exist%s" % (
        " and every alert links one" if links else ""), evidence)


@check("queues-fair")
def queues_fair(ctx):
    if ctx.params.get("queue_backend", "none") == "none":
        return Result("queues-fair", SKIP, "no queue backend (tenants_queue_backend: none)")
    if dra.is_dra(ctx):
        return dra.queues_fair(ctx)
    ensure_test_namespace(ctx)
    return QueueProbe(ctx, test_pod).run(ctx.params.get("teams") or [], ctx.params.get("queue_teams"))


@check("monitoring-alert")
def monitoring_alert(ctx):
    if not ctx.params.get("prometheus_url"):
        return Result("monitoring-alert", SKIP, "no Prometheus URL given: set acceptance_prometheus_url to the "
                      "Prometheus that scrapes the DCGM exporters (playbooks/monitoring.yml installs the rules)")
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.monitoring import AlertProbe

    ensure_test_namespace(ctx)
    return AlertProbe(ctx, test_pod, wait_for, pod_log).run()


def _agnhost_pod(ctx, name, namespace, args, labels=None, ports=None, restart="Never"):
    pod = test_pod(ctx, name, {}, image=ctx.params["probe_image"])
    pod["metadata"]["namespace"] = namespace
    pod["metadata"]["labels"].update(labels or {})
    container = pod["spec"]["containers"][0]
    del container["resources"]
    container["args"] = list(args)
    if ports:
        container["ports"] = ports
    pod["spec"]["restartPolicy"] = restart
    pod["spec"].pop("tolerations", None)   # probes run on ordinary nodes
    return pod


def _probe(ctx, namespace, name, target, protocol="tcp"):
    """An agnhost `connect` client pod: (phase, log) as on any cluster that enforces NetworkPolicy."""
    pod = _agnhost_pod(ctx, name, namespace, ["connect", target, "--timeout=3s", "--protocol=%s" % protocol])
    ctx.kube.create(pod)
    ctx.track(pod)
    final = wait_for(ctx, "v1", "Pod", name, namespace,
                     lambda p: (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
                     ctx.params["pod_timeout"])
    phase = ((final or {}).get("status") or {}).get("phase")
    log = pod_log(ctx, namespace, name).strip() if phase in ("Succeeded", "Failed") else ""
    return phase, log


@check("tenant-isolation")
def tenant_isolation(ctx):
    teams = ctx.params.get("teams") or []
    if len(teams) < 2:
        return Result("tenant-isolation", SKIP, "fewer than two teams in tenants_list (%s): isolation needs a "
                      "second team to probe from" % (", ".join(teams) or "none"))
    team_a, team_b = teams[0], teams[1]
    server = _agnhost_pod(ctx, "acceptance-server", team_b, ["netexec", "--http-port=8080"],
                          labels={"app.kubernetes.io/name": "acceptance-server"},
                          ports=[{"name": "http", "containerPort": 8080}], restart="Always")
    ctx.kube.create(server)
    ctx.track(server)
    ready = wait_for(ctx, "v1", "Pod", "acceptance-server", team_b,
                     lambda p: (_condition(p, "Ready") or {}).get("status") == "True", ctx.params["pod_timeout"])
    ip = ((ready or {}).get("status") or {}).get("podIP")
    if not ip:
        return Result("tenant-isolation", FAIL, "the probe server in %s did not become ready" % team_b,
                      [_pod_failure(ready or {})])
    target = "%s:8080" % ip
    evidence, failed = [], []
    cases = [
        ("acceptance-probe-cross", team_a, target, "tcp", "Failed",
         "%s -> %s (%s/acceptance-server)" % (team_a, target, team_b)),
        ("acceptance-probe-own", team_b, target, "tcp", "Succeeded", "%s -> %s (same namespace)" % (team_b, target)),
    ]
    if ctx.kube.get("v1", "Service", upstream.DNS_SERVICE, upstream.DNS_NAMESPACE) is not None:
        cases.append(("acceptance-probe-dns", team_a, "%s.%s.svc.cluster.local:53" % (
            upstream.DNS_SERVICE, upstream.DNS_NAMESPACE), "udp", "Succeeded", "%s -> cluster DNS (udp 53)" % team_a))
    for name, ns, dest, proto, want, what in cases:
        phase, log = _probe(ctx, ns, name, dest, proto)
        verdict = "allowed" if phase == "Succeeded" else "blocked" if phase == "Failed" else "no verdict"
        evidence.append("%s: %s%s (expected %s)" % (what, verdict, (" - " + log) if log else "",
                                                    "allowed" if want == "Succeeded" else "blocked"))
        if phase != want:
            failed.append(what)
    if failed:
        return Result("tenant-isolation", FAIL, "isolation not as the policies say: %s" % "; ".join(failed), evidence)
    return Result("tenant-isolation", PASS, "%s cannot reach %s; the own namespace%s can" % (
        team_a, team_b, " and the cluster DNS" if len(cases) > 2 else ""), evidence)
