# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters monitoring_dcgm_values, monitoring_objects, monitoring_metrics_csv, monitoring_required_crds
(docs in the .yml sidecars)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import domain_filter
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

monitoring = module_utils("monitoring.objects")


@domain_filter()
def _call(fn, settings):
    return fn(settings)


def monitoring_dcgm_values(settings=None):
    return _call(monitoring.dcgm_values, settings)


def monitoring_objects(settings=None):
    return _call(monitoring.objects, settings)


def monitoring_required_crds(settings=None):
    return _call(monitoring.required_crds, settings)


def monitoring_metrics_csv(settings=None):
    return _call(lambda s: monitoring.metrics_csv(monitoring.settings(s)), settings)


class FilterModule(object):
    def filters(self):
        return {
            "monitoring_dcgm_values": monitoring_dcgm_values,
            "monitoring_objects": monitoring_objects,
            "monitoring_metrics_csv": monitoring_metrics_csv,
            "monitoring_required_crds": monitoring_required_crds,
        }
