# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action base of the collection's Kubernetes modules: kubernetes.core's k8s_info action
(a local or vaulted kubeconfig is found and decrypted on the controller), with its errors in
the modules' words.

kubernetes.core's action reports a kubeconfig it cannot find or decrypt as Ansible's own
error with a traceback; here it is the module's ClientError text. The module's kubeconfig
option is no_log (it may be an inline mapping with credentials), so Ansible masks its value
in the module's message: a ClientError ("Cannot connect to Kubernetes (..., kubeconfig ********)")
gets back the path the task gave, a file the user knows (not the decrypted temporary copy of a
vaulted one). Only a path given as a string is put back, never an inline mapping.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible_collections.kubernetes.core.plugins.action.k8s_info import ActionModule as K8sActionModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kubeconfig import (
    PATH_SEPARATOR,
    missing_kubeconfig,
    undecryptable_kubeconfig,
)


MASK = "********"                                    # what Ansible puts for a no_log value in a string
MASKED_VALUE = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"  # ... and for a whole value


class KubeconfigActionModule(K8sActionModule):

    def get_kubeconfig(self, kubeconfig, remote_transport, new_module_args):
        if not isinstance(kubeconfig, str) or remote_transport:
            return super(KubeconfigActionModule, self).get_kubeconfig(kubeconfig, remote_transport,
                                                                      new_module_args)
        configs, shown = [], []
        for given in kubeconfig.split(PATH_SEPARATOR):
            try:
                found = self._find_needle("files", given)
            except AnsibleError:
                self._kubeconfig_error = missing_kubeconfig(given)
                raise AnsibleActionFail(str(self._kubeconfig_error))
            try:
                real = self._loader.get_real_file(found, decrypt=True)
            except AnsibleError as exc:
                self._kubeconfig_error = undecryptable_kubeconfig(given, exc)
                raise AnsibleActionFail(str(self._kubeconfig_error))
            configs.append(real)
            shown.append(found if real == found else given)   # a decrypted copy: the vaulted file's name
        new_module_args["kubeconfig"] = PATH_SEPARATOR.join(configs)
        self._kubeconfig_shown = PATH_SEPARATOR.join(shown)

    def run(self, tmp=None, task_vars=None):
        self._kubeconfig_error = None
        self._kubeconfig_shown = None
        result = super(KubeconfigActionModule, self).run(tmp, task_vars)
        if self._kubeconfig_error is not None:
            result.pop("exception", None)   # the message says it all; Ansible's traceback adds nothing
            result.update(msg=str(self._kubeconfig_error), api_error=self._kubeconfig_error.to_dict())
        api_error = result.get("api_error")
        if self._kubeconfig_shown and isinstance(api_error, dict) and api_error.get("stage"):
            if isinstance(result.get("msg"), str):
                result["msg"] = result["msg"].replace(MASK, self._kubeconfig_shown)
            if api_error.get("kubeconfig") == MASKED_VALUE:
                api_error["kubeconfig"] = self._kubeconfig_shown
        return result
