# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workload acceptance report (Markdown) and its JUnit XML (read by AWX and CI).

Pure functions of the step results (Result.to_dict() of workload/runner.py) and the run's
metadata, so the same run always gives the same bytes. Figures measured on the simulated
cluster say so at the top: they describe the simulator's model, not hardware.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import results as fmt

SIMULATED = ("> **Figures from a simulated cluster.** The API server is the collection's simulator "
             "(`simcluster`, version %s): bandwidths, throughput, latencies and times below come from its "
             "cluster file's model (docs/simcluster-fidelity.md), not from GPUs. Run the playbook on the site "
             "for figures to sign.")
HEADER = (("team", "Team"), ("namespace", "Namespace"), ("pool", "Pool"), ("cluster", "Cluster"), ("date", "Date"),
          ("queue_backend", "Queue backend"), ("kubernetes_version", "Kubernetes"),
          ("collection_version", "skaffon.gpu_platform"), ("run_id", "Run label"), ("inventory", "Inventory"))


def markdown(results, meta):
    """workload-acceptance.md: the run's header, a table of the steps, a section per step."""
    title = "# Workload acceptance"
    if meta.get("team"):
        title += ": %s" % meta["team"]
        if meta.get("pool"):
            title += " on %s" % meta["pool"]
    lines = [title, ""]
    if meta.get("simulated"):
        lines += [SIMULATED % (meta.get("kubernetes_version") or "unknown"), ""]
    lines += fmt.header(meta, HEADER) + fmt.overview(results, "step") + fmt.sections(results)
    return "\n".join(lines)


def junit(results, meta):
    """junit.xml: one testcase per step; SKIP is <skipped/>, FAIL is <failure/>; figures as properties."""
    suite = "workload acceptance %s" % " ".join(str(meta[k]) for k in ("cluster", "team", "pool") if meta.get(k))
    properties = [("simulated", "true" if meta.get("simulated") else "false")]
    properties += [(key, str(meta[key])) for key, _label in HEADER if meta.get(key) not in (None, "")]
    return fmt.junit(results, "gpu-platform-workload-acceptance", suite.strip(), "workload-acceptance",
                     meta.get("date", ""), properties)
