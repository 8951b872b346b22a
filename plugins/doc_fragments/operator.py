# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The GPU Operator namespace option (module_base.OPERATOR_ARG_SPEC).
    DOCUMENTATION = r"""
options:
  operator_namespace:
    description:
      - Namespace of the NVIDIA GPU Operator (its Deployment is labelled
        C(app.kubernetes.io/component=gpu-operator) by the chart).
      - Default - the ClusterPolicy C(status.namespace), else the one namespace that holds an operator
        Deployment.
    type: str
"""
