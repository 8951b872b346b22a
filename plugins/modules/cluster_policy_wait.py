#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_policy_wait
short_description: Wait until the NVIDIA GPU Operator ClusterPolicy really serves GPUs
version_added: 0.1.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Watches the ClusterPolicy (resourceVersion-resumed watch, no polling) until C(status.state) is
    C(ready) B(and) the C(Ready) condition is C(True) with an accepted reason.
  - C(state=ready) with reason C(NoGPUNodes) or C(NFDLabelsMissing) serves no GPU at all; those reasons
    are accepted only when listed in O(accept_reasons).
  - A ready ClusterPolicy does not mean every GPU node is served (a taint the operand DaemonSets do not
    tolerate keeps them off a node). With O(expect_nodes) the wait also lasts until each of those nodes
    offers C(nvidia.com/gpu), C(nvidia.com/gpu.shared) or C(nvidia.com/mig-*) resources.
  - Handles a ClusterPolicy that does not exist yet (waits for its creation).
  - On timeout fails with diagnostics - the Ready condition message (C(states not ready)), operand
    DaemonSets with unavailable counts, operand pods with their waiting reasons and the last log line of
    crashing containers, each expected node without GPUs and why (untolerated taint, operand not
    scheduled, NFD label missing), and hints for known causes.
  - Every Kubernetes API error ends in a message naming the verb, the object and the server's answer.
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
    description: Name of the ClusterPolicy.
    type: str
    default: cluster-policy
  stable_for:
    description:
      - Seconds the accepted state must hold before the wait succeeds (it fails again if the state
        drops within them).
      - Use it right after a Helm change - the status shows the previous reconcile until the operator
        has seen the new spec (the ClusterPolicy status has no C(observedGeneration)).
    type: int
    default: 0
  wait_operator:
    description:
      - First wait until the operator Deployment is rolled out. A new operator pod that cannot start
        (for example an image the mirror lacks) leaves the previous status in place, which would
        look ready.
    type: bool
    default: true
  accept_reasons:
    description:
      - Reasons of the C(Ready=True) condition that count as ready.
      - Add C(NoGPUNodes) or C(NFDLabelsMissing) only for clusters that may legitimately have no GPU yet.
    type: list
    elements: str
    default: [Reconciled]
    choices: [Reconciled, NoGPUNodes, NFDLabelsMissing]
  expect_nodes:
    description:
      - Names of nodes that must offer GPUs (allocatable C(nvidia.com/gpu), C(nvidia.com/gpu.shared) or
        C(nvidia.com/mig-*) greater than 0) before the wait succeeds.
      - The role C(skaffon.gpu_platform.gpu_operator) passes the GPU nodes of its inventory.
    type: list
    elements: str
    default: []
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Wait for the GPU Operator to serve GPUs
  skaffon.gpu_platform.cluster_policy_wait:
    timeout: 900

- name: Wait after an upgrade; the ready state must hold 10 seconds
  skaffon.gpu_platform.cluster_policy_wait:
    stable_for: 10

- name: Wait until the operator serves the GPUs of these nodes (fails naming each node that does not, and why)
  skaffon.gpu_platform.cluster_policy_wait:
    expect_nodes: [gpu-h100-1, gpu-l40s-1]

- name: Accept a cluster without GPU nodes yet (CI, staging)
  skaffon.gpu_platform.cluster_policy_wait:
    accept_reasons: [Reconciled, NoGPUNodes]
    timeout: 120
"""

RETURN = r"""
ready:
  description: Whether the ClusterPolicy reached an accepted ready state (and every expected node offers GPUs).
  returned: always
  type: bool
state:
  description: C(status.state) last seen (C(null) when the object does not exist).
  returned: always
  type: str
  sample: ready
reason:
  description: Reason of the Ready condition last seen.
  returned: always
  type: str
  sample: Reconciled
status:
  description: The ClusterPolicy C(status) last seen.
  returned: always
  type: dict
waited:
  description: Seconds spent waiting.
  returned: always
  type: float
  sample: 3.2
diagnostics:
  description: Human-readable findings (set when not ready).
  returned: when not ready
  type: list
  elements: str
operands:
  description: Operand DaemonSets and pods in the operator namespace (set when not ready).
  returned: when not ready
  type: dict
nodes_without_gpus:
  description: Expected nodes that offer no GPU, each with the reasons found.
  returned: when not ready and O(expect_nodes) is set
  type: dict
  sample: {gpu-h100-1: ["taint gpu.skaffon.io/workload=training:NoSchedule is not tolerated by ..."]}
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.cluster_policy import READY_REASONS, run
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import (
    OPERATOR_ARG_SPEC,
    WAIT_ARG_SPEC,
    GpuPlatformModule,
)


def argspec():
    spec = dict(
        name=dict(type="str", default="cluster-policy"),
        stable_for=dict(type="int", default=0),
        wait_operator=dict(type="bool", default=True),
        accept_reasons=dict(type="list", elements="str", default=["Reconciled"], choices=list(READY_REASONS)),
        expect_nodes=dict(type="list", elements="str", default=[]),
    )
    spec.update(WAIT_ARG_SPEC)
    spec.update(OPERATOR_ARG_SPEC)
    return spec


def main():
    module = GpuPlatformModule(argument_spec=argspec(), supports_check_mode=True)
    module.execute(run)


if __name__ == "__main__":
    main()
