# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One team's quota change, validated, applied with its queue together, recorded.

Body of the quota_change module (the AWX quota job template). Order of work:
validate the request (types exactly as the AWX survey sends them) -> read the team's
namespace, ResourceQuota, the other teams' quotas and the capacity -> refuse what must
not happen -> plan the writes (queue parents raised before children, lowered after) ->
apply them one by one (merge patches through the converge engine, core/converge.py); when a
write fails, undo the ones already done, newest first, and say what was restored. Same value
again: no write (changed=false). The result has the engine's objects and requests.

The record: annotations on the ResourceQuota (last change and a short history), and
an override annotation that the tenants role honours (it keeps the raised value until
the inventory catches up, and reports the difference every run: docs/awx.md).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import converge as engine
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import overrides
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.quantity import QuantityError, parse_quantity
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.quota.queues import Step

RECORD_ANNOTATION = "gpu-platform.skaffon.io/quota-change"
HISTORY_ANNOTATION = "gpu-platform.skaffon.io/quota-history"
HISTORY_LENGTH = 20
MEMORY_UNIT = "Gi"


def _fmt(value):
    return "%s" % value


def parse_force(value):
    """quota_force: a bool, or the survey's multiple-choice strings 'true'/'false'."""
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise DomainError("quota_force must be true or false (the survey sends the strings 'true'/'false'), got %r"
                      % (value,))


def check_request(team, resource, value, ticket):
    """Refuse a malformed request before anything is read; returns the quantity string to set."""
    if not isinstance(team, str) or not tenants.is_dns_label(team):
        raise DomainError("quota_team %r is not a team name (a DNS label: lower-case letters, digits, '-', "
                          "at most 63 characters)" % (team,))
    if not isinstance(resource, str) or not resource:
        raise DomainError("quota_resource must name a quota key such as requests.nvidia.com/gpu, got %r" % (resource,))
    prefix, name = tenants.quota_resource(resource)
    if tenants.is_extended_resource(name) and prefix != "requests":
        raise DomainError(
            "quota_resource %s is never enforced: a ResourceQuota enforces extended resources only as requests.%s "
            "(the API accepts %s silently). Use quota_resource=requests.%s" % (resource, name, resource, name))
    if isinstance(value, bool) or not isinstance(value, int):  # exactly an int, as AWX's integer question sends it
        raise DomainError(
            "quota_value must be an integer (AWX's integer question refuses %r and passes an int); got %s %r. "
            "On the command line use JSON: -e '{\"quota_value\": 12}'" % (value, type(value).__name__, value))
    if value < 0:
        raise DomainError("quota_value must not be negative, got %d" % value)
    if not isinstance(ticket, str) or len(ticket.strip()) < 3:
        raise DomainError("quota_ticket must name the change ticket (at least 3 characters), got %r" % (ticket,))
    if name == "memory":
        return "%d%s" % (value, MEMORY_UNIT)
    return str(value)


class QuotaStrategy(engine.Strategy):
    """A quota change writes merge patches in its own order; check mode plans and sends nothing."""

    check_mode = engine.NO_WRITE


class QuotaChange(object):
    """`queue` is a queue adapter (quota/queues.py) or None for tenants_queue_backend none."""

    def __init__(self, kube, params, check_mode=False, now=None, queue=None):
        self.engine = engine.Converge(kube, QuotaStrategy(), check_mode=check_mode, workers=1)
        self.kube = self.engine.kube      # counts every request (result "requests")
        if queue is not None:
            queue.kube = self.kube        # the queue's reads are counted too
        self.params = params
        self.check_mode = check_mode
        self.now = now
        self.queue = queue
        self.done = []       # the steps whose write succeeded
        self.changes = []    # the engine's Change of every write made (or planned, in check mode)

    # -- reads ---------------------------------------------------------------------------
    def read(self, team, resource):
        ns = self.kube.get("v1", "Namespace", team)
        if ns is None or not engine.carries(ns, engine.MANAGED_BY):
            raise DomainError("quota_team %s is not a team of this platform: %s. Teams are created by "
                              "playbooks/tenants.yml from tenants_list" % (
                                  team, "no namespace %s" % team if ns is None else
                                  "namespace %s is not labelled %s=%s" % (team, upstream.LABEL_MANAGED_BY,
                                                                          tenants.MANAGED_BY)))
        quota = self.kube.get("v1", "ResourceQuota", tenants.QUOTA_NAME, team)
        if quota is None:
            raise DomainError("team %s has no ResourceQuota %s: give the team a quota in tenants_list and run "
                              "playbooks/tenants.yml first" % (team, tenants.QUOTA_NAME))
        return quota

    def capacity(self, extended):
        nodes = self.kube.list("v1", "Node")[0]
        total = 0
        for node in nodes:
            value = ((node.get("status") or {}).get("allocatable") or {}).get(extended, 0)
            try:
                total += int(parse_quantity(value))
            except QuantityError:
                pass
        return total

    def others(self, team, resource):
        """Sum of the other teams' quota on this key (one LIST of our ResourceQuotas)."""
        items = self.kube.list("v1", "ResourceQuota", label_selector=engine.selector(engine.MANAGED_BY))[0]
        total = 0
        for item in items:
            if item["metadata"].get("namespace") == team:
                continue
            value = ((item.get("spec") or {}).get("hard") or {}).get(resource)
            if value is not None:
                total += parse_quantity(value)
        return total

    # -- the change ------------------------------------------------------------------------
    def run(self):
        p = self.params
        team, resource = p["team"], p["resource"]
        wanted = check_request(team, resource, p["value"], p["ticket"])
        force = parse_force(p.get("force", False))
        quota = self.read(team, resource)
        hard = (quota.get("spec") or {}).get("hard") or {}
        used = ((quota.get("status") or {}).get("used") or {}).get(resource, "0")
        old = hard.get(resource)
        before = {"value": old, "used": used}
        result = dict(team=team, resource=resource, before=before, after={"value": wanted, "used": used},
                      changed=False, queue=[], record=None)
        if old is not None and parse_quantity(old) == parse_quantity(wanted) and \
                (self.queue is None or not self.queue.differs(team, resource, wanted)):
            result["msg"] = "%s of %s is already %s: nothing to change" % (resource, team, wanted)
            return self.result(result, [engine.Change(engine.UNCHANGED, None, self.quota_target(team))])
        new_q, used_q = parse_quantity(wanted), parse_quantity(used)
        if new_q < used_q and not force:
            raise DomainError(
                "quota_value %s for %s of team %s is below what the team uses now (%s). Neither KAI nor Kueue "
                "evicts running work: the lower quota would only block new pods until the team's use drops. "
                "Set quota_force=true to lower it anyway" % (wanted, resource, team, used), before=before)
        _prefix, name = tenants.quota_resource(resource)
        if tenants.is_extended_resource(name) and not p.get("allow_overcommit"):
            capacity = p["cluster_gpus"] if name == upstream.GPU_RESOURCE and p.get("cluster_gpus") is not None \
                else self.capacity(name)
            total = self.others(team, resource) + new_q
            if total > capacity:
                raise DomainError(
                    "quota_value %s would give the teams %s of %s together, the cluster offers %d: raise the "
                    "capacity first, lower another team, or set tenants_allow_overcommit=true" % (
                        wanted, _fmt(total), name, capacity), before=before)
        raising = old is None or new_q > parse_quantity(old)
        # the adapter orders its steps for the direction: parents first when raising, last when lowering
        steps = self.queue.plan(team, resource, old, wanted, raising) if self.queue is not None else []
        record = self.record(quota, resource, old, wanted, used)
        current = quota["metadata"].get("annotations") or {}
        previous = dict((key, current.get(key)) for key in record)  # None deletes on undo (merge patch)
        quota_step = Step("ResourceQuota %s/%s %s: %s -> %s" % (team, tenants.QUOTA_NAME, resource, old, wanted),
                          self.quota_target(team), self.quota_patch(resource, wanted, record),
                          self.quota_patch(resource, old, previous))
        # the ResourceQuota is innermost: after the queues when raising, before them when lowering
        ordered = steps + [quota_step] if raising else [quota_step] + steps
        result.update(changed=True, queue=[s[0] for s in steps], record=record,
                      plan=[s[0] for s in ordered])
        if self.check_mode:
            result["msg"] = "check mode: would apply %s" % "; ".join(s[0] for s in ordered)
            planned = [engine.Change(engine.UPDATED, None, s.target, [("patch", s.patch)]) for s in ordered]
            for change in planned:
                change.done = True
            return self.result(result, planned)
        self.apply(ordered)
        result["msg"] = "applied %s" % "; ".join(s[0] for s in ordered)
        return self.result(result, self.changes)

    def result(self, result, changes):
        """The quota result with the engine's objects ({kind, name, namespace, action}) and requests."""
        shape = self.engine.result(changes)
        result.update(objects=shape["objects"], requests=shape["requests"])
        return result

    def record(self, quota, resource, old, new, used):
        p = self.params
        entry = {"resource": resource, "old": old, "new": new, "used": used, "ticket": p["ticket"],
                 "user": p.get("user") or "unknown", "job": p.get("job_id"), "at": self.now}
        annotations = quota["metadata"].get("annotations") or {}
        try:
            history = json.loads(annotations.get(HISTORY_ANNOTATION) or "[]")
        except ValueError:
            history = []
        history = (history + [entry])[-HISTORY_LENGTH:]
        return {RECORD_ANNOTATION: json.dumps(entry, sort_keys=True),
                HISTORY_ANNOTATION: json.dumps(history, sort_keys=True),
                overrides.ANNOTATION: overrides.record(quota, ["spec", "hard", resource], new, p["ticket"], self.now)}

    @staticmethod
    def quota_target(team):
        return engine.target("v1", "ResourceQuota", tenants.QUOTA_NAME, team)

    @staticmethod
    def quota_patch(resource, value, annotations):
        patch = {"spec": {"hard": {resource: value}}}
        if annotations is not None:
            patch["metadata"] = {"annotations": annotations}
        return patch

    def apply(self, steps):
        for step in steps:
            description = step.description
            try:
                self.changes.append(self.engine.update(step.target, step.patch))
            except ApiError as err:
                restored, lost = self.undo()
                raise DomainError(
                    "the change failed at: %s (%s). %s%s" % (
                        description, err,
                        ("Restored: %s. " % "; ".join(restored)) if restored else "Nothing had been changed. ",
                        ("NOT restored (fix by hand): %s" % "; ".join(lost)) if lost else
                        "The cluster is as before; run the job again once the cause is fixed"),
                    failed_step=description, restored=restored, not_restored=lost, api_error=err.to_dict())
            self.done.append(step)

    def undo(self):
        restored, lost = [], []
        while self.done:
            step = self.done.pop()
            try:
                self.engine.update(step.target, step.undo)
                restored.append(step.description)
            except ApiError as err:
                lost.append("%s (%s)" % (step.description, err))
        return restored, lost
