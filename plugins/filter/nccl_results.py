# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter nccl_results (docs in nccl_results.yml); the logic is module_utils/workload/nccl.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

nccl = module_utils("workload.nccl")


@domain_filter()
def nccl_results(text):
    # AnsibleUnsafeText and the other text types Ansible hands over are str subclasses
    if not isinstance(text, str):
        raise DomainError("nccl_results: %r (%s) is not text: the filter takes the log of an nccl-tests run as one string, "
                          "for example the stdout of 'kubectl logs <launcher pod>'" % (text, type(text).__name__))
    return nccl.parse(text)


class FilterModule(object):
    def filters(self):
        return {"nccl_results": nccl_results}
