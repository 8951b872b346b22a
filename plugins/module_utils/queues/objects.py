# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Queue objects of the teams: KAI Scheduler Queues or Kueue flavors and queues.

Pure functions, no cluster access: render(backend, teams, departments, pools)
validates everything and returns the objects in apply order (parents before
children, flavors before ClusterQueues before LocalQueues), or raises
DomainError naming the variable, the value and the fix. The backends' traps
it guards against:

- KAI: an unset `limit` is 0 and blocks the queue and its children; an unset
  `overQuotaWeight` is 0 (no share above quota). Every queue gets quota, limit
  and overQuotaWeight for gpu, cpu and memory. Units: gpu devices, cpu
  millicores, memory megabytes; -1 = unlimited.
- Any namespace may name any KAI queue (KAI does not check who names a
  queue): a ValidatingAdmissionPolicy refuses, in a team namespace, an object whose queue
  label names another team's queue (queue name = team name = namespace).
- Kueue: `borrowingLimit` only with a cohort; every flavor of a resource group
  lists every covered resource; `namespaceSelector` null matches nothing, so
  each ClusterQueue selects exactly its team's namespace.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import (
    KAI_DEFAULT_QUEUE,
    KAI_IMAGE_REGISTRY,
    KAI_DEFAULT_PARENT_QUEUE,
    KAI_QUEUE_API_VERSION,
    KAI_QUEUE_LABEL,
    KAI_UNLIMITED,
    KUEUE_API_VERSION,
    KUEUE_IMAGE_REPOSITORY,
    KUEUE_QUEUE_LABEL,
    QUEUE_POLICY_NAME,
    QUEUES_NS_NAME_LABEL,
    VAP_API_VERSION,
)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import dns_label_error, is_dns_label
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import dra as queues_dra
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import kai_sharing
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import kueue_config
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.pools import (
    DEFAULT_PREFIX,
    POOL_VARIABLE,
    host_pool,
    toleration,
)

BACKENDS = ("none", "kai", "kueue")
KAI_RESOURCES = ("gpu", "cpu", "memory")
_QTY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?$")
_FACTOR = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50}
KAI_KEYS = {"parent", "priority", "gpu", "cpu", "memory", "pool"}
KUEUE_KEYS = {"cohort", "flavors", "fair_sharing_weight", "preemption"}
KAI_RES_KEYS = {"quota", "limit", "over_quota_weight"}
KUEUE_RES_KEYS = {"nominal", "borrowing_limit", "lending_limit"}
PREEMPTION_KEYS = {"reclaimWithinCohort": ("Never", "LowerPriority", "Any"),
                   "withinClusterQueue": ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
                   "borrowWithinCohort": None}
# Reclaim within the cohort: a team gets its nominal quota back from borrowers.
DEFAULT_PREEMPTION = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}


def _fail(var, value, problem, fix, **details):
    raise DomainError("%s: %s (got %r): %s" % (var, problem, value, fix), variable=var, **details)


def quantity(var, value):
    """A Kubernetes quantity (4, "500m", "16Gi") as a float."""
    if isinstance(value, bool):
        _fail(var, value, "not a quantity", "use a number or a Kubernetes quantity such as 500m or 16Gi")
    if isinstance(value, (int, float)):
        return float(value)
    m = _QTY.match(str(value).strip())
    if not m:
        _fail(var, value, "not a quantity", "use a number or a Kubernetes quantity such as 500m or 16Gi")
    return float(m.group(1)) * _FACTOR[m.group(2)]


def _number(var, value, minimum=None, allow_unlimited=False):
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            _fail(var, value, "not a number", "use a number%s" % (" (-1 = unlimited)" if allow_unlimited else ""))
    if allow_unlimited and value == KAI_UNLIMITED:
        return value
    if minimum is not None and value < minimum:
        _fail(var, value, "below %s" % minimum, "use a value >= %s%s" % (
            minimum, " or -1 for unlimited" if allow_unlimited else ""))
    return value


def _int_or_float(v):
    return int(v) if float(v).is_integer() else v


def _unknown(var, block, allowed):
    extra = sorted(set(block) - set(allowed))
    if extra:
        _fail(var, extra, "unknown keys", "use only %s" % ", ".join(sorted(allowed)))


# -- KAI ------------------------------------------------------------------------------

def _kai_amount(var, res, value):
    """gpu in devices, cpu in millicores, memory in MB (KAI units); -1 stays -1."""
    if value in (KAI_UNLIMITED, str(KAI_UNLIMITED)):
        return KAI_UNLIMITED
    q = quantity(var, value)
    if q < 0:
        _fail(var, value, "negative", "use a value >= 0 or -1 for unlimited")
    if res == "cpu":
        return _int_or_float(round(q * 1000, 3))
    if res == "memory":
        return _int_or_float(round(q / 1e6, 3))
    return _int_or_float(q)


def _kai_resources(var, queue, gpu_required):
    out = {}
    for res in KAI_RESOURCES:
        block = queue.get(res)
        if block is None:
            if res == "gpu" and gpu_required:
                _fail(var + ".gpu", None, "missing", "set gpu: {quota: N} (limit and over_quota_weight "
                      "default to -1 and 1)")
            # cpu and memory unmanaged: unlimited quota and limit (0 would block the queue)
            block = {"quota": KAI_UNLIMITED}
        if not isinstance(block, dict):
            _fail("%s.%s" % (var, res), block, "not a mapping", "use {quota: ..., limit: ..., over_quota_weight: ...}")
        _unknown("%s.%s" % (var, res), block, KAI_RES_KEYS)
        if "quota" not in block:
            _fail("%s.%s.quota" % (var, res), None, "missing", "set the quota (-1 = unlimited)")
        quota = _kai_amount("%s.%s.quota" % (var, res), res, block["quota"])
        limit = _kai_amount("%s.%s.limit" % (var, res), res, block.get("limit", KAI_UNLIMITED))
        weight = _number("%s.%s.over_quota_weight" % (var, res), block.get("over_quota_weight", 1), minimum=0)
        if limit != KAI_UNLIMITED and (quota == KAI_UNLIMITED or limit < quota):
            _fail("%s.%s.limit" % (var, res), block.get("limit"), "below the quota %s" % block["quota"],
                  "raise the limit to at least the quota, or use -1 for no limit")
        out[res] = {"quota": quota, "limit": limit, "overQuotaWeight": _int_or_float(weight)}
    return out


def _kai_queue(name, parent, priority, resources, display):
    spec = {"displayName": display, "resources": resources}
    if parent:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": KAI_QUEUE_API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _priority(var, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(var, value, "not an integer", "use an integer (KAI default 100; higher gets the rest first)")
    return value


def render_kai(teams, departments):
    dept_names = set()
    objects = []
    dept_quota = {}
    for i, dept in enumerate(departments):
        var = "queues_departments[%d]" % i
        name = dept.get("name") if isinstance(dept, dict) else None
        if not is_dns_label(name):
            raise DomainError(dns_label_error(var + ".name", name), variable=var + ".name")
        if name in dept_names or name in (KAI_DEFAULT_QUEUE, KAI_DEFAULT_PARENT_QUEUE):
            _fail(var + ".name", name, "duplicate or reserved", "give each department its own name "
                  "(default-queue and default-parent-queue belong to the chart)")
        _unknown(var, dept, KAI_KEYS | {"name", "display_name"})
        dept_names.add(name)
    for i, dept in enumerate(departments):
        var = "queues_departments[%d]" % i
        parent = dept.get("parent")
        if parent is not None and parent not in dept_names:
            _fail(var + ".parent", parent, "no such department", "define it in queues_departments first")
        res = _kai_resources(var, dept, gpu_required=True)
        dept_quota[dept["name"]] = (var, res, parent)
        objects.append(_kai_queue(dept["name"], parent, _priority(var + ".priority", dept.get("priority")),
                                  res, dept.get("display_name") or dept["name"]))
    # parents before children (departments may nest)
    order = {}

    def depth(n, seen=()):
        p = dept_quota[n][2]
        if n in seen:
            _fail("queues_departments", n, "parent cycle", "break the cycle of parent references")
        return 0 if p is None else 1 + depth(p, seen + (n,))
    for n in dept_quota:
        order[n] = depth(n)
    objects.sort(key=lambda o: order[o["metadata"]["name"]])
    leaf = []
    for idx, var, team, queue in teams:
        if team in dept_names:
            _fail("tenants_list[%d].name" % idx, team, "also a department name",
                  "KAI queue names are cluster-wide: rename the team or the department")
        _unknown(var, queue, KAI_KEYS)
        parent = queue.get("parent")
        if parent is None:
            _fail(var + ".parent", None, "missing", "name the department queue (queues_departments) the team "
                  "belongs to")
        if parent not in dept_names:
            _fail(var + ".parent", parent, "no such department",
                  "define it in queues_departments (KAI drops a queue whose parent does not exist)")
        res = _kai_resources(var, queue, gpu_required=True)
        dept_quota.setdefault(team, (var, res, parent))
        leaf.append(_kai_queue(team, parent, _priority(var + ".priority", queue.get("priority")), res, team))
    # a child's quota above its parent's can never be deserved: refuse (raise the parent first)
    children = {}
    for name, (var, res, parent) in dept_quota.items():
        if parent:
            children.setdefault(parent, []).append((name, var, res))
    for parent, kids in sorted(children.items()):
        pvar, pres = dept_quota[parent][0], dept_quota[parent][1]
        for rname in KAI_RESOURCES:
            pq = pres[rname]["quota"]
            if pq == KAI_UNLIMITED:
                continue
            for name, var, res in kids:
                if res[rname]["quota"] == KAI_UNLIMITED or res[rname]["quota"] > pq:
                    _fail("%s.%s.quota" % (var, rname), res[rname]["quota"],
                          "above the quota %s of its parent %s" % (pq, parent),
                          "raise %s.%s.quota first or lower the child's" % (pvar, rname))
            total = sum(kid[2][rname]["quota"] for kid in kids)
            if total > pq:
                _fail("%s.%s.quota" % (pvar, rname), pq, "below the sum %s of its children's quotas (%s)" % (
                    total, ", ".join(sorted(kid[0] for kid in kids))),
                    "raise the parent's quota to at least the sum, or lower the children's")
    return objects + leaf


# -- Kueue ------------------------------------------------------------------------------

def flavor_objects(pools):
    """ResourceFlavor per pool: nodeLabels select the pool, tolerations let pods onto its taints."""
    out = []
    for name in sorted(pools):
        pool = pools[name]
        spec = {"nodeLabels": dict(pool.get("labels") or {})}
        tols = [toleration(t) for t in pool.get("taints") or []]
        if tols:
            spec["tolerations"] = tols
        out.append({"apiVersion": KUEUE_API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": name},
                    "spec": spec})
    return out


def _kueue_amount(var, value, resource):
    q = quantity(var, value)
    if q < 0:
        _fail(var, value, "negative", "use a value >= 0")
    if resource in ("cpu", "memory") or not float(q).is_integer():
        return str(value)
    return int(q)


def _kueue_queue(var, team, queue, pools):
    _unknown(var, queue, KUEUE_KEYS)
    cohort = queue.get("cohort")
    if cohort is not None and not is_dns_label(cohort):
        raise DomainError(dns_label_error(var + ".cohort", cohort), variable=var + ".cohort")
    flavors = queue.get("flavors")
    if not isinstance(flavors, list) or not flavors:
        _fail(var + ".flavors", flavors, "missing or empty",
              "list the pools the team uses: [{name: <pool>, resources: {nvidia.com/gpu: {nominal: 4}}}]")
    covered = []
    for fl in flavors:
        for r in sorted(((fl or {}).get("resources") or {}) if isinstance(fl, dict) else ()):
            if r not in covered:
                covered.append(r)
    out_flavors = []
    for j, fl in enumerate(flavors):
        fvar = "%s.flavors[%d]" % (var, j)
        if not isinstance(fl, dict) or fl.get("name") not in pools:
            _fail(fvar + ".name", (fl or {}).get("name") if isinstance(fl, dict) else fl, "not a GPU pool",
                  "use one of the node pools: %s" % (", ".join(sorted(pools)) or "(none defined)"))
        _unknown(fvar, fl, {"name", "resources"})
        res = fl.get("resources") or {}
        missing = [r for r in covered if r not in res]
        if missing:
            _fail(fvar + ".resources", sorted(res), "lacks covered resources %s" % ", ".join(missing),
                  "every flavor of a queue must list the same resources (Kueue coveredResources)")
        rows = []
        for r in covered:
            rvar = "%s.resources[%s]" % (fvar, r)
            block = res[r]
            if not isinstance(block, dict):
                block = {"nominal": block}
            _unknown(rvar, block, KUEUE_RES_KEYS)
            if "nominal" not in block:
                _fail(rvar + ".nominal", None, "missing", "set the nominal quota")
            row = {"name": r, "nominalQuota": _kueue_amount(rvar + ".nominal", block["nominal"], r)}
            nominal = quantity(rvar + ".nominal", block["nominal"])
            if block.get("borrowing_limit") is not None:
                if cohort is None:
                    _fail(rvar + ".borrowing_limit", block["borrowing_limit"], "set without a cohort",
                          "set %s.cohort or drop borrowing_limit (Kueue refuses it)" % var)
                row["borrowingLimit"] = _kueue_amount(rvar + ".borrowing_limit", block["borrowing_limit"], r)
            if block.get("lending_limit") is not None:
                if cohort is None:
                    _fail(rvar + ".lending_limit", block["lending_limit"], "set without a cohort",
                          "set %s.cohort or drop lending_limit" % var)
                if quantity(rvar + ".lending_limit", block["lending_limit"]) > nominal:
                    _fail(rvar + ".lending_limit", block["lending_limit"], "above the nominal quota %s" % (
                        block["nominal"]), "lend at most the nominal quota")
                row["lendingLimit"] = _kueue_amount(rvar + ".lending_limit", block["lending_limit"], r)
            rows.append(row)
        out_flavors.append({"name": fl["name"], "resources": rows})
    spec = {
        "namespaceSelector": {"matchLabels": {QUEUES_NS_NAME_LABEL: team}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": covered, "flavors": out_flavors}],
        "preemption": _preemption(var + ".preemption", queue.get("preemption")),
    }
    if cohort is not None:
        spec["cohortName"] = cohort
    if queue.get("fair_sharing_weight") is not None:
        w = _number(var + ".fair_sharing_weight", queue["fair_sharing_weight"], minimum=0)
        spec["fairSharing"] = {"weight": _int_or_float(w)}
    cq = {"apiVersion": KUEUE_API_VERSION, "kind": "ClusterQueue", "metadata": {"name": team}, "spec": spec}
    lq = {"apiVersion": KUEUE_API_VERSION, "kind": "LocalQueue", "metadata": {"name": team, "namespace": team},
          "spec": {"clusterQueue": team}}
    return cq, lq


def _preemption(var, value):
    if value is None:
        return dict(DEFAULT_PREEMPTION)
    if not isinstance(value, dict):
        _fail(var, value, "not a mapping", "use Kueue's preemption keys: %s" % ", ".join(sorted(PREEMPTION_KEYS)))
    _unknown(var, value, PREEMPTION_KEYS)
    for k, allowed in PREEMPTION_KEYS.items():
        if allowed and k in value and value[k] not in allowed:
            _fail("%s.%s" % (var, k), value[k], "not a Kueue policy", "use one of %s" % ", ".join(allowed))
    return dict(value)


def _quota_caps(tenants, idx):
    """{resource: (quota key, amount)} of the team's ResourceQuota (tenants_list[idx].quota) on requests."""
    quota = (tenants[idx] or {}).get("quota") if isinstance(tenants[idx], dict) else None
    caps = {}
    for key, value in (quota or {}).items() if isinstance(quota, dict) else ():
        key = str(key)
        resource = key[len("requests."):] if key.startswith("requests.") else key if key in ("cpu", "memory") \
            else queues_dra.claim_quota_resource(key)     # DRA: claims of a DeviceClass cap its mapped resource
        if resource is None:
            continue
        try:
            amount = quantity("tenants_list[%d].quota.%s" % (idx, key), value)
        except DomainError:
            continue          # the tenants role refuses it with its own message
        if resource not in caps or amount < caps[resource][1]:
            caps[resource] = (key, amount)
    return caps


def _check_borrowing(idx, var, cq, caps):
    """Refuse a borrowingLimit the team's ResourceQuota makes unusable.

    Kueue admits a Workload by the ClusterQueue's quota alone; its pods are then created in the
    team namespace, where the ResourceQuota refuses every pod above its hard limit. So a queue
    can never use more than the quota: GPUs it is allowed to borrow beyond that stay unused by
    the team, while the Workload holds them as admitted and the Job's pods are refused.
    """
    for group in cq["spec"]["resourceGroups"]:
        for j, flavor in enumerate(group["flavors"]):
            for row in flavor["resources"]:
                if "borrowingLimit" not in row or row["name"] not in caps:
                    continue
                key, hard = caps[row["name"]]
                nominal = quantity("nominal", row["nominalQuota"])
                borrow = quantity("borrowing_limit", row["borrowingLimit"])
                if borrow > 0 and nominal + borrow > hard:
                    usable = max(0.0, hard - nominal)
                    _fail("%s.flavors[%d].resources[%s].borrowing_limit" % (var, j, row["name"]),
                          row["borrowingLimit"],
                          "nominal %s + borrowing_limit %s = %s is above the team's ResourceQuota %s: %s "
                          "(tenants_list[%d].quota), so the namespace admits no pod for %s of it and Kueue would "
                          "hold borrowed quota the team cannot use" % (
                              _fmt_q(nominal), _fmt_q(borrow), _fmt_q(nominal + borrow), key, _fmt_q(hard), idx,
                              _fmt_q(nominal + borrow - hard)),
                          "lower borrowing_limit to %s, or raise tenants_list[%d].quota['%s'] to %s" % (
                              _fmt_q(usable), idx, key, _fmt_q(nominal + borrow)))


def _fmt_q(v):
    return str(int(v)) if float(v).is_integer() else "%g" % v


def render_kueue(teams, pools, tenants=None):
    cqs, lqs = [], []
    for idx, var, team, queue in teams:
        cq, lq = _kueue_queue(var, team, queue, pools)
        if tenants is not None:
            _check_borrowing(idx, var, cq, _quota_caps(tenants, idx))
        cqs.append(cq)
        lqs.append(lq)
    used = sorted({f["name"] for cq in cqs for rg in cq["spec"]["resourceGroups"] for f in rg["flavors"]})
    return flavor_objects(dict((n, pools[n]) for n in used)) + cqs + lqs


# -- admission policy: only the namespace's own queue may be named --------------------------

def queue_policy(backend, team_names, also_allowed=()):
    """Refuse, in a team namespace, any object whose queue label names another queue than the team's.

    Queue name = team name = namespace, so the rule needs no per-team table:
    a new team only widens the binding's namespace list. `also_allowed`: queues
    every team may name (KAI's default-queue when it is left open).
    """
    label = KAI_QUEUE_LABEL if backend == "kai" else KUEUE_QUEUE_LABEL
    rules = [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
              "resources": ["*"], "scope": "Namespaced"}]
    own = "== request.namespace"
    if also_allowed:
        own = "in [request.namespace, %s]" % ", ".join("'%s'" % q for q in also_allowed)
    expr = ("!has(object.metadata.labels) || !('{l}' in object.metadata.labels) || "
            "object.metadata.labels['{l}'] {own}").format(l=label, own=own)
    validations = [{
        "expression": expr,
        "messageExpression": ("'%s ' + object.metadata.labels['%s'] + ' is not the queue of namespace ' "
                              "+ request.namespace + ': use %s: ' + request.namespace") % (label, label, label),
        "reason": "Forbidden",
    }]
    if backend == "kai":
        # a PodGroup names its queue in spec.queue (the pod-grouper copies the label there)
        validations.append({
            "expression": ("request.kind.kind != 'PodGroup' || !has(object.spec.queue) || "
                           "object.spec.queue %s" % own),
            "messageExpression": ("'PodGroup queue ' + object.spec.queue + ' is not the queue of namespace ' "
                                  "+ request.namespace"),
            "reason": "Forbidden",
        })
    policy = {"apiVersion": VAP_API_VERSION, "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": QUEUE_POLICY_NAME},
              "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules},
                       "validations": validations}}
    binding = {"apiVersion": VAP_API_VERSION, "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": QUEUE_POLICY_NAME},
               "spec": {"policyName": QUEUE_POLICY_NAME, "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {"matchExpressions": [
                            {"key": QUEUES_NS_NAME_LABEL, "operator": "In", "values": sorted(team_names)}]}}}}
    return [policy, binding]


# -- entry point -------------------------------------------------------------------------

def team_queues(tenants):
    """[(index, var, team, queue block)] of the teams that have a queue block."""
    if tenants is None:
        return []
    if not isinstance(tenants, list):
        _fail("tenants_list", tenants, "not a list", "use a list of teams: [{name: team-a, queue: {...}}]")
    out = []
    seen = set()
    for i, team in enumerate(tenants):
        name = team.get("name") if isinstance(team, dict) else None
        if not is_dns_label(name):
            raise DomainError(dns_label_error("tenants_list[%d].name" % i, name) + " (a team name is its namespace "
                              "and its queue)", variable="tenants_list[%d].name" % i)
        if name in seen:
            _fail("tenants_list[%d].name" % i, name, "duplicate", "each team once")
        seen.add(name)
        queue = team.get("queue")
        if queue is None:
            continue
        if not isinstance(queue, dict):
            _fail("tenants_list[%d].queue" % i, queue, "not a mapping", "use a queue: {...} block")
        out.append((i, "tenants_list[%d].queue" % i, name, queue))
    return out


def kai_default_queue_block():
    """The chart's default-queue with gpu limit 0: a pod without a queue label gets no GPU.

    The chart creates it with quota 0 and limit -1 (free over-quota GPUs for
    anyone who omits the label, which bypasses the team queues and the
    admission policy); cpu and memory stay as the chart made them.
    """
    res = {"gpu": {"quota": 0, "limit": 0, "overQuotaWeight": 0},
           "cpu": {"quota": 0, "limit": KAI_UNLIMITED, "overQuotaWeight": 1},
           "memory": {"quota": 0, "limit": KAI_UNLIMITED, "overQuotaWeight": 1}}
    return {"apiVersion": KAI_QUEUE_API_VERSION, "kind": "Queue", "metadata": {"name": KAI_DEFAULT_QUEUE},
            "spec": {"parentQueue": KAI_DEFAULT_PARENT_QUEUE, "resources": res}}


def render(backend, tenants, departments=None, pools=None, kai_default_queue="block", kai_gpu_sharing=None,
           kai_placement=None, kai_fraction_pools=None, pool_aliases=None, kai_pool_teams=None, allocation_api=None):
    """All queue objects of the backend, validated; [] for backend none.

    KAI also: SchedulingShards per pool label value when kai_placement differs per pool (the
    team Queues labelled for their shard), and the GPU-fraction admission policies when
    kai_gpu_sharing is on (kai_sharing.py)."""
    if backend not in BACKENDS:
        _fail("tenants_queue_backend", backend, "unknown backend", "use one of %s" % ", ".join(BACKENDS))
    teams = team_queues(tenants)
    if backend == "none":
        return []
    if allocation_api not in (None, "device-plugin", queues_dra.DRA):
        _fail(queues_dra.VARIABLE, allocation_api, "unknown allocation API", "use device-plugin or dra")
    if queues_dra.is_dra(allocation_api):
        queues_dra.check(backend, tenants, kai_gpu_sharing, kai_fraction_pools)
    departments = departments or []
    if not isinstance(departments, list):
        _fail("queues_departments", departments, "not a list", "use a list of {name: ..., gpu: {quota: ...}}")
    if backend == "kai":
        if kai_default_queue not in ("block", "open"):
            _fail("queues_kai_default_queue", kai_default_queue, "unknown choice",
                  "use block (no GPUs without a queue label) or open (the chart's free default-queue)")
        sharing = kai_sharing.gpu_sharing(kai_gpu_sharing)
        pool_of = kai_sharing.team_pools(teams, pools, pool_aliases, kai_pool_teams)
        plan = kai_sharing.placement_plan(kai_placement, pools, pool_aliases)
        objects = kai_sharing.shard_objects(plan)
        objects += kai_sharing.label_queues(render_kai(teams, departments), teams, plan, pools, pool_of)
        if kai_default_queue == "block":
            objects.append(kai_default_queue_block())
        if sharing or kai_fraction_pools is not None:
            allowed, refused = kai_sharing.fraction_teams(teams, sharing, kai_fraction_pools, pools, pool_aliases,
                                                          pool_of)
            objects += kai_sharing.fraction_policies(allowed, refused)
    else:
        if departments:
            _fail("queues_departments", [d.get("name") for d in departments if isinstance(d, dict)],
                  "set with backend kueue", "Kueue groups teams by cohort: use queue.cohort, "
                  "drop queues_departments")
        objects = render_kueue(teams, pools or {}, tenants)
    if teams:
        # the pod-grouper writes default-queue into the PodGroups of unlabelled pods: allowed only when open
        extra = [KAI_DEFAULT_QUEUE] if backend == "kai" and kai_default_queue == "open" else []
        objects += queue_policy(backend, [t[2] for t in teams], extra)
    return objects


def pool_groups(hostvars, groups, within, default_prefix=DEFAULT_PREFIX):
    """{inventory group: pool name} of the groups whose hosts (all in `within`) form exactly one pool:
    the design names pools by group (pool_h100_nvlink_training), the queues role by labels."""
    inside = set(within or ())
    out = {}
    for group, hosts in sorted((groups or {}).items()):
        hosts = list(hosts or ())
        if not hosts or not set(hosts) <= inside or group in ("all", "ungrouped"):
            continue
        try:
            found = pools_from_hostvars(hostvars, hosts, default_prefix)
        except DomainError:
            continue
        if len(found) == 1:
            out[group] = list(found)[0]
    return out


def pools_from_hostvars(hostvars, hosts, default_prefix=DEFAULT_PREFIX):
    """Node pools of node_prereqs (node_prereqs_pool / _pool_taints per host) as flavors.

    Name: the pool's label values joined (h100-nvlink-training ...); hosts with
    the same labels are one pool. Labels and taints are the host's pool as
    node_prereqs writes it (node/pools.py).
    """
    pools = {}
    for host in hosts:
        hv = hostvars.get(host) or {}
        pool = hv.get(POOL_VARIABLE) or {}
        if not pool:
            continue
        found = host_pool(hv, host, default_prefix)
        labels, taints = found["labels"], found["taints"]
        order = [k for k in ("accelerator", "topology", "workload") if k in pool] or sorted(pool)
        name = "-".join(str(pool[k]) for k in order).lower()
        prev = pools.get(name)
        if prev is not None and prev["labels"] != labels:
            _fail(POOL_VARIABLE, labels, "two pools would both be flavor %s" % name,
                  "give the pools different accelerator/topology/workload labels")
        if prev is not None:
            taints = prev["taints"] + [t for t in taints if t not in prev["taints"]]
        pools[name] = {"labels": labels, "taints": taints}
    return pools


# -- chart values ---------------------------------------------------------------------------

# The charts differ in shape: KAI global.registry + image name, Kueue controllerManager.manager.image.repository.


def _merge(base, over):
    out = dict(base)
    for k, v in (over or {}).items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def chart_values(backend, image_mirror=None, mirror_layout="path", pull_secrets=None, user_values=None,
                 kai_gpu_sharing=None, kai_placement=None, pools=None, kai_block_visible_devices=None,
                 pool_aliases=None, allocation_api=None):
    """Helm values for the backend's chart: the mirror and pull secrets, KAI's GPU sharing and
    placement (kai_sharing.py), then the user's values."""
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.values import mirror_repository
    if image_mirror is not None and (not isinstance(image_mirror, str) or "://" in image_mirror
                                     or " " in image_mirror or not image_mirror.strip("/")):
        _fail("queues_image_mirror", image_mirror, "not a registry prefix",
              "use a prefix like registry.local:5000/mirror (no scheme)")
    if mirror_layout not in ("path", "flat"):
        _fail("queues_image_mirror_layout", mirror_layout, "unknown layout", "use path or flat")
    secrets = []
    for i, s in enumerate(pull_secrets or []):
        name = s.get("name") if isinstance(s, dict) else s
        if not isinstance(name, str) or not name:
            _fail("queues_image_pull_secrets[%d]" % i, s, "not a secret name", "list Secret names")
        secrets.append({"name": name})
    values = {}
    if backend == "kai":
        if image_mirror:
            repo = mirror_repository(KAI_IMAGE_REGISTRY, image_mirror, mirror_layout) if mirror_layout == "path" \
                else image_mirror.rstrip("/")
            values["global"] = {"registry": repo}
        if secrets:
            values.setdefault("global", {})["imagePullSecrets"] = secrets
        values = _merge(values, kai_sharing.chart_values(
            kai_sharing.gpu_sharing(kai_gpu_sharing), kai_sharing.placement_plan(kai_placement, pools, pool_aliases),
            kai_block_visible_devices))
    elif backend == "kueue":
        cm = {}
        if image_mirror:
            repo = mirror_repository(KUEUE_IMAGE_REPOSITORY, image_mirror, mirror_layout) if mirror_layout == "path" \
                else "%s/kueue" % image_mirror.rstrip("/")
            cm["manager"] = {"image": {"repository": repo}}
        if secrets:
            cm["imagePullSecrets"] = secrets
        if cm:
            values["controllerManager"] = cm
        values.update(kueue_config.chart_values(allocation_api))
    if user_values is not None and not isinstance(user_values, dict):
        _fail("queues_values", user_values, "not a mapping", "give chart values as a mapping")
    return _merge(values, user_values or {})
