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
        for dep in self.ctx.safe_list("deployments.apps"):
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
            shards = self.ctx.safe_list(SHARDS) or [{"metadata": {"name": "default"}}]
            for shard in shards:
                want[SCHEDULER_PREFIX + shard["metadata"]["name"]] = sched.get("image") or {}
        existing = {d["metadata"]["name"]: d for d in self.ctx.safe_list("deployments.apps", ns)}
        for name, image in sorted(want.items()):
            body = self._deployment(config, ns, name, image, glob)
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
