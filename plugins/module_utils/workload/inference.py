# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The step inference-serving: the team's serving Deployment (template inference-deployment:
readiness probe, PodDisruptionBudget, rollout with maxUnavailable 0) behind its Service takes
a bounded load, and a rollout during that load loses no request.

The Deployment, Service and PodDisruptionBudget are created and the Deployment waited for until
every replica is available. Then the load Job (template load-job, load.py) runs; at its first
`tick` line the Deployment is rolled out as `kubectl rollout restart` does it (the pod template
annotation kubectl.kubernetes.io/restartedAt), and the rollout is followed until every replica
is new and available. load.py's `summary` line gives p50/p90/p99, requests per second and the
error rate; the ticks within the rollout give the errors it caused. FAIL: no ready replica, a
rollout that does not finish, an error rate above the limit (naming the errors of the rollout),
a p99 above the limit, no summary.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import lines, objects
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.runner import FAIL, PASS, Result, step

APPS = "apps/v1"


def _tail(text, count=5):
    kept = [line for line in (text or "").splitlines() if line.strip()]
    return " | ".join(kept[-count:]) or "(empty)"


def replicas_of(dep):
    spec = (dep or {}).get("spec") or {}
    return int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)


def rolled_out(dep, generation=None):
    """True when the Deployment's controller saw the latest spec and every replica is new and available."""
    if not dep:
        return False
    status = dep.get("status") or {}
    want = replicas_of(dep)
    generation = generation or objects.meta(dep).get("generation") or 0
    return (status.get("observedGeneration", 0) >= generation and status.get("updatedReplicas", 0) == want
            and status.get("availableReplicas", 0) == want and status.get("replicas", 0) == want
            and not status.get("unavailableReplicas"))


def _selector(dep):
    labels = (((dep.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
    return ",".join("%s=%s" % kv for kv in sorted(labels.items()))


def serving_pods(ctx, dep):
    namespace = objects.meta(dep).get("namespace")
    return ctx.kube.list("v1", "Pod", namespace=namespace, label_selector=_selector(dep))[0]


def why_not_ready(ctx, dep):
    """What keeps the replicas from being available: the pods' problems, else the Deployment's conditions."""
    found = []
    for pod in serving_pods(ctx, dep):
        problem = objects.pod_problem(pod)
        if not problem and objects.phase_of(pod) == "Running":
            problem = "Running, not ready (readiness probe)" if not _ready(pod) else ""
        if problem:
            found.append("pod %s: %s" % (objects.name_of(pod), problem))
    for cond_type in ("ReplicaFailure", "Progressing", "Available"):
        cond = objects.condition(dep, cond_type)
        if cond and cond.get("status") != "True" or (cond and cond_type == "ReplicaFailure"):
            found.append("%s: %s" % (cond.get("reason"), cond.get("message")))
    return "; ".join(found) or "no pod was created"


def _ready(pod):
    return any(c.get("type") == upstream.COND_POD_READY and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def errors_between(found, start, end):
    """Requests and errors of the ticks that cover [start, end] (a tick reports the second before it)."""
    ticks = [t for t in lines.events(found, "tick") if start - 0.001 <= t["time"] and t["time"] - 1.0 <= end]
    return int(sum(lines.number(t, "requests") for t in ticks)), int(sum(lines.number(t, "errors") for t in ticks))


def restart(ctx, dep):
    """What `kubectl rollout restart` does: a new pod template annotation, so every pod is replaced."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ctx.clock()))
    patched = ctx.kube.patch(APPS, "Deployment", objects.name_of(dep), {"spec": {"template": {"metadata": {
        "annotations": {upstream.RESTARTED_AT_ANNOTATION: stamp}}}}}, namespace=objects.meta(dep).get("namespace"))
    return objects.meta(patched).get("generation") or 0


def evaluate(summary, opts, rollout, figures, evidence):
    """Result from load.py's summary line and the rollout's figures (pure)."""
    requests, errors = int(lines.number(summary, "requests")), int(lines.number(summary, "errors"))
    rate = lines.number(summary, "error_rate", 1.0)
    figures.update(requests=requests, errors=errors, error_rate=rate, p50_ms=summary.get("p50_ms"),
                   p90_ms=summary.get("p90_ms"), p99_ms=summary.get("p99_ms"), rps=summary.get("rps"),
                   load_seconds=summary.get("seconds"))
    evidence.append("load.py summary: %d requests, %d errors (rate %s), p50 %s ms, p90 %s ms, p99 %s ms, %s rps "
                    "over %s s%s" % (requests, errors, rate, summary.get("p50_ms"), summary.get("p90_ms"),
                                     summary.get("p99_ms"), summary.get("rps"), summary.get("seconds"),
                                     ("; last error: %s" % summary["last_error"]) if summary.get("last_error") else ""))
    limit = float(opts.get("max_error_rate") or 0.0)
    p99_max = opts.get("p99_ms_max")
    problems = []
    if requests == 0:
        problems.append("no request was answered or sent: %s" % (summary.get("last_error") or "no requests"))
    elif rate > limit:
        cause = ""
        if rollout.get("errors") is not None and rollout["errors"] > 0:
            cause = ": %d of them during the rollout (%.1f s), which lost requests" % (
                rollout["errors"], float(rollout.get("seconds") or 0))
        problems.append("%d of %d requests failed, error rate %.4f above %s%s%s" % (
            errors, requests, rate, limit, cause,
            (" (last: %s)" % summary["last_error"]) if summary.get("last_error") else ""))
    if p99_max is not None and summary.get("p99_ms") is not None and float(summary["p99_ms"]) > float(p99_max):
        problems.append("p99 %.1f ms above the limit of %s ms" % (float(summary["p99_ms"]), p99_max))
    if problems:
        return FAIL, "; ".join(problems)
    text = "p50 %s ms, p99 %s ms, %s requests/s, %d errors of %d" % (
        summary.get("p50_ms"), summary.get("p99_ms"), summary.get("rps"), errors, requests)
    if rollout.get("seconds") is not None:
        text += "; a rollout during the load (%.1f s) lost %s" % (
            rollout["seconds"], "no request" if not rollout.get("errors") else "%d requests" % rollout["errors"])
    return PASS, text


@step("inference-serving")
def inference_serving(ctx):
    opts = ctx.params.get("inference") or {}
    manifests = ctx.params.get("manifests") or {}
    pod_timeout = int(ctx.params.get("pod_timeout") or 300)
    load_seconds = float(opts.get("requests_seconds") or 60)
    do_rollout = opts.get("rollout", True) not in (False, "false", "no")
    namespace = ctx.params["namespace"]
    serving = objects.prepare(ctx, manifests.get("serving"), "serving")
    load = objects.prepare(ctx, manifests.get("load"), "load")
    dep_body = objects.pick(serving, "Deployment", "serving")
    svc_body = objects.pick(serving, "Service", "serving")
    pdb_body = objects.pick(serving, "PodDisruptionBudget", "serving", required=False)
    job_body = objects.pick(load, "Job", "load")
    name = objects.name_of(dep_body)
    evidence, figures = [], {"replicas": replicas_of(dep_body), "rollout": do_rollout}
    strategy = ((dep_body.get("spec") or {}).get("strategy") or {})
    evidence.append("Deployment %s: %d replicas, strategy %s %s; Service %s%s" % (
        name, replicas_of(dep_body), strategy.get("type", "RollingUpdate"), strategy.get("rollingUpdate") or "",
        objects.name_of(svc_body), "; PodDisruptionBudget %s" % objects.name_of(pdb_body) if pdb_body else
        "; no PodDisruptionBudget"))

    objects.ensure_scripts(ctx)
    started = ctx.clock()
    objects.create_all(ctx, serving, pod_timeout)
    ready = objects.until(ctx, lambda: ctx.kube.get(APPS, "Deployment", name, namespace) if rolled_out(
        ctx.kube.get(APPS, "Deployment", name, namespace)) else None, pod_timeout, watch=(APPS, "Deployment", namespace))
    dep = ready or ctx.kube.get(APPS, "Deployment", name, namespace) or dep_body
    figures["ready_replicas"] = int((dep.get("status") or {}).get("readyReplicas") or 0)
    if not ready:
        return Result("inference-serving", FAIL, "Deployment %s has %d of %d replicas ready after %d s: %s" % (
            name, figures["ready_replicas"], replicas_of(dep), pod_timeout, why_not_ready(ctx, dep)), evidence, figures)
    figures["ready_seconds"] = round(ctx.clock() - started, 2)
    evidence.append("%d replicas available %.1f s after creation on %s" % (
        figures["ready_replicas"], figures["ready_seconds"],
        ", ".join(sorted(set(objects.node_of(p) or "?" for p in serving_pods(ctx, dep))))))
    if pdb_body:
        pdb = ctx.kube.get("policy/v1", "PodDisruptionBudget", objects.name_of(pdb_body), namespace) or {}
        allowed = (pdb.get("status") or {}).get("disruptionsAllowed")
        figures["pdb_disruptions_allowed"] = allowed if allowed is not None else "-"
        evidence.append("PodDisruptionBudget %s: %s disruptions allowed" % (objects.name_of(pdb_body), allowed))

    objects.create_all(ctx, load, pod_timeout)
    job_name = objects.name_of(job_body)
    rollout = {"at": None, "done": None, "generation": None, "seconds": None, "errors": None}
    seen = {"text": "", "pod": None}

    def progress():
        pods = objects.pods_of(ctx, namespace, job_name)
        pod = pods[-1] if pods else None
        seen["pod"] = pod
        seen["text"] = objects.log_of(ctx, pod) if pod is not None else ""
        found = lines.read(seen["text"])
        if do_rollout and rollout["at"] is None and lines.events(found, "tick"):
            rollout["at"] = ctx.clock()
            rollout["generation"] = restart(ctx, dep)
        if rollout["at"] is not None and rollout["done"] is None and rolled_out(
                ctx.kube.get(APPS, "Deployment", name, namespace), rollout["generation"]):
            rollout["done"] = ctx.clock()
        if lines.last(found, "summary") and (not do_rollout or rollout["done"] is not None):
            return "summary"
        if pod is not None and objects.phase_of(pod) in ("Succeeded", "Failed") and not lines.last(found, "summary"):
            return objects.phase_of(pod)
        finished = objects.job_finished(ctx.kube.get("batch/v1", "Job", job_name, namespace))
        if finished == "Failed":
            return finished
        return None

    outcome = objects.until(ctx, progress, load_seconds + 2 * pod_timeout, interval=0.5)
    found = lines.read(seen["text"])
    summary = lines.last(found, "summary")
    if do_rollout:
        if rollout["at"] is None:
            evidence.append("no rollout: the load printed no tick line")
        elif rollout["done"] is None:
            dep = ctx.kube.get(APPS, "Deployment", name, namespace) or dep
            return Result("inference-serving", FAIL, "the rollout of %s did not finish: %s" % (
                name, why_not_ready(ctx, dep)), evidence, figures)
        else:
            began, ended = float(rollout["at"]), float(rollout["done"])
            rollout["seconds"] = round(ended - began, 2)
            requests, errors = errors_between(found, began, ended)
            rollout["errors"] = errors
            figures.update(rollout_seconds=rollout["seconds"], errors_during_rollout=errors)
            evidence.append("rollout (%s) from %.3f to %.3f: %d requests, %d errors in those seconds" % (
                upstream.RESTARTED_AT_ANNOTATION, began, ended, requests, errors))
    if summary is None:
        pod = seen["pod"]
        problem = objects.pod_problem(pod) if pod is not None else "no pod"
        return Result("inference-serving", FAIL, "the load Job %s printed no summary (%s)%s" % (
            job_name, outcome or "timed out after %d s" % (load_seconds + 2 * pod_timeout),
            (": " + problem) if problem else ""), evidence + ["log: %s" % _tail(seen["text"])], figures)
    status, text = evaluate(summary, opts, rollout, figures, evidence)
    return Result("inference-serving", status, text, evidence, figures)
