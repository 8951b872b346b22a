#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_monitoring
short_description: Converge the GPU PrometheusRule and Grafana dashboard ConfigMaps
version_added: 0.2.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Applies the objects rendered by the P(skaffon.gpu_platform.monitoring_objects#filter) filter (a
    PrometheusRule and dashboard ConfigMaps) with server-side apply.
  - One LIST per kind and namespace (objects labelled C(app.kubernetes.io/part-of=skaffon-gpu-platform));
    an object is written only when its labels, annotations, C(spec) or C(data) differ, so a second run
    writes nothing.
  - Check mode sends the writes as server dry-runs; with C(--diff) returns before and after of each changed
    object.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: The rules, alerts and dashboards are written as server-side dry runs.
  diff_mode:
    support: full
    details: Before and after of each monitoring object that changes.
  platform:
    platforms: posix
  action_group:
    membership: [skaffon.gpu_platform.k8s]
options:
  objects:
    description: The objects to converge (each with apiVersion, kind, metadata.name and metadata.namespace).
    type: list
    elements: dict
    required: true
  field_manager:
    description: Field manager of the server-side apply.
    type: str
    default: skaffon.gpu_platform
requirements:
  - kubernetes >= 24.2.0
"""

EXAMPLES = r"""
- name: Apply the GPU alerts and dashboards
  skaffon.gpu_platform.gpu_monitoring:
    objects: "{{ {'namespace': 'monitoring'} | skaffon.gpu_platform.monitoring_objects }}"
"""

RETURN = r"""
objects:
  description:
    - Every object and what happened to it - C(created), C(updated), C(unchanged) or C(deleted) (in check
      mode what would happen); the shape every converging module of the collection returns.
  returned: always
  type: list
  elements: dict
  sample: [{kind: PrometheusRule, name: skaffon-gpu-alerts, namespace: monitoring, action: unchanged}]
requests:
  description: API requests sent, by verb (C(LIST), C(GET), C(CREATE), C(PATCH), C(APPLY), C(DELETE)).
  returned: always
  type: dict
  sample: {LIST: 2}
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import GpuPlatformModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring.apply import converge


def run(module):
    return converge(module.kube, module.params["objects"], module.check_mode, module.params["field_manager"],
                    diff=module._diff)


def main():
    module = GpuPlatformModule(argument_spec=dict(
        objects=dict(type="list", elements="dict", required=True),
        field_manager=dict(type="str", default="skaffon.gpu_platform"),
    ))
    module.execute(run)


if __name__ == "__main__":
    main()
