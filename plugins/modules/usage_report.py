#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: usage_report
short_description: GPU time, normalised cost and workloads per team from Prometheus (Markdown, CSV, PNG)
version_added: 0.2.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Queries Prometheus for the raw DCGM exporter samples of a period and kube-state-metrics' pod and Job series,
    and writes the three perspectives of a GPU platform's usage.
  - Time, per team (namespace) and node pool, allocated GPU hours split into failed-run hours (every sample of a
    pod kube-state-metrics reported C(Failed), C(kube_pod_status_phase)), productive (at or above
    O(busy_percent)), idle (below O(idle_percent)) and low-utilisation hours; the four add up to allocated.
  - Normalised cost per team,
    C((compute + network + storage + support + idle + failed_runs + operations\) / accepted_units), each term with
    its source. compute, idle and failed_runs are GPU hours x the pool's price (O(prices)), compute being the
    allocated hours minus idle and failed-run hours, so the three add up to the allocated GPU cost. network,
    storage, support and operations come from O(network_cost), O(storage_cost), O(support_cost),
    O(operations_cost). accepted_units is O(units).
  - Workloads, per controlling object of the GPU pods (C(kube_pod_owner)), image (C(kube_pod_container_info)),
    the pod labels of O(workload_labels) (C(kube_pod_labels), which has only the labels in kube-state-metrics'
    C(--metric-labels-allowlist)), failed pods, container restarts, termination reasons and a Job's failure
    reason.
  - The mean queue wait per Kueue ClusterQueue when Prometheus has it.
  - Writes C(<name>.md), C(<name>.csv) (time and GPU cost per team and pool), C(<name>-cost.csv) (the normalised
    cost's terms per team), C(<name>-workloads.csv) and C(<name>.png) (headless matplotlib; skipped with a warning
    when matplotlib is not installed). In check mode nothing is written.
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
    description: Team to the number of accepted units in the period (C(accepted_units) of the normalised cost).
    type: dict
    default: {}
  network_cost:
    description: &cost_term
      - The cost term of the same name, from the inventory. V(per_month) is an amount per month prorated to the
        period (730 hours a month) - one amount for the site, shared among the teams by allocated GPU hours, or
        a mapping of team to its own amount. V(per_gpu_hour) is an amount per allocated GPU hour. Both may be
        given; they add up. Not given, the term is 0 and the report says so.
    type: dict
    default: {}
    suboptions: &cost_suboptions
      per_month:
        description: Amount per month for the site (a number) or per team (a mapping team -> amount).
        type: raw
      per_gpu_hour:
        description: Amount per allocated GPU hour.
        type: float
  storage_cost:
    description: *cost_term
    type: dict
    default: {}
    suboptions: *cost_suboptions
  support_cost:
    description: *cost_term
    type: dict
    default: {}
    suboptions: *cost_suboptions
  operations_cost:
    description: *cost_term
    type: dict
    default: {}
    suboptions: *cost_suboptions
  workload_labels:
    description:
      - The pod label keys the workload view reads, for the columns V(owner), V(model) and V(dataset).
      - kube-state-metrics exports a pod label only when its C(--metric-labels-allowlist) names it
        (kube-prometheus-stack C(kube-state-metrics.metricLabelsAllowlist), e.g.
        C(pods=[gpu.skaffon.io/owner,gpu.skaffon.io/model,gpu.skaffon.io/dataset])).
      - A column not given reads C(gpu.skaffon.io/<column>).
    type: dict
    default: {}
  simulated:
    description: Put a "figures from a simulated cluster" banner at the top of the report (the demo sets it;
      nothing in Prometheus tells a simulated cluster from a real one).
    type: bool
    default: false
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
    network_cost: {per_month: 1800}
    storage_cost: {per_month: {team-a: 400, team-b: 150}}
    support_cost: {per_gpu_hour: 0.3}
    operations_cost: {per_month: 2500}
    workload_labels: {owner: gpu.skaffon.io/owner, model: gpu.skaffon.io/model, dataset: gpu.skaffon.io/dataset}
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
normalised_cost:
  description: Per team the terms compute, network, storage, support, idle, failed_runs, operations, their total,
    accepted_units and cost_per_unit.
  returned: always
  type: list
  elements: dict
site_cost:
  description: The same terms for the whole site.
  returned: always
  type: dict
cost_sources:
  description: Term to where its figure comes from (inventory variable or metric).
  returned: always
  type: dict
workloads:
  description: One row per workload (team, workload, owner, image, model, dataset, pods, failed_pods, restarts,
    retries, termination, GPU hours).
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
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.pools import DEFAULT_PREFIX


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
    costs = dict((term, dict((k, v) for k, v in (p["%s_cost" % term] or {}).items() if v is not None))
                 for term in ur.OTHER_TERMS)
    labels = dict((field, DEFAULT_PREFIX + field) for field in ur.WORKLOAD_FIELDS)
    labels.update(p["workload_labels"] or {})
    report = ur.collect(prom, start, end, p["node_pools"], p["prices"], p["units"], p["busy_percent"],
                        p["idle_percent"], p["sample_interval"], costs, labels)
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
            if ur.chart_png(report, tmp, "GPU hours per team" + (" (simulated cluster)" if p["simulated"] else "")):
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
    md = ur.markdown(report, _iso(start), _iso(end), p["currency"], p["unit_name"], chart, p["simulated"], labels)
    changed |= _write(base + ".md", md.encode(), module.check_mode)
    files = [base + ".md"]
    for suffix, text in ((".csv", ur.csv_text), ("-cost.csv", ur.cost_csv_text),
                         ("-workloads.csv", ur.workloads_csv_text)):
        changed |= _write(base + suffix, text(report).encode(), module.check_mode)
        files.append(base + suffix)
    files += [png] if chart else []
    return dict(changed=changed, teams=report["teams"], pools=report["pools"], rows=report["rows"],
                queue_wait=report["queue_wait"], normalised_cost=report["normalised_cost"],
                site_cost=report["site_cost"], cost_sources=report["cost_sources"], workloads=report["workloads"],
                files=files)


COST_OPTIONS = dict(per_month=dict(type="raw"), per_gpu_hour=dict(type="float"))


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
        network_cost=dict(type="dict", default={}, options=COST_OPTIONS),
        storage_cost=dict(type="dict", default={}, options=COST_OPTIONS),
        support_cost=dict(type="dict", default={}, options=COST_OPTIONS),
        operations_cost=dict(type="dict", default={}, options=COST_OPTIONS),
        workload_labels=dict(type="dict", default={}),
        simulated=dict(type="bool", default=False),
        busy_percent=dict(type="float", default=10),
        idle_percent=dict(type="float", default=5),
        sample_interval=dict(type="float", default=15),
        validate_certs=dict(type="bool", default=True),
    ), supports_check_mode=True)
    execute(module, run)


if __name__ == "__main__":
    main()
