# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters gitops_files, gitops_nodes, gitops_platform_objects and tenants_objects (docs in their .yml files)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

gitops = module_utils("gitops")
tenants = module_utils("tenants.objects")


@domain_filter()
def gitops_files(settings, releases=None, layers=None, nodes=None):
    if not settings.get("repo_url"):
        raise DomainError("gitops_repo_url must name the Git repository Argo CD reads the export from "
                          "(for example https://git.example/platform/gpu-gitops.git)")
    return gitops.export(settings, releases or {}, layers or {},
                         dict((k, (v.get("labels") or {}, v.get("taints") or [])) for k, v in (nodes or {}).items()))


@domain_filter()
def tenants_objects(teams, settings=None):
    """The objects roles/tenants applies for tenants_list, validated the same way (without the cluster checks)."""
    merged = tenants.default_settings(**(settings or {}))
    problems = tenants.validate(teams or [], merged)
    if problems:
        raise DomainError("tenants_list cannot be exported: " + "; ".join(problems))
    return tenants.render_all(teams or [], merged)


@domain_filter()
def gitops_platform_objects(operator_namespace, psa_version="latest", time_slicing=None):
    return gitops.platform_objects(operator_namespace, psa_version, time_slicing)


@domain_filter()
def gitops_nodes(hostvars, hosts, plan=None, time_slicing=None):
    return gitops.node_patches(hostvars, hosts, plan, time_slicing)


class FilterModule(object):
    def filters(self):
        return {"gitops_files": gitops_files, "tenants_objects": tenants_objects,
                "gitops_platform_objects": gitops_platform_objects, "gitops_nodes": gitops_nodes}
