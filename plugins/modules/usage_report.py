#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: usage_report
short_description: GPU usage and cost per team and node pool from Prometheus (Markdown, CSV, PNG chart)
version_added: 0.2.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Queries Prometheus for the raw DCGM exporter samples of a period and writes, per team (namespace) and
    node pool, allocated GPU hours, GPU hours at meaningful utilisation, idle allocated hours, GPU hours of
    pods that failed (kube-state-metrics C(kube_pod_status_phase)), the mean queue wait per Kueue
    ClusterQueue when Prometheus has it, and the cost from the operator's prices per GPU hour.
  - Writes C(<name>.md), C(<name>.csv) and C(<name>.png) (headless matplotlib; skipped with a warning when
    matplotlib is not installed). In check mode nothing is written.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Queries Prometheus and reports the result; no file is written.
  diff_mode:
    support: none
    details: The report files are not shown as a diff.
  platform:
    platforms: posix
options:
  prometheus_url:
    description: Base URL of the Prometheus HTTP API.
    type: str
    required: true
  start:
    description: Start of the period, ISO 8601 (C(2026-11-01T00:00:00Z)) or Unix seconds.
    type: str
    required: true
  end:
    description: End of the period, ISO 8601 or Unix seconds.
    type: str
    required: true
  dest:
    description: Directory the files are written to (created when missing).
    type: path
    required: true
  name:
    description: File name prefix.
    type: str
    default: gpu-usage
  node_pools:
    description: Node name to node pool.
    type: dict
    default: {}
  prices:
    description: Node pool to price per GPU hour.
    type: dict
    default: {}
  currency:
    description: Currency shown next to the costs.
    type: str
    default: ""
  units:
    description: Team to the number of accepted units in the period (for the cost per unit).
    type: dict
    default: {}
  unit_name:
    description: What an accepted unit is (for example C(accepted model), C(merged experiment)).
    type: str
    default: unit
  busy_percent:
    description: Utilisation at or above which a GPU hour counts as productive.
    type: float
    default: 10
  idle_percent:
    description: Utilisation below which an allocated GPU hour counts as idle.
    type: float
    default: 5
  sample_interval:
    description: Seconds one exporter sample stands for (the ServiceMonitor's scrape interval).
    type: float
    default: 15
  validate_certs:
    description: Verify the Prometheus TLS certificate.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Usage of November
  skaffon.gpu_platform.usage_report:
    prometheus_url: http://prometheus-operated.monitoring:9090
    start: "2026-11-01T00:00:00Z"
    end: "2026-12-01T00:00:00Z"
    dest: reports/
    node_pools: {gpu-h100-1: h100, gpu-l40s-1: l40s}
    prices: {h100: 4.2, l40s: 1.1}
    currency: EUR
    units: {team-a: 12}
    unit_name: accepted model
"""

RETURN = r"""
teams:
  description: Totals per team.
  returned: always
  type: list
  elements: dict
pools:
  description: Totals per node pool.
  returned: always
  type: list
  elements: dict
rows:
  description: One row per team and node pool (the CSV).
  returned: always
  type: list
  elements: dict
queue_wait:
  description: Mean admission wait in seconds per Kueue ClusterQueue; null without Kueue metrics.
  returned: always
  type: dict
files:
  description: Paths of the files written (or that would be written in check mode).
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import usage_report as ur
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError, execute


def _time(value, name):
    import datetime
    for parse in (float, lambda v: datetime.datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()):
        try:
            return parse(value)
        except ValueError:
            continue
    raise DomainError("usage_report_%s: %r is not a time: give ISO 8601 (2026-11-01T00:00:00Z) or Unix "
                      "seconds" % (name, value))


def _iso(t):
    import datetime
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _write(path, data, check_mode):
    old = None
    if os.path.exists(path):
        with open(path, "rb") as fh:
            old = fh.read()
    if old == data:
        return False
    if not check_mode:
        with open(path, "wb") as fh:
            fh.write(data)
    return True


def run(module):
    p = module.params
    start, end = _time(p["start"], "start"), _time(p["end"], "end")
    prom = ur.Prometheus(p["prometheus_url"], open_url, validate_certs=p["validate_certs"])
    report = ur.collect(prom, start, end, p["node_pools"], p["prices"], p["units"], p["busy_percent"],
                        p["idle_percent"], p["sample_interval"])
    base = os.path.join(p["dest"], p["name"])
    if not module.check_mode and not os.path.isdir(p["dest"]):
        os.makedirs(p["dest"])
    changed = False
    png = base + ".png"
    chart = None
    if module.check_mode:
        chart = os.path.basename(png)
    else:
        import tempfile
        fd, tmp = tempfile.mkstemp(suffix=".png")
        os.close(fd)
        try:
            if ur.chart_png(report, tmp, "GPU hours per team"):
                with open(tmp, "rb") as fh:
                    changed |= _write(png, fh.read(), False)
                chart = os.path.basename(png)
            else:
                module.warn("matplotlib not installed: no chart (pip install matplotlib)")
        finally:
            os.remove(tmp)
    for u in report["unpriced"]:
        module.warn("no price for node pool %r (nodes %s): its GPU hours have no cost; %s" % (
            u["pool"], ", ".join(u["nodes"]), "the nodes carry no pool label (usage_report_pool_label)"
            if u["pool"] == ur.UNKNOWN_POOL else "add the pool to the prices"))
    md = ur.markdown(report, _iso(start), _iso(end), p["currency"], p["unit_name"], chart)
    changed |= _write(base + ".md", md.encode(), module.check_mode)
    changed |= _write(base + ".csv", ur.csv_text(report).encode(), module.check_mode)
    files = [base + ".md", base + ".csv"] + ([png] if chart else [])
    return dict(changed=changed, teams=report["teams"], pools=report["pools"], rows=report["rows"],
                queue_wait=report["queue_wait"], files=files)


def main():
    module = AnsibleModule(argument_spec=dict(
        prometheus_url=dict(type="str", required=True),
        start=dict(type="str", required=True),
        end=dict(type="str", required=True),
        dest=dict(type="path", required=True),
        name=dict(type="str", default="gpu-usage"),
        node_pools=dict(type="dict", default={}),
        prices=dict(type="dict", default={}),
        currency=dict(type="str", default=""),
        units=dict(type="dict", default={}),
        unit_name=dict(type="str", default="unit"),
        busy_percent=dict(type="float", default=10),
        idle_percent=dict(type="float", default=5),
        sample_interval=dict(type="float", default=15),
        validate_certs=dict(type="bool", default=True),
    ), supports_check_mode=True)
    execute(module, run)


if __name__ == "__main__":
    main()
