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

Placement as KAI's plugins score it (kai_fractions.py): per SchedulingShard
(`global.nodePoolLabelKey` of the Config: a shard sees only the Nodes, Queues and
PodGroups labelled `<key>=<partitionLabelValue>`, the default shard those without the
key), its `placementStrategy.gpu` binpack or spread; GPU fractions (`gpu-fraction` /
`gpu-memory`, with `admission.gpuSharing` in the Config) get a GPU group, a reservation
pod per shared GPU and count their fraction in the queue.
"""

from ..errors import ApiError
from . import dra
from . import kai_fractions as frac
from . import kai_share
from .matching import PodPlacements, matches_node_selector, tolerates, untolerated_taint
from .scheduler import bind, insufficient
from .volumes import VOLUME_NODE_CONFLICT, claims_problem, volume_node_conflict
from .util import clone, containers_requests, parse_quantity, random_suffix, set_condition, write_status

SCHEDULER = "kai-scheduler"
PODGROUP_ANNOTATION = "pod-group-name"
DEFAULT_QUEUE = "default-queue"
QUEUES = "queues.scheduling.run.ai"
PODGROUPS = "podgroups.scheduling.run.ai"
CONFIGS = "configs.kai.scheduler"
SHARDS = "schedulingshards.kai.scheduler"
NON_PREEMPTIBLE = 100             # priority class value from which a job must fit in quota
DEFAULT_PRIORITY = 50             # the chart's `train` class: what the pod-grouper gives a Job
GPU = "nvidia.com/gpu"
EPS = 1e-9


def pod_vector(pod, node=None):
    """(gpu devices, cpu millicores, memory bytes) requested by a pod, in float64 as KAI's
    resource_info computes queue shares; converted here from the exact quantities. A fractional
    pod counts its fraction of a GPU (gpu-memory: over the GPU memory of `node`)."""
    req = containers_requests(pod["spec"])
    gpu = float(req.get(GPU, 0))
    if frac.requests_fraction(pod):
        gpu += frac.portion(pod, node)
    return {"gpu": gpu, "cpu": float(req.get("cpu", 0)) * 1000.0, "memory": float(req.get("memory", 0))}


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
        self._dra_pass = None
        self._dra_states = {}

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
        config = (self.ctx.get_cached(CONFIGS, "kai-config") or {}).get("spec") or {}
        self.sharing = bool((config.get("admission") or {}).get("gpuSharing"))
        self.reservation = frac.reservation_settings(config)
        self._sync_reservations(pods)
        if not mine:
            self._queue_status(self._queues())      # all pods gone: allocated back to 0
            return
        key = (config.get("global") or {}).get("nodePoolLabelKey") or ""
        # KAI's binder runs the DynamicResources plugin: claims are allocated as the default scheduler does
        self._dra_pass = dra.Pass(self.ctx) if any(dra.has_claims(p) for p in mine) else None
        self._dra_states = {}
        all_nodes = list(self.ctx.list("nodes"))
        self.node_index = {n["metadata"]["name"]: n for n in all_nodes}
        all_queues = self._queues()
        all_jobs = self._jobs(mine)
        self.placements = PodPlacements(pods, all_nodes)
        for value, strategy in self._shards(key):
            def mine_(obj, value=value):
                return not key or (obj["metadata"].get("labels") or {}).get(key, "") == value
            names = [n for n, q in all_queues.items() if mine_(q.obj)]
            queues = self._queues(keep=set(names)) if key else all_queues
            jobs = dict((k, j) for k, j in all_jobs.items()
                        if not key or j.podgroup is None or mine_(j.podgroup))
            self._session([n for n in all_nodes if mine_(n)], pods, queues, jobs, strategy)
            if not key:
                break

    def _shards(self, key):
        """[(partitionLabelValue, gpu strategy)] of the SchedulingShards (the chart's default shard when
        there are none); without a nodePoolLabelKey every shard sees everything, the twin runs one."""
        out = []
        for shard in sorted(self.ctx.list(SHARDS), key=lambda s: s["metadata"]["name"] != "default"):
            spec = shard.get("spec") or {}
            out.append((spec.get("partitionLabelValue") or "",
                        ((spec.get("placementStrategy") or {}).get("gpu") or "binpack")))
        return out or [("", "binpack")]

    def _vec(self, pod):
        return pod_vector(pod, self.node_index.get(pod["spec"].get("nodeName")))

    def _session(self, nodes, pods, queues, jobs, strategy):
        self.strategy = strategy
        used, totals = self._capacity(nodes, pods)
        self.groups = self._groups(nodes, pods)
        for job in jobs.values():
            q = queues.get(job.queue)
            while q is not None:
                for p in job.running:
                    vec = self._vec(p)
                    for r in kai_share.RESOURCES:
                        q.shares[r].allocated += vec[r]
                        q.shares[r].request += vec[r]
                        if not job.preemptible:
                            q.shares[r].allocated_np += vec[r]
                for p in job.pending:
                    vec = self._vec(p)
                    for r in kai_share.RESOURCES:
                        q.shares[r].request += vec[r]
                q = queues.get(q.parent)
        kai_share.compute(queues, totals)
        pending = [j for j in jobs.values() if j.pending]
        while pending:
            # KAI pops the best queue, then that queue's first job (job order: priority, then age)
            heads = {}
            for j in pending:
                h = heads.get(j.queue)
                if h is None or (-j.priority, j.created, j.name) < (-h.priority, h.created, h.name):
                    heads[j.queue] = j
            job = min(heads.values(), key=lambda j: self._order(j, queues))
            pending.remove(job)
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
            if p["spec"].get("schedulerName") != SCHEDULER and not frac.is_reservation(p, self.reservation[2]):
                _add(totals, pod_vector(p), -1)    # other schedulers' pods are not KAI's to share
        return used, totals

    def _queues(self, keep=None):
        raw = {q["metadata"]["name"]: q for q in self.ctx.list(QUEUES)
               if keep is None or q["metadata"]["name"] in keep}
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
            out[name].obj = q
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
            _add(req, self._vec(p))
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
            if claims is None and self._dra_state(p) is not None:
                claims = self._dra_state(p).problem
            if claims is not None:
                return self._unschedulable(job, "Unschedulable", "pod %s/%s: %s" % (
                    p["metadata"]["namespace"], p["metadata"]["name"], claims))
        req = {}
        for p in need[:want]:
            _add(req, self._vec(p))
        problem = self._fraction_check(need[:want]) or self._capacity_check(job, q, queues, req)
        if problem:
            return self._unschedulable(job, *problem)
        placement = self._place(need, want, nodes, used)
        if placement is None and self._reclaim(job, q, jobs, queues, nodes, used, req):
            placement = self._place(need, want, nodes, used)
        if placement is None:
            return self._unschedulable(job, "Unschedulable", self._fit_message(need[0], nodes, used, want))
        for pod, node, group in placement:
            if not self._bind(pod, node, used, group):
                continue
            vec = pod_vector(pod, self.node_index.get(node))
            a = q
            while a is not None:
                for r in kai_share.RESOURCES:
                    a.shares[r].allocated += vec[r]
                    if not job.preemptible:
                        a.shares[r].allocated_np += vec[r]
                a = queues.get(a.parent)
            job.running.append(pod)
        placed = {x["metadata"]["uid"] for x, _, _ in placement}
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
    def _fits(pod, node, used, ctx=None, placements=None):
        spec = pod["spec"]
        if (node.get("spec") or {}).get("unschedulable") and not tolerates(
                spec.get("tolerations"), {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return "node(s) were unschedulable"
        if untolerated_taint(spec, node) is not None:
            return "node(s) had untolerated taint"
        if not matches_node_selector(spec, node):
            return "node(s) didn't match Pod's node affinity/selector"
        if placements is not None:
            conflict = placements.conflict(pod, node)
            if conflict is not None:
                return conflict
        short = insufficient(spec, node, used)
        if short:
            return "node(s) didn't have enough resources: %s" % ("GPUs" if short[0] == GPU else short[0])
        if ctx is not None and volume_node_conflict(ctx, pod, node):
            return VOLUME_NODE_CONFLICT
        return None

    def _dra_state(self, pod):
        if not dra.has_claims(pod):
            return None
        uid = pod["metadata"]["uid"]
        if uid not in self._dra_states:
            self._dra_states[uid] = dra.PodState(self.ctx, pod, self._dra_pass or dra.Pass(self.ctx))
        return self._dra_states[uid]

    def _dra_block(self, pod, node):
        """The DynamicResources Filter on this node: None or the reason."""
        state = self._dra_state(pod)
        if state is None:
            return None
        failed = state.filter(node)
        return None if failed is None else failed[0]

    def _idle(self, node, trial, resource=GPU):
        """Whole units of `resource` neither used nor reserved on the node (a shared GPU is not idle)."""
        alloc = (node.get("status") or {}).get("allocatable") or {}
        try:
            cap = float(parse_quantity(alloc.get(resource, 0)))
        except ValueError:
            cap = 0.0
        return cap, cap - float(trial.get(node["metadata"]["name"], {}).get(resource, 0))

    def _gpu_count(self, node):
        """GetNumberOfGPUsInNode: the nvidia.com/gpu.count label, else allocatable."""
        try:
            return int((node["metadata"].get("labels") or {})["nvidia.com/gpu.count"])
        except (KeyError, TypeError, ValueError):
            return int(self._idle(node, {})[0])

    def _place(self, pods, want, nodes, used):
        """`want` pods, all or none (gang), each on the best-scored node as KAI's nodeplacement (+
        gpusharingorder) plugins score it; a fraction also on its GPU (gpupack / gpuspread).
        Returns [(pod, node name, None or (gpu group, new))] or None."""
        trial = {k: dict(v) for k, v in used.items()}
        groups = {k: dict(v) for k, v in self.groups.items()}
        placed = self.placements.copy() if getattr(self, "placements", None) is not None else None
        trial_devices = []
        out = []
        for pod in pods:
            if len(out) == want:
                break
            fraction = frac.requests_fraction(pod)
            resource = GPU if fraction or containers_requests(pod["spec"]).get(GPU) else "cpu"
            fitting = []
            for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
                name = node["metadata"]["name"]
                if self._fits(pod, node, trial, self.ctx, placed) is not None or self._dra_block(pod, node):
                    continue
                gpu = None
                if fraction:
                    order = frac.order_gpus(groups.get(name, {}), self._idle(node, trial)[1],
                                            frac.portion(pod, node), self.strategy)
                    if not order:
                        continue
                    gpu = order[0]
                fitting.append((node, gpu))
            if not fitting:
                continue
            node, gpu = max(fitting, key=lambda ng: self._score(pod, ng, fitting, trial, resource))
            name = node["metadata"]["name"]
            state = self._dra_state(pod)
            if state is not None and state.to_allocate:
                state.filter(node)          # the chosen node's allocation; its devices are taken in the trial
                for res in state.allocations.get(name) or ():
                    for r in res["devices"]["results"]:
                        key_ = (r["driver"], r["pool"], r["device"])
                        if key_ not in state.dpass.in_use and not r.get("adminAccess"):
                            state.dpass.in_use.add(key_)
                            trial_devices.append((state.dpass, key_))
            if placed is not None:
                placed.add(pod, name)       # the gang's next pod sees this one (anti-affinity)
            acc = trial.setdefault(name, {"pods": 0})
            _add(acc, containers_requests(pod["spec"]))
            acc["pods"] = acc.get("pods", 0) + 1
            group = None
            if fraction:
                share = frac.portion(pod, node)
                new = gpu == frac.WHOLE
                gid = "%s-%s" % (random_suffix(8), random_suffix(8)) if new else gpu
                if new:
                    acc[GPU] = acc.get(GPU, 0) + 1           # the reservation pod's GPU
                groups.setdefault(name, {})[gid] = groups.get(name, {}).get(gid, 0.0) + share
                group = (gid, new)
            out.append((pod, name, group))
        if len(out) != want:
            for dpass, key_ in trial_devices:
                dpass.in_use.discard(key_)
            return None
        return out

    def _score(self, pod, node_gpu, fitting, trial, resource):
        """The node's score, ties to the first node by name (max keeps the first of equals)."""
        node, gpu = node_gpu
        if resource == GPU and self.strategy == "spread":
            return frac.node_spread_score(self._idle(node, trial)[1], self._gpu_count(node))
        if resource != GPU and self.strategy == "spread":
            cap, idle = self._idle(node, trial, resource)
            return frac.node_spread_score(idle, cap)
        idles = [self._idle(n, trial, resource) for n, _ in fitting]
        idles = [i for c, i in idles if c > 0]
        cap, idle = self._idle(node, trial, resource)
        score = frac.node_pack_score(min(idles or [0.0]), max(idles or [0.0]), idle, cap)
        if gpu is not None and gpu != frac.WHOLE:
            score += frac.GPU_SHARING_SCORE          # gpusharingorder: a shared GPU of the node fits
        return score

    def _groups(self, nodes, pods):
        """{node: {gpu group: used portion}} of the fractional pods bound there."""
        names = {n["metadata"]["name"]: n for n in nodes}
        out = {}
        for p in pods:
            node = names.get(p["spec"].get("nodeName"))
            group = (p["metadata"].get("labels") or {}).get(frac.GROUP_LABEL)
            if node is None or not group or frac.is_reservation(p, self.reservation[2]) \
                    or p["metadata"].get("deletionTimestamp") \
                    or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            g = out.setdefault(node["metadata"]["name"], {})
            g[group] = g.get(group, 0.0) + frac.portion(p, node)
        return out

    def _fraction_check(self, pods):
        for p in pods:
            if not frac.requests_fraction(p):
                continue
            if not self.sharing:
                # KAI's admission webhook refuses such a pod (gpusharing/gpu_sharing.go Validate)
                return ("Unschedulable", "attempting to create a pod %s/%s with gpu sharing request, while GPU "
                        "sharing is disabled" % (p["metadata"]["namespace"], p["metadata"]["name"]))
            why = frac.validation_error(p)
            if why:
                return ("Unschedulable", why)
        return None

    def _fit_message(self, pod, nodes, used, want):
        counts = {}
        for node in nodes:
            why = (self._fits(pod, node, used, self.ctx, getattr(self, "placements", None))
                   or self._dra_block(pod, node)
                   or "node(s) could not fit all pods of the gang")
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
    def _placed(self, pod, node):
        if getattr(self, "placements", None) is not None:
            self.placements.add(pod, node)

    def _bind(self, pod, node, used, group=None):
        """The binder: for a fraction first the GPU group (a reservation pod for a new one), the pod's
        group label and its GPU-sharing ConfigMaps, then the same Binding as the default scheduler's."""
        state = self._dra_state(pod)
        if state is not None and not state.prebind(self.ctx, node):
            self.ctx.runtime.after(0.05)
            return False
        if group is None:
            bind(self.ctx, pod, node, used)
            self._placed(pod, node)
            return True
        gid, new = group
        store, ns, name = self.ctx.store, pod["metadata"]["namespace"], pod["metadata"]["name"]
        uuid = self._reserve(node, gid) if new else self._reserved_uuid(gid)
        if uuid is None:
            return False
        if new:
            acc = used.setdefault(node, {})
            acc[GPU] = acc.get(GPU, 0) + 1
        prefix, generated = frac.configmap_prefix(pod)
        patch = {"metadata": {"labels": {frac.GROUP_LABEL: gid}}}
        if generated:
            patch["metadata"]["annotations"] = {frac.CONFIGMAP_ANNOTATION: prefix}
        share = frac.portion(pod, self.node_index.get(node))
        try:
            store.merge_patch("pods", ns, name, patch)
            for cm in frac.configmaps(pod, prefix, uuid, share):
                try:
                    store.create("configmaps", cm)
                except ApiError as err:
                    if err.code != 409:
                        raise
        except ApiError as err:
            if err.code == 404:
                return False
            raise
        bind(self.ctx, pod, node, used)
        self._placed(pod, node)
        g = self.groups.setdefault(node, {})
        g[gid] = g.get(gid, 0.0) + share
        return True

    def _reserve(self, node, gid):
        """The reservation pod of a new GPU group; its process writes the UUID of the GPU it got
        (the twin: the lowest index no other reservation pod of the node holds)."""
        held = {(p["metadata"].get("annotations") or {}).get(frac.GPU_INDEX_ANNOTATION)
                for p in self.ctx.list("pods", self.reservation[0]) if p["spec"].get("nodeName") == node}
        index = next(i for i in range(1024) if "GPU-%d" % i not in held)
        body = frac.reservation_pod(node, gid, self.reservation)
        try:
            created = self.ctx.store.create("pods", body)
            self.ctx.store.merge_patch("pods", self.reservation[0], created["metadata"]["name"], {
                "metadata": {"annotations": {frac.GPU_INDEX_ANNOTATION: "GPU-%d" % index}}})
        except ApiError as err:
            self.ctx.runtime.after(0.5)
            if err.code in (403, 404, 409, 422):
                return None          # e.g. the chart's kai-resource-reservation namespace is missing
            raise
        return "GPU-%d" % index

    def _reserved_uuid(self, gid):
        for p in self.ctx.list("pods", self.reservation[0]):
            if (p["metadata"].get("labels") or {}).get(frac.GROUP_LABEL) == gid:
                return (p["metadata"].get("annotations") or {}).get(frac.GPU_INDEX_ANNOTATION)
        return None

    def _sync_reservations(self, pods):
        """syncForPods: a reservation pod whose group has no Running or Pending pod left goes."""
        namespace, app = self.reservation[0], self.reservation[2]
        live = set()
        for p in pods:
            group = (p["metadata"].get("labels") or {}).get(frac.GROUP_LABEL)
            if group and not frac.is_reservation(p, app) and (p.get("status") or {}).get("phase") in (
                    "Running", "Pending", None):
                live.add(group)
        for p in pods:
            group = (p["metadata"].get("labels") or {}).get(frac.GROUP_LABEL)
            if frac.is_reservation(p, app) and p["metadata"].get("namespace") == namespace \
                    and group not in live and not p["metadata"].get("deletionTimestamp"):
                try:
                    self.ctx.store.delete("pods", namespace, p["metadata"]["name"])
                except ApiError as err:
                    if err.code != 404:
                        raise

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

