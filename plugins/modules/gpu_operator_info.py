#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_operator_info
short_description: Read the Nodes, the GPU Operator namespace and the operator's custom resources in one run
version_added: 0.3.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Reads what an install or upgrade of the NVIDIA GPU Operator decides on before it writes - the Nodes
    (one LIST), the operator Namespace (one GET), the ClusterPolicies (C(nvidia.com/v1)) and the GPUClusters
    (C(nvidia.com/v1alpha1), the DRA stack) (one LIST each) - in one module run instead of a
    M(kubernetes.core.k8s_info) task per kind.
  - With O(time_slicing_configmap), also the time-slicing ConfigMap and the device plugin DaemonSet of the
    operator namespace (one GET each), which the time-slicing steps decide on.
  - A kind the API server does not serve (its CRD is not installed) reads as no objects.
  - Read-only.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Reads only, in check mode as well.
  diff_mode:
    support: none
    details: Read-only.
  platform:
    platforms: posix
  action_group:
    membership: [skaffon.gpu_platform.k8s]
options:
  operator_namespace:
    description: Namespace of the NVIDIA GPU Operator (a DNS-1123 label).
    type: str
    default: gpu-operator
  time_slicing_configmap:
    description:
      - Name of the device plugin's time-slicing ConfigMap in O(operator_namespace); given, RV(time_slicing_configmap)
        and RV(device_plugin_daemonset) are read too.
    type: str
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Read the cluster state the operator install decides on
  skaffon.gpu_platform.gpu_operator_info:
    operator_namespace: gpu-operator
  register: cluster

- name: Name the nodes
  ansible.builtin.debug:
    msg: "{{ cluster.nodes | map(attribute='metadata.name') | list }}"
"""

RETURN = r"""
nodes:
  description: The Node objects.
  returned: success
  type: list
  elements: dict
namespace:
  description: The operator Namespace object, C(null) when it does not exist.
  returned: success
  type: dict
cluster_policies:
  description: The ClusterPolicy objects (none when the CRD is not installed).
  returned: success
  type: list
  elements: dict
gpu_clusters:
  description: The GPUCluster objects (none when the CRD is not installed).
  returned: success
  type: list
  elements: dict
time_slicing_configmap:
  description: The ConfigMap O(time_slicing_configmap) names, C(null) when it does not exist.
  returned: when O(time_slicing_configmap) is given
  type: dict
device_plugin_daemonset:
  description: The GPU Operator's device plugin DaemonSet (C(nvidia-device-plugin-daemonset)), C(null) when it does not exist.
  returned: when O(time_slicing_configmap) is given
  type: dict
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import GpuPlatformModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.state import read


def main():
    module = GpuPlatformModule(argument_spec=dict(operator_namespace=dict(type="str", default="gpu-operator"),
                                                  time_slicing_configmap=dict(type="str")),
                               supports_check_mode=True)
    module.execute(lambda m: dict(changed=False, **read(m.kube, m.params["operator_namespace"],
                                                        m.params["time_slicing_configmap"])))


if __name__ == "__main__":
    main()
