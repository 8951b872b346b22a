# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Markdown and JUnit XML of a run's results, shared by the hand-over protocol (acceptance/report.py)
and the workload acceptance report (workload/report.py).

A result is a dict: id, title, status (PASS, FAIL or SKIP), summary, evidence (lines), seconds and,
for workload steps, figures ({name: value}). Pure functions, so the same run gives the same bytes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from xml.sax.saxutils import escape, quoteattr

MARK = {"PASS": "PASS", "FAIL": "**FAIL**", "SKIP": "SKIP"}


def cell(text):
    """Text for one cell of a Markdown table."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def figure(value):
    """A figure as a report prints it: floats to 3 decimals without trailing zeros, lists and dicts as JSON."""
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


def header(meta, fields):
    """The run's two-column table: one row per (key, label) of fields that meta has."""
    lines = ["| | |", "|---|---|"]
    for key, label in fields:
        if meta.get(key) not in (None, ""):
            lines.append("| %s | %s |" % (label, cell(meta[key])))
    return lines


def overview(results, noun):
    """The result line and the table of results, one row each."""
    total = counts(results)
    lines = ["", "Result: %d passed, %d failed, %d skipped of %d %ss." % (
        total["PASS"], total["FAIL"], total["SKIP"], len(results), noun), ""]
    lines += ["| # | %s | result | summary | seconds |" % noun, "|---|---|---|---|---|"]
    for n, result in enumerate(results, 1):
        lines.append("| %d | `%s` %s | %s | %s | %.1f |" % (
            n, result["id"], cell(result["title"]), MARK[result["status"]], cell(result["summary"]),
            result.get("seconds", 0)))
    lines.append("")
    return lines


def sections(results):
    """One section per result: summary, its figures as a table, its evidence."""
    lines = []
    for n, result in enumerate(results, 1):
        lines += ["## %d. %s (`%s`): %s" % (n, result["title"], result["id"], result["status"]), "",
                  result["summary"], ""]
        figures = result.get("figures") or {}
        if figures:
            lines += ["| figure | value |", "|---|---|"]
            lines += ["| %s | %s |" % (cell(k), cell(figure(figures[k]))) for k in sorted(figures)]
            lines.append("")
        lines += ["- %s" % e for e in result.get("evidence") or []] or ["- (no evidence recorded)"]
        lines.append("")
    return lines


def junit(results, suites, suite, classname, date, properties=None):
    """JUnit XML: one testcase per result; SKIP is <skipped/>, FAIL is <failure/>; figures and the
    suite's properties ([(name, value)], None for none) as <properties>."""
    total = counts(results)
    seconds = sum(r.get("seconds", 0) for r in results)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuites name=%s tests="%d" failures="%d" skipped="%d" time="%.2f">' % (
               quoteattr(suites), len(results), total["FAIL"], total["SKIP"], seconds),
           '  <testsuite name=%s tests="%d" failures="%d" skipped="%d" time="%.2f" timestamp=%s>' % (
               quoteattr(suite), len(results), total["FAIL"], total["SKIP"], seconds, quoteattr(date or ""))]
    if properties is not None:
        out.append('    <properties>')
        out += ['      <property name=%s value=%s/>' % (quoteattr(k), quoteattr(v)) for k, v in properties]
        out.append('    </properties>')
    for result in results:
        out.append('    <testcase classname=%s name=%s time="%.2f">' % (
            quoteattr(classname), quoteattr(result["id"]), result.get("seconds", 0)))
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
