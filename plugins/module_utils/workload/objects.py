# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test objects of a workload acceptance run: the role's rendered manifests, created as they are.

The role renders the team's own job templates; this file only adds what the run needs to find
and remove its objects again (the run label on the objects and their pod templates, the team
namespace where a manifest names none) and never changes what the templates say otherwise,
so the acceptance runs exactly what a team would submit. The scripts go into the ConfigMap
the templates mount.

Waits are decided on a fresh read; a watch on the kind wakes the wait at the first change
(core/watch.py), so a wait costs one request per change, not one per second. Logs have no
watch: they are read again at most every `interval` seconds while a wait runs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.watch import ObjectWatch
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.runner import RUN_LABEL

SCRIPTS_CONFIGMAP = "wla-scripts"
FIELD_MANAGER = "skaffon.gpu_platform"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
# kinds with a pod template: the run label goes on their pods too (the metrics steps select by it)
POD_TEMPLATE_KINDS = ("Job", "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet")
# an object of this run that exists already is used as it is (a claim keeps its data between steps)
REUSABLE = ("PersistentVolumeClaim", "ConfigMap", "Service", "PodDisruptionBudget")
GPU_RESOURCE = upstream.GPU_RESOURCE


def meta(obj):
    return (obj or {}).get("metadata") or {}


def name_of(obj):
    return meta(obj).get("name")


def labels_of(obj):
    return meta(obj).get("labels") or {}


def condition(obj, cond_type):
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == cond_type:
            return cond
    return None


def prepare(ctx, manifests, what):
    """Copies of the role's rendered objects with the team namespace and the run label."""
    namespace = ctx.params["namespace"]
    out = []
    for number, obj in enumerate(manifests or []):
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind") or not name_of(obj):
            raise DomainError("manifests.%s[%d] is not a Kubernetes object (it needs apiVersion, kind and "
                              "metadata.name): %r" % (what, number, obj if not isinstance(obj, dict) else sorted(obj)))
        body = copy.deepcopy(obj)
        md = body.setdefault("metadata", {})
        if md.get("namespace") and md["namespace"] != namespace:
            raise DomainError("manifests.%s[%d] (%s %s) is for namespace %s, but the acceptance runs in the team "
                              "namespace %s: render the templates for that team"
                              % (what, number, body["kind"], md["name"], md["namespace"], namespace))
        md["namespace"] = namespace
        md.setdefault("labels", {})[RUN_LABEL] = ctx.run_label
        if body["kind"] in POD_TEMPLATE_KINDS:
            template = body.setdefault("spec", {}).setdefault("template", {})
            template.setdefault("metadata", {}).setdefault("labels", {})[RUN_LABEL] = ctx.run_label
        out.append(body)
    return out


def pick(objs, kind, what, required=True):
    found = [o for o in objs if o["kind"] == kind]
    if not found and required:
        raise DomainError("manifests.%s has no %s (it has: %s); the role renders it from the team's job template"
                          % (what, kind, ", ".join("%s %s" % (o["kind"], name_of(o)) for o in objs) or "nothing"))
    return found[0] if found else None


def ensure_scripts(ctx):
    """ConfigMap wla-scripts with the acceptance programs (the templates mount it)."""
    if ctx.state.get("scripts"):
        return
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": SCRIPTS_CONFIGMAP, "namespace": ctx.params["namespace"],
                         "labels": {RUN_LABEL: ctx.run_label, upstream.LABEL_MANAGED_BY: upstream.MANAGED_BY}},
            "data": dict((k, v) for k, v in (ctx.params.get("scripts") or {}).items())}
    ctx.kube.apply(body, FIELD_MANAGER)
    ctx.track(body)
    ctx.state["scripts"] = True


def create_all(ctx, objs, timeout):
    """Create the objects in the given order; returns the created (or reused) bodies.

    An object of this run that is there already is reused when it holds data or an address
    (claim, ConfigMap, Service); anything else an acceptance run left behind (this one or an
    earlier one) is deleted first and created again, so a wait never reads the pods of an older
    Job. An object of the same name without the run label is the team's: the step fails."""
    created = []
    for body in objs:
        try:
            created.append(ctx.kube.create(body))
        except ApiError as err:
            if err.status != 409:
                raise
            live = ctx.kube.get(body["apiVersion"], body["kind"], name_of(body), meta(body).get("namespace"))
            run = labels_of(live).get(RUN_LABEL) if live is not None else None
            if live is not None and body["kind"] in REUSABLE and run == ctx.run_label:
                created.append(live)
            elif live is not None and run is None:
                # not an acceptance object: the team's own, never touched
                raise DomainError("%s %s/%s exists and is not an acceptance object (no label %s): rename the "
                                  "acceptance's objects or remove it" % (body["kind"], meta(body).get("namespace"),
                                                                         name_of(body), RUN_LABEL))
            else:
                remove(ctx, body, timeout)
                created.append(ctx.kube.create(body))
        ctx.track(body)
    return created


def remove(ctx, obj, timeout):
    """Delete (Foreground) and wait until the object and, for a Job, its pods are gone."""
    api_version, kind, name, namespace = obj["apiVersion"], obj["kind"], name_of(obj), meta(obj).get("namespace")
    ctx.kube.delete(api_version, kind, name, namespace, propagation="Foreground")

    def gone():
        if ctx.kube.get(api_version, kind, name, namespace) is not None:
            return None
        if kind == "Job" and pods_of(ctx, namespace, name):
            return None
        return True
    done = until(ctx, gone, timeout, watch=("v1", "Pod", namespace) if kind == "Job" else None)
    ctx.untrack(obj)
    if not done:
        raise DomainError("%s %s/%s is still there %d s after it was deleted (a finalizer, or pods that do not "
                          "terminate): delete it by hand before the next run" % (kind, namespace, name, timeout))


def pods_of(ctx, namespace, job_name, uid=None):
    """The pods of a Job (by the job controller's label; only the given Job's when its uid is known)."""
    pods = ctx.kube.list("v1", "Pod", namespace=namespace, label_selector="%s=%s" % (JOB_NAME_LABEL, job_name))[0]
    if uid:
        pods = [p for p in pods if not meta(p).get("ownerReferences")
                or any(r.get("uid") == uid for r in meta(p)["ownerReferences"])]
    return sorted(pods, key=lambda p: (index_of(p) if index_of(p) is not None else 1 << 30, name_of(p)))


def index_of(pod):
    value = (meta(pod).get("annotations") or {}).get(COMPLETION_INDEX, labels_of(pod).get(COMPLETION_INDEX))
    return int(value) if value is not None and str(value).isdigit() else None


def node_of(pod):
    return (pod.get("spec") or {}).get("nodeName")


def phase_of(pod):
    return (pod.get("status") or {}).get("phase") or "Pending"


def deleting(obj):
    return bool(meta(obj).get("deletionTimestamp"))


def gpus_of(pod):
    """GPUs the pod's containers ask for (limits, as the device plugin counts them)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(GPU_RESOURCE, (resources.get("requests") or {}).get(GPU_RESOURCE))
        try:
            total += int(str(value)) if value is not None else 0
        except ValueError:
            pass
    return total


def job_size(job):
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1
    completions = spec.get("completions")
    return min(parallelism, completions) if completions is not None else parallelism


def job_finished(job):
    """'Complete' or 'Failed' when the Job has that condition True, else None."""
    for cond_type in ("Complete", "Failed"):
        cond = condition(job, cond_type)
        if cond and cond.get("status") == "True":
            return cond_type
    return None


def pod_problem(pod):
    """Why a pod does not run, as kubectl describe would show it ('' when nothing is wrong)."""
    status = pod.get("status") or {}
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        if waiting.get("reason") and waiting["reason"] not in ("ContainerCreating", "PodInitializing"):
            return "%s: %s" % (waiting["reason"], waiting.get("message") or "")
        terminated = state.get("terminated") or {}
        if terminated and terminated.get("exitCode"):
            return "container %s exited %s (%s)" % (cs.get("name"), terminated.get("exitCode"),
                                                    terminated.get("reason") or "Error")
    scheduled = condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") == "False":
        return "%s: %s" % (scheduled.get("reason") or "Unschedulable", scheduled.get("message") or "")
    return ""


def events_of(ctx, namespace, kind, name):
    """'Reason: message' of the Events about one object, oldest first."""
    items = ctx.kube.list("v1", "Event", namespace=namespace,
                          field_selector="involvedObject.kind=%s,involvedObject.name=%s" % (kind, name))[0]
    items = [e for e in items if (e.get("involvedObject") or {}).get("name") == name
             and (e.get("involvedObject") or {}).get("kind") == kind]
    items.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or meta(e).get("creationTimestamp") or "")
    return ["%s: %s" % (e.get("reason"), (e.get("message") or "").strip()) for e in items]


def log_of(ctx, pod):
    """The log of the pod's first container, the program's in the templates (a sidecar next to it would
    make an unnamed read fail); '' while the container has not started (the API answers 400 then)."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    try:
        return ctx.kube.log(name_of(pod), meta(pod).get("namespace"), container=containers[0].get("name")) or ""
    except ApiError as err:
        if err.status in (400, 404):
            return ""
        raise


def can_watch(kube):
    """The real client serves watches; the unit tests' in-memory one does not (it sleeps instead)."""
    return callable(getattr(kube, "resource", None)) and callable(getattr(kube, "error", None))


def until(ctx, check, timeout, watch=None, interval=1.0):
    """check() -> verdict (anything but None) evaluated until it decides or `timeout` seconds pass.

    Between two evaluations: the watch (api_version, kind, namespace) returns at its first event,
    else after `interval` seconds (logs, objects of other kinds); without a watch: ctx.sleep."""
    deadline = ctx.clock() + timeout
    follow = None
    while True:
        verdict = check()
        if verdict is not None:
            return verdict
        now = ctx.clock()
        if now >= deadline:
            return None
        pause = min(interval, deadline - now)
        if watch and can_watch(ctx.kube):
            if follow is None:
                api_version, kind, namespace = watch
                follow = ObjectWatch(ctx.kube, api_version, kind, namespace=namespace, clock=ctx.clock,
                                     sleep=ctx.sleep)
                follow.sync()
            for _event in follow.events(now + pause):
                break
        else:
            ctx.sleep(pause)
