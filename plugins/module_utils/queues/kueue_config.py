# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kueue manager's Configuration the queues role installs (pure).

    chart_values(allocation_api)     # {"managerConfig": {"controllerManagerConfigYaml": ...}}

A team's ClusterQueue covers what its flavors list (nvidia.com/gpu, MIG profiles); its pods also ask for
cpu and memory (a LimitRange gives every pod some). Kueue 0.19 runs `resources.quotaCheckStrategy:
BlockUndeclared` unless told otherwise: a pod set asking for a resource no resource group covers fits no
flavor ("resource cpu unavailable in ClusterQueue"), so not one team workload would be admitted.
IgnoreUndeclared (the QuotaCheckStrategy gate is beta and on since 0.19) counts only the covered
resources, for admission and for preemption; cpu and memory stay with the namespace's ResourceQuota. A
queue that lists cpu or memory in its flavors still has them counted.

The chart takes the Configuration as one string, so setting a key means restating the chart's defaults;
the chart rolls the manager when the string changes (config-checksum annotation).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import dra as queues_dra

QUOTA_CHECK_STRATEGY = "IgnoreUndeclared"
# kueue 0.19.2 values.yaml managerConfig.controllerManagerConfigYaml
CHART_CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081"},
    "metrics": {"bindAddress": ":8443"},
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
    "controller": {"groupKindConcurrency": {
        "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5,
        "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1}},
    "clientConnection": {"qps": 300, "burst": 500},
    "integrations": {"frameworks": ["batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/rayservice",
                                    "ray.io/raycluster", "jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper",
                                    "trainer.kubeflow.org/trainjob", "pod", "deployment", "statefulset",
                                    "leaderworkerset.x-k8s.io/leaderworkerset"]},
}


def configuration(allocation_api=None):
    config = dict(CHART_CONFIGURATION)
    resources = {"quotaCheckStrategy": QUOTA_CHECK_STRATEGY}
    if queues_dra.is_dra(allocation_api):
        resources["deviceClassMappings"] = queues_dra.device_class_mappings()
    config["resources"] = resources
    return config


def chart_values(allocation_api=None):
    """Helm values that give the Kueue manager its Configuration."""
    import yaml
    return {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(configuration(allocation_api),
                                                                            default_flow_style=False)}}
