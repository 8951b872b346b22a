"""Simplified workload controllers: Deployment, ReplicaSet, DaemonSet, StatefulSet, Job, GC.

They write through the Store like real controllers, so admission applies to
the pods they create: a refused pod leaves the owner short of it and records
a FailedCreate event ("Error creating: <reason>"), as kube-controller-manager does.
Deployments roll out as the deployment controller paces them (maxSurge /
maxUnavailable, readiness; Recreate drops every old pod first), see Deployments.
Simplifications (documented in docs/simcluster-clusterfile.md): no minReadySeconds;
deletions are immediate (no graceful termination).
"""

import math

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


# -- Deployment rollouts, as pkg/controller/deployment paces them (rolling.go, recreate.go,
# util/deployment_util.go). The arithmetic is kept in plain functions over replica counts so
# that the upstream table tests (rolling_test.go, deployment_util_test.go) port one to one.

DEFAULT_FENCEPOST = "25%"          # apps/v1 defaults: maxSurge and maxUnavailable 25%
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"


def int_or_percent(value, total, round_up):
    """intstr.GetScaledValueFromIntOrPercent: an int as is, "N%" of `total` rounded up (maxSurge)
    or down (maxUnavailable); any other string is an error."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if isinstance(value, int):
        return value
    digits = value[:-1]
    if not value.endswith("%") or not digits.lstrip("+-").isdigit():
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    part = int(digits) * total / 100.0
    return int(math.ceil(part)) if round_up else int(math.floor(part))


def resolve_fenceposts(max_surge, max_unavailable, desired):
    """ResolveFenceposts: (surge, unavailable); an unset one counts 0, and when both resolve to
    0 (a percentage rounded down) unavailable becomes 1 so that the rollout can progress."""
    surge = int_or_percent(0 if max_surge is None else max_surge, desired, True)
    unavailable = int_or_percent(0 if max_unavailable is None else max_unavailable, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def rollout_strategy(spec):
    """(type, maxSurge, maxUnavailable) with the apps/v1 defaults applied (this store does not
    default Deployments): RollingUpdate, 25% and 25%."""
    strategy = spec.get("strategy") or {}
    kind = strategy.get("type") or "RollingUpdate"
    if kind != "RollingUpdate":
        return kind, None, None
    rolling = strategy.get("rollingUpdate") or {}
    surge = rolling.get("maxSurge")
    unavailable = rolling.get("maxUnavailable")
    return (kind, DEFAULT_FENCEPOST if surge is None else surge,
            DEFAULT_FENCEPOST if unavailable is None else unavailable)


def max_unavailable(kind, max_surge, max_unav, desired):
    """MaxUnavailable: 0 for Recreate or no replicas; never more than the replicas."""
    if kind != "RollingUpdate" or desired == 0:
        return 0
    return min(resolve_fenceposts(max_surge, max_unav, desired)[1], desired)


def max_surge_of(kind, max_surge, max_unav, desired):
    """MaxSurge: 0 for Recreate."""
    if kind != "RollingUpdate":
        return 0
    return resolve_fenceposts(max_surge, max_unav, desired)[0]


def new_rs_new_replicas(kind, desired, surge, all_replicas, new_replicas):
    """NewRSNewReplicas: the new ReplicaSet grows while all ReplicaSets together stay within
    desired + maxSurge, never beyond desired; Recreate takes desired at once."""
    if kind != "RollingUpdate":
        return desired
    max_total = desired + surge
    if all_replicas >= max_total:
        return new_replicas
    return new_replicas + min(max_total - all_replicas, desired - new_replicas)


def reconcile_new(kind, desired, surge, all_replicas, new_replicas):
    """reconcileNewReplicaSet: the new ReplicaSet's next size, or None (no scaling)."""
    if new_replicas == desired:
        return None
    if new_replicas > desired:
        return desired
    target = new_rs_new_replicas(kind, desired, surge, all_replicas, new_replicas)
    return None if target == new_replicas else target


def cleanup_unhealthy(olds, max_cleanup):
    """cleanupUnhealthyReplicas over [(spec replicas, available)] (oldest first): old pods that
    are not available go first, at most max_cleanup. Returns (new sizes, count removed)."""
    sizes, total = [spec for spec, _avail in olds], 0
    for i, (spec, avail) in enumerate(olds):
        if total >= max_cleanup:
            break
        if spec == 0 or spec == avail:
            continue
        down = min(max_cleanup - total, spec - avail)
        sizes[i] = spec - down
        total += down
    return sizes, total


def scale_down_old_for_rolling(desired, max_unav, available, sizes):
    """scaleDownOldReplicaSetsForRollingUpdate: with `available` pods across all ReplicaSets,
    old ones shrink (oldest first) by what is above desired - maxUnavailable."""
    min_available = desired - max_unav
    if available <= min_available:
        return list(sizes), 0
    out, done, budget = list(sizes), 0, available - min_available
    for i, size in enumerate(sizes):
        if done >= budget:
            break
        if size == 0:
            continue
        down = min(size, budget - done)
        out[i] = size - down
        done += down
    return out, done


def reconcile_old(desired, max_unav, new, olds):
    """reconcileOldReplicaSets: new = (spec, available), olds = [(spec, available)] oldest first.
    The old ReplicaSets' next sizes, or None (no scaling). Scaled down at most
    all - (desired - maxUnavailable) - unavailable new pods, so new pods that do not become
    available never let the old ones go."""
    if not sum(spec for spec, _a in olds):
        return None
    all_replicas = new[0] + sum(spec for spec, _a in olds)
    max_scaled_down = all_replicas - (desired - max_unav) - (new[0] - new[1])
    if max_scaled_down <= 0:
        return None
    sizes, cleaned = cleanup_unhealthy(olds, max_scaled_down)
    available = new[1] + sum(a for _s, a in olds)
    sizes, scaled = scale_down_old_for_rolling(desired, max_unav, available, sizes)
    return sizes if cleaned + scaled else None


def _revision(rs):
    value = (rs["metadata"].get("annotations") or {}).get(REVISION, "0")
    return int(value) if str(value).isdigit() else 0


class Deployments:
    """RollingUpdate and Recreate as the deployment controller does them; each pass takes one
    step (scale the new ReplicaSet up, else the old ones down) and the next pass follows the
    pods' readiness. A pod counts as available when Ready (minReadySeconds is not modelled)."""
    # runtime.py: changes of these run a pass
    watches = {"deployments.apps", "replicasets.apps", "pods"}

    def __init__(self, ctx):
        self.ctx = ctx

    def reconcile(self):
        rs_by_owner = {}
        for rs in self.ctx.list("replicasets.apps"):
            uid = controller_uid(rs)
            if uid:
                rs_by_owner.setdefault(uid, []).append(rs)
        for dep in self.ctx.list("deployments.apps"):
            self._one(dep, rs_by_owner.get(dep["metadata"]["uid"], []))

    def _pods(self, rs):
        return [p for p in self.ctx.by_index("pods", "owner", rs["metadata"]["uid"])
                if not terminal(p) and not p["metadata"].get("deletionTimestamp")]

    def _available(self, rs):
        """Ready pods of the ReplicaSet, no more than its size (a ReplicaSet just scaled down
        is about to delete the surplus, not-ready ones first)."""
        ready = sum(1 for p in self._pods(rs) if pod_ready(p))
        return min(ready, int(rs["spec"].get("replicas") or 0))

    def _one(self, dep, owned):
        spec = dep["spec"]
        want = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        kind, surge_v, unav_v = rollout_strategy(spec)
        try:
            surge = max_surge_of(kind, surge_v, unav_v, want)
            unavailable = max_unavailable(kind, surge_v, unav_v, want)
        except ValueError:
            surge, unavailable = max_surge_of("RollingUpdate", None, None, want), 1
        template = clone(spec.get("template") or {})
        h = template_hash(template)
        new = next((r for r in owned
                    if (r["metadata"].get("labels") or {}).get("pod-template-hash") == h), None)
        olds = sorted((r for r in owned if r is not new),
                      key=lambda r: (r["metadata"].get("creationTimestamp") or "", r["metadata"]["name"]))
        top = max([_revision(r) for r in owned] or [0])
        if new is not None and _revision(new) < top:
            # a rollback to an older template makes it the newest revision
            new = self._patch(new, {"metadata": {"annotations": {REVISION: str(top + 1)}}}) or new
        if kind == "Recreate":
            new = self._recreate(dep, want, template, h, new, olds, top)
        else:
            new = self._rolling(dep, want, surge, unavailable, template, h, new, olds, top)
        self._status(dep, new, olds, want, unavailable)

    # -- strategies ---------------------------------------------------------------------
    def _rolling(self, dep, want, surge, unavailable, template, h, new, olds, top):
        old_total = sum(int(r["spec"].get("replicas") or 0) for r in olds)
        if new is None:
            size = new_rs_new_replicas("RollingUpdate", want, surge, old_total, 0)
            return self._create(dep, template, h, size, want, surge, top)
        size = int(new["spec"].get("replicas") or 0)
        target = reconcile_new("RollingUpdate", want, surge, old_total + size, size)
        if target is not None:
            return self._scale(dep, new, target, want, surge) or new
        sizes = reconcile_old(want, unavailable, (size, self._available(new)),
                              [(int(r["spec"].get("replicas") or 0), self._available(r)) for r in olds])
        for rs, target in zip(olds, sizes or []):
            if target != int(rs["spec"].get("replicas") or 0):
                self._scale(dep, rs, target, want, surge)
        return new

    def _recreate(self, dep, want, template, h, new, olds, top):
        """rolloutRecreate: every old ReplicaSet to 0, wait until none of their pods runs, then
        the new ReplicaSet at full size: the service has no pod in between."""
        active = [r for r in olds if int(r["spec"].get("replicas") or 0)]
        for rs in active:
            self._scale(dep, rs, 0, want, 0)
        if active or any(self._pods(r) for r in olds):
            return new
        if new is None:
            return self._create(dep, template, h, want, want, 0, top)
        if int(new["spec"].get("replicas") or 0) != want:
            return self._scale(dep, new, want, want, 0) or new
        return new

    # -- writes -------------------------------------------------------------------------
    def _patch(self, rs, changes):
        try:
            return self.ctx.store.merge_patch("replicasets.apps", rs["metadata"]["namespace"],
                                              rs["metadata"]["name"], changes)
        except ApiError:
            return None

    def _scale(self, dep, rs, target, want, surge):
        current = int(rs["spec"].get("replicas") or 0)
        out = self._patch(rs, {"spec": {"replicas": target}, "metadata": {"annotations": {
            DESIRED: str(want), MAX_REPLICAS: str(want + surge)}}})
        if out is not None and target != current:
            self.ctx.event_once(dep, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d"
                                % ("up" if target > current else "down", rs["metadata"]["name"],
                                   current, target),
                                key="%s-%d-%d-%s" % (rs["metadata"]["name"], current, target,
                                                     rs["metadata"].get("resourceVersion")))
        return out

    def _create(self, dep, template, h, size, want, surge, top):
        spec = dep["spec"]
        name = dep["metadata"]["name"]
        tmpl = clone(template)
        tmpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = h
        selector = clone(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})["pod-template-hash"] = h
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": "%s-%s" % (name, h), "namespace": dep["metadata"]["namespace"],
                           "labels": dict(tmpl["metadata"]["labels"]),
                           "annotations": {REVISION: str(top + 1), DESIRED: str(want),
                                           MAX_REPLICAS: str(want + surge)},
                           "ownerReferences": [owner_ref(dep, "Deployment", "apps/v1")]},
              "spec": {"replicas": size, "selector": selector, "template": tmpl}}
        if spec.get("minReadySeconds"):
            rs["spec"]["minReadySeconds"] = spec["minReadySeconds"]
        try:
            new = self.ctx.store.create("replicasets.apps", rs)
        except ApiError as err:
            if err.code != 409:
                self.ctx.event_once(dep, "FailedCreate", "Error creating: %s" % err.message, "Warning")
            return None
        if size:
            self.ctx.event_once(dep, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d"
                                % (rs["metadata"]["name"], size),
                                key="%s-0-%d-%s" % (rs["metadata"]["name"], size,
                                                    new["metadata"].get("uid")))
        return new

    def _status(self, dep, new, olds, want, unavailable):
        """calculateStatus and the Available / Progressing conditions (sync.go, progress.go)."""
        sets = [r for r in olds if r is not new] + ([new] if new is not None else [])
        st = lambda r, k: (r.get("status") or {}).get(k, 0) if r is not None else 0  # noqa: E731
        total = sum(st(r, "replicas") for r in sets)
        ready = sum(st(r, "readyReplicas") for r in sets)
        available = sum(st(r, "availableReplicas") for r in sets)
        updated = st(new, "replicas")
        spec_total = sum(int(r["spec"].get("replicas") or 0) for r in sets)
        conds = clone((dep.get("status") or {}).get("conditions") or [])
        if available >= want - unavailable:
            set_condition(conds, "Available", "True", "MinimumReplicasAvailable",
                          "Deployment has minimum availability.")
        else:
            set_condition(conds, "Available", "False", "MinimumReplicasUnavailable",
                          "Deployment does not have minimum availability.")
        if new is None:      # Recreate: the old pods are still going
            set_condition(conds, "Progressing", "True", "ReplicaSetUpdated",
                          'Deployment "%s" is progressing.' % dep["metadata"]["name"])
        elif updated == want and total == want and available == want:
            set_condition(conds, "Progressing", "True", "NewReplicaSetAvailable",
                          'ReplicaSet "%s" has successfully progressed.' % new["metadata"]["name"])
        else:
            set_condition(conds, "Progressing", "True", "ReplicaSetUpdated",
                          'ReplicaSet "%s" is progressing.' % new["metadata"]["name"])
        for c in conds:
            c.setdefault("lastUpdateTime", now_iso())
        status = {"observedGeneration": dep["metadata"].get("generation", 1),
                  "replicas": total, "updatedReplicas": updated, "readyReplicas": ready,
                  "availableReplicas": available,
                  "unavailableReplicas": max(0, spec_total - available), "conditions": conds}
        status = {k: v for k, v in status.items() if v or k in ("observedGeneration", "conditions")}
        write_status(self.ctx.store, "deployments.apps", dep, status)


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
