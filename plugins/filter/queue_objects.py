# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""queue_objects / queue_pools: the teams' queue objects, validated before anything is written.

The logic lives in module_utils/queues.py (unit-tested without Ansible).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.pools import DEFAULT_PREFIX
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

queues = module_utils("queues.objects")


@domain_filter("queue_objects")
def queue_objects(tenants, backend="none", departments=None, pools=None, kai_default_queue="block",
                  kai_gpu_sharing=None, kai_placement=None, kai_fraction_pools=None, pool_aliases=None,
                  kai_pool_teams=None, allocation_api=None):
    return queues.render(backend, tenants, departments, pools, kai_default_queue, kai_gpu_sharing, kai_placement,
                         kai_fraction_pools, pool_aliases, kai_pool_teams, allocation_api)


@domain_filter("queue_pools")
def queue_pools(hostvars, only=None, label_prefix=DEFAULT_PREFIX):
    hosts = list(only) if only is not None else list(hostvars.keys())
    return queues.pools_from_hostvars(hostvars, hosts, label_prefix)


@domain_filter("queue_chart_values")
def queue_chart_values(backend, image_mirror=None, image_mirror_layout="path", image_pull_secrets=None,
                       user_values=None, kai_gpu_sharing=None, kai_placement=None, pools=None,
                       kai_block_visible_devices=None, pool_aliases=None, allocation_api=None):
    return queues.chart_values(backend, image_mirror, image_mirror_layout, image_pull_secrets, user_values,
                               kai_gpu_sharing, kai_placement, pools, kai_block_visible_devices, pool_aliases, allocation_api)


@domain_filter("queue_pool_groups")
def queue_pool_groups(hostvars, groups, within=None, label_prefix=DEFAULT_PREFIX):
    return queues.pool_groups(hostvars, groups, within, label_prefix)


class FilterModule(object):
    def filters(self):
        return {"queue_objects": queue_objects, "queue_pools": queue_pools,
                "queue_chart_values": queue_chart_values, "queue_pool_groups": queue_pool_groups}
