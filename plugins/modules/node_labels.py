#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_labels
short_description: Set or remove labels and pool taints on many Kubernetes Nodes with one read
version_added: 0.2.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Reads the Nodes once (one LIST) and sends one merge patch to each Node whose labels differ from
    O(labels), in bounded parallel. Nodes whose labels already match are not written.
  - Only the labels named are touched; a label given as C(null) is removed.
  - With O(pools), a Node also gets its pool labels and taints under the pool's prefix, with the
    rules of node_prereqs (the P(skaffon.gpu_platform.node_pool_labels#filter) and
    P(skaffon.gpu_platform.node_taint_list#filter) filters) applied to the Node as read; labels
    and the taint list go out in one merge patch.
  - Every node named must exist, checked before any write (unless O(allow_missing=true)).
  - Every Kubernetes API error ends in a message naming the verb, the object and the server's answer;
    a failed patch does not stop the others, and the failures are reported together.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Each patch is sent as a server-side dry run.
  diff_mode:
    support: full
    details: The labels (and, for O(pools), the taints) of each Node that changes, before and after.
  platform:
    platforms: posix
  action_group:
    membership: [skaffon.gpu_platform.k8s]
options:
  labels:
    description:
      - 'Node name -> C({label: value}); C(null) removes the label.'
      - Applied after the pool labels of O(pools) for the same Node.
    type: dict
    default: {}
  pools:
    description:
      - 'Node name -> C({prefix, pool, taints, labels, host}): the labels and taints the caller owns
        under C(prefix) (default C(gpu.skaffon.io/)).'
      - C(pool) maps keys to values; a key without C(/) gets the prefix. Labels under the prefix that
        are not in C(pool) or C(labels) are removed; other labels are kept.
      - C(taints) is a list of C({key, value, effect}) (a key without C(/) gets the prefix). Taints
        whose key starts with the prefix and that are not listed are removed; other taints are kept
        in place.
      - C(labels) are further labels of the Node (C(null) removes one), C(host) the inventory host
        named when the Node does not exist.
    type: dict
    default: {}
  allow_missing:
    description:
      - Skip nodes the cluster does not have (returned in RV(unknown)) instead of failing.
    type: bool
    default: false
  parallel:
    description: Patches in flight at once.
    type: int
    default: 8
"""

EXAMPLES = r"""
- name: Keep host drivers on two nodes, select a time-slicing config on a third
  skaffon.gpu_platform.node_labels:
    labels:
      gpu-a100-1: {nvidia.com/gpu.deploy.driver: "false"}
      gpu-a100-2: {nvidia.com/gpu.deploy.driver: "false"}
      gpu-l40s-1: {nvidia.com/device-plugin.config: l40s}

- name: Remove a label
  skaffon.gpu_platform.node_labels:
    labels:
      gpu-l40s-1: {nvidia.com/device-plugin.config: null}

- name: Pool labels and taints of two nodes, in one call
  skaffon.gpu_platform.node_labels:
    pools:
      gpu-h100-1:
        host: gpu-h100-1
        pool: {accelerator: h100, workload: training}
        taints: [{key: workload, value: training, effect: NoSchedule}]
      gpu-l40s-1:
        pool: {accelerator: l40s}
    labels:
      gpu-h100-1: {nvidia.com/gpu.deploy.driver: "false"}
"""

RETURN = r"""
objects:
  description: The Nodes patched (or that would be, in check mode), with action C(updated).
  returned: success
  type: list
  elements: dict
  sample: [{kind: Node, name: gpu-a100-1, action: updated}]
unknown:
  description: Nodes named in O(labels) that the cluster does not have (with O(allow_missing=true)).
  returned: success
  type: list
  elements: str
requests:
  description: API requests by verb.
  returned: success
  type: dict
  sample: {LIST: 1, PATCH: 1}
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import GpuPlatformModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.labels import converge


def run(module):
    params = module.params
    return converge(module.kube, params["labels"], check_mode=module.check_mode, diff=module._diff,
                    parallel=params["parallel"], allow_missing=params["allow_missing"], pools=params["pools"])


def main():
    module = GpuPlatformModule(argument_spec=dict(
        labels=dict(type="dict", default={}),
        pools=dict(type="dict", default={}),
        allow_missing=dict(type="bool", default=False),
        parallel=dict(type="int", default=8),
    ), supports_check_mode=True)
    module.execute(run)


if __name__ == "__main__":
    main()
