# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The queues-fair hand-over check: two teams under scarcity get their agreed shares; a gang
starts whole or not at all. Runs on an idle GPU pool (a hand-over), with long-running test pods.

KAI: the expected split is computed from the live Queues the way KAI's proportion plugin divides
a resource between sibling queues that both want everything: each first gets min(quota, demand),
the rest goes by overQuotaWeight in whole GPUs (remainders to the largest fraction), capped by
limit. Kueue: each team gets at least its nominal quota and the cohort uses every free GPU.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import FAIL, PASS, SKIP, Result

UNLIMITED = upstream.KAI_UNLIMITED
KAI_PODGROUP_API = "scheduling.run.ai/v2alpha2"
KAI_PODGROUP_ANNOTATION = "pod-group-name"
KAI_SKIP_PODGROUPER = "kai.scheduler/skip-podgrouper"


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


class QueueProbe(object):
    def __init__(self, ctx, test_pod):
        self.ctx = ctx
        self.test_pod = test_pod     # acceptance_checks.test_pod: a pod Pod Security restricted admits
        self.backend = ctx.params["queue_backend"]

    # -- cluster facts --------------------------------------------------------------------
    def free_gpus(self):
        nodes = self.ctx.kube.list("v1", "Node")[0]
        pods = self.ctx.kube.list("v1", "Pod")[0]
        total = sum(int(((n.get("status") or {}).get("allocatable") or {}).get(upstream.GPU_RESOURCE, 0) or 0)
                    for n in nodes)
        used = 0
        for pod in pods:
            if (pod.get("status") or {}).get("phase") in upstream.POD_DONE_PHASES or not pod["spec"].get("nodeName"):
                continue
            for c in pod["spec"].get("containers") or []:
                used += int(((c.get("resources") or {}).get("limits") or {}).get(upstream.GPU_RESOURCE, 0) or 0)
        return total - used

    def quota_room(self, team):
        """GPUs the team's ResourceQuota still admits (None: no GPU quota)."""
        room = None
        key = upstream.QUOTA_ENFORCED_PREFIX + upstream.GPU_RESOURCE
        for quota in self.ctx.kube.list("v1", "ResourceQuota", namespace=team)[0]:
            hard = ((quota.get("spec") or {}).get("hard") or {}).get(key)
            if hard is not None:
                used = ((quota.get("status") or {}).get("used") or {}).get(key, 0)
                left = int(hard) - int(used)
                room = left if room is None else min(room, left)
        return room

    def team_queues(self, teams):
        if self.backend == "kai":
            listed = self.ctx.kube.list(upstream.KAI_QUEUE_API_VERSION, "Queue")[0]
            items = dict((q["metadata"]["name"], q) for q in listed)
            found = [t for t in teams if t in items]
            return found, items
        found = [t for t in teams if self.ctx.kube.get(upstream.KUEUE_API_VERSION, "LocalQueue", t, t)]
        items = dict((t, self.ctx.kube.get(upstream.KUEUE_API_VERSION, "ClusterQueue", t)) for t in found)
        return found, items

    # -- workloads ------------------------------------------------------------------------
    def job(self, team, name, parallelism):
        pod = self.test_pod(self.ctx, name, {upstream.GPU_RESOURCE: 1}, image=self.ctx.params["probe_image"])
        spec = pod["spec"]
        spec["containers"][0]["args"] = ["pause"]
        labels = {}
        if self.backend == "kai":
            spec["schedulerName"] = upstream.KAI_SCHEDULER_NAME
            labels[upstream.KAI_QUEUE_LABEL] = team
        else:
            labels[upstream.KUEUE_QUEUE_LABEL] = team
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
        group = {"apiVersion": KAI_PODGROUP_API, "kind": "PodGroup", "metadata": {"name": name, "namespace": team},
                 "spec": {"minMember": size, "queue": team}}
        self.ctx.kube.create(group)
        self.ctx.track(group)
        for i in range(size):
            pod = self.test_pod(self.ctx, "%s-%d" % (name, i), {upstream.GPU_RESOURCE: 1},
                                image=self.ctx.params["probe_image"])
            pod["metadata"]["namespace"] = team
            pod["metadata"]["labels"][upstream.KAI_QUEUE_LABEL] = team
            pod["metadata"]["annotations"] = {KAI_PODGROUP_ANNOTATION: name, KAI_SKIP_PODGROUPER: "true"}
            pod["spec"]["schedulerName"] = upstream.KAI_SCHEDULER_NAME
            pod["spec"]["containers"][0]["args"] = ["pause"]
            self.ctx.kube.create(pod)
            self.ctx.track(pod)

    def running(self, team, prefix):
        pods = self.ctx.kube.list("v1", "Pod", namespace=team)[0]
        return sum(1 for p in pods if p["metadata"]["name"].startswith(prefix)
                   and (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))

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
    def run(self, teams):
        found, queues = self.team_queues(teams)
        if len(found) < 2:
            return Result("queues-fair", FAIL, "backend %s: fewer than two teams have a queue (%s)" % (
                self.backend, ", ".join(found) or "none"))
        a, b = found[0], found[1]
        free = self.start_free = self.free_gpus()
        if free < 2:
            return Result("queues-fair", SKIP, "only %d free GPU(s): the check needs an idle pool" % free)
        evidence = ["%d free GPUs; teams %s and %s both ask for all of them" % (free, a, b)]
        if self.backend == "kai":
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
        else:
            expected = None
        size = self.gang_size(a, queues, free)   # before any test pod counts against the quota
        for team in (a, b):
            self.job(team, "acceptance-share", free)
        target = sum(expected.values()) if expected is not None else free
        got = self.settle(lambda: (self.running(a, "acceptance-share"), self.running(b, "acceptance-share")),
                          lambda v: sum(v) >= target, self.ctx.params["pod_timeout"])
        evidence.append("running: %s=%d, %s=%d" % (a, got[0], b, got[1]))
        if expected is not None:
            ok = got == (expected[a], expected[b])
        else:
            nominal = [self._nominal(queues[t]) for t in (a, b)]
            evidence.append("nominal quotas: %s=%s, %s=%s" % (a, nominal[0], b, nominal[1]))
            ok = sum(got) == free and all(g >= min(n, free) for g, n in zip(got, nominal)) \
                if sum(nominal) <= free else sum(got) == free
        self.cleanup()
        if not ok:
            return Result("queues-fair", FAIL, "the shares under scarcity are not the agreed ones", evidence)
        if size is None:
            return Result("queues-fair", FAIL, "the shares are right, but %s's queue has no limit below its "
                          "ResourceQuota, so no gang can be held by the queue: give it a gpu limit" % a, evidence)
        gang_ok, gang_evidence = self.gang(a, size)
        evidence.extend(gang_evidence)
        self.cleanup()
        if not gang_ok:
            return Result("queues-fair", FAIL, "a gang did not start whole-or-nothing", evidence)
        return Result("queues-fair", PASS, "%s and %s got %d and %d GPUs as agreed; a gang of %d started only whole"
                      % (a, b, got[0], got[1], size), evidence)

    def gang_size(self, team, queues, free):
        """A gang the queue (KAI limit, Kueue nominal quota) can hold whole while a blocker runs, and the
        namespace quota admits with the blocker: the scheduler, not the ResourceQuota, must decide."""
        if self.backend == "kai":
            gpu = ((queues[team].get("spec") or {}).get("resources") or {}).get("gpu") or {}
            cap = free if gpu.get("limit", UNLIMITED) == UNLIMITED else min(free, int(gpu["limit"]))
        else:
            cap = min(free, self._nominal(queues[team]) or free)
        room = self.quota_room(team)
        if cap < 1 or (room is not None and room < cap + 1):
            return None
        return cap

    @staticmethod
    def _nominal(cq):
        total = 0
        for group in ((cq or {}).get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for row in flavor.get("resources") or []:
                    if row.get("name") == upstream.GPU_RESOURCE:
                        total += int(row.get("nominalQuota") or 0)
        return total

    def gang(self, team, free):
        """One GPU taken by a blocker, a gang of `free` waits whole; the blocker goes, the gang starts whole."""
        evidence = []
        self.job(team, "acceptance-blocker", 1)
        self.settle(lambda: self.running(team, "acceptance-blocker"), lambda n: n == 1, self.ctx.params["pod_timeout"])
        if self.backend == "kai":
            self.kai_gang(team, "acceptance-gang", free)
        else:
            self.job(team, "acceptance-gang", free)
        # give the scheduler time to decide; a gang must not start partly
        partial = self.settle(lambda: self.running(team, "acceptance-gang"), lambda n: n > 0,
                              min(10, self.ctx.params["pod_timeout"]))
        evidence.append("gang of %d with one GPU taken: %d running (expected 0)" % (free, partial))
        blockers = [c for c in self.ctx.created if c[2] == "acceptance-blocker"]
        for ref in blockers:
            self.ctx.kube.delete(ref[0], ref[1], ref[2], ref[3], propagation="Background")
            self.ctx.created.remove(ref)
        whole = self.settle(lambda: self.running(team, "acceptance-gang"), lambda n: n == free,
                            self.ctx.params["pod_timeout"])
        evidence.append("after the GPU was freed: %d of %d running" % (whole, free))
        return partial == 0 and whole == free, evidence
