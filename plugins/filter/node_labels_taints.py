# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter node_labels_taints (docs in node_labels_taints.yml); logic in module_utils/node_labels.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node_labels import NodeLabelsError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node_labels import (
    node_labels_taints as _labels_taints,
)


def node_labels_taints(node, label_prefix, pool_labels=None, pool_taints=None, plan_labels=None):
    try:
        return _labels_taints(node, label_prefix, pool_labels, pool_taints, plan_labels)
    except NodeLabelsError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"node_labels_taints": node_labels_taints}
