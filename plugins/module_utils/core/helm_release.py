# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a Helm release as read (helm_release_info's `status`) differs from what the inventory asks.

The roles run kubernetes.core.helm only when it does: with nothing to change that module would read
the release, the chart and the helm plugins again to find the same and, without the helm diff plugin,
warn on every re-run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.plain import plain


def _version(text):
    # Chart.yaml spells the GPU Operator's and KAI's versions with a v, Kueue's without
    text = str(text)
    return text[1:] if text.startswith("v") else text


def release_differs(release, chart, version, values):
    """True unless `release` (helm list's fields and the user values) is deployed, of chart `chart`
    at `version` (with or without a leading v) and with exactly `values`."""
    if not isinstance(release, dict) or release.get("status") != "deployed":
        return True
    listed = str(release.get("chart") or "")
    prefix = "%s-" % chart
    if not listed.startswith(prefix) or _version(listed[len(prefix):]) != _version(version):
        return True
    return plain(release.get("values") or {}) != plain(values or {})
