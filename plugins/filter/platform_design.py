# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters platform_design, platform_inventory_pools, platform_design_report and
platform_job_templates (docs in the .yml files next to this one)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.plain import plain
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

decision = module_utils("design.decision")
design_inputs = module_utils("design.inputs")
design_report = module_utils("design.report")
design_templates = module_utils("design.templates")


@domain_filter("platform_design")
def platform_design(pools, tenants=None, requirements=None, inventory=None, mig_parted_config=None):
    return decision.decide(pools, tenants=tenants, requirements=requirements, inventory=inventory,
                           mig_parted_config=mig_parted_config)


def platform_inventory_pools(groups, hostvars=None, prefix="pool_"):
    return design_inputs.inventory_pools(groups, hostvars, prefix)


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
