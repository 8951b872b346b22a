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

import json
from xml.sax.saxutils import escape, quoteattr

MARK = {"PASS": "PASS", "FAIL": "**FAIL**", "SKIP": "SKIP"}
SIMULATED = ("> **Figures from a simulated cluster.** The API server is the collection's simulator "
             "(`simcluster`, version %s): bandwidths, throughput, latencies and times below come from its "
             "cluster file's model (docs/simcluster-fidelity.md), not from GPUs. Run the playbook on the site "
             "for figures to sign.")
HEADER = (("team", "Team"), ("namespace", "Namespace"), ("pool", "Pool"), ("cluster", "Cluster"), ("date", "Date"),
          ("queue_backend", "Queue backend"), ("kubernetes_version", "Kubernetes"),
          ("collection_version", "skaffon.gpu_platform"), ("run_id", "Run label"), ("inventory", "Inventory"))


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def figure(value):
    """A figure as the report prints it: floats to 3 decimals without trailing zeros, lists and dicts as JSON."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = ("%.3f" % value).rstrip("0").rstrip(".")
        return text if text not in ("", "-0") else "0"
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, separators=(", ", ": "))
    if value is None:
        return "-"
    return str(value)


def counts(results):
    out = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for result in results:
        out[result["status"]] += 1
    return out


def markdown(results, meta):
    """workload-acceptance.md: the run's header, a table of the steps, a section per step."""
    total = counts(results)
    title = "# Workload acceptance"
    if meta.get("team"):
        title += ": %s" % meta["team"]
        if meta.get("pool"):
            title += " on %s" % meta["pool"]
    lines = [title, ""]
    if meta.get("simulated"):
        lines += [SIMULATED % (meta.get("kubernetes_version") or "unknown"), ""]
    lines += ["| | |", "|---|---|"]
    for key, label in HEADER:
        if meta.get(key) not in (None, ""):
            lines.append("| %s | %s |" % (label, _cell(meta[key])))
    lines += ["", "Result: %d passed, %d failed, %d skipped of %d steps." % (
        total["PASS"], total["FAIL"], total["SKIP"], len(results)), ""]
    lines += ["| # | step | result | summary | seconds |", "|---|---|---|---|---|"]
    for n, result in enumerate(results, 1):
        lines.append("| %d | `%s` %s | %s | %s | %.1f |" % (
            n, result["id"], _cell(result["title"]), MARK[result["status"]], _cell(result["summary"]),
            result.get("seconds", 0)))
    lines.append("")
    for n, result in enumerate(results, 1):
        lines += ["## %d. %s (`%s`): %s" % (n, result["title"], result["id"], result["status"]), "",
                  result["summary"], ""]
        figures = result.get("figures") or {}
        if figures:
            lines += ["| figure | value |", "|---|---|"]
            lines += ["| %s | %s |" % (_cell(k), _cell(figure(figures[k]))) for k in sorted(figures)]
            lines.append("")
        lines += ["- %s" % e for e in result.get("evidence") or []] or ["- (no evidence recorded)"]
        lines.append("")
    return "\n".join(lines)


def junit(results, meta):
    """junit.xml: one testcase per step; SKIP is <skipped/>, FAIL is <failure/>; figures as properties."""
    total = counts(results)
    seconds = sum(r.get("seconds", 0) for r in results)
    suite = "workload acceptance %s" % " ".join(str(meta[k]) for k in ("cluster", "team", "pool") if meta.get(k))
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuites name="gpu-platform-workload-acceptance" tests="%d" failures="%d" skipped="%d" time="%.2f">' % (
               len(results), total["FAIL"], total["SKIP"], seconds),
           '  <testsuite name=%s tests="%d" failures="%d" skipped="%d" time="%.2f" timestamp=%s>' % (
               quoteattr(suite.strip()), len(results), total["FAIL"], total["SKIP"], seconds,
               quoteattr(meta.get("date", "")))]
    out += ['    <properties>', '      <property name="simulated" value=%s/>' % quoteattr(
        "true" if meta.get("simulated") else "false")]
    for key, _label in HEADER:
        if meta.get(key) not in (None, ""):
            out.append('      <property name=%s value=%s/>' % (quoteattr(key), quoteattr(str(meta[key]))))
    out.append('    </properties>')
    for result in results:
        out.append('    <testcase classname="workload-acceptance" name=%s time="%.2f">' % (
            quoteattr(result["id"]), result.get("seconds", 0)))
        figures = result.get("figures") or {}
        if figures:
            out.append('      <properties>')
            out += ['        <property name=%s value=%s/>' % (quoteattr(k), quoteattr(figure(figures[k])))
                    for k in sorted(figures)]
            out.append('      </properties>')
        detail = escape("\n".join([result["summary"]] + list(result.get("evidence") or [])))
        if result["status"] == "FAIL":
            out.append('      <failure message=%s>%s</failure>' % (quoteattr(result["summary"]), detail))
        elif result["status"] == "SKIP":
            out.append('      <skipped message=%s/>' % quoteattr(result["summary"]))
        else:
            out.append('      <system-out>%s</system-out>' % detail)
        out.append('    </testcase>')
    out += ['  </testsuite>', '</testsuites>', '']
    return "\n".join(out)
