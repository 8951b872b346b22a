# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter audit_policy (docs in audit_policy.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

policy = module_utils("audit_policy")


@domain_filter("audit_policy")
def audit_policy(tenants):
    if not isinstance(tenants, list):
        raise DomainError("tenants_list = %r: must be the list of teams ({name: ...})" % (tenants,))
    return policy.render(policy.team_names(tenants))


class FilterModule(object):
    def filters(self):
        return {"audit_policy": audit_policy}
