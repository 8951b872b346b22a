#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_cluster_wait
short_description: Wait until the NVIDIA GPU Operator GPUCluster (DRA stack) serves claimable GPUs
version_added: 0.2.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Watches the GPUCluster (C(nvidia.com/v1alpha1), the GPU Operator's experimental Dynamic Resource
    Allocation stack) until C(status.state) is C(ready) B(and) the C(Ready) condition is C(True) with
    reason C(Reconciled), the way M(skaffon.gpu_platform.cluster_policy_wait) waits on a ClusterPolicy
    (the same code). While a ClusterPolicy exists the operator keeps the GPUCluster C(notReady) with
    reason C(PrerequisiteNotMet).
  - A ready GPUCluster does not mean a node's GPUs can be claimed. With O(expect_nodes) the wait also
    lasts until each of those nodes publishes ResourceSlices of driver C(gpu.nvidia.com) (newest pool
    generation, all its slices) listing C(gpu) or C(mig) devices with the attributes claims select on
    (C(type), C(uuid), C(productName); MIG devices C(profile) and C(parentUUID)), and, with
    O(expect_gpus), as many physical GPUs as the host reports. One LIST of ResourceSlices, then a watch.
  - Refuses a cluster that serves no C(resource.k8s.io/v1) (Kubernetes before 1.34).
  - On timeout fails with diagnostics - the GPUCluster's Error condition, operand DaemonSets and pods,
    each expected node without claimable GPUs and why (no DRA kubelet plugin pod there, its state and
    last log line, an untolerated taint, a missing deploy label, devices without attributes, an
    incomplete pool).
  - Read-only. In check mode it reports the current state once and does not wait.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - skaffon.gpu_platform.wait
  - skaffon.gpu_platform.operator
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Reads the state once and does not wait.
  diff_mode:
    support: none
    details: Read-only.
  platform:
    platforms: posix
  action_group:
    membership: [skaffon.gpu_platform.k8s]
options:
  name:
    description: Name of the GPUCluster (the CRD allows only C(gpu-cluster)).
    type: str
    default: gpu-cluster
  stable_for:
    description:
      - Seconds the ready state must hold before the wait succeeds (the GPUCluster status has no
        C(observedGeneration) either).
    type: int
    default: 0
  wait_operator:
    description: First wait until the operator Deployment is rolled out.
    type: bool
    default: true
  expect_nodes:
    description: Names of nodes that must publish claimable GPU or MIG devices before the wait succeeds.
    type: list
    elements: str
    default: []
  expect_gpus:
    description:
      - Physical GPUs per node (C(node name -> count)) the node's slices must cover, counting C(gpu)
        devices and the distinct parents of C(mig) devices.
      - The role C(skaffon.gpu_platform.gpu_operator) passes the C(gpu_count) the hosts report.
    type: dict
    default: {}
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Wait until the DRA stack serves the GPUs of these nodes
  skaffon.gpu_platform.gpu_cluster_wait:
    expect_nodes: [gpu-h100-1, gpu-l40s-1]
    expect_gpus: {gpu-h100-1: 8, gpu-l40s-1: 4}
    timeout: 900
"""

RETURN = r"""
ready:
  description: Whether the GPUCluster is ready (and every expected node publishes claimable GPUs).
  returned: always
  type: bool
state:
  description: C(status.state) last seen (C(null) when the object does not exist).
  returned: always
  type: str
  sample: ready
reason:
  description: Reason of the Ready condition last seen (of the Error condition while not ready).
  returned: always
  type: str
  sample: Reconciled
status:
  description: The GPUCluster C(status) last seen.
  returned: always
  type: dict
waited:
  description: Seconds spent waiting.
  returned: always
  type: float
resource_slices:
  description: Per expected node what the driver publishes (C(gpus), C(mig) by profile, C(devices), C(physical_gpus)).
  returned: when the slices were read
  type: dict
  sample: {gpu-h100-1: {gpus: 7, mig: {1g.10gb: 7}, physical_gpus: 8, devices: [gpu-0, gpu-1]}}
diagnostics:
  description: Human-readable findings (set when not ready).
  returned: when not ready
  type: list
  elements: str
operands:
  description: Operand DaemonSets and pods in the operator namespace (set when not ready).
  returned: when not ready
  type: dict
nodes_without_slices:
  description: Expected nodes without claimable GPUs, each with the reasons found.
  returned: when not ready and O(expect_nodes) is set
  type: dict
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.cluster_policy import run
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.gpu_cluster import (
    GPUClusterWaiter,
    prerequisites,
)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import (
    OPERATOR_ARG_SPEC,
    WAIT_ARG_SPEC,
    GpuPlatformModule,
)


def argspec():
    spec = dict(
        name=dict(type="str", default="gpu-cluster"),
        stable_for=dict(type="int", default=0),
        wait_operator=dict(type="bool", default=True),
        expect_nodes=dict(type="list", elements="str", default=[]),
        expect_gpus=dict(type="dict", default={}),
    )
    spec.update(WAIT_ARG_SPEC)
    spec.update(OPERATOR_ARG_SPEC)
    return spec


def main():
    module = GpuPlatformModule(argument_spec=argspec(), supports_check_mode=True)
    module.execute(lambda m: run(m, GPUClusterWaiter, prerequisites))


if __name__ == "__main__":
    main()
