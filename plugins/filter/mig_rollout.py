# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters mig_pools and mig_whole_pool_batches (docs in the .yml sidecars); logic in module_utils/mig_rollout.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.module_utils import mig_rollout


def mig_pools(hosts, hostvars, group_prefix):
    try:
        return mig_rollout.mig_pools(hosts, hostvars, group_prefix)
    except mig_rollout.MigRolloutError as exc:
        raise AnsibleFilterError(str(exc))


def mig_whole_pool_batches(pools, hosts, batch_size):
    try:
        return mig_rollout.mig_whole_pool_batches(pools, hosts, batch_size)
    except mig_rollout.MigRolloutError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"mig_pools": mig_pools, "mig_whole_pool_batches": mig_whole_pool_batches}
