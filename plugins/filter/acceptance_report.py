# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters acceptance_inputs, acceptance_markdown and acceptance_junit (docs in their .yml files)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

inputs = module_utils("acceptance.inputs")
report = module_utils("acceptance.report")


def acceptance_markdown(results, meta=None):
    return report.markdown(results, meta or {})


def acceptance_junit(results, meta=None):
    return report.junit(results, meta or {})


@domain_filter()
def acceptance_inputs(hostvars, hosts, time_slicing=None, tenants=None, allowed_registries=None,
                      allocation_api=None, groups=None, queue_backend=None, kai_gpu_sharing=None,
                      kai_fraction_pools=None, kai_pool_teams=None):
    fractions = dict(groups=groups, queue_backend=queue_backend, kai_gpu_sharing=kai_gpu_sharing,
                     kai_fraction_pools=kai_fraction_pools, kai_pool_teams=kai_pool_teams)
    return inputs.checks_input(hostvars, hosts, time_slicing, tenants, allowed_registries, allocation_api, fractions)


class FilterModule(object):
    def filters(self):
        return {"acceptance_markdown": acceptance_markdown, "acceptance_junit": acceptance_junit,
                "acceptance_inputs": acceptance_inputs}
