"""Kueue twin: what kueue-controller-manager (chart 0.19) does for batch/v1 Jobs.

Active only while the Deployment `kueue-controller-manager` has a ready pod
(an image the mirror lacks: nothing is queued, nothing admitted).
- webhook: a Job labelled `kueue.x-k8s.io/queue-name` is suspended (this twin
  runs before the Job controller in each pass, which is where the real
  mutating webhook sits);
- jobframework: its Workload `job-<name>-<sha1(Kind, group, name, uid)[:5]>`
  (owner: the Job) with one pod set `main` of `parallelism` pods;
- scheduler: pending Workloads in creation order (BestEffortFIFO), per
  ClusterQueue of their LocalQueue; a Workload fits a flavor when every
  covered resource fits the queue's nominal quota plus what its cohort lends
  (lendingLimit; null = all), within its borrowingLimit (null = unlimited).
  A Workload that does not fit and would stay within its nominal quota
  reclaims: workloads of cohort members that borrow are evicted, newest first
  (preemption.reclaimWithinCohort != Never). With fair sharing (a
  ClusterQueue sets fairSharing) the pending workload whose queue would have
  the lowest dominant resource share (borrowed / lendable / weight) goes
  first, and borrowers are evicted highest share first;
- on admission the Job gets the flavor's nodeLabels (nodeSelector) and
  tolerations and is unsuspended; eviction suspends it again (its pods go).
Lowering a quota evicts nothing: only a pending Workload ever preempts.

The manager's Configuration is the file its Deployment mounts (the chart's
ConfigMap `<release>-manager-config`), read when the manager starts (a new
Deployment generation), as the real one reads it once at start:
`resources.excludeResourcePrefixes` drops requests before anything counts them;
`resources.quotaCheckStrategy` (the QuotaCheckStrategy gate is on in 0.19)
BlockUndeclared, the default: a pod set asking a resource no resource group
covers fits no flavor ("resource cpu unavailable in ClusterQueue") and preempts
nothing; IgnoreUndeclared: only covered resources count, for admission and for
the preemption that makes room.
"""

import hashlib

import yaml

from ..errors import ApiError
from ..validation.quantity import Quantity
from .util import clone, containers_requests, now_iso, owner_ref, set_condition, write_status
from ..selectors import label_selector_matches as _selector_matches

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WORKLOADS = "workloads.kueue.x-k8s.io"
CQS = "clusterqueues.kueue.x-k8s.io"
LQS = "localqueues.kueue.x-k8s.io"
FLAVORS = "resourceflavors.kueue.x-k8s.io"
MANAGER = "kueue-controller-manager"
API = "kueue.x-k8s.io/v1beta2"
CONFIG_ARG = "--config="
BLOCK_UNDECLARED, IGNORE_UNDECLARED = "BlockUndeclared", "IgnoreUndeclared"
PREEMPTION_REASONS = {"InCohortReclamation": "reclamation within the cohort",
                      "InCohortFairSharing": "Fair Sharing within the cohort"}


def workload_name(job):
    meta = job["metadata"]
    h = hashlib.sha1()
    for part in ("Job", "\n", "batch", "\n", meta["name"], "\n", meta.get("uid") or ""):
        h.update(part.encode())
    return "job-%s-%s" % (meta["name"][:240], h.hexdigest()[:5])


def _amount(v):
    from .util import parse_quantity
    try:
        return parse_quantity(v)
    except ValueError:
        return 0


def _reserved_at(wl):
    """When the workload's quota was reserved (the QuotaReserved condition's transition)."""
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c.get("type") == "QuotaReserved":
            return c.get("lastTransitionTime") or ""
    return ""


def _cond(obj, ctype):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c.get("status") == "True"
    return False




class Quotas:
    """Nominal, lendable and usage per (ClusterQueue, flavor, resource), and cohort sums."""

    def __init__(self, cqs):
        self.cqs = cqs
        self.usage = {}

    def rows(self, cq):
        for rg in cq["spec"].get("resourceGroups") or []:
            for fl in rg.get("flavors") or []:
                for r in fl.get("resources") or []:
                    yield fl["name"], r

    def row(self, cq, flavor, resource):
        for fname, r in self.rows(cq):
            if fname == flavor and r["name"] == resource:
                return r
        return None

    def used(self, cq, flavor, resource):
        return self.usage.get((cq["metadata"]["name"], flavor, resource), 0)

    def add(self, cqname, assignment, sign=1):
        for (flavor, resource), amount in assignment.items():
            key = (cqname, flavor, resource)
            self.usage[key] = self.usage.get(key, 0) + sign * amount

    def members(self, cq):
        cohort = cq["spec"].get("cohortName")
        if not cohort:
            return [cq]
        return [c for c in self.cqs.values() if c["spec"].get("cohortName") == cohort]

    def guaranteed(self, cq, flavor, resource):
        r = self.row(cq, flavor, resource)
        if r is None:
            return 0
        nominal = _amount(r.get("nominalQuota"))
        if r.get("lendingLimit") is None or not cq["spec"].get("cohortName"):
            return 0 if cq["spec"].get("cohortName") else nominal
        return max(0, nominal - _amount(r["lendingLimit"]))

    def available(self, cq, flavor, resource):
        """What cq can still take of (flavor, resource), borrowing included."""
        r = self.row(cq, flavor, resource)
        if r is None:
            return 0
        nominal = _amount(r.get("nominalQuota"))
        used = self.used(cq, flavor, resource)
        if not cq["spec"].get("cohortName"):
            return nominal - used
        local = max(0, self.guaranteed(cq, flavor, resource) - used)
        pool = pool_used = 0
        for m in self.members(cq):
            mr = self.row(m, flavor, resource)
            if mr is None:
                continue
            mn = _amount(mr.get("nominalQuota"))
            g = self.guaranteed(m, flavor, resource)
            pool += mn - g
            pool_used += max(0, self.used(m, flavor, resource) - g)
        avail = local + max(0, pool - pool_used)
        if r.get("borrowingLimit") is not None:
            avail = min(avail, nominal + _amount(r["borrowingLimit"]) - used)
        return avail

    def borrowing(self, cq):
        for fname, r in self.rows(cq):
            if self.used(cq, fname, r["name"]) > _amount(r.get("nominalQuota")):
                return True
        return False

    def drs(self, cq, extra=None):
        """Dominant resource share: max over resources of borrowed / lendable of the cohort, per weight."""
        worst = 0.0
        for fname, r in self.rows(cq):
            res = r["name"]
            used = self.used(cq, fname, res) + (extra or {}).get((fname, res), 0)
            borrowed = max(0, used - _amount(r.get("nominalQuota")))
            lendable = sum(_amount((self.row(m, fname, res) or {}).get("nominalQuota")) - self.guaranteed(m, fname, res)
                           for m in self.members(cq))
            if lendable > 0:
                # Kueue's dominantResourceShare: float64(borrowed) * 1000 / float64(lendable)
                worst = max(worst, float(borrowed) * 1000.0 / float(lendable))
        # parseFairWeight: the weight Quantity AsFloat64Slow
        weight = float(_amount((cq["spec"].get("fairSharing") or {}).get("weight", 1)))
        return float("inf") if weight == 0 and worst > 0 else (worst / weight if weight else 0.0)


class Kueue:
    def __init__(self, ctx):
        self.ctx = ctx
        self._config_of = (None, {})     # (the manager Deployment's uid and generation, its Configuration)

    def active(self):
        dep = self._manager()
        if dep is None:
            return False
        self._read_configuration(dep)
        return True

    def _manager(self):
        for dep in self.ctx.list("deployments.apps"):
            if dep["metadata"]["name"] == MANAGER and ((dep.get("status") or {}).get("readyReplicas") or 0) >= 1:
                return dep
        return None

    def _read_configuration(self, dep):
        """The Configuration the manager started with: the --config file from the ConfigMap its pod mounts."""
        key = (dep["metadata"].get("uid"), dep["metadata"].get("generation"))
        if self._config_of[0] == key:
            return
        pod = ((dep.get("spec") or {}).get("template") or {}).get("spec") or {}
        path = next((a[len(CONFIG_ARG):] for c in pod.get("containers") or []
                     for a in (c.get("args") or []) if a.startswith(CONFIG_ARG)), None)
        config = {}
        for c in pod.get("containers") or []:
            for mount in c.get("volumeMounts") or []:
                if path is None or mount.get("mountPath") != path:
                    continue
                volume = next((v for v in pod.get("volumes") or [] if v.get("name") == mount.get("name")), {})
                name = (volume.get("configMap") or {}).get("name")
                cm = self.ctx.store.get("configmaps", dep["metadata"]["namespace"], name) if name else None
                text = ((cm or {}).get("data") or {}).get(mount.get("subPath") or "")
                try:
                    config = yaml.safe_load(text or "") or {}
                except yaml.YAMLError:
                    config = {}
        self._config_of = (key, config if isinstance(config, dict) else {})

    @property
    def _resources_config(self):
        return self._config_of[1].get("resources") or {}

    def _quota_check_strategy(self):
        return self._resources_config.get("quotaCheckStrategy") or BLOCK_UNDECLARED

    def reconcile(self):
        jobs = [j for j in self.ctx.list("jobs.batch")
                if (j["metadata"].get("labels") or {}).get(QUEUE_LABEL)]
        wls = self.ctx.list(WORKLOADS)
        if not jobs and not wls and not self.ctx.list(CQS):
            return
        if not self.active():
            return
        store = self.ctx.store
        by_owner = {}
        for wl in wls:
            ref = next((r for r in wl["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
            if ref:
                by_owner[ref.get("uid")] = wl
        live = {j["metadata"]["uid"] for j in jobs}
        for uid, wl in list(by_owner.items()):
            if uid not in live:        # the Job is gone: its Workload goes (ownerReference GC)
                self._delete(WORKLOADS, wl)
                by_owner.pop(uid)
        for job in jobs:
            wl = by_owner.get(job["metadata"]["uid"])
            if wl is None:
                self._suspend(job)
                wl = self._create_workload(job)
                if wl is not None:
                    by_owner[job["metadata"]["uid"]] = wl
            elif _cond(wl, "Finished"):
                continue
            elif self._job_done(job):
                self._finish(wl, job)
        self._schedule([w for w in by_owner.values() if w is not None],
                       {j["metadata"]["uid"]: j for j in jobs})

    # -- jobframework -------------------------------------------------------------------------
    def _job_done(self, job):
        return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                   for c in (job.get("status") or {}).get("conditions") or [])

    def _suspend(self, job):
        if job["spec"].get("suspend"):
            return
        upd = clone(job)
        upd["spec"]["suspend"] = True
        try:
            self.ctx.store.update("jobs.batch", upd)
        except ApiError as err:
            if err.code not in (404, 409):
                raise
        self._delete_pods(job)

    def _delete_pods(self, job):
        for p in self.ctx.list("pods", job["metadata"]["namespace"]):
            if any(r.get("uid") == job["metadata"]["uid"] for r in p["metadata"].get("ownerReferences") or []):
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    self._delete("pods", p)

    def _delete(self, resource, obj):
        try:
            self.ctx.store.delete(resource, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        except ApiError as err:
            if err.code != 404:
                raise

    def _create_workload(self, job):
        spec = job["spec"]
        count = spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1
        body = {"apiVersion": API, "kind": "Workload",
                "metadata": {"name": workload_name(job), "namespace": job["metadata"]["namespace"],
                             "labels": {"kueue.x-k8s.io/job-uid": job["metadata"]["uid"]},
                             "ownerReferences": [owner_ref(job, "Job", "batch/v1")]},
                "spec": {"queueName": job["metadata"]["labels"][QUEUE_LABEL], "priority": 0, "active": True,
                         "podSets": [{"name": "main", "count": count,
                                      "template": clone(spec.get("template") or {})}]}}
        try:
            return self.ctx.store.create(WORKLOADS, body)
        except ApiError as err:
            if err.code == 409:
                return self.ctx.store.get(WORKLOADS, body["metadata"]["namespace"], body["metadata"]["name"])
            if err.code == 404:
                return None
            raise

    def _finish(self, wl, job):
        status = clone(wl.get("status") or {})
        conds = list(status.get("conditions") or [])
        set_condition(conds, "Finished", "True", "Succeeded", "Job finished successfully")
        status["conditions"] = conds
        write_status(self.ctx.store, WORKLOADS, wl, status)

    # -- scheduler ------------------------------------------------------------------------------
    def _request(self, wl):
        """The pod set's requests Kueue counts: zero amounts and excludeResourcePrefixes dropped."""
        ps = (wl["spec"].get("podSets") or [{}])[0]
        per = containers_requests((ps.get("template") or {}).get("spec") or {})
        excluded = tuple(self._resources_config.get("excludeResourcePrefixes") or ())
        return {k: v * int(ps.get("count", 1)) for k, v in per.items() if v > 0 and not k.startswith(excluded)}

    def _counted(self, cq, req):
        """(the requests the ClusterQueue's quota counts, None) or (None, why it fits no flavor)."""
        covered = {r for rg in cq["spec"].get("resourceGroups") or [] for r in rg.get("coveredResources") or []}
        undeclared = sorted(r for r in req if r not in covered)
        if not undeclared or not any(r in covered for r in req):
            return req, None
        if self._quota_check_strategy() == IGNORE_UNDECLARED:
            return {r: v for r, v in req.items() if r in covered}, None
        return None, "couldn't assign flavors to pod set main: resource %s unavailable in ClusterQueue" % (
            undeclared[0])

    def _schedule(self, wls, jobs):
        cqs = {c["metadata"]["name"]: c for c in self.ctx.list(CQS)}
        lqs = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in self.ctx.list(LQS)}
        flavors = {f["metadata"]["name"]: f for f in self.ctx.list(FLAVORS)}
        quotas = Quotas(cqs)
        admitted, pending = [], []
        for wl in wls:
            if _cond(wl, "Finished"):
                continue
            adm = (wl.get("status") or {}).get("admission")
            if adm and _cond(wl, "QuotaReserved"):
                quotas.add(adm["clusterQueue"], self._assigned(adm))
                admitted.append(wl)
                job = jobs.get(((wl["metadata"].get("ownerReferences") or [{}])[0]).get("uid"))
                if job is not None and job["spec"].get("suspend"):
                    flavor = next(iter((adm["podSetAssignments"][0].get("flavors") or {}).values()), None)
                    self._start(job, flavor, flavors)
            else:
                pending.append(wl)
        pending.sort(key=lambda w: (-(w["spec"].get("priority") or 0), w["metadata"].get("creationTimestamp") or "",
                                    w["metadata"]["name"]))
        fair = any(c["spec"].get("fairSharing") for c in cqs.values())
        while pending:
            wl = pending.pop(self._next(pending, lqs, cqs, quotas) if fair else 0)
            ns = wl["metadata"]["namespace"]
            lq = lqs.get((ns, wl["spec"].get("queueName")))
            if lq is None:
                self._pending(wl, "Inadmissible", "LocalQueue %s doesn't exist" % wl["spec"].get("queueName"))
                continue
            cq = cqs.get(lq["spec"].get("clusterQueue"))
            if cq is None:
                self._pending(wl, "Inadmissible", "ClusterQueue %s doesn't exist" % lq["spec"].get("clusterQueue"))
                continue
            nsobj = self.ctx.get_cached("namespaces", ns) or {}
            if not _selector_matches(cq["spec"].get("namespaceSelector"), nsobj.get("metadata", {}).get("labels") or {}):
                self._pending(wl, "Inadmissible", "Workload namespace doesn't match ClusterQueue selector")
                continue
            req, why = self._counted(cq, self._request(wl))
            if req is None:                  # no flavor fits: nothing to preempt for
                self._pending(wl, "Pending", why)
                continue
            sel = self._selector(wl)
            choice, why = self._fit(cq, quotas, req, flavors, sel)
            if choice is None and self._reclaim(cq, quotas, req, admitted, jobs, flavors, sel):
                choice, why = self._fit(cq, quotas, req, flavors, sel)
            if choice is None:
                self._pending(wl, "Pending", why)
                continue
            stored = self._admit(wl, cq, choice, jobs, flavors)
            if stored is not None:       # with its admission: a later workload of this pass may preempt it
                quotas.add(cq["metadata"]["name"], choice[1])
                admitted.append(stored)
        self._cq_status(cqs, quotas, admitted, wls)

    def _cq_status(self, cqs, quotas, admitted, wls):
        """status.flavorsReservation / flavorsUsage (total, borrowed) and workload counts per ClusterQueue."""
        counts = {}
        for wl in admitted:
            name = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")
            counts[name] = counts.get(name, 0) + 1
        lqs = {(q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"].get("clusterQueue")
               for q in self.ctx.list(LQS)}
        pending = {}
        admitted_ids = {(w["metadata"]["namespace"], w["metadata"]["name"]) for w in admitted}
        for wl in wls:
            if (wl["metadata"]["namespace"], wl["metadata"]["name"]) in admitted_ids or _cond(wl, "Finished"):
                continue
            name = lqs.get((wl["metadata"]["namespace"], wl["spec"].get("queueName")))
            pending[name] = pending.get(name, 0) + 1
        for name, cq in cqs.items():
            usage = []
            for rg in cq["spec"].get("resourceGroups") or []:
                for fl in rg.get("flavors") or []:
                    rows = []
                    for r in fl.get("resources") or []:
                        used = quotas.used(cq, fl["name"], r["name"])
                        rows.append({"name": r["name"], "total": _fmt(used),
                                     "borrowed": _fmt(max(0, used - _amount(r.get("nominalQuota"))))})
                    usage.append({"name": fl["name"], "resources": rows})
            status = clone(cq.get("status") or {})
            status.update({"flavorsReservation": usage, "flavorsUsage": clone(usage),
                           "admittedWorkloads": counts.get(name, 0), "reservingWorkloads": counts.get(name, 0),
                           "pendingWorkloads": pending.get(name, 0)})
            write_status(self.ctx.store, CQS, cq, status)

    def _next(self, pending, lqs, cqs, quotas):
        """Fair sharing: the workload whose ClusterQueue would have the lowest dominant resource share."""
        best, best_key = 0, None
        for i, wl in enumerate(pending):
            lq = lqs.get((wl["metadata"]["namespace"], wl["spec"].get("queueName")))
            cq = cqs.get((lq or {}).get("spec", {}).get("clusterQueue"))
            if cq is None:
                return i
            first = next((f["name"] for rg in cq["spec"].get("resourceGroups") or [] for f in rg.get("flavors") or []),
                         None)
            extra = {(first, r): v for r, v in (self._counted(cq, self._request(wl))[0] or {}).items()}
            key = (-(wl["spec"].get("priority") or 0), quotas.drs(cq, extra), i)
            if best_key is None or key < best_key:
                best, best_key = i, key
        return best

    @staticmethod
    def _assigned(adm):
        out = {}
        for psa in adm.get("podSetAssignments") or []:
            for res, flavor in (psa.get("flavors") or {}).items():
                out[(flavor, res)] = out.get((flavor, res), 0) + _amount((psa.get("resourceUsage") or {}).get(res))
        return out

    def _fit(self, cq, quotas, req, flavors, selector=None):
        """(flavor, assignment) of the first flavor of the resource group that fits, else (None, message)."""
        messages = []
        for rg in cq["spec"].get("resourceGroups") or []:
            covered = set(rg.get("coveredResources") or [])
            wanted = {r: v for r, v in req.items() if r in covered}
            if not wanted:
                continue
            # flavorassigner: only the pod's nodeSelector keys some flavor of the group labels count
            keys = {k for fl in rg.get("flavors") or [] for k in
                    ((flavors.get(fl["name"]) or {}).get("spec") or {}).get("nodeLabels") or {}}
            for fl in rg.get("flavors") or []:
                name = fl["name"]
                if name not in flavors:
                    messages.append("flavor %s not found" % name)
                    continue
                labels = (flavors[name].get("spec") or {}).get("nodeLabels") or {}
                if any(k in keys and labels.get(k) != v for k, v in (selector or {}).items()):
                    messages.append("flavor %s doesn't match node affinity" % name)
                    continue
                short = [(r, v - quotas.available(cq, name, r)) for r, v in sorted(wanted.items())
                         if v > quotas.available(cq, name, r)]
                if not short:
                    return (name, {(name, r): v for r, v in wanted.items()}), None
                r, more = short[0]
                messages.append("insufficient unused quota for %s in flavor %s, %s more needed" % (
                    r, name, _fmt(more)))
            return None, "couldn't assign flavors to pod set main: " + ", ".join(messages)
        missing = sorted(r for r in req if not any(r in (rg.get("coveredResources") or [])
                                                    for rg in cq["spec"].get("resourceGroups") or []))
        if missing:
            return None, "couldn't assign flavors to pod set main: resource %s unavailable in ClusterQueue" % missing[0]
        return None, "no resources requested"

    @staticmethod
    def _selector(wl):
        """The pod set's nodeSelector (required node affinity is not read: a known difference)."""
        ps = (wl["spec"].get("podSets") or [{}])[0]
        return ((ps.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}

    def _reclaim(self, cq, quotas, req, admitted, jobs, flavors, selector=None):
        policy = (cq["spec"].get("preemption") or {}).get("reclaimWithinCohort", "Never")
        if policy == "Never" or not cq["spec"].get("cohortName"):
            return False
        first = self._first_flavor(cq, flavors, selector)
        if first is None:
            return False
        cands = []
        for wl in admitted:
            ocq = quotas.cqs.get(wl["status"]["admission"]["clusterQueue"])
            if ocq is None or ocq is cq or ocq["spec"].get("cohortName") != cq["spec"].get("cohortName"):
                continue
            if quotas.borrowing(ocq):
                cands.append((wl, ocq))
        # Kueue's candidate order: lower priority first, then the latest quota reservation first
        # (the twin's timestamps have seconds: the newest, then the last name, break a tie)
        cands.sort(key=lambda c: (_reserved_at(c[0]), c[0]["metadata"].get("creationTimestamp") or "",
                                  c[0]["metadata"]["name"]), reverse=True)
        cands.sort(key=lambda c: c[0]["spec"].get("priority") or 0)
        if any(m["spec"].get("fairSharing") for m in quotas.members(cq)):
            victims = self._fair_victims(cq, quotas, req, flavors, selector, first, cands)
            reason = "InCohortFairSharing"
        else:
            victims = self._reclaim_victims(cq, quotas, req, flavors, selector, first, cands)
            reason = "InCohortReclamation"
        if victims is None:
            return False
        for vwl in victims:
            self._evict(vwl, jobs, cq, reason)
            admitted.remove(vwl)
        return True

    def _first_flavor(self, cq, flavors, selector):
        """The first flavor of the first resource group the pod set's nodeSelector does not contradict."""
        for rg in cq["spec"].get("resourceGroups") or []:
            keys = {k for fl in rg.get("flavors") or [] for k in
                    ((flavors.get(fl["name"]) or {}).get("spec") or {}).get("nodeLabels") or {}}
            for fl in rg.get("flavors") or []:
                labels = ((flavors.get(fl["name"]) or {}).get("spec") or {}).get("nodeLabels") or {}
                if not any(k in keys and labels.get(k) != v for k, v in (selector or {}).items()):
                    return fl["name"]
        return None

    def _reclaim_victims(self, cq, quotas, req, flavors, selector, first, cands):
        """Without fair sharing: borrowers' workloads, until the pending one fits, only to get back
        what the queue's nominal quota guarantees. None when that does not make it fit."""
        for r, v in req.items():
            row = quotas.row(cq, first, r)
            if row is None or quotas.used(cq, first, r) + v > _amount(row.get("nominalQuota")):
                return None
        victims = []
        for wl, ocq in cands:
            if not quotas.borrowing(ocq):
                continue
            quotas.add(ocq["metadata"]["name"], self._assigned(wl["status"]["admission"]), -1)
            victims.append((wl, ocq))
            if self._fit(cq, quotas, req, flavors, selector)[0] is not None:
                return [w for w, _ in victims]
        self._restore(quotas, victims)
        return None

    def _fair_victims(self, cq, quotas, req, flavors, selector, first, cands):
        """Fair sharing preemption (Kueue's preemption/fairsharing): the preemptor's share with the
        pending workload admitted is compared with the target ClusterQueue of the highest share.
        Rule S2-a takes a target's workload when the preemptor's share stays <= the target's share
        without it; rule S2-b then takes one workload per remaining target whose share before is
        above the preemptor's. The outcome depends on the shares only, never on which queue's
        workloads were admitted first. None when no set of victims makes the workload fit."""
        mine = quotas.drs(cq, {(first, r): v for r, v in req.items()})
        by_cq = {}
        for wl, ocq in cands:
            by_cq.setdefault(ocq["metadata"]["name"], []).append(wl)
        victims, retry = [], {}

        def take(name, wl):
            quotas.add(name, self._assigned(wl["status"]["admission"]), -1)
            victims.append((wl, quotas.cqs[name]))
            return self._fit(cq, quotas, req, flavors, selector)[0] is not None

        while True:                                                  # rule S2-a
            name = self._highest_share(quotas, by_cq)
            if name is None:
                break
            queue = by_cq[name]
            while queue:
                wl = queue.pop(0)
                assigned = self._assigned(wl["status"]["admission"])
                quotas.add(name, assigned, -1)
                after = quotas.drs(quotas.cqs[name])
                quotas.add(name, assigned)
                if mine <= after:
                    if take(name, wl):
                        return [w for w, _ in victims]
                    break                     # shares changed: pick the target queue again
                retry.setdefault(name, []).append(wl)
            if not queue:
                by_cq.pop(name)
        while True:                                                  # rule S2-b
            name = self._highest_share(quotas, retry)
            if name is None:
                break
            wl = retry.pop(name)[0]
            if mine < quotas.drs(quotas.cqs[name]) and take(name, wl):
                return [w for w, _ in victims]
        self._restore(quotas, victims)
        return None

    @staticmethod
    def _highest_share(quotas, by_cq):
        """The borrowing ClusterQueue with candidates and the highest share (ties: by name), else None."""
        best = None
        for name in sorted(by_cq):
            ocq = quotas.cqs[name]
            if not by_cq[name] or not quotas.borrowing(ocq):
                continue
            if best is None or quotas.drs(ocq) > quotas.drs(quotas.cqs[best]):
                best = name
        return best

    def _restore(self, quotas, victims):
        """No preemption after all: the simulated victims' usage counts again."""
        for wl, ocq in victims:
            quotas.add(ocq["metadata"]["name"], self._assigned(wl["status"]["admission"]))

    # -- writes -----------------------------------------------------------------------------------
    def _pending(self, wl, reason, message):
        status = clone(wl.get("status") or {})
        conds = list(status.get("conditions") or [])
        set_condition(conds, "QuotaReserved", "False", reason, message)
        status["conditions"] = conds
        if write_status(self.ctx.store, WORKLOADS, wl, status) is not wl:
            self.ctx.event_once(wl, "Pending", message, "Warning", key=reason + message)

    def _admit(self, wl, cq, choice, jobs, flavors):
        flavor, assignment = choice
        usage = {res: _fmt(v) for (_f, res), v in assignment.items()}
        ps = (wl["spec"].get("podSets") or [{}])[0]
        status = clone(wl.get("status") or {})
        status["admission"] = {"clusterQueue": cq["metadata"]["name"], "podSetAssignments": [{
            "name": ps.get("name", "main"), "count": ps.get("count", 1),
            "flavors": {res: flavor for (_f, res) in assignment}, "resourceUsage": usage}]}
        conds = [c for c in status.get("conditions") or [] if c.get("type") not in ("Evicted", "Preempted")]
        msg = "Quota reserved in ClusterQueue %s" % cq["metadata"]["name"]
        set_condition(conds, "QuotaReserved", "True", "QuotaReserved", msg)
        set_condition(conds, "Admitted", "True", "Admitted", "The workload is admitted")
        status["conditions"] = conds
        stored = write_status(self.ctx.store, WORKLOADS, wl, status)
        if stored is None:
            return None
        self.ctx.event_once(wl, "QuotaReserved", msg, key=now_iso())
        job = jobs.get(((wl["metadata"].get("ownerReferences") or [{}])[0]).get("uid"))
        if job is not None:
            self._start(job, flavor, flavors)
        return stored

    def _start(self, job, flavor, flavors):
        """Unsuspend the Job with the flavor's node labels and tolerations (read fresh: no stale write)."""
        job = self.ctx.store.get("jobs.batch", job["metadata"]["namespace"], job["metadata"]["name"])
        if job is None or not job["spec"].get("suspend"):
            return
        fspec = (flavors.get(flavor) or {}).get("spec") or {}
        upd = clone(job)
        tmpl = upd["spec"].setdefault("template", {}).setdefault("spec", {})
        if fspec.get("nodeLabels"):
            sel = dict(tmpl.get("nodeSelector") or {})
            sel.update(fspec["nodeLabels"])
            tmpl["nodeSelector"] = sel
        tols = list(tmpl.get("tolerations") or [])
        for t in fspec.get("tolerations") or []:
            if t not in tols:
                tols.append(clone(t))
        if tols:
            tmpl["tolerations"] = tols
        upd["spec"]["suspend"] = False
        try:
            self.ctx.store.update("jobs.batch", upd)
        except ApiError as err:
            if err.code not in (404, 409):
                raise
            self.ctx.runtime.after(0.1)

    def _evict(self, wl, jobs, preemptor, reason):
        status = clone(wl.get("status") or {})
        status.pop("admission", None)
        conds = list(status.get("conditions") or [])
        msg = "Preempted to accommodate a workload (UID: %s) due to %s" % (
            preemptor["metadata"].get("uid", ""), PREEMPTION_REASONS[reason])
        set_condition(conds, "Evicted", "True", "Preempted", msg)
        set_condition(conds, "Preempted", "True", reason, msg)
        set_condition(conds, "QuotaReserved", "False", "Pending", "Preempted")
        set_condition(conds, "Admitted", "False", "NoReservation", "The workload has no reservation")
        status["conditions"] = conds
        write_status(self.ctx.store, WORKLOADS, wl, status)
        self.ctx.event_once(wl, "Preempted", msg, key=now_iso())
        job = jobs.get(((wl["metadata"].get("ownerReferences") or [{}])[0]).get("uid"))
        if job is not None:
            self._suspend(self.ctx.store.get("jobs.batch", job["metadata"]["namespace"], job["metadata"]["name"])
                          or job)


def _fmt(v):
    """An exact amount as resource.Quantity prints it (4, 500m)."""
    return str(Quantity(v))
