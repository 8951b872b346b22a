#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mig_config
short_description: Apply a MIG profile to GPU nodes through the GPU Operator mig-manager
version_added: 0.1.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Validates the request before touching anything, for every node listed, then sets the node
    label C(nvidia.com/mig.config) and watches C(nvidia.com/mig.config.state) until mig-manager
    reports C(success); finally checks that the node offers what the MIG strategy promises.
  - Validation - the node exists and is MIG capable (C(nvidia.com/mig.capable=true)); the profile
    exists in the mig-parted config the cluster uses (ClusterPolicy C(spec.migManager.config.name),
    else the per-node C(<node>-mig-config), else C(default-mig-parted-config), in the operator
    namespace) and applies to the node's GPU model (device filters, profiles of the model). An unknown
    profile fails with the profiles valid for that GPU.
  - GPU pods on the node make mig-manager wait forever (state C(pending)). They are refused by name
    unless O(drain=true); then the node is cordoned, the GPU pods are evicted with the policy/v1
    Eviction API (PodDisruptionBudgets are respected), the label is set, and the node is uncordoned
    after success.
  - On C(failed) the module fails with the node's Events and the mig-manager log. A node that already
    reports C(failed) for the requested profile (an earlier run) is reported at once, before any change
    (mig-manager does not retry an unchanged label). On a timeout in C(pending) it explains the known
    cause (GPU clients not stopping, gpu-operator#2833) and names the pods still on the node.
  - O(timeout) is per node. When the API server is lost mid-run, the failure says what was already
    changed (C(changed=true) when a node was relabelled) and what a re-run will do.
  - Nodes are processed one after the other. To roll out node pools in batches, so that a pool never
    loses all of its GPUs at once, use the role C(skaffon.gpu_platform.mig) or C(playbooks/mig.yml).
  - A call over several nodes reads the Nodes and the operator namespace's ConfigMaps with one LIST each (not a
    request per node); a node's pods are read only when the node is to change.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - skaffon.gpu_platform.wait
  - skaffon.gpu_platform.operator
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Validation only; reports which nodes would change and which pods would be evicted.
  diff_mode:
    support: full
    details: Before and after values of the MIG labels per node.
  platform:
    platforms: posix
  action_group:
    membership: [skaffon.gpu_platform.k8s]
options:
  nodes:
    description: Names of the Kubernetes nodes to configure.
    type: list
    elements: str
    required: true
    aliases: [node]
  profile:
    description:
      - Name of a config of the mig-parted config (for example C(all-1g.10gb), C(all-balanced),
        C(all-disabled)).
    type: str
    required: true
    aliases: [config]
  drain:
    description:
      - Cordon the node and evict its GPU pods first. Without it, GPU pods on a node fail the task.
    type: bool
    default: false
  verify_timeout:
    description: Seconds to wait after success until allocatable resources and labels match the strategy.
    type: int
    default: 120
  eviction_timeout:
    description: Seconds to retry evictions refused by a PodDisruptionBudget and to wait for evicted pods.
    type: int
    default: 300
  reconfigure:
    description:
      - >-
        With C(false) nothing changes. The nodes already at O(profile) are verified (their offer read as
        after a change) and the others are reported C(pending=true) without being touched, so one call can
        sort a batch of nodes before the ones to change get a call of their own.
    type: bool
    default: true
  device_id:
    description:
      - PCI device id of the node's GPUs (C(nvidia-smi -q) Device Id, for example C(0x233010DE)), for
        GPU products missing from the collection's MIG model table.
    type: str
requirements:
  - kubernetes >= 24.2.0
  - PyYAML
notes:
  - The MIG strategy comes from the ClusterPolicy C(spec.mig.strategy) (default C(single)); C(single)
    needs one MIG profile per node.
"""

EXAMPLES = r"""
- name: Split the H100 nodes into 1g.10gb instances, evicting GPU pods first
  skaffon.gpu_platform.mig_config:
    nodes: [gpu-h100-1, gpu-h100-2]
    profile: all-1g.10gb
    drain: true

- name: Only check that the profile is valid for the node (nothing changes)
  skaffon.gpu_platform.mig_config:
    node: gpu-h100-1
    profile: all-balanced
  check_mode: true
"""

RETURN = r"""
nodes:
  description: One entry per node.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: Node name.
      type: str
    profile:
      description: Requested profile.
      type: str
    previous:
      description: Value of C(nvidia.com/mig.config) before.
      type: str
    changed:
      description: Whether the label was (or would be) changed.
      type: bool
    strategy:
      description: MIG strategy of the ClusterPolicy.
      type: str
    config_source:
      description: ConfigMap the profile was validated against.
      type: str
    expected:
      description: Allocatable resources and labels the node must offer after success.
      type: dict
    offer:
      description: What the node offers now (GPU and MIG allocatable, product, MIG labels).
      type: dict
    evicted:
      description: Pods evicted (namespace/name).
      type: list
      elements: str
    would_evict:
      description: In check mode, the GPU pods that drain would evict.
      type: list
      elements: str
    pending:
      description: With O(reconfigure=false), the node is not at O(profile) (nothing was changed; no C(offer)).
      type: bool
  sample:
    - node: gpu-h100-1
      profile: all-1g.10gb
      previous: all-disabled
      changed: true
      strategy: single
      offer: {allocatable: {nvidia.com/gpu: 56}, product: NVIDIA-H100-80GB-HBM3-MIG-1g.10gb}
strategy:
  description: MIG strategy of the ClusterPolicy.
  returned: success
  type: str
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig.config import run
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import (
    OPERATOR_ARG_SPEC,
    WAIT_ARG_SPEC,
    GpuPlatformModule,
)


def argspec():
    spec = dict(
        nodes=dict(type="list", elements="str", required=True, aliases=["node"]),
        profile=dict(type="str", required=True, aliases=["config"]),
        drain=dict(type="bool", default=False),
        verify_timeout=dict(type="int", default=120),
        eviction_timeout=dict(type="int", default=300),
        reconfigure=dict(type="bool", default=True),
        device_id=dict(type="str"),
    )
    spec.update(WAIT_ARG_SPEC)
    spec.update(OPERATOR_ARG_SPEC)
    return spec


def main():
    module = GpuPlatformModule(argument_spec=argspec(), supports_check_mode=True)
    module.execute(run)


if __name__ == "__main__":
    main()
