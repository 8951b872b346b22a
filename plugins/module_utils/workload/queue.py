# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Job through the team's queue: submitted, admitted, its pods bound; and the step queued-job.

What "admitted" means depends on the backend, as each one decides:
- Kueue: the Job is created suspended (Kueue's webhook) and unsuspended when its Workload is
  admitted; the wait is creation -> unsuspend, the reason the Workload's Admitted and
  QuotaReserved conditions ("Quota reserved in ClusterQueue X"). Its pods must then be bound.
- KAI: kai-scheduler binds the pods of the Job's PodGroup together (a gang) or none of them;
  the wait is creation -> all pods bound.
- none: the default scheduler binds the pods one by one; the wait is creation -> all bound.
A Job that is not admitted within queue_timeout fails naming the queue and the last reason
the backend gave (the Workload's condition, the pods' PodScheduled message or their events).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import objects
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.runner import FAIL, PASS, Result, step

WORKLOAD_KIND = "Workload"


class Submission(object):
    """One Job submitted through the queue and what was seen while it waited."""

    def __init__(self, job, created_at, body=None):
        self.job = job
        self.body = body or job  # the manifest as rendered (the live object adds status and defaults)
        self.last_pending = ""   # why the pods are not bound yet
        self.name = objects.name_of(job)
        self.namespace = objects.meta(job).get("namespace")
        self.uid = objects.meta(job).get("uid")
        self.created_at = created_at
        self.admitted_at = None
        self.bound_at = None
        self.reason = ""         # the admission reason (PASS) or the last reason it waits (FAIL)
        self.message = ""
        self.pods = []
        self.evidence = []
        self.problem = None      # a FAIL sentence

    @property
    def nodes(self):
        return sorted(set(objects.node_of(p) for p in self.pods if objects.node_of(p)))

    @property
    def gpus(self):
        return sum(objects.gpus_of(p) for p in self.pods)

    @property
    def wait_seconds(self):
        return round((self.admitted_at or self.created_at) - self.created_at, 2)


def queue_name(ctx, job):
    """The queue the Job names (its label, or its pod template's label for KAI)."""
    backend = ctx.params.get("queue_backend") or "none"
    template_labels = objects.meta(((job.get("spec") or {}).get("template") or {})).get("labels") or {}
    if backend == "kueue":
        return objects.labels_of(job).get(upstream.KUEUE_QUEUE_LABEL)
    if backend == "kai":
        return objects.labels_of(job).get(upstream.KAI_QUEUE_LABEL) or template_labels.get(upstream.KAI_QUEUE_LABEL)
    return None


def describe_queue(ctx, job):
    backend = ctx.params.get("queue_backend") or "none"
    name = queue_name(ctx, job)
    if backend == "kueue":
        return "Kueue LocalQueue %s" % name if name else "Kueue (the Job names no LocalQueue: label %s missing)" % (
            upstream.KUEUE_QUEUE_LABEL)
    if backend == "kai":
        return "KAI queue %s" % name if name else "KAI (the Job names no queue: label %s missing)" % (
            upstream.KAI_QUEUE_LABEL)
    return "the default scheduler (no queue backend)"


def kueue_workload(ctx, sub):
    """The Kueue Workload of the Job (owner reference), or None (not created yet / not served)."""
    if not ctx.kube.served(upstream.KUEUE_API_VERSION, WORKLOAD_KIND):
        return None
    items = ctx.kube.list(upstream.KUEUE_API_VERSION, WORKLOAD_KIND, namespace=sub.namespace)[0]
    for wl in items:
        refs = objects.meta(wl).get("ownerReferences") or []
        if any(r.get("kind") == "Job" and (r.get("uid") == sub.uid or (not sub.uid and r.get("name") == sub.name))
               for r in refs):
            return wl
    return None


def _pending_reason(ctx, sub, pods):
    """The reason the pods are not bound: their PodScheduled condition, else their last event."""
    for pod in pods:
        if objects.node_of(pod):
            continue
        problem = objects.pod_problem(pod)
        if problem:
            return "pod %s: %s" % (objects.name_of(pod), problem)
        events = objects.events_of(ctx, sub.namespace, "Pod", objects.name_of(pod))
        if events:
            return "pod %s: %s" % (objects.name_of(pod), events[-1])
    if not pods:
        events = objects.events_of(ctx, sub.namespace, "Job", sub.name)
        return "no pod created yet%s" % ((": " + events[-1]) if events else "")
    return "pods pending"


def _kueue_admitted(ctx, sub):
    job = ctx.kube.get("batch/v1", "Job", sub.name, sub.namespace)
    if job is None:
        raise DomainError("Job %s/%s disappeared while it waited in the queue" % (sub.namespace, sub.name))
    wl = kueue_workload(ctx, sub)
    if wl is not None:
        admitted = objects.condition(wl, "Admitted")
        reserved = objects.condition(wl, "QuotaReserved")
        if admitted and admitted.get("status") == "True":
            sub.reason = admitted.get("reason") or "Admitted"
            sub.message = (reserved or {}).get("message") or admitted.get("message") or ""
        else:
            cond = reserved or admitted or {}
            sub.reason = cond.get("reason") or "Pending"
            sub.message = cond.get("message") or ""
            if not cond:
                events = objects.events_of(ctx, sub.namespace, WORKLOAD_KIND, objects.name_of(wl))
                sub.message = events[-1] if events else "the Workload has no condition yet"
    elif (job.get("spec") or {}).get("suspend"):
        sub.reason, sub.message = "NoWorkload", "Kueue created no Workload for the Job (is Kueue running?)"
    if (job.get("spec") or {}).get("suspend"):
        return None
    if not sub.reason:
        sub.reason, sub.message = "NotSuspended", "the Job was never suspended: Kueue did not manage it"
    return job


def _bound(ctx, sub, job=None):
    job = job or ctx.kube.get("batch/v1", "Job", sub.name, sub.namespace)
    if job is None:
        raise DomainError("Job %s/%s disappeared while its pods waited to be scheduled" % (sub.namespace, sub.name))
    pods = [p for p in objects.pods_of(ctx, sub.namespace, sub.name, sub.uid) if not objects.deleting(p)]
    sub.pods = pods
    bound = [p for p in pods if objects.node_of(p)]
    if objects.job_finished(job) or (pods and len(bound) >= objects.job_size(job)):
        return True
    sub.last_pending = _pending_reason(ctx, sub, pods)
    return None


def start(ctx, objs, job_kind_what):
    """Create the objects (claims, Service, Job, ...); the Submission to wait for with admit()."""
    pod_timeout = int(ctx.params.get("pod_timeout") or 300)
    job_body = objects.pick(objs, "Job", job_kind_what)
    objects.ensure_scripts(ctx)
    created_at = ctx.clock()
    created = objects.create_all(ctx, objs, pod_timeout)
    sub = Submission(created[objs.index(job_body)], created_at, job_body)
    sub.evidence.append("Job %s/%s submitted to %s" % (sub.namespace, sub.name, describe_queue(ctx, job_body)))
    return sub


def submit(ctx, objs, job_kind_what):
    """Create the objects and wait for admission and bound pods."""
    return admit(ctx, start(ctx, objs, job_kind_what))


def admit(ctx, sub):
    """Wait until the queue admitted the Job and its pods are bound; sub.problem says why not."""
    queue_timeout = int(ctx.params.get("queue_timeout") or 600)
    pod_timeout = int(ctx.params.get("pod_timeout") or 300)
    backend = ctx.params.get("queue_backend") or "none"
    job_body = sub.body
    queue = describe_queue(ctx, job_body)
    watch_pods = ("v1", "Pod", sub.namespace)
    if backend == "kueue":
        live = objects.until(ctx, lambda: _kueue_admitted(ctx, sub), queue_timeout,
                             watch=("batch/v1", "Job", sub.namespace))
        if live is None:
            sub.problem = "%s did not admit Job %s within %d s: last reason %s: %s" % (
                queue, sub.name, queue_timeout, sub.reason or "none", sub.message or "no status from Kueue")
            return sub
        sub.admitted_at = ctx.clock()
        sub.evidence.append("admitted after %.1f s: %s%s" % (sub.wait_seconds, sub.reason,
                                                             (" (%s)" % sub.message) if sub.message else ""))
        if objects.until(ctx, lambda: _bound(ctx, sub), pod_timeout, watch=watch_pods) is None:
            sub.problem = "%s admitted Job %s but its pods were not scheduled within %d s: %s" % (
                queue, sub.name, pod_timeout, sub.last_pending)
            return sub
        sub.bound_at = ctx.clock()
    else:
        if objects.until(ctx, lambda: _bound(ctx, sub), queue_timeout, watch=watch_pods) is None:
            sub.problem = "%s did not start Job %s within %d s: last reason %s" % (
                queue, sub.name, queue_timeout, sub.last_pending or "none")
            return sub
        sub.admitted_at = sub.bound_at = ctx.clock()
        scheduler = ((job_body.get("spec") or {}).get("template") or {}).get("spec", {}).get(
            "schedulerName") or upstream.DEFAULT_SCHEDULER_NAME
        sub.reason = "Scheduled"
        sub.message = ("all %d pods bound by %s" % (len(sub.pods), scheduler) if len(sub.pods) != 1
                       else "the pod bound by %s" % scheduler)
        sub.evidence.append("admitted after %.1f s: %s%s" % (sub.wait_seconds, sub.reason,
                                                             (" (%s)" % sub.message) if sub.message else ""))
    sub.evidence.append("pods: %s" % ", ".join("%s on %s" % (objects.name_of(p), objects.node_of(p) or "-")
                                               for p in sub.pods))
    return sub


def training_objects(ctx):
    """The training run's objects in creation order: checkpoint claim(s), then the training manifests."""
    manifests = ctx.params.get("manifests") or {}
    objs = objects.prepare(ctx, manifests.get("checkpoint"), "checkpoint")
    objs += objects.prepare(ctx, manifests.get("training"), "training")
    return objs


@step("queued-job")
def queued_job(ctx):
    """Submit the training Job through the team's queue; the wait and the reason it was admitted.

    The Job is removed again once its pods are bound: the benchmark gang of nccl-allreduce needs
    the same GPUs, and training-window submits the Job anew for its measured window."""
    objs = training_objects(ctx)
    sub = submit(ctx, objs, "training")
    figures = {"wait_seconds": sub.wait_seconds, "admission_reason": sub.reason,
               "queue": queue_name(ctx, sub.job) or "", "backend": ctx.params.get("queue_backend") or "none"}
    ctx.state["queue"] = {"job": sub.name, "namespace": sub.namespace, "queue": figures["queue"],
                          "backend": figures["backend"], "wait_seconds": sub.wait_seconds,
                          "reason": sub.reason, "message": sub.message, "nodes": sub.nodes}
    if sub.problem:
        figures["wait_seconds"] = round(ctx.clock() - sub.created_at, 2)
        return Result("queued-job", FAIL, sub.problem, sub.evidence, figures)
    job_body = objects.pick(objs, "Job", "training")
    objects.remove(ctx, job_body, int(ctx.params.get("pod_timeout") or 300))
    sub.evidence.append("Job %s removed again (its GPUs are needed by the next steps)" % sub.name)
    summary = "admitted by %s after %.1f s (%s%s); %d pod%s on %s" % (
        describe_queue(ctx, sub.job), sub.wait_seconds, sub.reason, (": " + sub.message) if sub.message else "",
        len(sub.pods), "" if len(sub.pods) == 1 else "s", ", ".join(sub.nodes) or "no node")
    return Result("queued-job", PASS, summary, sub.evidence, figures)
