"""KAI Scheduler twins: what the real chart deploys, and the scheduler it runs.

The chart (v0.17) installs only the operator Deployment `kai-operator`; a
post-install hook Job `kai-config-deployer` runs `kubectl apply` of the
ConfigMap `kai-config-manifest` (the `Config` kai-config); the operator then
deploys the scheduler (one Deployment per SchedulingShard, `kai-scheduler-
<shard>`), binder, pod-grouper, admission, podgroup- and queue-controller from
that Config, with its images. So:
- KaiConfigDeployer: a kubelet hook doing the Job's kubectl apply when its pod
  runs (an image the mirror lacks: the pod never runs, no Config);
- KaiOperator: with its pod ready, keeps those Deployments as the Config says;
- KaiPodGrouper: with the pod-grouper running, gives every KAI pod without a
  `pod-group-name` annotation the PodGroup of its top owner
  (`pg-<owner>-<owner uid>`, minMember 1, queue from the owner's or the pod's
  `kai.scheduler/queue` label, else default-queue) and annotates the pod;
- KaiScheduler (kai_scheduler.py) schedules only while the scheduler and the
  binder Deployments have ready pods.
"""

import yaml

from ..errors import ApiError
from .util import clone, owner_ref

CONFIGS = "configs.kai.scheduler"
SHARDS = "schedulingshards.kai.scheduler"
CONFIG_NAME = "kai-config"
MANIFEST_CM = "kai-config-manifest"
DEPLOYER_APP = "kai-config-deployer"
OPERATOR = "kai-operator"
# Config spec key -> Deployment name the operator gives it
SERVICES = {"binder": "binder", "podGrouper": "pod-grouper", "podGroupController": "podgroup-controller",
            "queueController": "queue-controller", "admission": "admission"}
SCHEDULER_PREFIX = "kai-scheduler-"
MANAGED = "kai.scheduler/managed-by"


def queue_controller_args(config):
    """The queue-controller's args as the operator renders them from Config spec.queueController
    (pkg/operator/operands/queue_controller/resources.go buildArgsList): its metrics port (default
    8080), the metrics namespace and the queue-label mappings when set. The metrics twin
    (simcluster/kai_metrics.py) reads them from the pod."""
    port = (((config.get("controllerService") or {}).get("metrics") or {}).get("port")) or 8080
    args = ["--metrics-listen-address", ":%d" % port]
    if (config.get("replicas") or 1) > 1:
        args.append("--leader-elect")
    for key, flag in (("metricsNamespace", "--metrics-namespace"),
                      ("queueLabelToMetricLabel", "--queue-label-to-metric-label"),
                      ("queueLabelToDefaultMetricValue", "--queue-label-to-default-metric-value")):
        if config.get(key) is not None:
            args += [flag, str(config[key])]
    return args


def ready(dep):
    return dep is not None and ((dep.get("status") or {}).get("readyReplicas") or 0) >= 1


class KaiConfigDeployer:
    """kubelet hook: the kai-config-deployer Job pod applies the Config when it runs."""

    def __init__(self, ctx):
        self.ctx = ctx

    def pod_hook(self, pod, elapsed):
        labels = pod["metadata"].get("labels") or {}
        if labels.get("app") != DEPLOYER_APP:
            return None
        ns = pod["metadata"]["namespace"]
        store = self.ctx.store
        cm = store.get("configmaps", ns, MANIFEST_CM)
        if cm is None:
            return {"kind": "complete", "exit": 1,
                    "logs": {pod["spec"]["containers"][0]["name"]:
                             'error: the path "/manifest/kai-config.yaml" does not exist\n'}}
        try:
            doc = yaml.safe_load((cm.get("data") or {}).get("kai-config.yaml") or "")
        except yaml.YAMLError:
            doc = None
        if not isinstance(doc, dict):
            return {"kind": "complete", "exit": 1}
        try:
            cur = store.get(CONFIGS, None, doc["metadata"]["name"])
            if cur is None:
                store.create(CONFIGS, doc)
            elif cur.get("spec") != doc.get("spec"):
                cur["spec"] = doc.get("spec")
                store.update(CONFIGS, cur)
        except (ApiError, KeyError) as err:
            return {"kind": "complete", "exit": 1,
                    "logs": {pod["spec"]["containers"][0]["name"]: "error: %s\n" % err}}
        return None      # the default outcome: the Job pod completes


class KaiOperator:
    def __init__(self, ctx):
        self.ctx = ctx

    def operator(self):
        for dep in self.ctx.list("deployments.apps"):
            if dep["metadata"]["name"] == OPERATOR:
                return dep
        return None

    def reconcile(self):
        if not ready(self.operator()):
            return
        config = self.ctx.get_cached(CONFIGS, CONFIG_NAME)
        if config is None:
            return
        spec = config.get("spec") or {}
        ns = spec.get("namespace") or "kai-scheduler"
        glob = spec.get("global") or {}
        want = {}
        for key, name in SERVICES.items():
            svc = (spec.get(key) or {}).get("service") or {}
            if svc.get("enabled", True) is False:
                continue
            want[name] = svc.get("image") or {}
        sched = ((spec.get("scheduler") or {}).get("service") or {})
        if sched.get("enabled", True) is not False:
            shards = self.ctx.list(SHARDS) or [{"metadata": {"name": "default"}}]
            for shard in shards:
                want[SCHEDULER_PREFIX + shard["metadata"]["name"]] = sched.get("image") or {}
        existing = {d["metadata"]["name"]: d for d in self.ctx.list("deployments.apps", ns)}
        for name, image in sorted(want.items()):
            body = self._deployment(config, ns, name, image, glob)
            if name == SERVICES["queueController"]:
                body["spec"]["template"]["spec"]["containers"][0]["args"] = queue_controller_args(
                    spec.get("queueController") or {})
            cur = existing.get(name)
            try:
                if cur is None:
                    self.ctx.store.create("deployments.apps", body)
                elif cur["spec"]["template"] != body["spec"]["template"]:
                    upd = clone(cur)
                    upd["spec"]["template"] = body["spec"]["template"]
                    self.ctx.store.update("deployments.apps", upd)
            except ApiError as err:
                if err.code not in (404, 409):
                    raise
                self.ctx.runtime.after(0.1)

    @staticmethod
    def _deployment(config, ns, name, image, glob):
        repo = image.get("repository") or "ghcr.io/kai-scheduler/kai-scheduler"
        ref = "%s/%s:%s" % (repo.rstrip("/"), image.get("name") or name, image.get("tag") or "latest")
        labels = {"app": name, MANAGED: "kai-operator"}
        pod_spec = {"serviceAccountName": name, "containers": [{
            "name": name, "image": ref, "imagePullPolicy": image.get("pullPolicy") or "IfNotPresent",
            "resources": {"requests": {"cpu": "50m", "memory": "200Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}}]}
        if glob.get("imagePullSecrets"):
            pod_spec["imagePullSecrets"] = clone(glob["imagePullSecrets"])
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": ns, "labels": dict(labels),
                             "ownerReferences": [owner_ref(config, "Config", "kai.scheduler/v1")]},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec}}}


PODGROUPS = "podgroups.scheduling.run.ai"
PODGROUP_ANNOTATION = "pod-group-name"
SKIP_ANNOTATION = "kai.scheduler/skip-podgrouper"
QUEUE_LABEL = "kai.scheduler/queue"
DEFAULT_QUEUE = "default-queue"
OWNER_RESOURCES = {"ReplicaSet": "replicasets.apps", "Deployment": "deployments.apps", "Job": "jobs.batch",
                   "StatefulSet": "statefulsets.apps", "CronJob": "cronjobs.batch", "DaemonSet": "daemonsets.apps"}


def top_owner(ctx, pod):
    """(object, kind, apiVersion) of the pod's top controller (the pod itself when it has none)."""
    obj, kind, api = pod, "Pod", "v1"
    for _ in range(5):
        ref = next((r for r in (obj["metadata"].get("ownerReferences") or []) if r.get("controller")), None)
        res = OWNER_RESOURCES.get((ref or {}).get("kind"))
        if ref is None or res is None:
            break
        owner = next((o for o in ctx.list(res, obj["metadata"].get("namespace"))
                      if o["metadata"].get("uid") == ref.get("uid")), None)
        if owner is None:
            break
        obj, kind, api = owner, ref["kind"], ref.get("apiVersion") or "v1"
    return obj, kind, api


class KaiPodGrouper:
    def __init__(self, ctx):
        self.ctx = ctx

    def reconcile(self):
        pods = [p for p in self.ctx.list("pods") if p["spec"].get("schedulerName") == "kai-scheduler"
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        if not pods and not self.ctx.list(PODGROUPS):
            return
        if not ready(next((d for d in self.ctx.list("deployments.apps")
                           if d["metadata"]["name"] == SERVICES["podGrouper"]), None)):
            return
        store = self.ctx.store
        for pod in pods:
            ann = pod["metadata"].get("annotations") or {}
            if ann.get(PODGROUP_ANNOTATION) or ann.get(SKIP_ANNOTATION) == "true":
                continue
            top, kind, api = top_owner(self.ctx, pod)
            ns = pod["metadata"]["namespace"]
            name = "pg-%s-%s" % (top["metadata"]["name"], top["metadata"].get("uid", ""))
            if self.ctx.get_cached(PODGROUPS, name, ns) is None:
                queue = ((top["metadata"].get("labels") or {}).get(QUEUE_LABEL)
                         or (pod["metadata"].get("labels") or {}).get(QUEUE_LABEL) or DEFAULT_QUEUE)
                labels = {QUEUE_LABEL: queue}
                # the node-pool label (Config global.nodePoolLabelKey) from the top owner, else the pod
                # (pkg/podgrouper/pod_controller.go addNodePoolLabel): it picks the scheduling shard
                key = ((self.ctx.get_cached(CONFIGS, CONFIG_NAME) or {}).get("spec") or {}).get(
                    "global", {}).get("nodePoolLabelKey")
                pool = key and ((top["metadata"].get("labels") or {}).get(key)
                                or (pod["metadata"].get("labels") or {}).get(key))
                if pool:
                    labels[key] = pool
                body = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": ns, "labels": labels,
                                     "ownerReferences": [owner_ref(top, kind, api)]},
                        "spec": {"minMember": 1, "queue": queue,
                                 "priorityClassName": pod["spec"].get("priorityClassName") or "train"}}
                try:
                    store.create(PODGROUPS, body)
                except ApiError as err:
                    if err.code == 409:
                        pass
                    elif err.code in (403, 404, 422):    # e.g. refused by an admission policy
                        self.ctx.event_once(pod, "PodGrouperWarning", "failed to create PodGroup %s: %s" % (
                            name, err.message), "Warning")
                        continue
                    else:
                        raise
            try:
                store.merge_patch("pods", ns, pod["metadata"]["name"],
                                  {"metadata": {"annotations": {PODGROUP_ANNOTATION: name}}})
            except ApiError as err:
                if err.code != 404:
                    raise
        self._collect()

    def _collect(self):
        """PodGroups whose owner is gone go too (what the garbage collector does for them)."""
        for pg in self.ctx.list(PODGROUPS):
            ref = next((r for r in pg["metadata"].get("ownerReferences") or []), None)
            if ref is None:
                continue
            res = OWNER_RESOURCES.get(ref.get("kind")) or ("pods" if ref.get("kind") == "Pod" else None)
            if res is None:
                continue
            if not any(o["metadata"].get("uid") == ref.get("uid")
                       for o in self.ctx.list(res, pg["metadata"].get("namespace"))):
                try:
                    self.ctx.store.delete(PODGROUPS, pg["metadata"]["namespace"], pg["metadata"]["name"])
                except ApiError as err:
                    if err.code != 404:
                        raise
