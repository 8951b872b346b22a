# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter helm_release_differs (docs in helm_release_differs.yml); the logic is module_utils/core/helm_release.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

helm_release = module_utils("core.helm_release")


@domain_filter()
def helm_release_differs(release, chart, version, values):
    return helm_release.release_differs(release, chart, version, values)


class FilterModule(object):
    def filters(self):
        return {"helm_release_differs": helm_release_differs}
