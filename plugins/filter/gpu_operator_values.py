# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters gpu_operator_values and gpu_operator_values_diff (docs in the .yml sidecars)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.operator_values import (
    OperatorValuesError,
    operator_values,
    values_diff,
)


def gpu_operator_values(plan, user_values=None, mig_strategy=None, service_monitor=None,
                        image_mirror=None, image_mirror_layout="path",
                        image_pull_secrets=None, device_plugin_config=None):
    try:
        return operator_values(
            plan, user_values=user_values, mig_strategy=mig_strategy,
            service_monitor=service_monitor, image_mirror=image_mirror,
            image_mirror_layout=image_mirror_layout or "path",
            image_pull_secrets=image_pull_secrets,
            device_plugin_config=device_plugin_config)
    except OperatorValuesError as exc:
        raise AnsibleFilterError(str(exc))


def gpu_operator_values_diff(current, desired):
    return values_diff(current, desired)


class FilterModule(object):
    def filters(self):
        return {
            "gpu_operator_values": gpu_operator_values,
            "gpu_operator_values_diff": gpu_operator_values_diff,
        }
