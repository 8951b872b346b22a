# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters platform_design, platform_inventory_pools, platform_design_report and
platform_job_templates (docs in the .yml files next to this one)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.skaffon.gpu_platform.plugins.module_utils.design import report as design_report
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.design import templates as design_templates
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.design.decision import decide
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.plain import plain
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter

POOL_VARS = ("node_prereqs_pool", "node_prereqs_pool_taints", "node_prereqs_node_name", "node_prereqs_label_prefix",
             "gpu_platform_label_prefix")


@domain_filter("platform_design")
def platform_design(pools, tenants=None, requirements=None, inventory=None, mig_parted_config=None):
    return decide(pools, tenants=tenants, requirements=requirements, inventory=inventory,
                  mig_parted_config=mig_parted_config)


def platform_inventory_pools(groups, hostvars=None, prefix="pool_"):
    """{pool group: {hosts, nodes, labels, taints, label_prefix}} from the node_prereqs variables.

    Without hostvars (a variable read through another host's hostvars cannot see hostvars)
    only the hosts are known: `labels_known` is false and the design skips label checks;
    the MIG layout, which depends on the hosts only, stays the same."""
    result = {}
    for group in sorted(g for g in groups if str(g).startswith(prefix)):
        hosts = sorted(str(h) for h in groups[group])
        pool = {"hosts": hosts, "nodes": [], "labels": {}, "taints": [], "label_prefix": None,
                "labels_known": hostvars is not None}
        for host in hosts:
            if hostvars is None:
                pool["nodes"].append(host)
                continue
            hv = hostvars[host]
            values = dict((k, hv[k]) for k in POOL_VARS if k in hv)
            pool["nodes"].append(str(values.get("node_prereqs_node_name") or host))
            # a pool is one group_vars file: the first host speaks for all
            if host == hosts[0]:
                pool["labels"] = plain(values.get("node_prereqs_pool") or {})
                pool["taints"] = plain(list(values.get("node_prereqs_pool_taints") or []))
                # node_prereqs_label_prefix defaults to the site-wide gpu_platform_label_prefix
                pool["label_prefix"] = (values.get("node_prereqs_label_prefix")
                                        or values.get("gpu_platform_label_prefix"))
        result[str(group)] = pool
    return result


def platform_design_report(design, departments=None, title="GPU platform"):
    design = plain(design)
    return {"architecture.md": design_report.architecture(design, title=title),
            "quota-queue-concept.md": design_report.concept(design, departments=plain(departments or []))}


def platform_job_templates(design):
    return design_templates.contexts(plain(design))


class FilterModule(object):
    def filters(self):
        return {"platform_design": platform_design, "platform_inventory_pools": platform_inventory_pools,
                "platform_design_report": platform_design_report, "platform_job_templates": platform_job_templates}
