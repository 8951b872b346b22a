# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site's node-pool label prefix: the one default and how a host's prefix is found.

node_prereqs writes the pool labels as <prefix><key> (accelerator, topology, fabric, workload,
sharing, trust). Every reader of those labels (the gpu_operator trust guard, the usage report's
pools, queues, GitOps export, design) must use the prefix the GPU host was labelled with, not a
literal: a site with its own prefix would otherwise pass a guard that matches nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DEFAULT_PREFIX = "gpu.skaffon.io/"
POOL_KEYS = ("accelerator", "topology", "fabric", "workload", "sharing", "trust")
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


class MixedPrefixError(ValueError):
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
