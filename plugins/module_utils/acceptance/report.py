# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hand-over protocol (Markdown, signed by the customer) and JUnit XML (read by AWX and CI).

Pure functions of the check results and the run's metadata, so the same run always
gives the same bytes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import results as fmt

HEADER = (("cluster", "Cluster"), ("date", "Date"), ("operator_version", "GPU Operator chart"),
          ("kubernetes_version", "Kubernetes"), ("collection_version", "skaffon.gpu_platform"),
          ("queue_backend", "Queue backend"), ("inventory", "Inventory"))
SIGN_OFF = ["## Sign-off", "", "| role | name | date | signature |", "|---|---|---|---|",
            "| Customer | | | |", "| Platform team | | | |", ""]


def markdown(results, meta):
    """acceptance.md: cluster, date, versions, each check with its evidence, signatures."""
    lines = ["# GPU platform hand-over protocol", ""] + fmt.header(meta, HEADER)
    lines += fmt.overview(results, "check") + fmt.sections(results) + SIGN_OFF
    return "\n".join(lines)


def junit(results, meta):
    """junit.xml: one testcase per check; SKIP is <skipped/>, FAIL is <failure/>."""
    return fmt.junit(results, "gpu-platform-acceptance", "acceptance %s" % meta.get("cluster", ""), "acceptance",
                     meta.get("date", ""))
