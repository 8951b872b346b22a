# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Local and vaulted kubeconfigs for gpu_operator_info, exactly as for kubernetes.core.k8s."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.kubeconfig_action import KubeconfigActionModule


class ActionModule(KubeconfigActionModule):
    """kubernetes.core's k8s action: finds and decrypts the kubeconfig on the controller (plugin_utils)."""
