"""Simplified workload controllers: Deployment, ReplicaSet, DaemonSet, StatefulSet, Job, GC.

They write through the Store like real controllers, so admission applies to
the pods they create: a refused pod leaves the owner short of it and records
a FailedCreate event ("Error creating: <reason>"), as kube-controller-manager does.
Simplifications (documented in docs/simcluster-clusterfile.md): a template
change replaces all pods at once (no surge/maxUnavailable pacing); deletions
are immediate (no graceful termination).
"""


from ..errors import ApiError
from .matching import DAEMONSET_TOLERATIONS, matches_node_selector, untolerated_taint
from .util import (clone, controller_uid, owner_ref, random_suffix, template_hash, write_status,
                   now_iso, set_condition)


def pod_ready(pod):
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def pod_index(pod):
    """The completion index of an Indexed Job's pod (None for other pods)."""
    value = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    return int(value) if value is not None and str(value).isdigit() else None


def terminal(pod):
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pods_by_owner(pods):
    out = {}
    for p in pods:
        uid = controller_uid(p)
        if uid:
            out.setdefault(uid, []).append(p)
    return out


def _delete(store, resource, obj):
    try:
        store.delete(resource, obj["metadata"].get("namespace"), obj["metadata"]["name"])
    except ApiError as err:
        if err.code != 404:
            raise


class PodMaker:
    """Creates pods from a template; reports refusals as FailedCreate events."""

    def __init__(self, ctx):
        self.ctx = ctx

    def create(self, owner, kind, api_version, name_prefix, extra_labels=None, *, name=None,
               spec_mutator=None, annotations=None):
        tmpl = clone(owner["spec"].get("template") or {})
        meta = tmpl.get("metadata") or {}
        ns = owner["metadata"]["namespace"]
        labels = dict(meta.get("labels") or {})
        labels.update(extra_labels or {})
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"namespace": ns, "labels": labels,
                            "ownerReferences": [owner_ref(owner, kind, api_version)]},
               "spec": tmpl.get("spec") or {}}
        if meta.get("annotations") or annotations:
            pod["metadata"]["annotations"] = dict(meta.get("annotations") or {}, **(annotations or {}))
        if spec_mutator:
            spec_mutator(pod["spec"])
        for _ in range(5):
            pod["metadata"]["name"] = name or "%s-%s" % (name_prefix, random_suffix())
            try:
                return self.ctx.store.create("pods", clone(pod))
            except ApiError as err:
                if err.code == 409 and not name:
                    continue
                if err.code == 409:
                    return None
                self.ctx.event_once(owner, "FailedCreate", "Error creating: %s" % err.message,
                                    "Warning")
                return None
        return None

    def created(self, owner, pod):
        self.ctx.event_once(owner, "SuccessfulCreate",
                            "Created pod: %s" % pod["metadata"]["name"],
                            key=pod["metadata"]["name"])


class ReplicaSets:
    watches = {"replicasets.apps", "pods"}      # runtime.py: changes of these run a pass

    def __init__(self, ctx):
        self.ctx = ctx
        self.maker = PodMaker(ctx)

    def reconcile(self):
        store = self.ctx.store
        owned = pods_by_owner(self.ctx.list("pods"))
        for rs in self.ctx.list("replicasets.apps"):
            pods = [p for p in owned.get(rs["metadata"]["uid"], []) if not terminal(p)]
            want = int(rs["spec"].get("replicas", 1) or 0)
            if len(pods) < want:
                for _ in range(want - len(pods)):
                    pod = self.maker.create(rs, "ReplicaSet", "apps/v1", rs["metadata"]["name"])
                    if pod:
                        self.maker.created(rs, pod)
                        pods.append(pod)
            elif len(pods) > want:
                # delete not-ready and newest first, like the real controller
                victims = sorted(pods, key=pod_ready)[: len(pods) - want]
                for p in victims:
                    _delete(store, "pods", p)
                    self.ctx.event_once(rs, "SuccessfulDelete",
                                        "Deleted pod: %s" % p["metadata"]["name"],
                                        key="del-" + p["metadata"]["name"])
                    pods.remove(p)
            ready = sum(1 for p in pods if pod_ready(p))
            status = {"replicas": len(pods), "fullyLabeledReplicas": len(pods),
                      "readyReplicas": ready, "availableReplicas": ready,
                      "observedGeneration": rs["metadata"].get("generation", 1)}
            status = {k: v for k, v in status.items() if v or k in ("replicas",)}
            write_status(store, "replicasets.apps", rs, status)


class Deployments:
    # runtime.py: changes of these run a pass
    watches = {"deployments.apps", "replicasets.apps", "pods"}

    def __init__(self, ctx):
        self.ctx = ctx

    def reconcile(self):
        store = self.ctx.store
        rs_by_owner = {}
        for rs in self.ctx.list("replicasets.apps"):
            uid = controller_uid(rs)
            if uid:
                rs_by_owner.setdefault(uid, []).append(rs)
        for dep in self.ctx.list("deployments.apps"):
            self._one(dep, rs_by_owner.get(dep["metadata"]["uid"], []))

    def _one(self, dep, owned):
        store = self.ctx.store
        spec = dep["spec"]
        want = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        template = clone(spec.get("template") or {})
        h = template_hash(template)
        new = next((r for r in owned
                    if (r["metadata"].get("labels") or {}).get("pod-template-hash") == h), None)
        revisions = [int((r["metadata"].get("annotations") or {})
                         .get("deployment.kubernetes.io/revision", "0") or 0) for r in owned]
        top = max(revisions or [0])
        name = dep["metadata"]["name"]
        if new is None:
            tmpl = clone(template)
            tmpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = h
            selector = clone(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = h
            labels = dict(tmpl["metadata"]["labels"])
            rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": "%s-%s" % (name, h), "namespace": dep["metadata"]["namespace"],
                               "labels": labels,
                               "annotations": {"deployment.kubernetes.io/revision": str(top + 1),
                                               "deployment.kubernetes.io/desired-replicas": str(want),
                                               "deployment.kubernetes.io/max-replicas": str(want)},
                               "ownerReferences": [owner_ref(dep, "Deployment", "apps/v1")]},
                  "spec": {"replicas": want, "selector": selector, "template": tmpl}}
            try:
                new = store.create("replicasets.apps", rs)
                self.ctx.event_once(dep, "ScalingReplicaSet",
                                    "Scaled up replica set %s from 0 to %d" % (rs["metadata"]["name"], want))
            except ApiError as err:
                if err.code == 409:
                    return
                self.ctx.event_once(dep, "FailedCreate", "Error creating: %s" % err.message, "Warning")
                return
        else:
            rev = int((new["metadata"].get("annotations") or {})
                      .get("deployment.kubernetes.io/revision", "0") or 0)
            changes = {}
            if new["spec"].get("replicas") != want:
                changes["spec"] = {"replicas": want}
            if rev < top:      # a rollback to an older template makes it the newest revision
                changes["metadata"] = {"annotations": {"deployment.kubernetes.io/revision": str(top + 1)}}
            if changes:
                try:
                    new = store.merge_patch("replicasets.apps", new["metadata"]["namespace"],
                                            new["metadata"]["name"], changes)
                except ApiError:
                    return
        self._scale_down_old(dep, new, owned, want)
        self._status(dep, new, owned, want)

    def _scale_down_old(self, dep, new, owned, want):
        """RollingUpdate: old pods go only as the new ones become ready, keeping at least
        want - maxUnavailable ready (so a new template that never gets ready, e.g. an image
        that does not pull, leaves the old pods serving). Recreate: old ones go at once.
        Approximation: the new ReplicaSet is scaled to `want` at once (maxSurge not applied)."""
        store = self.ctx.store
        old_sets = sorted((r for r in owned if r["metadata"]["uid"] != new["metadata"]["uid"]
                           and r["spec"].get("replicas")),
                          key=lambda r: r["metadata"].get("creationTimestamp") or "")
        if not old_sets:
            return
        strategy = dep["spec"].get("strategy") or {}
        if strategy.get("type") == "Recreate":
            keep = 0
        else:
            max_unavailable = _scaled((strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%"),
                                      want, round_up=False)
            new_ready = (new.get("status") or {}).get("readyReplicas", 0)
            keep = max(0, want - max_unavailable - new_ready)
        for old in old_sets:
            current = old["spec"]["replicas"]
            target = min(current, keep)
            keep -= target
            if target == current:
                continue
            try:
                store.merge_patch("replicasets.apps", old["metadata"]["namespace"],
                                  old["metadata"]["name"], {"spec": {"replicas": target}})
                self.ctx.event_once(dep, "ScalingReplicaSet", "Scaled down replica set %s from %s to %d"
                                    % (old["metadata"]["name"], current, target),
                                    key="down-%s-%s-%d" % (old["metadata"]["name"], new["metadata"]["name"],
                                                           target))
            except ApiError:
                pass

    def _status(self, dep, new, owned, want):
        st_new = new.get("status") or {}
        total = sum((r.get("status") or {}).get("replicas", 0) for r in owned if r is not new) \
            + st_new.get("replicas", 0)
        ready = sum((r.get("status") or {}).get("readyReplicas", 0) for r in owned if r is not new) \
            + st_new.get("readyReplicas", 0)
        updated = st_new.get("replicas", 0)
        available = ready
        old = dep.get("status") or {}
        conds = clone(old.get("conditions") or [])
        if available >= want:
            set_condition(conds, "Available", "True", "MinimumReplicasAvailable",
                          "Deployment has minimum availability.")
        else:
            set_condition(conds, "Available", "False", "MinimumReplicasUnavailable",
                          "Deployment does not have minimum availability.")
        complete = updated == want and total == want and available >= want
        rs_name = new["metadata"]["name"]
        if complete:
            set_condition(conds, "Progressing", "True", "NewReplicaSetAvailable",
                          'ReplicaSet "%s" has successfully progressed.' % rs_name)
        else:
            set_condition(conds, "Progressing", "True", "ReplicaSetUpdated",
                          'ReplicaSet "%s" is progressing.' % rs_name)
        for c in conds:
            c.setdefault("lastUpdateTime", now_iso())
        status = {"observedGeneration": dep["metadata"].get("generation", 1),
                  "replicas": total, "updatedReplicas": updated, "readyReplicas": ready,
                  "availableReplicas": available, "unavailableReplicas": max(0, want - available),
                  "conditions": conds}
        status = {k: v for k, v in status.items() if v or k in ("observedGeneration", "conditions")}
        write_status(self.ctx.store, "deployments.apps", dep, status)


def _scaled(value, total, round_up):
    """An IntOrString like maxUnavailable ("25%" or 1) as a count of `total` pods."""
    if isinstance(value, str) and value.endswith("%"):
        part = total * int(value[:-1]) / 100.0
        return int(-(-part // 1)) if round_up else int(part)
    return int(value)


def daemonset_pod_node(pod):
    """The node a DaemonSet pod is meant for (its matchFields affinity or nodeName)."""
    if pod["spec"].get("nodeName"):
        return pod["spec"]["nodeName"]
    terms = ((((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
             .get("nodeSelectorTerms") or [])
    for t in terms:
        for f in t.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("values"):
                return f["values"][0]
    return None


def daemonset_eligible(ds, node):
    spec = clone(ds["spec"].get("template", {}).get("spec") or {})
    spec["tolerations"] = list(spec.get("tolerations") or []) + DAEMONSET_TOLERATIONS
    return matches_node_selector(spec, node) and untolerated_taint(spec, node) is None


class DaemonSets:
    watches = {"daemonsets.apps", "nodes", "pods"}      # runtime.py: changes of these run a pass

    def __init__(self, ctx):
        self.ctx = ctx
        self.maker = PodMaker(ctx)
        self._eligible_memo = {}

    def reconcile(self):
        store = self.ctx.store
        nodes = self.ctx.list("nodes")
        owned = pods_by_owner(self.ctx.list("pods"))
        for ds in self.ctx.list("daemonsets.apps"):
            self._one(ds, nodes, owned.get(ds["metadata"]["uid"], []))

    def _eligible(self, ds, node):
        """daemonset_eligible, remembered per (DaemonSet, Node) resourceVersion pair: a pass
        over 1000 nodes mostly sees objects that did not change."""
        key = (ds["metadata"].get("uid"), ds["metadata"].get("resourceVersion"),
               node["metadata"]["name"], node["metadata"].get("resourceVersion"))
        got = self._eligible_memo.get(key)
        if got is None:
            if len(self._eligible_memo) > 200000:
                self._eligible_memo.clear()
            got = self._eligible_memo[key] = daemonset_eligible(ds, node)
        return got

    def _one(self, ds, nodes, pods):
        store = self.ctx.store
        h = template_hash(ds["spec"].get("template") or {})
        gen = ds["metadata"].get("generation", 1)
        eligible = {n["metadata"]["name"] for n in nodes if self._eligible(ds, n)}
        # OnDelete (the GPU operator's driver DaemonSet): old pods stay until deleted by hand
        on_delete = ((ds["spec"].get("updateStrategy") or {}).get("type") == "OnDelete")
        by_node = {}
        for p in pods:
            node = daemonset_pod_node(p)
            stale = ((p["metadata"].get("labels") or {}).get("controller-revision-hash") != h
                     and on_delete is False)
            if node not in eligible or stale or (p.get("status") or {}).get("phase") == "Failed":
                _delete(store, "pods", p)
                self.ctx.event_once(ds, "SuccessfulDelete", "Deleted pod: %s" % p["metadata"]["name"],
                                    key="del-" + p["metadata"]["name"])
                continue
            if node in by_node:           # duplicate: keep one
                _delete(store, "pods", p)
                continue
            by_node[node] = p
        for node in sorted(eligible - set(by_node)):
            def pin(spec, node=node):
                spec["tolerations"] = list(spec.get("tolerations") or [])
                for tol in DAEMONSET_TOLERATIONS:
                    if tol not in spec["tolerations"]:
                        spec["tolerations"].append(dict(tol))
                aff = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
                aff["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
            pod = self.maker.create(ds, "DaemonSet", "apps/v1", ds["metadata"]["name"],
                                    {"controller-revision-hash": h,
                                     "pod-template-generation": str(gen)}, spec_mutator=pin)
            if pod:
                self.maker.created(ds, pod)
                by_node[node] = pod
        scheduled = sum(1 for n, p in by_node.items() if p["spec"].get("nodeName"))
        ready = sum(1 for p in by_node.values() if pod_ready(p))
        status = {"currentNumberScheduled": scheduled, "numberMisscheduled": 0,
                  "desiredNumberScheduled": len(eligible), "numberReady": ready,
                  "observedGeneration": gen,
                  "updatedNumberScheduled": sum(
                      1 for p in by_node.values()
                      if (p["metadata"].get("labels") or {}).get("controller-revision-hash") == h),
                  "numberAvailable": ready, "numberUnavailable": len(eligible) - ready}
        # omitempty fields, as the API serves them
        for k in ("updatedNumberScheduled", "numberAvailable", "numberUnavailable"):
            if not status[k]:
                del status[k]
        write_status(store, "daemonsets.apps", ds, status)


class StatefulSets:
    watches = {"statefulsets.apps", "pods"}      # runtime.py: changes of these run a pass

    def __init__(self, ctx):
        self.ctx = ctx
        self.maker = PodMaker(ctx)

    def reconcile(self):
        store = self.ctx.store
        owned = pods_by_owner(self.ctx.list("pods"))
        for sts in self.ctx.list("statefulsets.apps"):
            name = sts["metadata"]["name"]
            want = int(sts["spec"].get("replicas", 1) if sts["spec"].get("replicas") is not None else 1)
            h = "%s-%s" % (name, template_hash(sts["spec"].get("template") or {}))
            have = {p["metadata"]["name"]: p for p in owned.get(sts["metadata"]["uid"], [])}
            for pname, p in list(have.items()):
                idx = pname.rsplit("-", 1)[-1]
                stale = (p["metadata"].get("labels") or {}).get("controller-revision-hash") != h
                if not idx.isdigit() or int(idx) >= want or stale:
                    _delete(store, "pods", p)
                    del have[pname]
            for i in range(want):
                pname = "%s-%d" % (name, i)
                if pname in have:
                    continue
                pod = self.maker.create(sts, "StatefulSet", "apps/v1", name,
                                        {"controller-revision-hash": h,
                                         "statefulset.kubernetes.io/pod-name": pname,
                                         "apps.kubernetes.io/pod-index": str(i)}, name=pname,
                                        spec_mutator=lambda s, pn=pname: s.update(
                                            {"hostname": pn, **({"subdomain": sts["spec"]["serviceName"]}
                                                                if sts["spec"].get("serviceName") else {})}))
                if pod:
                    have[pname] = pod
            ready = sum(1 for p in have.values() if pod_ready(p))
            status = {"observedGeneration": sts["metadata"].get("generation", 1),
                      "replicas": len(have), "readyReplicas": ready, "currentReplicas": len(have),
                      "updatedReplicas": len(have), "availableReplicas": ready,
                      "currentRevision": h, "updateRevision": h, "collisionCount": 0}
            status = {k: v for k, v in status.items()
                      if v or k in ("replicas", "observedGeneration", "availableReplicas")}
            write_status(store, "statefulsets.apps", sts, status)


class Jobs:
    watches = {"jobs.batch", "pods"}      # runtime.py: changes of these run a pass

    def __init__(self, ctx):
        self.ctx = ctx
        self.maker = PodMaker(ctx)
        self.seen = {}    # job uid -> {"succeeded": set(pod uid), "failed": set(pod uid)}

    def reconcile(self):
        store = self.ctx.store
        owned = pods_by_owner(self.ctx.list("pods"))
        for job in self.ctx.list("jobs.batch"):
            self._one(job, owned.get(job["metadata"]["uid"], []))

    @staticmethod
    def _free_indexes(spec, pods, active, target):
        """Indexed Jobs: the completion indexes neither succeeded nor running, lowest first
        (None for NonIndexed Jobs)."""
        if spec.get("completionMode") != "Indexed":
            return None
        taken = {pod_index(p) for p in active}
        taken |= {pod_index(p) for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"}
        return [i for i in range(target) if i not in taken]

    def _indexed(self, job, jlabels, index):
        """A pod of an Indexed Job as the job controller makes it: the index in an annotation, a
        label and JOB_COMPLETION_INDEX, the hostname <job>-<index> (with the template's subdomain
        that is <job>-<index>.<subdomain> in DNS) and the index in the generated name."""
        name = job["metadata"]["name"]
        labels = dict(jlabels, **{COMPLETION_INDEX: str(index)})

        def mutate(spec):
            spec.setdefault("hostname", "%s-%d" % (name, index))
            for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
                c["env"] = [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "fieldPath": "metadata.annotations['%s']" % COMPLETION_INDEX}}}] + list(c.get("env") or [])
        return self.maker.create(job, "Job", "batch/v1", "%s-%d" % (name, index), labels,
                                 spec_mutator=mutate, annotations={COMPLETION_INDEX: str(index)})

    def _one(self, job, pods):
        store = self.ctx.store
        spec = job["spec"]
        uid = job["metadata"]["uid"]
        seen = self.seen.setdefault(uid, {"succeeded": set(), "failed": set()})
        for p in pods:
            phase = (p.get("status") or {}).get("phase")
            if phase == "Succeeded":
                seen["succeeded"].add(p["metadata"]["uid"])
            elif phase == "Failed":
                seen["failed"].add(p["metadata"]["uid"])
        old = job.get("status") or {}
        succeeded = max(len(seen["succeeded"]), old.get("succeeded", 0))
        failed = max(len(seen["failed"]), old.get("failed", 0))
        completions = spec.get("completions")
        parallelism = spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1
        backoff = spec.get("backoffLimit", 6) if spec.get("backoffLimit") is not None else 6
        active = [p for p in pods if not terminal(p)]
        conds = clone(old.get("conditions") or [])
        finished = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                       for c in conds)
        target = completions if completions is not None else 1
        status = dict(old)
        if not finished:
            if succeeded >= target:
                set_condition(conds, "SuccessCriteriaMet", "True", "CompletionsReached",
                              "Reached expected number of succeeded pods")
                set_condition(conds, "Complete", "True", "CompletionsReached",
                              "Reached expected number of succeeded pods")
                status["completionTime"] = now_iso()
                self.ctx.event_once(job, "Completed", "Job completed")
                finished = True
            elif failed > backoff:
                set_condition(conds, "FailureTarget", "True", "BackoffLimitExceeded",
                              "Job has reached the specified backoff limit")
                set_condition(conds, "Failed", "True", "BackoffLimitExceeded",
                              "Job has reached the specified backoff limit")
                self.ctx.event_once(job, "BackoffLimitExceeded",
                                    "Job has reached the specified backoff limit", "Warning")
                for p in active:
                    _delete(store, "pods", p)
                active = []
                finished = True
            elif not spec.get("suspend"):
                room = min(parallelism, target - succeeded) - len(active)
                jlabels = {"batch.kubernetes.io/controller-uid": uid,
                           "batch.kubernetes.io/job-name": job["metadata"]["name"],
                           "controller-uid": uid, "job-name": job["metadata"]["name"]}
                free = self._free_indexes(spec, pods, active, target)
                for i in range(max(0, room)):
                    if free is None:
                        pod = self.maker.create(job, "Job", "batch/v1", job["metadata"]["name"], jlabels)
                    elif i < len(free):
                        pod = self._indexed(job, jlabels, free[i])
                    else:
                        break
                    if pod:
                        self.maker.created(job, pod)
                        active.append(pod)
        status.setdefault("startTime", now_iso())
        status["conditions"] = conds
        status["active"] = len(active)
        status["succeeded"] = succeeded
        status["failed"] = failed
        status["ready"] = sum(1 for p in active if pod_ready(p))
        status["terminating"] = 0
        status["uncountedTerminatedPods"] = {}
        for k in ("active", "succeeded", "failed", "terminating"):
            if not status[k]:
                del status[k]
        if not conds:
            del status["conditions"]
        write_status(store, "jobs.batch", job, status)


# Resources whose objects may carry ownerReferences to objects we delete.
GC_RESOURCES = ["pods", "replicasets.apps", "daemonsets.apps", "deployments.apps", "jobs.batch",
                "statefulsets.apps", "configmaps", "services", "serviceaccounts",
                "controllerrevisions.apps"]


class GarbageCollector:
    """Deletes dependents (ownerReferences) of deleted objects, like the GC controller."""

    def __init__(self, ctx):
        self.ctx = ctx

    def reconcile(self):
        gone = {obj["metadata"].get("uid") for _r, obj in self.ctx.runtime.take_deleted()
                if obj.get("metadata")}
        gone.discard(None)
        if not gone:
            return
        for res in GC_RESOURCES:
            for obj in self.ctx.list(res):
                refs = obj["metadata"].get("ownerReferences") or []
                if refs and any(r.get("uid") in gone for r in refs):
                    _delete(self.ctx.store, res, obj)
