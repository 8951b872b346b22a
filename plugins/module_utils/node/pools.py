# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-pool rules: the label prefix, a host's pool labels and taints, as node_prereqs writes them.

node_prereqs writes the pool labels as <prefix><key> (accelerator, topology, fabric, workload,
sharing, trust). Every reader of those labels (the gpu_operator trust guard, the usage report's
pools, queues, GitOps export, design) must use the prefix the GPU host was labelled with, not a
literal: a site with its own prefix would otherwise pass a guard that matches nothing.

The pool of a host (`host_pool`) is read from its hostvars here and nowhere else: node_prereqs
(through the node_pools filters), gpu_operator's tolerations, the queue flavors, the GitOps node
patches and the acceptance checks' tolerations all see the same labels and taints. A taint
without a value (`value` missing or null) has no value, as in Kubernetes: the empty string,
tolerated by `operator: Exists` (never the string "None").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from collections.abc import Mapping

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import (
    is_dns_subdomain,
    is_label_value,
    label_key_error,
    label_key_problem,
    label_value_error,
    to_bool,
)

DEFAULT_PREFIX = "gpu.skaffon.io/"
POOL_KEYS = ("accelerator", "topology", "fabric", "workload", "sharing", "trust")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TAINT_FIELDS = ("key", "value", "effect")
POOL_VARIABLE = "node_prereqs_pool"
TAINTS_VARIABLE = "node_prereqs_pool_taints"
NODE_NAME_VARIABLE = "node_prereqs_node_name"
# The collection-wide variable a site sets once (group_vars/all); node_prereqs_label_prefix
# defaults to it.
SITE_VARIABLE = "gpu_platform_label_prefix"
HOST_VARIABLE = "node_prereqs_label_prefix"


def site_prefix(prefix=None):
    """gpu_platform_label_prefix as given, else the default."""
    return DEFAULT_PREFIX if prefix in (None, "") else prefix


def host_prefix(hostvars_of_host, default=None):
    """The prefix node_prereqs labels this host with: its node_prereqs_label_prefix, else its
    gpu_platform_label_prefix, else `default` (the caller's site prefix), else DEFAULT_PREFIX."""
    hv = hostvars_of_host or {}
    for name in (HOST_VARIABLE, SITE_VARIABLE):
        value = hv.get(name)
        if value not in (None, ""):
            return str(value)
    return site_prefix(default)


class PoolError(DomainError):
    """A node-pool input (prefix, labels, taints) node_prereqs could not write."""


class MixedPrefixError(PoolError):
    pass


def hosts_label_key(key, hostvars, hosts, default=None, variable=None):
    """<prefix><key> for the GPU hosts `hosts`; their prefix must be one (a guard reading one
    label key cannot serve hosts labelled under two prefixes)."""
    found = {}
    for host in hosts or ():
        hv = hostvars[host] if hostvars is not None and host in hostvars else {}
        found.setdefault(host_prefix(hv, default), []).append(str(host))
    if len(found) > 1:
        listing = "; ".join("%s on %s" % (p, ", ".join(sorted(h))) for p, h in sorted(found.items()))
        raise MixedPrefixError(
            "the GPU hosts are labelled under different %s values (%s), so no single %s label key "
            "matches all of them: use one prefix for the site (%s in group_vars/all)%s."
            % (HOST_VARIABLE, listing, key, SITE_VARIABLE,
               " or set %s explicitly" % variable if variable else ""))
    prefix = next(iter(found)) if found else site_prefix(default)
    return prefix + key


def pool_label_key(key, hostvars=None, hosts=None, default=None, variable=None):
    """The full key of pool label `key` (trust, accelerator...) as node_prereqs labels `hosts`."""
    if key not in POOL_KEYS:
        raise PoolError("pool_label_key: %r is not a node-pool key (%s)" % (key, ", ".join(POOL_KEYS)))
    try:
        full = hosts_label_key(key, hostvars, list(hosts or ()), default, variable)
    except MixedPrefixError as exc:
        raise PoolError("%s%s" % ("%s: " % variable if variable else "", exc.msg), variable=variable)
    check_label_prefix(full[:-len(key)], "%s (or %s)" % (HOST_VARIABLE, SITE_VARIABLE))
    return full


def check_label_prefix(prefix, field=HOST_VARIABLE):
    """The prefix must be `<DNS subdomain>/`: every pool label is prefix + key."""
    if not isinstance(prefix, str) or not prefix.endswith("/"):
        raise PoolError(
            "%s must end with '/' (like gpu.skaffon.io/), got %r: pool labels are the prefix followed "
            "directly by the key, so %r would give %r." % (field, prefix, prefix, "%saccelerator" % prefix),
            variable=field)
    problem = label_key_problem(prefix + "accelerator")
    if problem:
        raise PoolError("%s %r is not a label key prefix: %s." % (field, prefix, problem), variable=field)
    return prefix


def full_key(key, prefix):
    """A pool label or taint key as written on the node: a key without '/' gets the prefix."""
    key = str(key)
    return key if "/" in key else prefix + key


def pool_taints(taints, prefix=DEFAULT_PREFIX, host=None):
    """Validated pool taints with full keys; a missing or null value is no value ("")."""
    where = "%s%s" % (TAINTS_VARIABLE, " of %s" % host if host else "")
    if taints is None:
        return []
    if isinstance(taints, (str, Mapping)) or not isinstance(taints, (list, tuple)):
        raise PoolError(
            "%s must be a list of {key, value, effect} (one item per taint, YAML '- key: ...'), got %s %r"
            % (where, "a mapping" if isinstance(taints, Mapping) else type(taints).__name__, taints),
            variable=TAINTS_VARIABLE)
    check_label_prefix(prefix)
    result = []
    for index, taint in enumerate(taints):
        if not isinstance(taint, Mapping) or not taint.get("key"):
            raise PoolError("%s[%d] must be a mapping with a key, got %r" % (where, index, taint),
                            variable=TAINTS_VARIABLE)
        unknown = sorted(set(taint) - set(TAINT_FIELDS))
        if unknown:
            raise PoolError("%s[%d] has unknown fields %s (known: key, value, effect)"
                            % (where, index, ", ".join(unknown)), variable=TAINTS_VARIABLE)
        key = full_key(taint["key"], prefix)
        error = label_key_error("%s[%d].key" % (where, index), key)
        if error:
            raise PoolError(error, variable=TAINTS_VARIABLE)
        value = "" if taint.get("value") is None else str(taint["value"])
        error = label_value_error("%s[%d].value" % (where, index), value)
        if error:
            raise PoolError(error, variable=TAINTS_VARIABLE)
        if taint.get("effect") not in TAINT_EFFECTS:
            raise PoolError("%s[%d].effect must be one of %s, got %r"
                            % (where, index, ", ".join(TAINT_EFFECTS), taint.get("effect")),
                            variable=TAINTS_VARIABLE)
        result.append({"key": key, "value": value, "effect": taint["effect"]})
    return result


def pool_labels(pool, prefix=DEFAULT_PREFIX):
    """{full key: value} of a node_prereqs_pool mapping."""
    if not isinstance(pool, Mapping):
        raise PoolError("%s must be a mapping of %s to label values, got %r"
                        % (POOL_VARIABLE, ", ".join(POOL_KEYS), pool), variable=POOL_VARIABLE)
    return dict((full_key(key, prefix), str(value)) for key, value in pool.items())


def node_label_patch(current, pool, prefix=DEFAULT_PREFIX, extra=None):
    """Label patch of a node: pool labels under prefix; stale ones under it set to None."""
    check_label_prefix(prefix)
    labels = dict((key, None) for key in (current or {}) if key.startswith(prefix))
    labels.update(pool_labels(pool, prefix))
    labels.update(extra or {})
    return labels


def node_taint_list(current, wanted, prefix=DEFAULT_PREFIX):
    """The node's full taint list: wanted pool taints, foreign taints kept, stale prefixed ones gone."""
    pending = dict(("%s:%s" % (t["key"], t["effect"]), t) for t in wanted)
    out = []
    for taint in current or ():
        ident = "%s:%s" % (taint.get("key"), taint.get("effect"))
        if ident in pending:
            out.append(pending.pop(ident))
        elif not str(taint.get("key", "")).startswith(prefix):
            out.append(taint)
    return out + [t for t in wanted if "%s:%s" % (t["key"], t["effect"]) in pending]


def node_name(hostvars_of_host, host):
    """The Kubernetes node name of an inventory host: node_prereqs_node_name, else the host name."""
    return str((hostvars_of_host or {}).get(NODE_NAME_VARIABLE) or host)


def host_pool(hostvars_of_host, host, default_prefix=None):
    """{name, prefix, labels, taints} of an inventory host, as node_prereqs labels and taints its node."""
    hv = hostvars_of_host or {}
    prefix = host_prefix(hv, default_prefix)
    return {"name": node_name(hv, host), "prefix": prefix,
            "labels": pool_labels(hv.get(POOL_VARIABLE) or {}, prefix),
            "taints": pool_taints(hv.get(TAINTS_VARIABLE), prefix, host)}


def toleration(taint):
    """The toleration of one pool taint: Equal with its value, Exists when it has none."""
    if taint.get("value") in (None, ""):
        return {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}
    return {"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": taint["effect"]}


def hosts_pool_taints(hostvars, hosts, default_prefix=DEFAULT_PREFIX):
    """Every distinct pool taint of `hosts` (inventory names), as node_prereqs applies them."""
    seen, result = set(), []
    for host in hosts or ():
        if host not in hostvars:
            continue
        for taint in host_pool(hostvars[host], host, default_prefix)["taints"]:
            ident = (taint["key"], taint["value"], taint["effect"])
            if ident not in seen:
                seen.add(ident)
                result.append(taint)
    return result


def host_inputs(host, pool, taints, prefix, node_name_, label_nodes=True):
    """node_prereqs' inputs of one host: {errors, node_pool}. errors name the host, the variable,
    the value and the fix; node_pool ({host, prefix, pool, taints}, what node_prereqs writes to the
    host's Node) is None when the host's Node is not labelled or an input is wrong."""
    errors = []
    pool_ok = (isinstance(pool, Mapping) and not set(pool) - set(POOL_KEYS)
               and all(is_label_value(str(value)) for value in pool.values()))
    if not pool_ok:
        errors.append(
            "%s on %s must map only %s to label values (up to 63 characters [A-Za-z0-9-_.], alphanumeric at "
            "both ends); got %s%s. Fix the inventory (group_vars of the pool or host_vars), e.g. %s: {accelerator: "
            "h100, topology: nvlink, workload: training}."
            % (POOL_VARIABLE, host, ", ".join(POOL_KEYS), json.dumps(pool, default=str),
               " (a string, not a mapping)" if isinstance(pool, str) else "", POOL_VARIABLE))
    try:
        wanted = pool_taints(taints, prefix, host)
    except DomainError as exc:
        errors.append(exc.msg)
        wanted = None
    if not (isinstance(node_name_, str) and is_dns_subdomain(node_name_)):
        errors.append("%s of %s is '%s', not a Kubernetes node name (lower-case DNS subdomain): set it to the "
                      "name `kubectl get nodes` shows." % (NODE_NAME_VARIABLE, host, node_name_))
    labelled = label_nodes and pool_ok and wanted is not None
    return {"errors": errors,
            "node_pool": {"host": host, "prefix": prefix, "pool": pool, "taints": wanted} if labelled else None}


def hosts_inputs(hostvars, hosts, label_nodes=True, default_prefix=None):
    """host_inputs of hosts the play does not visit, from their inventory variables (hostvars):
    {errors, pools: {node name: node_pool}}. label_nodes and default_prefix stand for a host that
    does not set node_prereqs_label_nodes or a prefix."""
    errors, out = [], {}
    for host in hosts or ():
        hv = hostvars[host] if host in hostvars else {}
        name = node_name(hv, host)
        own = hv.get("node_prereqs_label_nodes")
        got = host_inputs(host, {} if hv.get(POOL_VARIABLE) is None else hv.get(POOL_VARIABLE),
                          hv.get(TAINTS_VARIABLE) or [], host_prefix(hv, default_prefix), name,
                          to_bool(label_nodes if own is None else own))
        errors.extend(got["errors"])
        if got["node_pool"] is not None:
            out[name] = got["node_pool"]
    return {"errors": errors, "pools": out}
