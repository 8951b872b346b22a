# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hand-over protocol (Markdown, signed by the customer) and JUnit XML (read by AWX and CI).

Pure functions of the check results and the run's metadata, so the same run always
gives the same bytes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from xml.sax.saxutils import escape, quoteattr

MARK = {"PASS": "PASS", "FAIL": "**FAIL**", "SKIP": "SKIP"}


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def counts(results):
    out = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for result in results:
        out[result["status"]] += 1
    return out


def markdown(results, meta):
    """acceptance.md: cluster, date, versions, each check with its evidence, signatures."""
    total = counts(results)
    lines = ["# GPU platform hand-over protocol", ""]
    lines += ["| | |", "|---|---|"]
    for key, label in (("cluster", "Cluster"), ("date", "Date"), ("operator_version", "GPU Operator chart"),
                       ("kubernetes_version", "Kubernetes"), ("collection_version", "skaffon.gpu_platform"),
                       ("queue_backend", "Queue backend"), ("inventory", "Inventory")):
        if meta.get(key) not in (None, ""):
            lines.append("| %s | %s |" % (label, _cell(meta[key])))
    lines += ["", "Result: %d passed, %d failed, %d skipped of %d checks." % (
        total["PASS"], total["FAIL"], total["SKIP"], len(results)), ""]
    lines += ["| # | check | result | summary | seconds |", "|---|---|---|---|---|"]
    for n, result in enumerate(results, 1):
        lines.append("| %d | `%s` %s | %s | %s | %.1f |" % (
            n, result["id"], _cell(result["title"]), MARK[result["status"]], _cell(result["summary"]),
            result.get("seconds", 0)))
    lines.append("")
    for n, result in enumerate(results, 1):
        lines += ["## %d. %s (`%s`): %s" % (n, result["title"], result["id"], result["status"]), "",
                  result["summary"], ""]
        lines += ["- %s" % e for e in result["evidence"]] or ["- (no evidence recorded)"]
        lines.append("")
    lines += ["## Sign-off", "", "| role | name | date | signature |", "|---|---|---|---|",
              "| Customer | | | |", "| Platform team | | | |", ""]
    return "\n".join(lines)


def junit(results, meta):
    """junit.xml: one testcase per check; SKIP is <skipped/>, FAIL is <failure/>."""
    total = counts(results)
    seconds = sum(r.get("seconds", 0) for r in results)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuites name="gpu-platform-acceptance" tests="%d" failures="%d" skipped="%d" time="%.2f">' % (
               len(results), total["FAIL"], total["SKIP"], seconds),
           '  <testsuite name=%s tests="%d" failures="%d" skipped="%d" time="%.2f" timestamp=%s>' % (
               quoteattr("acceptance %s" % meta.get("cluster", "")), len(results), total["FAIL"], total["SKIP"],
               seconds, quoteattr(meta.get("date", "")))]
    for result in results:
        out.append('    <testcase classname="acceptance" name=%s time="%.2f">' % (
            quoteattr(result["id"]), result.get("seconds", 0)))
        detail = escape("\n".join([result["summary"]] + result["evidence"]))
        if result["status"] == "FAIL":
            out.append('      <failure message=%s>%s</failure>' % (quoteattr(result["summary"]), detail))
        elif result["status"] == "SKIP":
            out.append('      <skipped message=%s/>' % quoteattr(result["summary"]))
        else:
            out.append('      <system-out>%s</system-out>' % detail)
        out.append('    </testcase>')
    out += ['  </testsuite>', '</testsuites>', '']
    return "\n".join(out)
