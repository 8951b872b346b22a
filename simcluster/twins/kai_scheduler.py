"""KAI scheduler twin: pods with schedulerName kai-scheduler, by queue, fair share and gang.

Runs only while the operator-deployed `kai-scheduler-default` and `binder`
Deployments have ready pods (see kai.py). Each pass, like one KAI session:
- jobs: pods with annotation `pod-group-name` form that PodGroup (minMember,
  spec.queue); the pod-grouper twin (kai.py) annotates the others with the
  PodGroup of their top owner, and until then they wait;
- fair share per resource from kai_share (the proportion plugin), with
  request = allocated + pending of every queue and its ancestors;
- allocate: pending jobs in KAI's queue order (under-used queues, then within
  quota, priority, dominant share), each whole (a gang places minMember pods or none) after the
  capacity checks: `limit` of the queue and every ancestor (OverLimit),
  quota for non-preemptible jobs (priority >= 100: NonPreemptibleOverQuota);
- reclaim: a job that does not fit and stays within its queue's fair share
  evicts preemptible pods of queues above their fair share (newest first,
  never below that share); the evicted pods' controllers recreate them Pending.
Unschedulable jobs get PodScheduled=False (reason Unschedulable) with KAI's
message and, for a PodGroup, status.schedulingConditions.
"""

from ..errors import ApiError
from . import kai_share
from .matching import matches_node_selector, tolerates, untolerated_taint
from .scheduler import bind, insufficient
from .volumes import VOLUME_NODE_CONFLICT, claims_problem, volume_node_conflict
from .util import clone, containers_requests, set_condition, write_status

SCHEDULER = "kai-scheduler"
PODGROUP_ANNOTATION = "pod-group-name"
DEFAULT_QUEUE = "default-queue"
QUEUES = "queues.scheduling.run.ai"
PODGROUPS = "podgroups.scheduling.run.ai"
NON_PREEMPTIBLE = 100             # priority class value from which a job must fit in quota
DEFAULT_PRIORITY = 50             # the chart's `train` class: what the pod-grouper gives a Job
GPU = "nvidia.com/gpu"
EPS = 1e-9


def pod_vector(pod):
    """(gpu devices, cpu millicores, memory bytes) requested by a pod, in float64 as KAI's
    resource_info computes queue shares; converted here from the exact quantities."""
    req = containers_requests(pod["spec"])
    return {"gpu": float(req.get(GPU, 0)), "cpu": float(req.get("cpu", 0)) * 1000.0,
            "memory": float(req.get("memory", 0))}


def _add(acc, vec, sign=1):
    """acc += sign * vec (exact for the node accounting, float64 for the queue vectors)."""
    for k, v in vec.items():
        acc[k] = acc.get(k, 0) + sign * v


def _human(v):
    return ("%d" % v) if float(v).is_integer() else ("%g" % v)


class Job:
    def __init__(self, key, name, namespace, queue, min_member, priority, created, podgroup=None):
        self.key = key
        self.name = name
        self.namespace = namespace
        self.queue = queue
        self.min_member = max(1, int(min_member or 1))
        self.priority = priority
        self.created = created
        self.podgroup = podgroup
        self.running = []
        self.pending = []

    @property
    def preemptible(self):
        return self.priority < NON_PREEMPTIBLE


class KaiScheduler:
    def __init__(self, ctx):
        self.ctx = ctx

    # -- is the real scheduler there? ----------------------------------------------------
    def active(self):
        names = {"kai-scheduler-default": False, "binder": False}
        for dep in self.ctx.list("deployments.apps"):
            n = dep["metadata"]["name"]
            if n in names and ((dep.get("status") or {}).get("readyReplicas") or 0) >= 1:
                names[n] = True
        return all(names.values())

    # -- the session ---------------------------------------------------------------------------
    def reconcile(self):
        pods = self.ctx.list("pods")
        mine = [p for p in pods if p["spec"].get("schedulerName") == SCHEDULER
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and not p["metadata"].get("deletionTimestamp")]
        if not self.active():
            return
        if not mine:
            self._queue_status(self._queues())      # all pods gone: allocated back to 0
            return
        nodes = [n for n in self.ctx.list("nodes")]
        used, totals = self._capacity(nodes, pods)
        queues = self._queues()
        jobs = self._jobs(mine)
        for job in jobs.values():
            q = queues.get(job.queue)
            while q is not None:
                for p in job.running:
                    vec = pod_vector(p)
                    for r in kai_share.RESOURCES:
                        q.shares[r].allocated += vec[r]
                        q.shares[r].request += vec[r]
                        if not job.preemptible:
                            q.shares[r].allocated_np += vec[r]
                for p in job.pending:
                    vec = pod_vector(p)
                    for r in kai_share.RESOURCES:
                        q.shares[r].request += vec[r]
                q = queues.get(q.parent)
        kai_share.compute(queues, totals)
        pending = [j for j in jobs.values() if j.pending]
        while pending:
            pending.sort(key=lambda j: self._order(j, queues))
            job = pending.pop(0)
            if self._try(job, jobs, queues, nodes, used) and job.pending:
                pending.append(job)       # one step done (gang core or one elastic pod): re-queue
        self._queue_status(queues)

    def _queue_status(self, queues):
        """status.allocated / allocatedNonPreemptible / requested, as KAI's queue-controller reports them."""
        for q in queues.values():
            obj = self.ctx.get_cached(QUEUES, q.name)
            if obj is None:
                continue
            status = clone(obj.get("status") or {})
            for field, attr in (("allocated", "allocated"), ("allocatedNonPreemptible", "allocated_np"),
                                ("requested", "request")):
                s = {r: getattr(q.shares[r], attr) for r in kai_share.RESOURCES}
                status[field] = {"nvidia.com/gpu": _human(s["gpu"]), "cpu": "%dm" % round(s["cpu"]),
                                 "memory": "%d" % round(s["memory"])}
            write_status(self.ctx.store, QUEUES, obj, status)

    def _capacity(self, nodes, pods):
        used = {n["metadata"]["name"]: {"pods": 0} for n in nodes}
        totals = {"gpu": 0.0, "cpu": 0.0, "memory": 0.0}
        for n in nodes:
            if (n.get("spec") or {}).get("unschedulable"):
                continue
            alloc = (n.get("status") or {}).get("allocatable") or {}
            vec = pod_vector({"spec": {"containers": [{"resources": {"requests": {
                k: v for k, v in alloc.items() if k in (GPU, "cpu", "memory")}}}]}})
            _add(totals, vec)
        for p in pods:
            node = p["spec"].get("nodeName")
            if node not in used or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            req = containers_requests(p["spec"])
            acc = used[node]
            for k, v in req.items():
                acc[k] = acc.get(k, 0) + v
            acc["pods"] += 1
            if p["spec"].get("schedulerName") != SCHEDULER:
                _add(totals, pod_vector(p), -1)    # other schedulers' pods are not KAI's to share
        return used, totals

    def _queues(self):
        raw = {q["metadata"]["name"]: q for q in self.ctx.list(QUEUES)}
        out = {}

        def alive(name, seen=()):
            q = raw.get(name)
            if q is None or name in seen:
                return False
            parent = (q.get("spec") or {}).get("parentQueue")
            return not parent or alive(parent, seen + (name,))
        for name, q in raw.items():
            if not alive(name):
                continue          # KAI drops a queue whose parent does not exist, with its children
            spec = q.get("spec") or {}
            res = spec.get("resources") or {}
            shares = {}
            for r in kai_share.RESOURCES:
                block = res.get(r) or {}
                quota = float(block.get("quota", 0) or 0)
                limit = float(block.get("limit", 0) or 0)
                if r == "memory":      # MB in the Queue, bytes in the session
                    quota = max(kai_share.UNLIMITED, quota * 1e6)
                    limit = max(kai_share.UNLIMITED, limit * 1e6)
                shares[r] = kai_share.Share(quota, limit, float(block.get("overQuotaWeight", 0) or 0))
            out[name] = kai_share.Queue(name, spec.get("parentQueue"), spec.get("priority", 100),
                                        q["metadata"].get("creationTimestamp") or "", q["metadata"].get("uid"),
                                        shares)
        for q in out.values():
            if q.parent in out:
                out[q.parent].children.append(q.name)
        return out

    def _priority(self, pod):
        name = pod["spec"].get("priorityClassName")
        if not name:
            return DEFAULT_PRIORITY
        pc = self.ctx.get_cached("priorityclasses.scheduling.k8s.io", name)
        return int((pc or {}).get("value", DEFAULT_PRIORITY))

    def _jobs(self, pods):
        jobs = {}
        pgs = {(p["metadata"].get("namespace"), p["metadata"]["name"]): p for p in self.ctx.list(PODGROUPS)}
        for pod in sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"])):
            ns = pod["metadata"]["namespace"]
            pg_name = (pod["metadata"].get("annotations") or {}).get(PODGROUP_ANNOTATION)
            if pg_name:
                pg = pgs.get((ns, pg_name))
                if pg is None:
                    continue          # the pod waits for its PodGroup
                key = ("pg", ns, pg_name)
                if key not in jobs:
                    spec = pg.get("spec") or {}
                    prio = self._priority({"spec": {"priorityClassName": spec.get("priorityClassName")
                                                    or pod["spec"].get("priorityClassName")}})
                    jobs[key] = Job(key, pg_name, ns, spec.get("queue") or DEFAULT_QUEUE, spec.get("minMember", 1),
                                    prio, pg["metadata"].get("creationTimestamp") or "", pg)
            else:
                continue              # no PodGroup yet: the pod-grouper (kai.py) gives it one
            job = jobs[key]
            (job.running if pod["spec"].get("nodeName") else job.pending).append(pod)
        return jobs

    def _order(self, job, queues):
        """KAI's queue order (queue_order.go): under-used queues first, then those within their quota
        with the job, higher queue priority, smaller dominant share with the job, older queue; inside
        a queue, higher job priority then older job."""
        q = queues.get(job.queue)
        if q is None:
            return (2,)
        req = {}
        for p in job.pending[:self._step(job)]:
            _add(req, pod_vector(p))
        over = any(s.allocated > s.fair + EPS for s in q.shares.values())
        starved = all(s.deserved == kai_share.UNLIMITED or s.allocated + req.get(r, 0.0) <= s.deserved + EPS
                      for r, s in q.shares.items())
        share = max([(s.allocated + req.get(r, 0.0)) / s.fair for r, s in q.shares.items() if s.fair > 0] or [0.0])
        return (1 if over else 0, 0 if starved else 1, -q.priority, share, q.created, q.name, -job.priority,
                job.created)

    # -- one job -------------------------------------------------------------------------------
    def _try(self, job, jobs, queues, nodes, used):
        q = queues.get(job.queue)
        if q is None:
            return self._unschedulable(job, "QueueDoesNotExist",
                                       "Queue %s does not exist or its parent queue does not exist" % job.queue)
        need = job.pending            # placed in creation order; `want` of them together
        want = self._step(job)
        if want > len(job.pending):
            return self._unschedulable(job, "Unschedulable", "Waiting for %d pods of the pod group, %d exist" % (
                job.min_member, len(job.running) + len(job.pending)))
        for p in need[:want]:
            # the k8s VolumeBinding PreFilter KAI runs for every pod: a gang waits for all claims
            claims = claims_problem(self.ctx, p)
            if claims is not None:
                return self._unschedulable(job, "Unschedulable", "pod %s/%s: %s" % (
                    p["metadata"]["namespace"], p["metadata"]["name"], claims))
        req = {}
        for p in need[:want]:
            _add(req, pod_vector(p))
        problem = self._capacity_check(job, q, queues, req)
        if problem:
            return self._unschedulable(job, *problem)
        placement = self._place(need, want, nodes, used)
        if placement is None and self._reclaim(job, q, jobs, queues, nodes, used, req):
            placement = self._place(need, want, nodes, used)
        if placement is None:
            return self._unschedulable(job, "Unschedulable", self._fit_message(need[0], nodes, used, want))
        for pod, node in placement:
            self._bind(pod, node, used)
            vec = pod_vector(pod)
            a = q
            while a is not None:
                for r in kai_share.RESOURCES:
                    a.shares[r].allocated += vec[r]
                    if not job.preemptible:
                        a.shares[r].allocated_np += vec[r]
                a = queues.get(a.parent)
            job.running.append(pod)
        placed = {x["metadata"]["uid"] for x, _ in placement}
        job.pending = [p for p in job.pending if p["metadata"]["uid"] not in placed]
        return True

    @staticmethod
    def _step(job):
        """Pods to place together: the gang's missing core (minMember), else one elastic pod."""
        return 1 if len(job.running) >= job.min_member else job.min_member - len(job.running)

    def _capacity_check(self, job, q, queues, req):
        a = q
        while a is not None:
            for r, label, unit in (("gpu", "GPUs", 1.0), ("cpu", "CPU cores", 1000.0), ("memory", "memory", 1e9)):
                s = a.shares[r]
                if s.max_allowed == kai_share.UNLIMITED or not req.get(r):
                    continue
                if s.allocated + req[r] > s.max_allowed + EPS:
                    unit_name = {"gpu": "GPUs", "cpu": "cores", "memory": "GB"}[r]
                    return ("OverLimit", "%s quota has reached the allowable limit of %s. Limit is %s %s, currently "
                            "%s %s allocated and workload requested %s %s" % (
                                a.name, label, _human(s.max_allowed / unit), unit_name, _human(s.allocated / unit),
                                unit_name, _human(req[r] / unit), unit_name))
            a = queues.get(a.parent)
        if not job.preemptible:
            a = q
            while a is not None:
                s = a.shares["gpu"]
                if req.get("gpu") and s.deserved != kai_share.UNLIMITED and \
                        s.allocated_np + req["gpu"] > s.deserved + EPS:
                    return ("NonPreemptibleOverQuota",
                            "Non-preemptible workload is over quota. Workload requested %s GPUs, but %s quota is %s "
                            "GPUs, while %s GPUs are already allocated for non-preemptible pods. Use a preemptible "
                            "workload to go over quota." % (_human(req["gpu"]), a.name, _human(s.deserved),
                                                           _human(s.allocated_np)))
                a = queues.get(a.parent)
        return None

    # -- nodes -----------------------------------------------------------------------------------
    @staticmethod
    def _fits(pod, node, used, ctx=None):
        spec = pod["spec"]
        if (node.get("spec") or {}).get("unschedulable") and not tolerates(
                spec.get("tolerations"), {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return "node(s) were unschedulable"
        if untolerated_taint(spec, node) is not None:
            return "node(s) had untolerated taint"
        if not matches_node_selector(spec, node):
            return "node(s) didn't match Pod's node affinity/selector"
        short = insufficient(spec, node, used)
        if short:
            return "node(s) didn't have enough resources: %s" % ("GPUs" if short[0] == GPU else short[0])
        if ctx is not None and volume_node_conflict(ctx, pod, node):
            return VOLUME_NODE_CONFLICT
        return None

    def _place(self, pods, want, nodes, used):
        """First fit of `want` pods, all or none (gang); bin packing: fullest node first."""
        trial = {k: dict(v) for k, v in used.items()}
        out = []
        for pod in pods:
            if len(out) == want:
                break
            order = sorted(nodes, key=lambda n: -trial.get(n["metadata"]["name"], {}).get(GPU, 0.0))
            for node in order:
                if self._fits(pod, node, trial, self.ctx) is None:
                    acc = trial.setdefault(node["metadata"]["name"], {"pods": 0})
                    _add(acc, containers_requests(pod["spec"]))
                    acc["pods"] = acc.get("pods", 0) + 1
                    out.append((pod, node["metadata"]["name"]))
                    break
        return out if len(out) == want else None

    def _fit_message(self, pod, nodes, used, want):
        counts = {}
        for node in nodes:
            why = self._fits(pod, node, used, self.ctx) or "node(s) could not fit all pods of the gang"
            counts[why] = counts.get(why, 0) + 1
        detail = ", ".join("%d %s" % (n, r) for r, n in sorted(counts.items()))
        return "Resources were not found for %d pod(s) of the workload: 0/%d nodes are available: %s." % (
            want, len(nodes), detail)

    # -- reclaim --------------------------------------------------------------------------------
    def _reclaim(self, job, q, jobs, queues, nodes, used, req):
        s = q.shares["gpu"]
        if s.allocated + req.get("gpu", 0.0) > s.fair + EPS:
            return False          # a reclaimer may not go above its fair share
        ancestors = set()
        a = q
        while a is not None:
            ancestors.add(a.name)
            a = queues.get(a.parent)
        victims = []
        for other in jobs.values():
            vq = queues.get(other.queue)
            if vq is None or other.queue in ancestors or not other.preemptible or not other.running:
                continue
            victims.append((other, vq))
        trial_alloc = {name: qq.shares["gpu"].allocated for name, qq in queues.items()}
        trial_used = {k: dict(v) for k, v in used.items()}
        chosen = []
        # the queue most above its fair share first, its newest pods first
        for other, vq in sorted(victims, key=lambda jv: -(jv[1].shares["gpu"].allocated - jv[1].shares["gpu"].fair)):
            units = [other.running] if other.min_member > 1 else [[p] for p in reversed(other.running)]
            for unit in units:
                gpus = sum(pod_vector(p)["gpu"] for p in unit)
                if trial_alloc[vq.name] - gpus < vq.shares["gpu"].fair - EPS:
                    continue      # would push the victim's queue below its fair share
                for p in unit:
                    node = trial_used.get(p["spec"]["nodeName"])
                    if node is not None:
                        _add(node, containers_requests(p["spec"]), -1)
                        node["pods"] = node.get("pods", 1) - 1
                a = vq
                while a is not None:
                    trial_alloc[a.name] -= gpus
                    a = queues.get(a.parent)
                chosen.extend(unit)
                if self._place(job.pending, self._step(job), nodes, trial_used) is not None:
                    self._evict(chosen, job, jobs, queues, used)
                    return True
        return False

    def _evict(self, pods, reclaimer, jobs, queues, used):
        for p in pods:
            msg = "Pod %s/%s was preempted by workload %s/%s." % (
                p["metadata"]["namespace"], p["metadata"]["name"], reclaimer.namespace, reclaimer.name)
            self.ctx.event_once(p, "Evict", msg, "Normal")
            try:
                self.ctx.store.delete("pods", p["metadata"]["namespace"], p["metadata"]["name"])
            except ApiError as err:
                if err.code != 404:
                    raise
            node = used.get(p["spec"]["nodeName"])
            if node is not None:
                _add(node, containers_requests(p["spec"]), -1)
                node["pods"] = node.get("pods", 1) - 1
            for j in jobs.values():
                if any(x is p for x in j.running):
                    j.running = [x for x in j.running if x is not p]
                    vec = pod_vector(p)
                    a = queues.get(j.queue)
                    while a is not None:
                        for r in kai_share.RESOURCES:
                            a.shares[r].allocated -= vec[r]
                        a = queues.get(a.parent)

    # -- writes ----------------------------------------------------------------------------------
    def _bind(self, pod, node, used):
        bind(self.ctx, pod, node, used)   # the same Binding as the default scheduler's

    def _unschedulable(self, job, reason, message):
        for pod in job.pending:
            status = clone(pod.get("status") or {})
            status["phase"] = "Pending"
            status["conditions"] = set_condition(list(status.get("conditions") or []), "PodScheduled", "False",
                                                 "Unschedulable", "%s: %s" % (reason, message))
            if write_status(self.ctx.store, "pods", pod, status) is not pod:
                self.ctx.event_once(pod, "Unschedulable", message, "Warning", key=reason)
        if job.podgroup is not None:
            pg = job.podgroup
            cond = {"type": "UnschedulableOnNodePool", "nodePool": "default", "status": "True",
                    "reason": reason, "message": message, "reasons": [{"reason": reason, "message": message}],
                    "transitionID": "0"}
            status = clone(pg.get("status") or {})
            old = [c for c in status.get("schedulingConditions") or [] if c.get("type") == cond["type"]]
            if old and all(old[0].get(k) == cond[k] for k in ("reason", "message")):
                return
            status["schedulingConditions"] = [cond]
            write_status(self.ctx.store, PODGROUPS, pg, status)

