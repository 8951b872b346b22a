# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base of the collection's Kubernetes modules (model: community.okd openshift_common).

    def main():
        module = GpuPlatformModule(argument_spec=argspec())
        module.execute(run)        # run(module) -> result dict

`GpuPlatformModule` merges kubernetes.core's AUTH_ARG_SPEC, holds the client
(`module.kube`, see kube.py) and runs the body so that DomainError, ApiError
(ClientError too: no client could be made) and kubernetes.core's CoreException
all end in fail_json, never a traceback (errors.execute, the one translation for modules).
kubernetes.core's AnsibleModule is imported here and nowhere else; a module that needs no cluster
(gpu_node_facts, usage_report, export_files) uses Ansible's own, the latter two with errors.execute.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule  # noqa: F401
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import errors
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import connect


# Options shared by several modules; documented by the doc fragments of the same names.
WAIT_ARG_SPEC = {"timeout": dict(type="int", default=600)}              # doc_fragments/wait.py
OPERATOR_ARG_SPEC = {"operator_namespace": dict(type="str")}            # doc_fragments/operator.py


def k8s_argspec(argument_spec):
    """AUTH_ARG_SPEC plus the module's own options."""
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(argument_spec)
    return spec


class GpuPlatformModule(AnsibleK8SModule):
    def __init__(self, argument_spec, **kwargs):
        kwargs.setdefault("supports_check_mode", True)
        super(GpuPlatformModule, self).__init__(module_class=AnsibleModule,
                                                argument_spec=k8s_argspec(argument_spec), **kwargs)
        self._kube = None

    @property
    def kube(self):
        """The client, made on first use; a kubeconfig that does not load or a server that does not
        answer GET /version raises ClientError (an ApiError), which execute() reports."""
        if self._kube is None:
            self._kube = connect(self, get_api_client)
        return self._kube

    def execute(self, body):
        """Run body(self) -> result dict and exit with it; every known failure is a message
        (errors.execute, plus kubernetes.core's CoreException)."""
        def guarded(module):
            try:
                return body(module)
            except CoreException as exc:
                module.fail_from_exception(exc)
        errors.execute(self, guarded)
