# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG rollout plan: pools, batches and every input error, behind the filter
mig_rollout_plan (docs in plugins/filter/mig_rollout_plan.yml).

The whole MIG rollout is checked from every host's inventory variables before
the first batch changes anything: under `serial`, a check that read the
current batch's host values would pass batch 1 and fail batch 2 after batch 1
had relabelled its nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import is_label_value, to_bool
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.pools import node_name

INT_VARS = ("mig_timeout", "mig_verify_timeout", "mig_eviction_timeout")
BOOL_VARS = ("mig_drain", "mig_allow_whole_pool")


def _bool(value):
    if to_bool(value) is None:
        raise ValueError(value)
    return to_bool(value)


def _int(value):
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise ValueError(value)


def mig_rollout_plan(hostvars, hosts, batch_size=1, batch=None, defaults=None, pending=None):
    """Pools, batches and every input error of the rollout, computed from all hosts.

    hostvars: the hostvars mapping; hosts: every host of the rollout (ansible_play_hosts_all of the
    MIG play), the order serial cuts; batch_size: mig_batch_size; batch: ansible_play_batch (checked
    against batch_size); defaults: role defaults for variables a host does not set
    (mig_pool_group_prefix, mig_allow_whole_pool, mig_drain, mig_timeout, ...); pending: the hosts
    that will be reconfigured, when the batched play runs over those only (a node already at its
    profile loses no GPU): batches are cut over them, pools still count every host.
    """
    defaults = dict(defaults or {})
    errors = []
    hosts = list(hosts or ())
    try:
        size = _int(batch_size)
        if size < 1:
            raise ValueError(batch_size)
    except ValueError:
        return {"pools": {}, "profiles": {}, "nodes": {}, "batches": [], "errors": [
            "mig_batch_size must be a whole number of nodes >= 1 (the play's serial), got %r: set "
            "mig_batch_size=1 to change one node at a time." % (batch_size,)]}

    # hostvars[host] computes every variable of the host: once per host, not once per variable read
    seen = {}

    def var(host, name):
        if host not in seen:
            hv = hostvars[host] if host in hostvars else {}
            seen[host] = hv if isinstance(hv, Mapping) else {}
        value = seen[host].get(name)
        return defaults.get(name) if value is None else value

    pools, profiles, nodes, allow = {}, {}, {}, {}
    for host in hosts:
        profile = var(host, "mig_profile")
        if profile in (None, ""):
            continue
        # a mig-parted config name is a label value (nvidia.com/mig.config=<name>)
        if not is_label_value(profile, allow_empty=False):
            errors.append("mig_profile of %s must be a mig-parted config name such as all-1g.10gb or "
                          "all-disabled (a string, quoted in YAML if it looks like a number), got %r"
                          % (host, profile))
            continue
        profiles[host] = profile
        # the role's default: node_prereqs' node name rule
        nodes[host] = str(var(host, "mig_node_name") or node_name(seen[host], host))
        prefix = var(host, "mig_pool_group_prefix") or ""
        groups = [g for g in (var(host, "group_names") or []) if prefix and g.startswith(prefix)]
        pools[host] = var(host, "mig_pool") or (groups[0] if groups else "ungrouped")
        # The pool name is compared with, and reported as, the node-pool label value.
        if not is_label_value(pools[host], allow_empty=False):
            errors.append("mig_pool of %s is %r, not a label value (up to 63 letters, digits, '-', '_' and "
                          "'.', starting and ending with a letter or digit): use the pool's node-pool label "
                          "value such as h100-nvlink-training, or leave mig_pool unset to take the host's "
                          "%s* group" % (host, pools[host], prefix))
        for name in BOOL_VARS:
            try:
                value = _bool(var(host, name))
            except ValueError:
                errors.append("%s of %s must be true or false, got %r" % (name, host, var(host, name)))
                continue
            if name == "mig_allow_whole_pool":
                allow[host] = value
        for name in INT_VARS:
            try:
                if _int(var(host, name)) < 1:
                    raise ValueError(name)
            except ValueError:
                errors.append("%s of %s must be a number of seconds >= 1, got %r" % (name, host, var(host, name)))
        other = var(host, "mig_batch_size")
        if other is not None and str(other) != str(batch_size):
            errors.append("mig_batch_size of %s is %r but the rollout runs with %r: set it once (group_vars/all "
                          "or -e), the play's serial uses it" % (host, other, batch_size))

    waiting = None if pending is None else set(pending)
    cut = hosts if waiting is None else [h for h in hosts if h in waiting]
    batches = [cut[start:start + size] for start in range(0, len(cut), size)]
    if batch is not None:
        batch = list(batch)
        if batch and batch not in batches and batch[0] in hosts:
            errors.append("mig_batch_size=%s does not match the play's serial: this batch is %s. Run "
                          "playbooks/mig.yml (serial: mig_batch_size) or set serial to mig_batch_size."
                          % (batch_size, ", ".join(batch)))

    whole = []
    for pool in sorted(set(pools.values())):
        members = [h for h in hosts if pools.get(h) == pool]
        if all(allow.get(h) for h in members):
            continue
        for number, members_batch in enumerate(batches, 1):
            if not set(members) - set(members_batch):
                whole.append("batch %d holds all %d node(s) of pool %s (%s)"
                             % (number, len(members), pool, ", ".join(members)))
    if whole:
        errors.append("mig_batch_size=%s would reconfigure every node of a pool at once: %s. Lower "
                      "mig_batch_size (the play's serial), add nodes to the pool, or set "
                      "mig_allow_whole_pool=true for that pool to accept that it has no GPU during its change."
                      % (batch_size, "; ".join(whole)))
    return {"pools": pools, "profiles": profiles, "nodes": nodes, "batches": batches, "errors": errors}


def mig_rollout_read(plan, results, hosts):
    """What the rollout's read (mig_config reconfigure=false, one call per profile) found.

    plan: mig_rollout_plan's result for `hosts`; results: the registered loop results of the read
    calls. Returns pending (hosts of `hosts` with a profile whose node has no verified offer, in
    order: the batched play's hosts) and verified (one offer per verified host as the role records
    it, with node, pool and changed=false). A node a failed call did not reach has no offer: pending.
    """
    offers = {}
    for result in results or ():
        for entry in (result or {}).get("nodes") or ():
            if isinstance(entry, Mapping) and "offer" in entry and not entry.get("pending"):
                offers[entry.get("node")] = entry["offer"]
    pending, verified = [], []
    for host in hosts or ():
        if host not in plan.get("profiles", {}):
            continue
        node = plan["nodes"][host]
        if node in offers:
            verified.append(dict(offers[node], node=node, pool=plan["pools"][host], changed=False))
        else:
            pending.append(host)
    return {"pending": pending, "verified": verified}
