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


def stuck(release, name, namespace, chart, version, values):
    """Why a re-run cannot go on with `release` (and what the operator does about it), else ''.

    pending-*: an interrupted helm run; Helm refuses every new operation until it is resolved.
    failed with the chart version and values wanted: kubernetes.core.helm compares only those and
    would not run Helm again, so the release would stay failed and the run wait for what it never
    created."""
    if not isinstance(release, dict):
        return ""
    status = str(release.get("status") or "")
    if status.startswith("pending-"):
        fix = ("nothing was ever deployed, so `helm uninstall %s -n %s`" if status == "pending-install"
               else "`helm rollback %s -n %s` (back to the last deployed revision)") % (name, namespace)
        return ("Helm release %s in %s is %s: an earlier helm run was interrupted, and Helm refuses every new "
                "operation on it. Resolve it, then run this playbook again: %s." % (name, namespace, status, fix))
    if status == "failed" and not release_differs(dict(release, status="deployed"), chart, version, values):
        revision = str(release.get("revision") or "")
        fix = ("nothing was ever deployed (revision 1 failed), so `helm uninstall %s -n %s`" % (name, namespace)
               if revision == "1" else
               "`helm rollback %s <the last deployed revision> -n %s` (`helm history %s -n %s` lists them)"
               % (name, namespace, name, namespace))
        return ("Helm release %s in %s is failed (revision %s) with the chart version and values this run would "
                "install: the last helm run on it failed, and kubernetes.core.helm does not run Helm again when "
                "neither changes. Resolve it, then run this playbook again: %s." % (
                    name, namespace, revision or "unknown", fix))
    return ""
