# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pools and batches of a MIG rollout (filters mig_pools, mig_whole_pool_batches).

A pool is a set of nodes that serve the same workloads; a batch (the play's
`serial`) must never hold every node of a pool, or the pool has no GPU while
mig-manager reconfigures it. Pure: hosts and their variables in, findings out.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections.abc import Mapping

UNGROUPED = "ungrouped"


class MigRolloutError(ValueError):
    """A wrong input (the filters raise it as AnsibleFilterError)."""


def mig_pools(hosts, hostvars, group_prefix):
    """{host: pool} for every host with a mig_profile: its mig_pool, else its first group
    whose name starts with group_prefix, else 'ungrouped'."""
    if not isinstance(group_prefix, str) or not group_prefix:
        raise MigRolloutError("mig_pools: mig_pool_group_prefix must be a non-empty string, got %r" % (group_prefix,))
    pools = {}
    for host in hosts:
        host_vars = hostvars[host]
        if not isinstance(host_vars, Mapping):
            raise MigRolloutError("mig_pools: hostvars of %s is not a mapping" % host)
        if not host_vars.get("mig_profile"):
            continue
        groups = [g for g in host_vars.get("group_names") or [] if re.match("^" + re.escape(group_prefix), g)]
        pools[host] = host_vars.get("mig_pool") or (groups[0] if groups else UNGROUPED)
    return pools


def batch_size_of(batch_size):
    if isinstance(batch_size, bool):
        batch_size = None
    try:
        size = int(batch_size)
    except (TypeError, ValueError):
        size = 0
    if size < 1:
        raise MigRolloutError("mig_batch_size must be a whole number of nodes >= 1 (the play's serial), got %r"
                              % (batch_size,))
    return size


def mig_whole_pool_batches(pools, hosts, batch_size):
    """One line per batch that would hold every node of a pool at once (empty = safe)."""
    size = batch_size_of(batch_size)
    hosts = list(hosts)
    found = []
    ordered = []
    for pool in pools.values():
        if pool not in ordered:
            ordered.append(pool)
    for start in range(0, len(hosts), size):
        batch = hosts[start:start + size]
        for pool in ordered:
            members = [h for h, p in pools.items() if p == pool]
            if all(m in batch for m in members):
                found.append("batch %d holds all %d node(s) of pool %s (%s)"
                             % (start // size + 1, len(members), pool, ", ".join(members)))
    return found
