# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node-pool filters: labels and taints of a pool, the GPU nodes of an inventory
(docs in the .yml sidecars).

Thin wrappers over module_utils/node/pools.py, the one definition of the pool rules shared by
node_prereqs (which writes the labels and taints), gpu_operator (whose operands must tolerate
them), queues, GitOps export and the acceptance checks.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node import pools
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter, problems
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

node_labels = module_utils("node.labels")


@domain_filter()
def node_pool_taints(taints, prefix=pools.DEFAULT_PREFIX, host=None, check_only=False):
    """Validated pool taints with full keys (a key without '/' gets the prefix); with
    check_only, the list of input errors instead (empty when fine)."""
    if check_only:
        return problems(pools.pool_taints, taints, prefix, host)
    return pools.pool_taints(taints, prefix, host)


@domain_filter()
def node_pool_labels(current, pool, prefix=pools.DEFAULT_PREFIX, extra=None):
    """Label patch of a node: pool labels under prefix; stale ones under it set to None."""
    return pools.node_label_patch(current, pool, prefix, extra)


def node_taint_list(current, wanted, prefix=pools.DEFAULT_PREFIX):
    """The node's full taint list: wanted pool taints, foreign taints kept, stale prefixed ones gone."""
    return pools.node_taint_list(current, wanted, prefix)


def pool_label_prefix(prefix=None):
    """The site's pool label prefix: gpu_platform_label_prefix as given, else the default."""
    return pools.site_prefix(prefix)


@domain_filter()
def pool_label_key(key, hostvars=None, hosts=None, prefix=None, variable=None):
    """The full key of pool label `key` (trust, accelerator...) as node_prereqs labels `hosts`."""
    return pools.pool_label_key(key, hostvars, hosts, prefix, variable)


@domain_filter()
def gpu_pool_taints(hostvars, hosts, default_prefix=pools.DEFAULT_PREFIX):
    """Every distinct pool taint of `hosts` (inventory names), as node_prereqs applies them."""
    return pools.hosts_pool_taints(hostvars, hosts, default_prefix)


@domain_filter()
def node_pool_inputs(pool, host, taints=None, prefix=pools.DEFAULT_PREFIX, node_name=None, label_nodes=True):
    """node_prereqs' inputs of one host: {errors, node_pool} (what its Node gets, none when not labelled)."""
    return pools.host_inputs(host, pool, taints or [], prefix, host if node_name is None else node_name,
                             bool(label_nodes))


@domain_filter()
def hosts_node_pool_inputs(hostvars, hosts, label_nodes=True, default_prefix=None):
    """node_pool_inputs of hosts a play does not visit, from their inventory variables: {errors, pools}."""
    return pools.hosts_inputs(hostvars, hosts, label_nodes, default_prefix)


def gpu_node_names(hostvars, hosts):
    """Kubernetes node names of inventory hosts (node_prereqs_node_name, else the host name)."""
    return [pools.node_name(hostvars[host] if host in hostvars else {}, host) for host in hosts or ()]


def node_label_values(nodes, label, default=None):
    """{node name: value of `label`} of Node objects (a key with dots and '/' cannot go through
    Jinja's map(attribute=...), which reads dots as a path)."""
    out = {}
    for node in nodes or ():
        meta = (node or {}).get("metadata") or {}
        out[meta.get("name")] = (meta.get("labels") or {}).get(label, default)
    return out


def node_labels_to_change(wanted, nodes):
    """The labels of `wanted` ({node: {label: value}}) the Node objects do not carry yet."""
    return node_labels.labels_to_change(wanted, nodes)


class FilterModule(object):
    def filters(self):
        return {
            "node_pool_taints": node_pool_taints,
            "node_pool_labels": node_pool_labels,
            "node_taint_list": node_taint_list,
            "gpu_pool_taints": gpu_pool_taints,
            "gpu_node_names": gpu_node_names,
            "node_pool_inputs": node_pool_inputs,
            "hosts_node_pool_inputs": hosts_node_pool_inputs,
            "pool_label_prefix": pool_label_prefix,
            "pool_label_key": pool_label_key,
            "node_label_values": node_label_values,
            "node_labels_to_change": node_labels_to_change,
        }
