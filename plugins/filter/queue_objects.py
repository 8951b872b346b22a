# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""queue_objects / queue_pools: the teams' queue objects, validated before anything is written.

The logic lives in module_utils/queues.py (unit-tested without Ansible).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues.objects import chart_values, pools_from_hostvars, render


def queue_objects(tenants, backend="none", departments=None, pools=None, kai_default_queue="block"):
    try:
        return render(backend, tenants, departments, pools, kai_default_queue)
    except DomainError as exc:
        raise AnsibleFilterError("queue_objects: %s" % exc.msg)


def queue_pools(hostvars, only=None, label_prefix="gpu.skaffon.io/"):
    try:
        hosts = list(only) if only is not None else list(hostvars.keys())
        return pools_from_hostvars(hostvars, hosts, label_prefix)
    except DomainError as exc:
        raise AnsibleFilterError("queue_pools: %s" % exc.msg)


def queue_chart_values(backend, image_mirror=None, image_mirror_layout="path", image_pull_secrets=None,
                       user_values=None):
    try:
        return chart_values(backend, image_mirror, image_mirror_layout, image_pull_secrets, user_values)
    except DomainError as exc:
        raise AnsibleFilterError("queue_chart_values: %s" % exc.msg)


class FilterModule(object):
    def filters(self):
        return {"queue_objects": queue_objects, "queue_pools": queue_pools,
                "queue_chart_values": queue_chart_values}
