# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters gpu_operator_values, gpu_operator_values_diff, gpu_operator_secret_strings and
gpu_operator_untolerated (docs in the .yml sidecars)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter, problems
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

values = module_utils("gpu_operator.values")


def gpu_operator_values(plan, user_values=None, mig_strategy=None, service_monitor=None,
                        image_mirror=None, image_mirror_layout="path",
                        image_pull_secrets=None, device_plugin_config=None,
                        values_overlay=None, pool_taints=None, check_only=False, dcgm_hostengine=None,
                        gpu_access_by_request=None, allocation_api=None):
    """The chart values; with check_only, the list of input errors instead (empty when fine),
    so the role can show them from a task that does not print the values."""
    kwargs = dict(user_values=user_values, mig_strategy=mig_strategy, service_monitor=service_monitor,
                  image_mirror=image_mirror, image_mirror_layout=image_mirror_layout or "path",
                  image_pull_secrets=image_pull_secrets, device_plugin_config=device_plugin_config,
                  values_overlay=values_overlay, pool_taints=pool_taints, dcgm_hostengine=dcgm_hostengine,
                  gpu_access_by_request=gpu_access_by_request, allocation_api=allocation_api)
    if check_only:
        return problems(values.operator_values, plan, **kwargs)
    return domain_filter()(values.operator_values)(plan, **kwargs)


def gpu_operator_values_diff(current, desired, secret_paths=None):
    return values.values_diff(current, desired, secret_paths or ())


def gpu_operator_secret_strings(chart_values, secret_paths=None):
    return values.secret_strings(chart_values, secret_paths or ())


def gpu_operator_scrub(text, secrets):
    return values.scrub(text, secrets)


def gpu_operator_untolerated(nodes, tolerations, expect):
    return values.untolerated_nodes(nodes, tolerations, expect)


class FilterModule(object):
    def filters(self):
        return {
            "gpu_operator_values": gpu_operator_values,
            "gpu_operator_values_diff": gpu_operator_values_diff,
            "gpu_operator_secret_strings": gpu_operator_secret_strings,
            "gpu_operator_scrub": gpu_operator_scrub,
            "gpu_operator_untolerated": gpu_operator_untolerated,
        }
