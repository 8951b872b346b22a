"""default-scheduler twin: filter nodes like the real plugins, bind, or explain why not.

Filters run in the real plugin order and a node reports its first failure
(NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit), so the
message aggregates the way the real one does:
  0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present},
  2 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: ...
Pods for another scheduler (e.g. kai-scheduler) stay Pending untouched. Before the node filters,
VolumeBinding's PreFilter (volumes.claims_problem): a missing or unbound (Immediate) claim makes the
pod unschedulable on every node, with no preemption.
"""


from ..errors import ApiError
from . import dra
from .matching import PodPlacements, matches_node_selector, untolerated_taint, tolerates
from .util import clone, containers_requests, parse_quantity, pod_active, set_condition, write_status
from .volumes import VOLUME_NODE_CONFLICT, claims_problem, prefilter_message, select_node, volume_node_conflict

DEFAULT_SCHEDULERS = ("", None, "default-scheduler")
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"


def _pinned_nodes(spec):
    """Node names a required affinity term pins the pod to (None: not pinned)."""
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
             .get("nodeSelectorTerms") or [])
    names = set()
    for term in terms:
        fields = [f for f in term.get("matchFields") or []
                  if f.get("key") == "metadata.name" and f.get("operator") == "In"]
        if not fields:
            return None          # a term without a name pin can match any node
        names.update(fields[0].get("values") or [])
    return names if terms else None


def _aggregate(counts, total):
    parts = sorted("%d %s" % (n, reason) for reason, n in counts.items())
    return "0/%d nodes are available: %s." % (total, ", ".join(parts))


class Scheduler:
    # runtime.py: changes of these run a pass (a claim that binds makes its pods schedulable)
    watches = {"pods", "nodes", "persistentvolumeclaims", "storageclasses.storage.k8s.io",
               dra.CLAIMS, dra.SLICES, dra.CLASSES}

    def __init__(self, ctx):
        self.ctx = ctx
        self._dra = None          # the DynamicResources state of the pod being scheduled
        self._dra_pass = None

    def reconcile(self):
        store = self.ctx.store
        pods = self.ctx.list("pods")
        pending = [p for p in pods if not p["spec"].get("nodeName")
                   and p["spec"].get("schedulerName") in DEFAULT_SCHEDULERS
                   and (p.get("status") or {}).get("phase") in (None, "Pending")
                   and not p["metadata"].get("deletionTimestamp")]
        if not pending:
            return
        nodes = self.ctx.list("nodes")
        used = {n["metadata"]["name"]: {} for n in nodes}
        for p in pods:
            node = p["spec"].get("nodeName")
            if node in used and pod_active(p):
                acc = used[node]
                for k, v in containers_requests(p["spec"]).items():
                    acc[k] = acc.get(k, 0) + v
                acc["pods"] = acc.get("pods", 0) + 1
        pending.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
        self._placements = PodPlacements(pods, nodes)
        self._dra_pass = dra.Pass(self.ctx) if any(dra.has_claims(p) for p in pending) else None
        for pod in pending:
            self._dra = None
            self._schedule(pod, nodes, used)
        self._dra = self._dra_pass = None

    def _fit(self, pod, node, used):
        """None if the pod fits, else (reasons list, resources_only flag)."""
        spec = pod["spec"]
        if (node.get("spec") or {}).get("unschedulable") and not tolerates(
                spec.get("tolerations"),
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return ["node(s) were unschedulable"], False
        taint = untolerated_taint(spec, node)
        if taint is not None:
            return ["node(s) had untolerated taint {%s: %s}" % (taint.get("key"),
                                                               taint.get("value", ""))], False
        if not matches_node_selector(spec, node):
            return [AFFINITY_MISMATCH], False
        placements = getattr(self, "_placements", None)
        conflict = placements.conflict(pod, node) if placements is not None else None
        if conflict is not None:
            return [conflict], False
        alloc = (node.get("status") or {}).get("allocatable") or {}
        have = used.get(node["metadata"]["name"], {})
        reasons = []
        if have.get("pods", 0) + 1 > parse_quantity(alloc.get("pods", "110")):
            reasons.append("Too many pods")
        reasons.extend("Insufficient %s" % res for res in sorted(insufficient(spec, node, used)))
        if reasons:
            return reasons, True
        if volume_node_conflict(self.ctx, pod, node):
            return [VOLUME_NODE_CONFLICT], False
        if self._dra is not None:
            failed = self._dra.filter(node)
            if failed is not None:
                if failed[1]:
                    raise _FilterError(failed[0])
                return [failed[0]], False     # UnschedulableAndUnresolvable: preemption cannot help
        return None

    def _schedule(self, pod, nodes, used):
        problem = claims_problem(self.ctx, pod)
        if problem is not None:
            self._unschedulable(pod, prefilter_message(len(nodes), problem))
            return
        if dra.has_claims(pod):
            self._dra = dra.PodState(self.ctx, pod, self._dra_pass or dra.Pass(self.ctx))
            if self._dra.problem is not None:
                self._unschedulable(pod, prefilter_message(len(nodes), self._dra.problem))
                return
        try:
            self._schedule_nodes(pod, nodes, used)
        except _FilterError as err:
            self._unschedulable(pod, str(err), reason="SchedulerError")

    def _schedule_nodes(self, pod, nodes, used):
        pinned = _pinned_nodes(pod["spec"])
        if pinned is not None:
            # NodeAffinity PreFilter: a matchFields metadata.name term (DaemonSet pods)
            # narrows the nodes to look at; when none fits, the full walk below
            # explains why, node by node
            chosen, _f, _p = self._walk(pod, [n for n in nodes
                                              if n["metadata"]["name"] in pinned], used)
            if chosen is not None:
                self._bind(pod, chosen, used)
                return
        chosen, failures, preempt = self._walk(pod, nodes, used)
        if chosen is not None:
            self._bind(pod, chosen, used)
            return
        total = len(nodes)
        if total:
            message = "%s preemption: %s" % (_aggregate(failures, total), _aggregate(preempt, total))
        else:
            message = "no nodes available to schedule pods"
        self._unschedulable(pod, message)

    def _unschedulable(self, pod, message, reason="Unschedulable"):
        status = clone(pod.get("status") or {})
        status["phase"] = "Pending"
        status["conditions"] = set_condition(list(status.get("conditions") or []), "PodScheduled",
                                             "False", reason, message)
        if write_status(self.ctx.store, "pods", pod, status) is not pod:
            self.ctx.event_once(pod, "FailedScheduling", message, "Warning")

    def _walk(self, pod, nodes, used):
        failures = {}
        preempt = {}
        # spread: prefer the node with the fewest pods among those that fit
        for node in sorted(nodes, key=lambda n: used.get(n["metadata"]["name"], {}).get("pods", 0)):
            result = self._fit(pod, node, used)
            if result is None:
                return node, failures, preempt
            reasons, resources = result
            for r in reasons:
                failures[r] = failures.get(r, 0) + 1
            key = NO_VICTIMS if resources else NOT_HELPFUL
            preempt[key] = preempt.get(key, 0) + 1
        return None, failures, preempt

    def _bind(self, pod, node, used):
        if self._dra is not None and not self._dra.prebind(self.ctx, node["metadata"]["name"]):
            self.ctx.runtime.after(0.05)      # a claim changed meanwhile: the next pass retries
            return
        bind(self.ctx, pod, node["metadata"]["name"], used)
        if getattr(self, "_placements", None) is not None:
            self._placements.add(pod, node["metadata"]["name"])


class _FilterError(Exception):
    """A Filter plugin's error (not a node's unfitness): the scheduling attempt fails."""


def insufficient(spec, node, used):
    """The pod's requested resources (in request order) the node's allocatable lacks, given what the
    pods already bound there (`used`) take: NodeResourcesFit for both scheduler twins."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    have = used.get(node["metadata"]["name"], {})
    short = []
    for res, amount in containers_requests(spec).items():
        if amount <= 0:
            continue
        try:
            cap = parse_quantity(alloc.get(res, 0))
        except ValueError:
            cap = 0
        if have.get(res, 0) + amount > cap:
            short.append(res)
    return short


def bind(ctx, pod, name, used):
    """The Binding (spec.nodeName and PodScheduled=True in one write), the Scheduled event; `used` counts
    the pod's requests on the node. A pod deleted or bound meanwhile is left for the next pass (as the real
    binder's 404/409). WaitForFirstConsumer claims learn the node first (VolumeBinding PreBind)."""
    select_node(ctx, pod, name)
    try:
        ctx.store.bind(pod["metadata"]["namespace"], pod["metadata"]["name"], name)
    except ApiError as err:
        if err.code in (404, 409):
            ctx.runtime.after(0.05)
            return
        raise
    acc = used.setdefault(name, {})
    for k, v in containers_requests(pod["spec"]).items():
        acc[k] = acc.get(k, 0) + v
    acc["pods"] = acc.get("pods", 0) + 1
    ctx.event_once(pod, "Scheduled", "Successfully assigned %s/%s to %s" % (
        pod["metadata"]["namespace"], pod["metadata"]["name"], name))
