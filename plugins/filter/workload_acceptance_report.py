# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters workload_acceptance_markdown and workload_acceptance_junit (docs in their .yml files)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

report = module_utils("workload.report")


def workload_acceptance_markdown(results, meta=None):
    return report.markdown(results, meta or {})


def workload_acceptance_junit(results, meta=None):
    return report.junit(results, meta or {})


class FilterModule(object):
    def filters(self):
        return {"workload_acceptance_markdown": workload_acceptance_markdown,
                "workload_acceptance_junit": workload_acceptance_junit}
