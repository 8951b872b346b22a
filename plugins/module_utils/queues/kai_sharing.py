# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KAI Scheduler GPU fractions and placement per pool (pure functions).

Read from the KAI Scheduler chart and code at v0.17.0 (kai-scheduler/KAI-Scheduler):

- `global.gpuSharing` (values.yaml) becomes `admission.gpuSharing` of the Config
  (templates/_helpers.tpl); the admission webhook then accepts pods annotated
  `gpu-fraction` or `gpu-memory` (pkg/common/constants/constants.go) and refuses them
  while it is off ("... with gpu sharing request, while GPU sharing is disabled",
  pkg/admission/webhook/v1alpha2/gpusharing/gpu_sharing.go).
- A fraction must be a number with 0 < f < 1 and gpu-memory a positive integer MiB
  (pkg/binder/plugins/gpusharing/gpu-request/gpu_request_validator.go): 1.0 is refused by
  KAI itself, a whole GPU is requested as `nvidia.com/gpu: 1`.
- A fractional pod requests no `nvidia.com/gpu`; the binder reserves the shared GPU with a
  reservation pod `gpu-reservation-<node>-<5 chars>` in the namespace `kai-resource-reservation`
  (chart global.resourceReservation.namespace) that requests `nvidia.com/gpu: 1`
  (pkg/binder/binding/resourcereservation/resource_reservation.go). So a team's
  ResourceQuota on `requests.nvidia.com/gpu` never sees its fractions; the queue does: the
  pod's fraction counts in the queue's allocated GPUs
  (pkg/podgroupcontroller/controllers/resources/fraction.go).
- `scheduler.placementStrategy` sets the chart's `default` SchedulingShard
  (templates/default-shard.yaml) `placementStrategy.{gpu,cpu}`. With
  `global.nodePoolLabelKey` set, a shard with `partitionLabelValue: V` schedules only the
  Nodes, Queues and PodGroups labelled `<key>=V`; the default shard (value "") only those
  without the key (pkg/scheduler/conf/scheduler_conf.go GetLabelSelector, DoesNotExist;
  cache/cluster_info/data_lister/kubernetes_lister.go). The pod-grouper copies the label
  from the pod to its PodGroup (pkg/podgrouper/pod_controller.go addNodePoolLabel).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import (
    KAI_GPU_FRACTION_ANNOTATION,
    KAI_GPU_MEMORY_ANNOTATION,
    KAI_SHARD_API_VERSION,
    QUEUES_NS_NAME_LABEL,
    VAP_API_VERSION,
)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import is_dns_label

STRATEGIES = ("binpack", "spread")
CHART_DEFAULT_STRATEGY = "binpack"          # values.yaml scheduler.placementStrategy
# the pool label a shard partitions by, in the order tried: the workload separates training
# (binpack) from inference (spread) pools, the others are fall-backs
LABEL_ORDER = ("workload", "accelerator", "topology", "fabric", "sharing", "trust")
FRACTION_POLICY = "skaffon-gpu-fraction"
FRACTION_OFF_POLICY = "skaffon-gpu-fraction-off"
# a decimal or scientific number, as KAI parses it (strconv.ParseFloat + resource.ParseQuantity)
_NUMBER = r"^([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?$"


def _fail(var, value, problem, fix):
    raise DomainError("%s: %s (got %r): %s" % (var, problem, value, fix), variable=var)


def gpu_sharing(value):
    """queues_kai_gpu_sharing as a bool (null = off, the chart's default)."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0", ""):
        return False
    return _fail("queues_kai_gpu_sharing", value, "not a boolean", "use true or false")


def canonical(name, pools, aliases=None):
    """The pool a name means: a pool name (queue_pools: h100-nvlink-training) or an inventory group
    whose hosts are that one pool (pool_h100_nvlink_training, as the design names pools); else None."""
    if name in (pools or {}):
        return name
    alias = (aliases or {}).get(name)
    return alias if alias in (pools or {}) else None


def _known(pools, aliases):
    names = sorted(pools or {})
    names += sorted(a for a, p in (aliases or {}).items() if p in (pools or {}) and a not in names)
    return ", ".join(names) or "(none found in queues_pool_group)"


def team_pools(teams, pools, aliases=None, pool_teams=None):
    """{team: pool or None}: the team's queue.pool, else the one pool of queues_kai_pool_teams
    ({pool: [teams]} or {pool: {teams: [...]}}, the shape of the design's platform_pools) naming it."""
    listed = {}
    for name, entry in sorted((pool_teams or {}).items()):
        members = entry.get("teams") if isinstance(entry, dict) else entry
        pool = canonical(name, pools, aliases)
        if pool is None:
            _fail("queues_kai_pool_teams", name, "not a GPU pool", "use one of the node pools: %s" % _known(
                pools, aliases))
        for team in members or ():
            listed.setdefault(team, set()).add(pool)
    out = {}
    for idx, var, team, queue in teams:
        if queue.get("pool") is not None:
            pool = canonical(queue["pool"], pools, aliases)
            if pool is None:
                _fail(var + ".pool", queue["pool"], "not a GPU pool",
                      "use one of the node pools: %s" % _known(pools, aliases))
            out[team] = pool
        else:
            found = listed.get(team) or set()
            out[team] = list(found)[0] if len(found) == 1 else None
    return out


def placement_plan(placement, pools, aliases=None):
    """What the chart and the shards get from queues_kai_placement ({pool: binpack|spread}).

    Returns {"strategy": s or None, "label_key": k or None, "shards": {value: strategy},
    "pool_value": {pool: value}}: strategy when every pool agrees (scheduler.placementStrategy),
    else label_key (global.nodePoolLabelKey) and one shard per value of that pool label.
    Pools not named keep the chart's binpack.
    """
    plan = {"strategy": None, "label_key": None, "shards": {}, "pool_value": {}}
    if placement in (None, {}):
        return plan
    if not isinstance(placement, dict):
        _fail("queues_kai_placement", placement, "not a mapping", "use {<pool>: binpack|spread}")
    pools = pools or {}
    named = {}
    for name, strategy in sorted(placement.items()):
        pool = canonical(name, pools, aliases)
        if pool is None:
            _fail("queues_kai_placement", name, "not a GPU pool", "use one of the node pools: %s" % _known(
                pools, aliases))
        if strategy not in STRATEGIES:
            _fail("queues_kai_placement[%s]" % name, strategy, "unknown strategy", "use binpack or spread")
        if named.get(pool, strategy) != strategy:
            _fail("queues_kai_placement[%s]" % name, strategy, "names pool %s a second time with another "
                  "strategy" % pool, "give each pool one strategy")
        named[pool] = strategy
    want = dict((name, named.get(name, CHART_DEFAULT_STRATEGY)) for name in pools)
    if len(set(want.values())) == 1:
        plan["strategy"] = list(want.values())[0]
        return plan
    for key, values in _candidate_keys(pools):
        by_value = {}
        for name, value in values.items():
            by_value.setdefault(value, set()).add(want[name])
        # a shard is named by its value: "default" is the chart's shard of the unlabelled nodes
        nameable = all(is_dns_label(v) and v != "default" for v in by_value)
        if all(len(s) == 1 for s in by_value.values()) and nameable:
            plan["label_key"] = key
            plan["shards"] = dict((v, list(s)[0]) for v, s in by_value.items())
            plan["pool_value"] = values
            return plan
    return _fail("queues_kai_placement", placement, "no pool label separates the pools by strategy",
                 "KAI shards by one node label (global.nodePoolLabelKey): give pools of different strategies "
                 "different node_prereqs_pool workload values, or one strategy to all")


def _candidate_keys(pools):
    """[(full label key, {pool: value})] of labels every pool carries, workload first."""
    def short(key):
        return key.rsplit("/", 1)[-1]
    keys = None
    for pool in pools.values():
        have = set((pool.get("labels") or {}))
        keys = have if keys is None else keys & have
    ranked = sorted(keys or (), key=lambda k: (LABEL_ORDER.index(short(k)) if short(k) in LABEL_ORDER
                                               else len(LABEL_ORDER), k))
    return [(k, dict((name, str(pool["labels"][k])) for name, pool in pools.items())) for k in ranked]


def shard_objects(plan):
    """One SchedulingShard per pool label value (kai.scheduler/v1, the chart's CRD), named by the value."""
    out = []
    for value, strategy in sorted(plan["shards"].items()):
        out.append({"apiVersion": KAI_SHARD_API_VERSION, "kind": "SchedulingShard", "metadata": {"name": value},
                    "spec": {"partitionLabelValue": value,
                             "placementStrategy": {"gpu": strategy, "cpu": strategy}}})
    return out


def chart_values(sharing, plan, block_visible_devices=None):
    """The chart values of GPU sharing and placement (merged into queue_chart_values)."""
    values = {}
    if sharing:
        values["global"] = {"gpuSharing": True}
    if block_visible_devices is not None:
        values.setdefault("global", {})["blockNvidiaVisibleDevices"] = bool(block_visible_devices)
    if plan["strategy"] is not None:
        values["scheduler"] = {"placementStrategy": plan["strategy"]}
    if plan["label_key"] is not None:
        values.setdefault("global", {})["nodePoolLabelKey"] = plan["label_key"]
    return values


def label_queues(objects, teams, plan, pools, pool_of):
    """With shards, every team Queue carries <label_key>=<its pool's value> (pool_of: team_pools), and
    every department the value of its teams; a department whose teams are in two shards is refused."""
    key = plan["label_key"]
    if key is None:
        return objects
    queues = dict((o["metadata"]["name"], o) for o in objects if o["kind"] == "Queue")
    value_of = {}
    for idx, var, team, queue in teams:
        pool = pool_of.get(team)
        if pool is None:
            _fail(var + ".pool", None, "missing",
                  "name the team's GPU pool (one of %s) in its queue block or queues_kai_pool_teams: KAI shards the "
                  "pools (queues_kai_placement differs per pool) and schedules a queue only in the shard of its %s "
                  "label" % (", ".join(sorted(pools)), key))
        value_of[team] = (var, plan["pool_value"][pool])
    for team, (var, value) in sorted(value_of.items()):
        q = queues.get(team)
        parent = q["spec"].get("parentQueue") if q else None
        while q is not None:
            labels = q["metadata"].setdefault("labels", {})
            if labels.get(key, value) != value:
                problem = "in another shard than a sibling under %s (%s)" % (q["metadata"]["name"], labels[key])
                _fail(var + ".pool", value, problem,
                      "a KAI queue belongs to one shard: put the teams of one department on pools of one %s, or "
                      "split the department" % key)
            labels[key] = value
            q = queues.get(parent)
            parent = q["spec"].get("parentQueue") if q else None
    return objects


def fraction_teams(teams, sharing, fraction_pools, pools, aliases=None, pool_of=None):
    """(allowed, refused) team names: fractions need gpuSharing and, when queues_kai_fraction_pools
    is a list, the team's pool (team_pools) in it."""
    if fraction_pools is not None and not isinstance(fraction_pools, list):
        _fail("queues_kai_fraction_pools", fraction_pools, "not a list", "list the pools that take GPU fractions")
    wanted = None
    if fraction_pools is not None:
        wanted = set()
        for name in fraction_pools:
            pool = canonical(name, pools, aliases)
            if pool is None:
                _fail("queues_kai_fraction_pools", name, "not a GPU pool", "use one of the node pools: %s" % _known(
                    pools, aliases))
            wanted.add(pool)
    allowed, refused = [], []
    for idx, var, team, queue in teams:
        ok = sharing and (wanted is None or (pool_of or {}).get(team) in wanted)
        (allowed if ok else refused).append(team)
    return allowed, refused


def _annotation(name):
    return "object.metadata.annotations['%s']" % name


def _has(name):
    return "has(object.metadata.annotations) && '%s' in object.metadata.annotations" % name


def fraction_policies(allowed, refused):
    """ValidatingAdmissionPolicies on pods of the team namespaces.

    A ResourceQuota cannot count a fraction (the pod requests no nvidia.com/gpu; the reservation
    pod in kai-resource-reservation does), so the platform refuses what quota cannot stop:
    fractions in namespaces of teams whose pools do not take them, and values KAI would
    refuse only at binding (a fraction outside 0 < f < 1, gpu-memory not a positive integer).
    Every refusal is reason Forbidden (403): kubectl prints a 422 (reason Invalid) without causes
    as 'The pods "x" is invalid', hiding the message.
    """
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["pods"]}]
    frac, mem = KAI_GPU_FRACTION_ANNOTATION, KAI_GPU_MEMORY_ANNOTATION
    out = []

    def policy(name, validations, teams):
        out.append({"apiVersion": VAP_API_VERSION, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
                    "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules},
                             "validations": validations}})
        out.append({"apiVersion": VAP_API_VERSION, "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": {"name": name},
                    "spec": {"policyName": name, "validationActions": ["Deny"],
                             "matchResources": {"namespaceSelector": {"matchExpressions": [
                                 {"key": QUEUES_NS_NAME_LABEL, "operator": "In", "values": sorted(teams)}]}}}})
    if allowed:
        policy(FRACTION_POLICY, [
            {"expression": "!(%s) || (%s.matches('%s') && double(%s) > 0.0 && double(%s) < 1.0)" % (
                _has(frac), _annotation(frac), _NUMBER, _annotation(frac), _annotation(frac)),
             "messageExpression": ("'%s ' + %s + ' is not a GPU fraction: KAI takes 0 < %s < 1 "
                                   "(a whole GPU is nvidia.com/gpu: 1)'") % (frac, _annotation(frac), frac),
             "reason": "Forbidden"},
            {"expression": "!(%s) || (%s.matches('^[0-9]+$') && int(%s) > 0)" % (
                _has(mem), _annotation(mem), _annotation(mem)),
             "messageExpression": "'%s ' + %s + ' is not a positive integer (MiB of one GPU)'" % (
                 mem, _annotation(mem)),
             "reason": "Forbidden"},
        ], allowed)
    if refused:
        policy(FRACTION_OFF_POLICY, [
            {"expression": "!(%s) && !(%s)" % (_has(frac), _has(mem)),
             "messageExpression": ("'GPU fractions (%s, %s) are not offered in namespace ' + request.namespace + "
                                   "': its pool does not share GPUs by KAI fractions; request nvidia.com/gpu "
                                   "(see docs/queues.md, GPU fractions)'") % (frac, mem),
             "reason": "Forbidden"},
        ], refused)
    return out
