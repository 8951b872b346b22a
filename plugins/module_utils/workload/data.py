# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The step data-staged: the stage Job downloads the dataset sample and the base weights.

stage.py prints one `staged` line per source (bytes, seconds), `stage-failed` (url, error)
at the first failure and exits 1, `stage-done` with the totals. The data claim stays for the
training Job (it mounts it); the stage Job is removed when the step ends.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import lines, objects
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.queue import submit
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.runner import FAIL, PASS, Result, step

MB = 1000.0 * 1000.0


def _tail(text, count=5):
    kept = [line for line in (text or "").splitlines() if line.strip()]
    return " | ".join(kept[-count:])


def _mbps(size, seconds):
    return round(size / MB / seconds, 1) if seconds else None


@step("data-staged")
def data_staged(ctx):
    objs = objects.prepare(ctx, (ctx.params.get("manifests") or {}).get("data"), "data")
    stage_timeout = int(ctx.params.get("stage_timeout") or 1800)
    sub = submit(ctx, objs, "data")
    evidence = list(sub.evidence)
    if sub.problem:
        return Result("data-staged", FAIL, sub.problem, evidence, {"bytes": 0, "seconds": 0})
    state = {}

    def finished():
        job = ctx.kube.get("batch/v1", "Job", sub.name, sub.namespace)
        pods = objects.pods_of(ctx, sub.namespace, sub.name, sub.uid)
        state["pods"] = pods
        done = objects.job_finished(job) if job else "gone"
        # every pod failed (a 404 is a 404 on each retry): report now, not after the backoff; a pod that
        # succeeded is read once the Job controller has marked the Job Complete
        if done or (pods and all(objects.phase_of(p) == "Failed" for p in pods)):
            return done or "pods failed"
        return None

    outcome = objects.until(ctx, finished, stage_timeout, watch=("v1", "Pod", sub.namespace))
    pods = state.get("pods") or sub.pods
    text = "\n".join(objects.log_of(ctx, p) for p in pods)
    found = lines.read(text)
    sources = []
    for line in lines.events(found, "staged"):
        size, seconds = int(lines.number(line, "bytes")), lines.number(line, "seconds")
        sources.append({"name": line.get("name"), "url": line.get("url"), "bytes": size,
                        "seconds": round(seconds, 2), "mbps": _mbps(size, seconds)})
        evidence.append("staged %s from %s: %d bytes in %.1f s (%s MB/s)" % (
            line.get("name"), line.get("url"), size, seconds, _mbps(size, seconds)))
    done = lines.last(found, "stage-done")
    total_bytes = int(lines.number(done, "bytes")) if done else sum(s["bytes"] for s in sources)
    total_seconds = round(lines.number(done, "seconds") if done else sum(s["seconds"] for s in sources), 2)
    figures = {"bytes": total_bytes, "seconds": total_seconds, "sources": sources,
               "mbps": _mbps(total_bytes, total_seconds)}
    failed = lines.first(found, "stage-failed")
    if failed:
        return Result("data-staged", FAIL, "staging %s from %s failed: %s" % (
            failed.get("name"), failed.get("url"), failed.get("error")), evidence, figures)
    if outcome is None:
        return Result("data-staged", FAIL, "the stage Job %s did not finish within %d s (%d of the sources staged)"
                      % (sub.name, stage_timeout, len(sources)), evidence + ["log: %s" % _tail(text)], figures)
    if outcome != "Complete" or not done:
        problems = [objects.pod_problem(p) for p in pods if objects.pod_problem(p)]
        return Result("data-staged", FAIL, "the stage Job %s ended (%s) without a stage-done line%s" % (
            sub.name, outcome, (": " + problems[0]) if problems else ""),
            evidence + ["log: %s" % (_tail(text) or "(empty)")], figures)
    job_body = objects.pick(objs, "Job", "data")
    objects.remove(ctx, job_body, int(ctx.params.get("pod_timeout") or 300))
    ctx.state["data"] = figures
    return Result("data-staged", PASS, "%d sources staged: %d bytes in %.1f s (%s MB/s)" % (
        len(sources), total_bytes, total_seconds, figures["mbps"]), evidence, figures)
