# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The steps training-window and checkpoint-restore, on one training Job.

training-window submits the team's training Job (the template the team copies) through its
queue and reads rank 0's step lines for a fixed window: throughput in samples per second from
the first to the last step of the window, the accepted units (samples) for the cost step.
The Job keeps running for checkpoint-restore: it waits for a checkpoint line, deletes the
rank-0 pod, and reads the replacement's first lines: `resume` at step S, then the first step
after it. The recovery time is that step's time minus the delete. A replacement that starts
at step 0 fails with the cause, read from the pod spec and the claim: the checkpoint
directory is not on a PersistentVolumeClaim (it died with the pod), or the claim is missing
or not bound (its events say why).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import lines, objects
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.queue import submit, training_objects
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.runner import FAIL, PASS, Result, step

DEFAULT_CHECKPOINT_DIR = "/checkpoints"


def _tail(text, count=5):
    kept = [line for line in (text or "").splitlines() if line.strip()]
    return " | ".join(kept[-count:]) or "(empty)"


def rank0(ctx, tr, exclude_uid=None):
    """The running rank-0 pod of the training Job (completion index 0, else the first pod)."""
    pods = [p for p in objects.pods_of(ctx, tr["namespace"], tr["job"], tr.get("uid"))
            if not objects.deleting(p) and objects.meta(p).get("uid") != exclude_uid]
    zero = [p for p in pods if objects.index_of(p) in (0, None)]
    return (zero or pods or [None])[0]


def window_figures(found, window):
    """(steps in the window, seconds, samples after the first step, throughput) from step lines."""
    steps = lines.events(found, "step")
    if not steps:
        return [], 0.0, 0, 0.0
    start = steps[0]["time"]
    inside = [s for s in steps if s["time"] <= start + window]
    seconds = inside[-1]["time"] - start
    samples = int(sum(lines.number(s, "samples") for s in inside[1:]))
    return inside, seconds, samples, (samples / seconds if seconds > 0 else 0.0)


@step("training-window")
def training_window(ctx):
    window = float(ctx.params.get("training_window_seconds") or 300)
    pod_timeout = int(ctx.params.get("pod_timeout") or 300)
    objs = training_objects(ctx)
    sub = submit(ctx, objs, "training")
    evidence = list(sub.evidence)
    if sub.problem:
        return Result("training-window", FAIL, sub.problem, evidence, {"steps": 0})
    tr = {"job": sub.name, "namespace": sub.namespace, "uid": sub.uid, "pods": [objects.name_of(p) for p in sub.pods],
          "nodes": sub.nodes, "gpus": sub.gpus, "gpu_seconds": 0.0, "units": 0, "throughput": 0.0,
          "started": None, "ended": None, "unit": "samples"}
    seen = {}

    def covered():
        pod = rank0(ctx, tr)
        seen["pod"] = pod
        if pod is None:
            return None
        seen["text"] = objects.log_of(ctx, pod)
        found = lines.read(seen["text"])
        steps = lines.events(found, "step")
        if lines.first(found, "done") or (steps and steps[-1]["time"] - steps[0]["time"] >= window):
            return "covered"
        if objects.phase_of(pod) in ("Succeeded", "Failed"):
            return objects.phase_of(pod)
        return None

    outcome = objects.until(ctx, covered, window + pod_timeout, watch=("v1", "Pod", sub.namespace))
    pod, text = seen.get("pod"), seen.get("text") or ""
    found = lines.read(text)
    inside, seconds, samples, throughput = window_figures(found, window)
    figures = {"throughput_samples_per_s": round(throughput, 2), "steps": len(inside), "samples": samples,
               "seconds": round(seconds, 2), "window_seconds": window, "gpus": sub.gpus,
               "gpu_seconds": round(sub.gpus * seconds, 2), "unit": "samples"}
    start = lines.first(found, "start") or lines.first(found, "resume")
    if start:
        reason = (" (%s)" % start["reason"]) if start.get("reason") else ""
        evidence.append("rank 0 (%s): %s at step %s%s" % (objects.name_of(pod), start["event"], start.get("step"), reason))
    if len(inside) < 2:
        problem = objects.pod_problem(pod) if pod is not None else "no pod"
        return Result("training-window", FAIL, "the training Job %s printed %d step lines %s%s" % (
            sub.name, len(inside), "before it ended (%s)" % outcome if outcome not in (None, "covered") else
            "within %d s" % (window + pod_timeout), (": " + problem) if problem else ""),
            evidence + ["log of %s: %s" % (objects.name_of(pod) if pod else "-", _tail(text))], figures)
    done = lines.first(found, "done")
    steps = lines.events(found, "step")
    if steps[-1]["time"] - steps[0]["time"] < window:
        evidence.append("the window is %.1f s of the %.0f s asked: %s" % (
            seconds, window, "the program ended its run (done line) first" if done else "the wait ended first"))
    evidence.append("%d steps from %.3f to %.3f: %d samples, last loss %s" % (
        len(inside), inside[0]["time"], inside[-1]["time"], samples, inside[-1].get("loss")))
    tr.update(gpu_seconds=figures["gpu_seconds"], units=samples, throughput=figures["throughput_samples_per_s"],
              started=inside[0]["time"], ended=inside[-1]["time"], steps=len(inside))
    ctx.state["training"] = tr
    return Result("training-window", PASS, "%.1f samples/s over %.1f s (%d steps, %d GPUs on %s)" % (
        throughput, seconds, len(inside), sub.gpus, ", ".join(sub.nodes)), evidence, figures)


# --- checkpoint-restore -------------------------------------------------------------------

def _main_container(pod):
    containers = (pod.get("spec") or {}).get("containers") or []
    return containers[0] if containers else {}


def checkpoint_dir(pod):
    """--checkpoint-dir of the program (command or args, also inside a shell line), else CHECKPOINT_DIR."""
    container = _main_container(pod)
    words = []
    for part in (container.get("command") or []) + (container.get("args") or []):
        words.extend(str(part).split())
    for number, word in enumerate(words):
        if word == "--checkpoint-dir" and number + 1 < len(words):
            return words[number + 1].strip("'\";")
        if word.startswith("--checkpoint-dir="):
            return word.split("=", 1)[1].strip("'\";")
    for env in container.get("env") or []:
        if env.get("name") == "CHECKPOINT_DIR" and env.get("value"):
            return env["value"]
    return DEFAULT_CHECKPOINT_DIR


def checkpoint_volume(pod, directory):
    """(mount path, volume) holding the directory, or (None, None) when it is in the container's own filesystem."""
    container = _main_container(pod)
    best = None
    for mount in container.get("volumeMounts") or []:
        path = (mount.get("mountPath") or "").rstrip("/") or "/"
        if directory == path or directory.startswith(path.rstrip("/") + "/"):
            if best is None or len(path) > len(best.get("mountPath") or ""):
                best = mount
    if best is None:
        return None, None
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if volume.get("name") == best.get("name"):
            return best.get("mountPath"), volume
    return best.get("mountPath"), {"name": best.get("name")}


def persistence_problem(ctx, pod, directory):
    """Why a checkpoint in `directory` does not outlive the pod ('' when it is on a bound claim)."""
    mount, volume = checkpoint_volume(pod, directory)
    if volume is None:
        return "%s is not a persistent volume: it is in the container's own filesystem" % directory
    claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
    if not claim:
        kinds = sorted(k for k in volume if k != "name") or ["no source"]
        return "%s is not a persistent volume: volume %s mounted at %s is %s" % (
            directory, volume.get("name"), mount, ", ".join(kinds))
    namespace = objects.meta(pod).get("namespace")
    pvc = ctx.kube.get("v1", "PersistentVolumeClaim", claim, namespace)
    if pvc is None:
        return "%s is on claim %s, which does not exist" % (directory, claim)
    phase = (pvc.get("status") or {}).get("phase")
    if phase != "Bound":
        events = objects.events_of(ctx, namespace, "PersistentVolumeClaim", claim)
        last = (": " + events[-1]) if events else ""
        return "%s is on claim %s, which is %s%s" % (directory, claim, phase or "not bound", last)
    return ""


@step("checkpoint-restore")
def checkpoint_restore(ctx):
    tr = ctx.state.get("training")
    if not tr:
        return Result("checkpoint-restore", FAIL, "no training Job to restore: training-window did not run in this run")
    checkpoint_timeout = int(ctx.params.get("checkpoint_timeout") or 600)
    pod_timeout = int(ctx.params.get("pod_timeout") or 300)
    evidence = []
    seen = {}
    pod = rank0(ctx, tr)
    if pod is None or objects.phase_of(pod) != "Running":
        return Result("checkpoint-restore", FAIL, "the training Job %s has no running rank-0 pod to delete (%s): its "
                      "run must last longer than the window and the checkpoint wait" % (
                          tr["job"], objects.phase_of(pod) if pod else "no pod"), evidence)
    directory = checkpoint_dir(pod)
    cause = persistence_problem(ctx, pod, directory)
    evidence.append("checkpoint directory %s of pod %s: %s" % (
        directory, objects.name_of(pod), cause or "on a bound PersistentVolumeClaim"))

    def checkpointed():
        seen["text"] = objects.log_of(ctx, pod)
        hit = lines.last(lines.read(seen["text"]), "checkpoint")
        if hit:
            return hit
        current = ctx.kube.get("v1", "Pod", objects.name_of(pod), tr["namespace"])
        if current is None or objects.phase_of(current) != "Running":
            return {"ended": objects.phase_of(current) if current else "deleted"}
        return None

    ckpt = objects.until(ctx, checkpointed, checkpoint_timeout, watch=("v1", "Pod", tr["namespace"]))
    if ckpt is None or "ended" in ckpt:
        why = ("within %d s" % checkpoint_timeout) if ckpt is None else "before the pod ended (%s)" % ckpt["ended"]
        return Result("checkpoint-restore", FAIL, "no checkpoint written %s by %s (directory %s)%s" % (
            why, objects.name_of(pod), directory, ("; " + cause) if cause else ""),
            evidence + ["log of %s: %s" % (objects.name_of(pod), _tail(seen.get("text")))])
    figures = {"checkpoint_seconds": round(lines.number(ckpt, "seconds"), 2), "checkpoint_step": ckpt.get("step"),
               "checkpoint_bytes": int(lines.number(ckpt, "bytes"))}
    evidence.append("checkpoint of step %s written to %s: %d bytes in %.2f s" % (
        ckpt.get("step"), ckpt.get("path"), figures["checkpoint_bytes"], figures["checkpoint_seconds"]))
    old_uid = objects.meta(pod).get("uid")
    deleted_at = ctx.clock()
    ctx.kube.delete("v1", "Pod", objects.name_of(pod), tr["namespace"])
    evidence.append("pod %s deleted at %.3f" % (objects.name_of(pod), deleted_at))

    def restored():
        new = rank0(ctx, tr, exclude_uid=old_uid)
        seen["new"] = new
        if new is None:
            return None
        seen["new_text"] = objects.log_of(ctx, new)
        found = lines.read(seen["new_text"])
        begin = lines.first(found, "resume") or lines.first(found, "start")
        if begin is not None:
            after = lines.first(found, "step", after=begin["time"] - 1e-9)
            if after is not None or begin["event"] == "start":
                return begin, after
        if objects.phase_of(new) in ("Succeeded", "Failed"):
            return None, None
        return None

    outcome = objects.until(ctx, restored, pod_timeout + checkpoint_timeout, watch=("v1", "Pod", tr["namespace"]))
    new = seen.get("new")
    if outcome is None or outcome[0] is None:
        seen_new = (": %s %s %s" % (objects.name_of(new), objects.phase_of(new), objects.pod_problem(new))
                    if new else ": no new pod")
        return Result("checkpoint-restore", FAIL, "no replacement pod resumed within %d s of the delete%s" % (
            pod_timeout + checkpoint_timeout, seen_new), evidence + ["log of the replacement: %s" % _tail(seen.get("new_text"))], figures)
    begin, first_step = outcome
    tr["pods"] = tr["pods"] + [objects.name_of(new)]
    figures["resumed_step"] = int(lines.number(begin, "step"))
    evidence.append("replacement %s on %s: %s at step %s%s" % (
        objects.name_of(new), objects.node_of(new) or "-", begin["event"], begin.get("step"),
        (" (%s)" % begin["reason"]) if begin.get("reason") else ""))
    if begin["event"] == "start" or figures["resumed_step"] == 0:
        reason = cause or "the checkpoint directory %s is on a bound claim, but the program found no checkpoint (%s)" % (
            directory, begin.get("reason") or "no reason printed")
        return Result("checkpoint-restore", FAIL, "restored from step 0: %s" % reason, evidence, figures)
    figures["restore_seconds"] = round(lines.number(begin, "seconds"), 2)
    figures["recovery_seconds"] = round(first_step["time"] - deleted_at, 2)
    evidence.append("first step after the restore: step %s at %.3f" % (first_step.get("step"), first_step["time"]))
    seen_step = int(lines.number(ckpt, "step"))
    if figures["resumed_step"] < seen_step:
        evidence.append("resumed from step %d, before the checkpoint of step %d seen before the delete" % (
            figures["resumed_step"], seen_step))
    elif figures["resumed_step"] > seen_step:
        evidence.append("resumed from a newer checkpoint than the one of step %d seen: written between the read "
                        "and the delete" % seen_step)
    tr["recovery_seconds"] = figures["recovery_seconds"]
    return Result("checkpoint-restore", PASS, "resumed from step %d; recovery %.1f s from the delete to the first "
                  "step (checkpoint write %.1f s, load %.1f s)" % (
                      figures["resumed_step"], figures["recovery_seconds"], figures["checkpoint_seconds"],
                      figures["restore_seconds"]), evidence, figures)
