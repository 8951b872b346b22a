# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The queues-fair hand-over check: two teams under scarcity get their agreed shares; a gang
starts whole or not at all. Runs on an idle GPU pool (a hand-over), with long-running test pods.

What is expected comes from the site, per backend:

- the pool: the GPU nodes the teams' workloads can use - KAI: every node offering GPUs whose
  taints the test pods tolerate (a KAI queue names no nodes); Kueue: the nodes carrying the
  node labels of the ResourceFlavor both teams' ClusterQueues list (the probe pins that flavor);
- the admission model - KAI places pods (a Job's pods one by one, a PodGroup's minMember as a
  gang); Kueue admits a Workload (one per Job) whole or not at all, so the share test submits
  one-GPU Jobs and the gang is one Job of parallelism N;
- borrowing - KAI: the split is computed from the live Queues the way KAI's proportion plugin
  divides a resource between sibling queues that both want everything (quota first, the rest by
  overQuotaWeight in whole GPUs, capped by limit); Kueue: nominal quota, borrowingLimit and
  lendingLimit of every ClusterQueue of the cohort, minus what the cohort uses now. The gang is
  sized to all a team can take (borrowing included), and the one-GPU blocker goes where it takes
  exactly one GPU from that: the team's own namespace, or its cohort partner's when the team's
  ResourceQuota leaves no room beside the gang.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.runner import FAIL, PASS, SKIP, Result
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.quantity import parse_quantity

UNLIMITED = upstream.KAI_UNLIMITED
KAI_PODGROUP_API = "scheduling.run.ai/v2alpha2"
KAI_PODGROUP_ANNOTATION = "pod-group-name"
KAI_SKIP_PODGROUPER = "kai.scheduler/skip-podgrouper"
KUEUE_WORKLOAD = "Workload"
KUEUE_ADMITTED = "Admitted"
KUEUE_QUOTA_RESERVED = "QuotaReserved"
# Kueue's flavor assigner when a pod set asks for a resource no resource group of the ClusterQueue covers
# (resources.quotaCheckStrategy BlockUndeclared, the default): no waiting makes such a Workload fit
KUEUE_UNDECLARED = "unavailable in ClusterQueue"
INF = float("inf")
CHECK = "queues-fair"


def kai_split(queues, free):
    """{name: GPUs} for sibling queues [{name, quota, limit, weight, demand}] sharing `free` GPUs
    (demand: the GPUs the queue's pending pods ask for; default all of them)."""
    def cap(q):
        limit = free if q["limit"] == UNLIMITED else min(free, q["limit"])
        return min(limit, q.get("demand", free))

    share = {}
    left = free
    for q in queues:
        share[q["name"]] = min(q["quota"] if q["quota"] != UNLIMITED else free, cap(q))
        left -= share[q["name"]]
    while left > 0:
        open_ = [q for q in queues if share[q["name"]] < cap(q) and q["weight"] > 0]
        total_w = float(sum(q["weight"] for q in open_))
        if not open_ or total_w == 0:
            break
        exact = dict((q["name"], left * q["weight"] / total_w) for q in open_)
        given = dict((n, int(v)) for n, v in exact.items())
        rest = left - sum(given.values())
        for name in sorted(exact, key=lambda n: (-(exact[n] - given[n]), n))[:rest]:
            given[name] += 1
        moved = 0
        for q in open_:
            add = min(given[q["name"]], cap(q) - share[q["name"]])
            share[q["name"]] += add
            moved += add
        left -= moved
        if moved == 0:
            break
    return share


def _num(value):
    try:
        return parse_quantity(value)
    except Exception:  # a malformed status counts as nothing
        return 0.0


def _int(value):
    return int(value) if value != INF else value


def kueue_gpu_flavors(cq, resource=upstream.GPU_RESOURCE):
    """[flavor names] of a ClusterQueue that carry `resource`, in its order."""
    out = []
    for group in ((cq or {}).get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            if any(r.get("name") == resource for r in flavor.get("resources") or []):
                out.append(flavor["name"])
    return out


class KueueQuota(object):
    """What Kueue lets the ClusterQueues take of one flavor's GPUs.

    Kueue's arithmetic for a flat cohort: a queue's nominal quota minus its lendingLimit is its
    own (guaranteed); the rest of every member's nominal is the cohort's pool, which a member
    borrows from up to its borrowingLimit (null: unlimited, lendingLimit null: all lendable).
    Without a cohort a queue has its nominal quota and nothing else.
    """

    def __init__(self, cqs, flavor, resource=upstream.GPU_RESOURCE):
        self.cqs = cqs            # {name: ClusterQueue}
        self.flavor = flavor
        self.resource = resource

    def limits(self, name):
        """(nominal, borrowingLimit or INF, lendingLimit or None) or None when the flavor is not listed."""
        for group in ((self.cqs.get(name) or {}).get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                if flavor.get("name") != self.flavor:
                    continue
                for row in flavor.get("resources") or []:
                    if row.get("name") == self.resource:
                        borrow = row.get("borrowingLimit")
                        lend = row.get("lendingLimit")
                        return (_num(row.get("nominalQuota")), INF if borrow is None else _num(borrow),
                                None if lend is None else _num(lend))
        return None

    def cohort(self, name):
        return ((self.cqs.get(name) or {}).get("spec") or {}).get("cohortName")

    def members(self, name):
        cohort = self.cohort(name)
        if not cohort:
            return [name]
        return sorted(n for n in self.cqs if self.cohort(n) == cohort and self.limits(n) is not None)

    def used_now(self, name):
        """What the queue uses of the flavor now (status.flavorsUsage, as Kueue reports it)."""
        status = (self.cqs.get(name) or {}).get("status") or {}
        for flavor in status.get("flavorsUsage") or status.get("flavorsReservation") or []:
            if flavor.get("name") == self.flavor:
                for row in flavor.get("resources") or []:
                    if row.get("name") == self.resource:
                        return _num(row.get("total"))
        return 0.0

    def guaranteed(self, name):
        nominal, _borrow, lend = self.limits(name) or (0.0, 0.0, None)
        if not self.cohort(name):
            return nominal
        return max(0.0, nominal - lend) if lend is not None else 0.0

    def pool_left(self, name, used):
        """The cohort's lendable GPUs nobody borrows yet."""
        lendable = sum((self.limits(m) or (0.0,))[0] - self.guaranteed(m) for m in self.members(name))
        borrowed = sum(max(0.0, used.get(m, 0.0) - self.guaranteed(m)) for m in self.members(name))
        return max(0.0, lendable - borrowed)

    def local(self, name, used):
        return max(0.0, self.guaranteed(name) - used.get(name, 0.0))

    def room(self, name, used):
        """GPUs the queue can still be admitted, borrowing included."""
        limits = self.limits(name)
        if limits is None:
            return 0.0
        nominal, borrow, _lend = limits
        mine = used.get(name, 0.0)
        if not self.cohort(name):
            return max(0.0, nominal - mine)
        return max(0.0, min(nominal + borrow - mine, self.local(name, used) + self.pool_left(name, used)))

    def usage(self):
        return dict((n, self.used_now(n)) for n in self.cqs)

    def reclaims(self, name):
        policy = ((self.cqs.get(name) or {}).get("spec") or {}).get("preemption") or {}
        return policy.get("reclaimWithinCohort", "Never") != "Never"

    def shares(self, a, b, demand):
        """({team: (least, most)}, total) of GPUs Kueue admits when both teams ask for `demand` each."""
        used = self.usage()
        caps = dict((t, min(demand[t], self.room(t, used))) for t in (a, b))
        if self.cohort(a) and self.cohort(a) == self.cohort(b):
            pool = self.pool_left(a, used)
            total = min(caps[a] + caps[b], sum(min(caps[t], self.local(t, used)) for t in (a, b)) + pool)
        else:
            total = caps[a] + caps[b]
        bounds = {}
        for t in (a, b):
            nominal = (self.limits(t) or (0.0,))[0]
            # the team's nominal quota comes back to it by reclaim; without reclaim only what it does not lend
            floor = max(0.0, nominal - used.get(t, 0.0)) if (self.reclaims(t) or not self.cohort(t)) \
                else self.local(t, used)
            bounds[t] = (min(caps[t], floor, total), caps[t])
        return bounds, total


# A team namespace's ResourceQuota on cpu/memory refuses a pod that states none (and a team need not
# have a LimitRange to default them): the probe pods state a small amount of both.
PROBE_RESOURCES = {"cpu": "10m", "memory": "32Mi"}


def _probe_resources(pod):
    container = pod["spec"]["containers"][0]
    limits = dict(container["resources"].get("limits") or {})
    limits.update(PROBE_RESOURCES)
    container["resources"] = {"limits": limits, "requests": dict(limits)}
    return pod


class QueueProbe(object):
    def __init__(self, ctx, test_pod):
        self.ctx = ctx
        self.test_pod = test_pod     # acceptance_checks.test_pod: a pod Pod Security restricted admits
        self.backend = ctx.params["queue_backend"]
        self.pool_nodes = None       # names of the nodes of the teams' pool
        self.node_selector = {}      # Kueue: the flavor the probe pins
        self.start_free = 0
        self.kai_queues = {}         # KAI: the team Queues (their shard label)
        self.shard_key = None        # KAI: global.nodePoolLabelKey of its Config, when sharded per pool

    # -- cluster facts --------------------------------------------------------------------
    def _tolerated(self, node):
        tolerations = self.ctx.params.get("tolerations") or []
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") not in ("NoSchedule", "NoExecute"):
                continue
            if not any(t.get("key") in (None, "", taint.get("key")) and (
                    t.get("operator") == "Exists" or str(t.get("value", "")) == str(taint.get("value", "")))
                    and t.get("effect") in (None, "", taint.get("effect")) for t in tolerations):
                return False
        return True

    def find_pool(self, node_labels=None):
        """The GPU nodes the probe's pods can use: the flavor's node labels (Kueue) or tolerated taints (KAI)."""
        out = []
        for node in self.ctx.kube.list("v1", "Node")[0]:
            labels = (node.get("metadata") or {}).get("labels") or {}
            if node_labels is not None:
                if any(labels.get(k) != str(v) for k, v in node_labels.items()):
                    continue
            elif not self._tolerated(node):
                continue
            if int(_num(((node.get("status") or {}).get("allocatable") or {}).get(upstream.GPU_RESOURCE, 0))):
                out.append(node["metadata"]["name"])
        self.pool_nodes = sorted(out)
        return self.pool_nodes

    def free_gpus(self):
        nodes = self.ctx.kube.list("v1", "Node")[0]
        pods = self.ctx.kube.list("v1", "Pod")[0]
        pool = set(self.pool_nodes or [])
        total = sum(int(_num(((n.get("status") or {}).get("allocatable") or {}).get(upstream.GPU_RESOURCE, 0)))
                    for n in nodes if n["metadata"]["name"] in pool)
        used = 0
        for pod in pods:
            if (pod.get("status") or {}).get("phase") in upstream.POD_DONE_PHASES or \
                    pod["spec"].get("nodeName") not in pool:
                continue
            for c in pod["spec"].get("containers") or []:
                res = c.get("resources") or {}
                amount = (res.get("requests") or {}).get(upstream.GPU_RESOURCE, (res.get("limits") or {}).get(
                    upstream.GPU_RESOURCE, 0))
                used += int(_num(amount))
        return total - used

    def quota_room(self, team):
        """GPUs the team's ResourceQuota still admits (None: no GPU quota)."""
        room = None
        key = upstream.QUOTA_ENFORCED_PREFIX + upstream.GPU_RESOURCE
        for quota in self.ctx.kube.list("v1", "ResourceQuota", namespace=team)[0]:
            hard = ((quota.get("spec") or {}).get("hard") or {}).get(key)
            if hard is not None:
                used = ((quota.get("status") or {}).get("used") or {}).get(key, 0)
                left = int(_num(hard) - _num(used))
                room = left if room is None else min(room, left)
        return room

    def team_queues(self, teams):
        if self.backend == "kai":
            listed = self.ctx.kube.list(upstream.KAI_QUEUE_API_VERSION, "Queue")[0]
            items = dict((q["metadata"]["name"], q) for q in listed)
            found = [t for t in teams if t in items]
            self.kai_queues = items
            config = self.ctx.kube.get(upstream.KAI_SHARD_API_VERSION, "Config", upstream.KAI_CONFIG_NAME) or {}
            self.shard_key = ((config.get("spec") or {}).get("global") or {}).get("nodePoolLabelKey") or None
            return found, items
        found, items = [], {}
        for t in teams:
            lq = self.ctx.kube.get(upstream.KUEUE_API_VERSION, "LocalQueue", t, t)
            cq_name = ((lq or {}).get("spec") or {}).get("clusterQueue")
            cq = self.ctx.kube.get(upstream.KUEUE_API_VERSION, "ClusterQueue", cq_name) if cq_name else None
            if cq is not None:
                found.append(t)
                items[t] = cq
        return found, items

    # -- workloads ------------------------------------------------------------------------
    def shard_labels(self, team):
        """With one KAI scheduling shard per pool, a workload reaches its queue only when it carries
        the queue's pool label (the pod-grouper copies it to the PodGroup, the shard picks by it);
        without it the default shard answers QueueDoesNotExist."""
        if not self.shard_key:
            return {}
        value = ((self.kai_queues.get(team) or {}).get("metadata", {}).get("labels") or {}).get(self.shard_key)
        return {self.shard_key: value} if value else {}

    def job(self, team, name, parallelism):
        pod = _probe_resources(self.test_pod(self.ctx, name, {upstream.GPU_RESOURCE: 1},
                                             image=self.ctx.params["probe_image"]))
        spec = pod["spec"]
        spec["containers"][0]["args"] = ["pause"]
        labels = {}
        if self.backend == "kai":
            spec["schedulerName"] = upstream.KAI_SCHEDULER_NAME
            labels[upstream.KAI_QUEUE_LABEL] = team
            labels.update(self.shard_labels(team))
        else:
            labels[upstream.KUEUE_QUEUE_LABEL] = team
            if self.node_selector:
                # Kueue assigns only a flavor whose node labels the pod's nodeSelector allows
                spec["nodeSelector"] = dict(self.node_selector)
        labels.update(pod["metadata"]["labels"])
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": name, "namespace": team, "labels": labels},
               "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
                        "template": {"metadata": {"labels": dict(pod["metadata"]["labels"])}, "spec": spec}}}
        self.ctx.kube.create(job)
        self.ctx.track(job)
        return job

    def kai_gang(self, team, name, size):
        """A PodGroup with minMember=size and its pods (KAI's gang; a plain Job is not one)."""
        group = {"apiVersion": KAI_PODGROUP_API, "kind": "PodGroup",
                 "metadata": {"name": name, "namespace": team, "labels": self.shard_labels(team)},
                 "spec": {"minMember": size, "queue": team}}
        self.ctx.kube.create(group)
        self.ctx.track(group)
        for i in range(size):
            pod = _probe_resources(self.test_pod(self.ctx, "%s-%d" % (name, i), {upstream.GPU_RESOURCE: 1},
                                                 image=self.ctx.params["probe_image"]))
            pod["metadata"]["namespace"] = team
            pod["metadata"]["labels"][upstream.KAI_QUEUE_LABEL] = team
            pod["metadata"]["labels"].update(self.shard_labels(team))
            pod["metadata"]["annotations"] = {KAI_PODGROUP_ANNOTATION: name, KAI_SKIP_PODGROUPER: "true"}
            pod["spec"]["schedulerName"] = upstream.KAI_SCHEDULER_NAME
            pod["spec"]["containers"][0]["args"] = ["pause"]
            self.ctx.kube.create(pod)
            self.ctx.track(pod)

    def running(self, team, prefix):
        pods = self.ctx.kube.list("v1", "Pod", namespace=team)[0]
        return sum(1 for p in pods if p["metadata"]["name"].startswith(prefix)
                   and (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))

    def workloads(self, team, prefix):
        """Kueue: the Workloads of the Jobs named prefix* in the team's namespace (one Workload per Job)."""
        for wl in self.ctx.kube.list(upstream.KUEUE_API_VERSION, KUEUE_WORKLOAD, namespace=team)[0]:
            if any(r.get("name", "").startswith(prefix) for r in wl["metadata"].get("ownerReferences") or []):
                yield wl

    def admitted(self, team, prefix):
        """Kueue: GPUs of the admitted Workloads of the Jobs named prefix*."""
        total = 0
        for wl in self.workloads(team, prefix):
            if any(c.get("type") == KUEUE_ADMITTED and c.get("status") == "True"
                   for c in (wl.get("status") or {}).get("conditions") or []):
                total += sum(int(ps.get("count", 1)) for ps in wl["spec"].get("podSets") or [])
        return total

    def inadmissible(self, teams, prefix):
        """Kueue: the distinct reasons why Workloads of the Jobs named prefix* can never fit (undeclared resources)."""
        found = set()
        for team in teams:
            for wl in self.workloads(team, prefix):
                for c in (wl.get("status") or {}).get("conditions") or []:
                    if c.get("type") == KUEUE_QUOTA_RESERVED and c.get("status") == "False" and \
                            KUEUE_UNDECLARED in (c.get("message") or ""):
                        found.add(c["message"])
        return sorted(found)

    def settle(self, counts, until, timeout):
        """Poll the counts until `until(values)` holds or the time is up; the last values."""
        deadline = self.ctx.clock() + timeout
        values = counts()
        while not until(values) and self.ctx.clock() < deadline:
            self.ctx.sleep(1.0)
            values = counts()
        return values

    def cleanup(self):
        self.ctx.cleanup()
        # the test pods of deleted Jobs go with them; wait until their GPUs are free again
        self.settle(self.free_gpus, lambda free: free >= self.start_free, self.ctx.params["pod_timeout"])

    # -- the check ------------------------------------------------------------------------
    def run(self, teams, queue_teams=None):
        queue_teams = [t for t in teams if queue_teams is None or t in queue_teams]
        if len(queue_teams) < 2:
            return Result(CHECK, SKIP, "fewer than two teams have a queue: block in tenants_list (%s): fair "
                          "sharing needs two teams competing" % (", ".join(queue_teams) or "none"))
        found, queues = self.team_queues(queue_teams)
        missing = [t for t in queue_teams if t not in found]
        if len(found) < 2:
            return Result(CHECK, FAIL, "backend %s: the cluster has no queue for %s although tenants_list gives "
                          "them a queue: block: run playbooks/queues.yml" % (self.backend, ", ".join(missing)))
        # a team whose ResourceQuota admits no GPU (a MIG-only team: requests.nvidia.com/gpu 0) never competes
        closed = [t for t in found if self.quota_room(t) == 0]
        found = [t for t in found if t not in closed]
        if len(found) < 2:
            return Result(CHECK, SKIP, "fewer than two teams with a queue may use %s: the ResourceQuota of %s admits "
                          "none (tenants_list[].quota)" % (upstream.GPU_RESOURCE, ", ".join(closed)))
        if self.backend == "kai":
            return self.run_kai(found, queues)
        return self.run_kueue(found, queues)

    def _idle(self, evidence):
        free = self.start_free = self.free_gpus()
        evidence.append("pool: %s, %d GPU(s) free" % (", ".join(self.pool_nodes) or "no node", free))
        if free < 2:
            return Result(CHECK, SKIP, "only %d free GPU(s) in the teams' pool (%s): the check needs an idle pool "
                          "of at least 2 GPUs" % (free, ", ".join(self.pool_nodes) or "no GPU node"), evidence)
        return None

    def run_kai(self, found, queues):
        # siblings first: the split below is how KAI divides between queues of one parent
        pairs = [(queues[x]["spec"].get("parentQueue") != queues[y]["spec"].get("parentQueue"), i, x, y)
                 for i, x in enumerate(found) for y in found[i + 1:]]
        a, b = min(pairs)[2:]
        evidence = []
        self.find_pool()
        skipped = self._idle(evidence)
        if skipped:
            return skipped
        free = self.start_free
        evidence.append("teams %s and %s both ask for all %d GPUs" % (a, b, free))
        rows = []
        for name in (a, b):
            gpu = ((queues[name].get("spec") or {}).get("resources") or {}).get("gpu") or {}
            room = self.quota_room(name)   # the namespace quota admits no more pods than it allows
            rows.append({"name": name, "quota": gpu.get("quota", 0), "limit": gpu.get("limit", 0),
                         "weight": gpu.get("overQuotaWeight", 0), "demand": free if room is None else
                         min(free, room)})
        expected = kai_split(rows, free)
        evidence.append("expected from the Queues (quota, limit, overQuotaWeight, pods the ResourceQuota "
                        "admits): %s" % ", ".join("%s=%d (%s, %s, %s, %s)" % (
                            r["name"], expected[r["name"]], r["quota"], r["limit"], r["weight"], r["demand"])
                            for r in rows))
        gangs = [(t, self.kai_gang_size(t, queues, free)) for t in found]   # before any test pod counts
        for r in rows:
            self.job(r["name"], "acceptance-share", r["demand"])
        want = (expected[a], expected[b])
        got = self.settle(lambda: (self.running(a, "acceptance-share"), self.running(b, "acceptance-share")),
                          lambda v: v == want, self.ctx.params["pod_timeout"])
        evidence.append("running: %s=%d, %s=%d" % (a, got[0], b, got[1]))
        self.cleanup()
        if got != want:
            return Result(CHECK, FAIL, "the shares under scarcity are not the agreed ones", evidence)
        shares = "%s and %s got %d and %d GPUs as agreed" % (a, b, got[0], got[1])
        team, size = next(((t, s) for t, s in gangs if s), (None, None))
        if team is None:
            evidence.append("gang: no team's Queue holds a gang below its ResourceQuota (%s)" % "; ".join(
                "%s: gpu limit %s, ResourceQuota room %s" % (
                    t, ((queues[t].get("spec") or {}).get("resources") or {}).get("gpu", {}).get("limit"),
                    self.quota_room(t)) for t in found))
            return Result(CHECK, SKIP, "%s; the gang start is not tested: no team's KAI queue has a gpu limit "
                          "below its namespace quota (set tenants_list[].queue.gpu.limit to at most the "
                          "ResourceQuota requests.nvidia.com/gpu minus 1 for one team)" % shares, evidence)
        gang_ok, gang_evidence = self.gang(team, size, team)
        evidence.extend(gang_evidence)
        self.cleanup()
        if not gang_ok:
            return Result(CHECK, FAIL, "a gang did not start whole-or-nothing", evidence)
        return Result(CHECK, PASS, "%s; a gang of %d in %s started only whole" % (shares, size, team), evidence)

    def kai_gang_size(self, team, queues, free):
        """A gang the KAI queue's limit holds whole while a blocker runs, and the namespace quota admits with
        the blocker: the scheduler, not the ResourceQuota, must decide."""
        gpu = ((queues[team].get("spec") or {}).get("resources") or {}).get("gpu") or {}
        cap = free if gpu.get("limit", UNLIMITED) == UNLIMITED else min(free, int(gpu["limit"]))
        room = self.quota_room(team)
        if cap < 2 or (room is not None and room < cap + 1):
            return None
        return cap

    # -- Kueue ------------------------------------------------------------------------------
    def kueue_pair(self, found, queues):
        """The first two teams whose ClusterQueues list a common GPU flavor, a pair in one cohort first."""
        pairs = []
        for i, a in enumerate(found):
            for b in found[i + 1:]:
                common = [f for f in kueue_gpu_flavors(queues[a]) if f in kueue_gpu_flavors(queues[b])]
                if common:
                    same = bool((queues[a]["spec"].get("cohortName")) and
                                queues[a]["spec"].get("cohortName") == queues[b]["spec"].get("cohortName"))
                    pairs.append((not same, i, a, b, common[0]))
        if not pairs:
            return None
        _other_cohort, _index, a, b, flavor = min(pairs)
        return a, b, flavor

    def run_kueue(self, found, queues):
        pair = self.kueue_pair(found, queues)
        if pair is None:
            return Result(CHECK, SKIP, "no two teams' ClusterQueues list a common GPU flavor (%s): the teams never "
                          "compete for the same GPUs" % ", ".join(
                              "%s: %s" % (t, ", ".join(kueue_gpu_flavors(queues[t])) or "none") for t in found))
        a, b, flavor = pair
        rf = self.ctx.kube.get(upstream.KUEUE_API_VERSION, "ResourceFlavor", flavor)
        if rf is None:
            return Result(CHECK, FAIL, "ClusterQueues %s and %s list ResourceFlavor %s, which does not exist: run "
                          "playbooks/queues.yml" % (a, b, flavor))
        self.node_selector = dict((rf.get("spec") or {}).get("nodeLabels") or {})
        evidence = ["teams %s and %s (ClusterQueues %s, %s; cohort %s), flavor %s (node labels %s)" % (
            a, b, queues[a]["metadata"]["name"], queues[b]["metadata"]["name"],
            queues[a]["spec"].get("cohortName") or "none", flavor,
            ", ".join("%s=%s" % kv for kv in sorted(self.node_selector.items())) or "none")]
        self.find_pool(self.node_selector)
        skipped = self._idle(evidence)
        if skipped:
            return skipped
        free = self.start_free
        all_cqs = dict((c["metadata"]["name"], c) for c in
                       self.ctx.kube.list(upstream.KUEUE_API_VERSION, "ClusterQueue")[0])
        model = KueueQuota(all_cqs, flavor)
        name_of = dict((t, queues[t]["metadata"]["name"]) for t in (a, b))
        rooms = dict((t, self.quota_room(t)) for t in (a, b))
        demand = dict((name_of[t], free if rooms[t] is None else min(free, rooms[t])) for t in (a, b))
        bounds, total = model.shares(name_of[a], name_of[b], demand)
        evidence.append("cohort %s: %s" % (model.cohort(name_of[a]) or "none", "; ".join(
            "%s nominal %s, borrowingLimit %s, lendingLimit %s, in use %s" % (
                m, _fmt(model.limits(m)[0]), _fmt(model.limits(m)[1]), _fmt(model.limits(m)[2]),
                _fmt(model.used_now(m))) for m in sorted(set(model.members(name_of[a]) + model.members(name_of[b]))))))
        wanted = ", ".join("%s=%d" % (t, demand[name_of[t]]) for t in (a, b))
        ranges = ", ".join("%s %d..%d" % (t, bounds[name_of[t]][0], bounds[name_of[t]][1]) for t in (a, b))
        evidence.append("each team submits one-GPU Jobs up to what its ResourceQuota admits (%s); Kueue should "
                        "admit %d in all: %s" % (wanted, total, ranges))
        gang = self.kueue_gang_plan(model, found, queues, rooms, free)   # before any test pod counts
        # one Workload per Job: interleaved, so neither team is first to borrow what the other is owed
        for i in range(max(demand.values())):
            for t in (a, b):
                if i < demand[name_of[t]]:
                    self.job(t, "acceptance-share-%03d" % i, 1)
        want_running = min(total, free)

        def counts():
            return (self.admitted(a, "acceptance-share"), self.admitted(b, "acceptance-share"),
                    self.running(a, "acceptance-share") + self.running(b, "acceptance-share"))

        def fair(v):
            return (v[0] + v[1] == total and v[2] == want_running and
                    all(bounds[name_of[t]][0] <= n <= bounds[name_of[t]][1] for t, n in zip((a, b), v[:2])))
        blocked = []

        def done(v):
            if fair(v):
                return True
            if v[0] + v[1] == 0:       # nothing admitted yet: maybe nothing ever can be
                blocked[:] = self.inadmissible((a, b), "acceptance-share")
            return bool(blocked)
        got = self.settle(counts, done, self.ctx.params["pod_timeout"])
        evidence.append("admitted: %s=%d, %s=%d; running: %d (expected %d)"
                        % (a, got[0], b, got[1], got[2], want_running))
        self.cleanup()
        if blocked:
            evidence.extend("Workload QuotaReserved=False: %s" % m for m in blocked)
            return Result(CHECK, FAIL, "Kueue admits none of the probe's Workloads: their pods ask for resources the "
                          "ClusterQueues do not cover (every pod asks for cpu and memory) and Kueue blocks them: set "
                          "resources.quotaCheckStrategy: IgnoreUndeclared in Kueue's Configuration "
                          "(playbooks/queues.yml installs Kueue so; queues_values.managerConfig replaces it) or list "
                          "cpu and memory in the queues' flavors", evidence)
        if not fair(got):
            return Result(CHECK, FAIL, "the shares under scarcity are not what the ClusterQueues promise", evidence)
        shares = "Kueue admitted %s %d and %s %d GPUs as the ClusterQueues promise" % (a, got[0], b, got[1])
        if isinstance(gang, str):
            evidence.append("gang: %s" % gang)
            if gang.startswith("FAIL: "):
                return Result(CHECK, FAIL, "%s, but %s" % (shares, gang[6:]), evidence)
            return Result(CHECK, SKIP, "%s; the gang start is not tested: %s" % (shares, gang), evidence)
        team, size, blocker_team = gang
        gang_ok, gang_evidence = self.gang(team, size, blocker_team)
        evidence.extend(gang_evidence)
        self.cleanup()
        if not gang_ok:
            return Result(CHECK, FAIL, "a gang did not start whole-or-nothing", evidence)
        return Result(CHECK, PASS, "%s; a gang of %d in %s started only whole (blocker in %s)" % (
            shares, size, team, blocker_team), evidence)

    def kueue_gang_plan(self, model, found, queues, rooms, free):
        """(team, size, blocker team): a gang of all the team can be admitted now (borrowing included), and a
        one-GPU blocker that takes exactly one GPU of that; or the reason why no team allows the test.
        rooms: ResourceQuota room of the teams already read (the fairness pair); any other team with a queue
        on the flavor is read when it is considered."""
        rooms = dict(rooms)

        def room_of(team):
            if team not in rooms:
                rooms[team] = self.quota_room(team)
            return rooms[team]

        reasons = []
        for team in found:
            name = queues[team]["metadata"]["name"]
            if model.limits(name) is None:
                continue
            used = model.usage()
            size = model.room(name, used)
            if size == INF or size > free:
                return ("FAIL: ClusterQueue %s may be admitted %s GPUs of flavor %s while its nodes have %d free: "
                        "Kueue admits by quota, so a gang can be admitted and start partly; keep the cohort's "
                        "quotas of the flavor within its nodes' GPUs" % (name, _fmt(size), model.flavor, free))
            size = int(size)
            if size < 2:
                reasons.append("%s can take %d GPU" % (team, size))
                continue
            if room_of(team) is not None and room_of(team) < size:
                reasons.append("%s: ResourceQuota room %d is below the %d its ClusterQueue admits" % (
                    team, room_of(team), size))
                continue
            partners = [team] + [t for t in found if t != team and model.limits(queues[t]["metadata"]["name"])
                                 is not None]
            for other in partners:
                other_name = queues[other]["metadata"]["name"]
                room = room_of(other)
                need = size + 1 if other == team else 1
                if room is not None and room < need:
                    continue
                if model.room(other_name, used) < 1:
                    continue
                with_blocker = dict(used)
                with_blocker[other_name] = with_blocker.get(other_name, 0.0) + 1
                if model.room(name, with_blocker) == size - 1:
                    return team, size, other
            reasons.append("%s (gang of %d): no blocker takes one GPU from it - its own ResourceQuota room is %s "
                           "and no cohort partner's use lowers what it may borrow" % (
                               team, size, "unlimited" if room_of(team) is None else room_of(team)))
        return "; ".join(reasons) or "no team's ClusterQueue lists the flavor"

    def gang(self, team, size, blocker_team):
        """One GPU taken by a blocker, a gang of `size` waits whole; the blocker goes, the gang starts whole."""
        evidence = []
        self.job(blocker_team, "acceptance-blocker", 1)
        self.settle(lambda: self.running(blocker_team, "acceptance-blocker"), lambda n: n == 1,
                    self.ctx.params["pod_timeout"])
        if self.backend == "kai":
            self.kai_gang(team, "acceptance-gang", size)
        else:
            self.job(team, "acceptance-gang", size)   # one Workload: Kueue admits it whole or not at all
        # give the scheduler time to decide; a gang must not start partly
        partial = self.settle(lambda: self.running(team, "acceptance-gang"), lambda n: n > 0,
                              min(10, self.ctx.params["pod_timeout"]))
        evidence.append("gang of %d in %s with one GPU taken by a blocker in %s: %d running (expected 0)" % (
            size, team, blocker_team, partial))
        blockers = [c for c in self.ctx.created if c[2] == "acceptance-blocker"]
        for ref in blockers:
            self.ctx.kube.delete(ref[0], ref[1], ref[2], ref[3], propagation="Background")
            self.ctx.created.remove(ref)
        whole = self.settle(lambda: self.running(team, "acceptance-gang"), lambda n: n == size,
                            self.ctx.params["pod_timeout"])
        evidence.append("after the GPU was freed: %d of %d running" % (whole, size))
        return partial == 0 and whole == size, evidence


def _fmt(value):
    if value is None:
        return "none"
    if value == INF:
        return "unlimited"
    return str(int(value)) if float(value).is_integer() else "%g" % value
