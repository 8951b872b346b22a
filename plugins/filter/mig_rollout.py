# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters mig_rollout_plan and mig_rollout_read (docs in the .yml sidecars): thin wrappers over
module_utils/mig/rollout.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

rollout = module_utils("mig.rollout")


def mig_rollout_plan(*args, **kwargs):
    return rollout.mig_rollout_plan(*args, **kwargs)


def mig_rollout_read(*args, **kwargs):
    return rollout.mig_rollout_read(*args, **kwargs)


class FilterModule(object):
    def filters(self):
        return {"mig_rollout_plan": mig_rollout_plan, "mig_rollout_read": mig_rollout_read}
