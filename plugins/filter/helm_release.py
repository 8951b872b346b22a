# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters helm_release_differs and helm_release_stuck (docs in their .yml files); the logic is
module_utils/core/helm_release.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

helm_release = module_utils("core.helm_release")


@domain_filter()
def helm_release_differs(release, chart, version, values):
    return helm_release.release_differs(release, chart, version, values)


@domain_filter()
def helm_release_stuck(release, name, namespace, chart, version, values):
    return helm_release.stuck(release, name, namespace, chart, version, values)


class FilterModule(object):
    def filters(self):
        return {"helm_release_differs": helm_release_differs, "helm_release_stuck": helm_release_stuck}
