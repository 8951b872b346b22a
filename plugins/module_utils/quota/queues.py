# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The queue side of a quota change, per backend (KAI Queue, Kueue ClusterQueue).

An adapter answers differs(team, resource, value) and plan(team, resource, old, new, raising)
-> [Step(description, target, patch, undo)] (merge patches the converge engine writes) already
in the order they must run: raising, the parents first
(a KAI department whose quota would fall below its children's sum is raised to it); lowering,
the child first, then the parents that were sized to their children. quota_change puts the
ResourceQuota innermost: after the queues when raising, before them when lowering.
Every queue value raised is recorded for the roles (overrides.py), like the quota.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
from collections import namedtuple

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import converge as engine
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import overrides
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.quantity import parse_quantity
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues.dra import claim_quota_resource
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues.objects import _kai_amount, _kueue_amount

KAI_RESOURCE = {"nvidia.com/gpu": "gpu", "cpu": "cpu", "memory": "memory"}
UNLIMITED = upstream.KAI_UNLIMITED
# One write of a quota change: a merge patch of target, and the merge patch that undoes it.
Step = namedtuple("Step", "description target patch undo")


def _annotate(patch, obj, path, value, ticket, at):
    patch.setdefault("metadata", {}).setdefault("annotations", {})[overrides.ANNOTATION] = \
        overrides.record(obj, path, value, ticket, at)
    return patch


def _old_annotation(obj):
    return {"metadata": {"annotations": {overrides.ANNOTATION: ((obj.get("metadata") or {}).get("annotations") or {})
                                         .get(overrides.ANNOTATION)}}}


class KaiQueues(object):
    """Team queue = a KAI Queue named like the team; departments are its parentQueue chain."""

    def __init__(self, kube, ticket, at):
        self.kube, self.ticket, self.at = kube, ticket, at
        self._queues = None

    def queues(self):
        if self._queues is None:
            items = self.kube.list(upstream.KAI_QUEUE_API_VERSION, "Queue")[0]
            self._queues = dict((q["metadata"]["name"], q) for q in items)
        return self._queues

    @staticmethod
    def _res(resource):
        # DRA mode: KAI charges whole-GPU claims (gpu.nvidia.com) to the queue's gpu, never MIG claims
        if claim_quota_resource(resource) == upstream.GPU_RESOURCE:
            return KAI_RESOURCE.get(upstream.GPU_RESOURCE)
        return KAI_RESOURCE.get(tenants.quota_resource(resource)[1])

    @staticmethod
    def _get(queue, res, key):
        return ((((queue.get("spec") or {}).get("resources") or {}).get(res) or {}).get(key, 0))

    def differs(self, team, resource, value):
        res = self._res(resource)
        queue = self.queues().get(team)
        if res is None or queue is None:
            return False
        return self._get(queue, res, "quota") != _kai_amount("quota_value", res, value)

    def _step(self, queue, res, quota, why):
        name = queue["metadata"]["name"]
        old_quota, old_limit = self._get(queue, res, "quota"), self._get(queue, res, "limit")
        fields = {"quota": quota}
        if old_limit != UNLIMITED and quota != UNLIMITED and old_limit < quota:
            fields["limit"] = quota   # a limit below the quota blocks the queue
        patch = _annotate({"spec": {"resources": {res: fields}}}, queue, ["spec", "resources", res, "quota"], quota,
                          self.ticket, self.at)
        undo = {"spec": {"resources": {res: {"quota": old_quota, "limit": old_limit}}}}
        undo.update(_old_annotation(queue))
        limit = (" (limit %s -> %s)" % (old_limit, fields["limit"])) if "limit" in fields else ""
        desc = "KAI Queue %s %s quota %s -> %s%s%s" % (name, res, old_quota, quota, limit, why)
        return Step(desc, engine.target(upstream.KAI_QUEUE_API_VERSION, "Queue", name), patch, undo)

    def plan(self, team, resource, old, new, raising):
        res = self._res(resource)
        queues = self.queues()
        queue = queues.get(team)
        if res is None or queue is None:
            return []       # MIG slices have no KAI queue resource; a team without a queue has none to change
        want = _kai_amount("quota_value", res, new)
        have = self._get(queue, res, "quota")
        steps = [self._step(queue, res, want, "")]
        delta_old, delta_new = have, want
        parent = (queue.get("spec") or {}).get("parentQueue")
        child = team
        while parent:
            pq = queues.get(parent)
            if pq is None:
                raise DomainError("KAI Queue %s names parent %s, which does not exist: KAI drops such queues; "
                                  "run playbooks/queues.yml" % (child, parent))
            siblings = [q for n, q in queues.items() if (q.get("spec") or {}).get("parentQueue") == parent]
            old_sum = sum(self._get(q, res, "quota") for q in siblings)
            if any(self._get(q, res, "quota") == UNLIMITED for q in siblings):
                break
            new_sum = old_sum - delta_old + delta_new
            pquota = self._get(pq, res, "quota")
            if pquota == UNLIMITED:
                break
            if raising and new_sum > pquota:
                steps.insert(0, self._step(pq, res, new_sum, " (its children need %s)" % new_sum))
            elif not raising and pquota == old_sum:
                steps.append(self._step(pq, res, new_sum, " (sized to its children)"))
            else:
                break
            delta_old, delta_new = pquota, new_sum
            child, parent = parent, (pq.get("spec") or {}).get("parentQueue")
        return steps


class KueueQueues(object):
    """Team queue = a Kueue ClusterQueue named like the team (its LocalQueue points at it)."""

    def __init__(self, kube, ticket, at, flavor=None):
        self.kube, self.ticket, self.at, self.flavor = kube, ticket, at, flavor

    def _find(self, team, resource):
        # DRA mode: a quota on claims of a DeviceClass moves the row its deviceClassMappings name
        name = claim_quota_resource(resource) or tenants.quota_resource(resource)[1]
        cq = self.kube.get(upstream.KUEUE_API_VERSION, "ClusterQueue", team)
        if cq is None:
            return None, None, None
        hits = []
        for g, group in enumerate((cq.get("spec") or {}).get("resourceGroups") or []):
            for flavor in group.get("flavors") or []:
                for row in flavor.get("resources") or []:
                    if row.get("name") == name:
                        hits.append((g, flavor["name"], row))
        if self.flavor:
            hits = [h for h in hits if h[1] == self.flavor]
        if len(hits) > 1:
            raise DomainError("ClusterQueue %s has %s in several flavors (%s): name the one to change with "
                              "quota_flavor" % (team, name, ", ".join(h[1] for h in hits)))
        if not hits:
            return cq, name, None
        return cq, name, hits[0]

    def differs(self, team, resource, value):
        cq, name, hit = self._find(team, resource)
        return bool(hit) and str(hit[2].get("nominalQuota")) != str(_kueue_amount("quota_value", value, name))

    def plan(self, team, resource, old, new, raising):
        cq, name, hit = self._find(team, resource)
        if hit is None:
            return []
        group, flavor, row = hit
        want = _kueue_amount("quota_value", new, name)
        lending = row.get("lendingLimit")
        if lending is not None and parse_quantity(lending) > parse_quantity(want):
            raise DomainError("ClusterQueue %s lends %s of %s in flavor %s, more than the new nominal quota %s: "
                              "lower lending_limit in tenants_list first" % (team, lending, name, flavor, want))
        groups = copy.deepcopy(cq["spec"]["resourceGroups"])
        for r in next(f for f in groups[group]["flavors"] if f["name"] == flavor)["resources"]:
            if r["name"] == name:
                r["nominalQuota"] = want
        path = ["spec", "resourceGroups", group, "flavors", {"name": flavor}, "resources", {"name": name},
                "nominalQuota"]
        patch = _annotate({"spec": {"resourceGroups": groups}}, cq, path, want, self.ticket, self.at)
        undo = {"spec": {"resourceGroups": cq["spec"]["resourceGroups"]}}
        undo.update(_old_annotation(cq))
        desc = "Kueue ClusterQueue %s flavor %s %s nominalQuota %s -> %s" % (
            team, flavor, name, row.get("nominalQuota"), want)
        return [Step(desc, engine.target(upstream.KUEUE_API_VERSION, "ClusterQueue", team), patch, undo)]


def adapter(backend, kube, ticket=None, at=None, flavor=None):
    if backend in (None, "none"):
        return None
    if backend == "kai":
        return KaiQueues(kube, ticket, at)
    if backend == "kueue":
        return KueueQueues(kube, ticket, at, flavor)
    raise DomainError("tenants_queue_backend must be none, kai or kueue, got %r" % (backend,))
