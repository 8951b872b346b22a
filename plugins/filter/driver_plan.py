# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter driver_plan (docs in driver_plan.yml); the logic is module_utils/driver_plan.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

plan = module_utils("node.driver_plan")


@domain_filter()
def driver_plan(hosts, driver_enabled=None, toolkit_enabled=None, driver_precompiled=False, only=None, group=None):
    return plan.driver_plan(hosts, driver_enabled=driver_enabled, toolkit_enabled=toolkit_enabled,
                            driver_precompiled=driver_precompiled, only=only, group=group)


class FilterModule(object):
    def filters(self):
        return {"driver_plan": driver_plan}
