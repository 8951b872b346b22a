# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the gpu_operator role decides on before it writes: the Nodes, the operator Namespace and
both stacks' custom resources (ClusterPolicy, GPUCluster), read in one module run; with time-slicing,
the time-slicing ConfigMap and the device plugin DaemonSet as well (two k8s_info tasks before).

Three kubernetes.core.k8s_info tasks read the same: three module processes on every run, each
importing the Kubernetes client anew. A kind the server does not serve (the GPUCluster CRD before
the operator's DRA stack is installed) reads as no objects, as k8s_info answers it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import (
    CLUSTER_POLICY_API_VERSION,
    CLUSTER_POLICY_KIND,
    DEVICE_PLUGIN_DAEMONSET,
    GPUCLUSTER_API_VERSION,
    GPUCLUSTER_KIND,
)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import (
    ValidationError,
    dns_label_error,
    dns_subdomain_error,
)


def read(kube, operator_namespace, time_slicing_configmap=None):
    """{nodes, namespace, cluster_policies, gpu_clusters}: one LIST or GET each; with a
    `time_slicing_configmap` name also {time_slicing_configmap, device_plugin_daemonset} (None when
    missing), one GET each."""
    problem = dns_label_error("operator_namespace", operator_namespace) or (
        None if time_slicing_configmap is None else dns_subdomain_error("time_slicing_configmap", time_slicing_configmap))
    if problem:
        raise ValidationError(problem)
    state = dict(nodes=kube.list("v1", "Node")[0],
                 namespace=kube.get("v1", "Namespace", operator_namespace),
                 cluster_policies=kube.list_if_served(CLUSTER_POLICY_API_VERSION, CLUSTER_POLICY_KIND)[0],
                 gpu_clusters=kube.list_if_served(GPUCLUSTER_API_VERSION, GPUCLUSTER_KIND)[0])
    if time_slicing_configmap is not None:
        # nothing to GET in a namespace that does not exist yet (a first install)
        exists = state["namespace"] is not None
        state["time_slicing_configmap"] = kube.get("v1", "ConfigMap", time_slicing_configmap,
                                                   operator_namespace) if exists else None
        state["device_plugin_daemonset"] = kube.get("apps/v1", "DaemonSet", DEVICE_PLUGIN_DAEMONSET,
                                                    operator_namespace) if exists else None
    return state
