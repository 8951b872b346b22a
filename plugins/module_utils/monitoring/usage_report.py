# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU usage and cost per team (namespace) and node pool over a period, from Prometheus.

Counted from the raw DCGM exporter samples of the period (a range selector, not a resampled
range query, so a series that ends does not linger for the 5 minute lookback): every sample of
a GPU held by a pod (`pod` label set) stands for `sample_interval` seconds of that GPU. A MIG
instance counts as one GPU unit.

- allocated: held by a pod; busy: at >= busy_percent utilisation; idle: below idle_percent;
- failed: held by a pod that kube-state-metrics reported in phase Failed during the period;
- queue wait: Kueue's admission wait histogram per ClusterQueue, when Prometheus has it;
- cost: allocated hours x the operator's price per GPU hour of the pool; per accepted unit when
  the operator gives the team's count of accepted units.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import io
import json
import math
from urllib.parse import urlencode

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError

UTIL_QUERY = 'DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[%ds]'
FAILED_QUERY_PLAIN = 'max_over_time(kube_pod_status_phase{phase="Failed"}[%ds]) == 1'
QUEUE_WAIT_QUERY = ('sum by (cluster_queue) (increase(kueue_admission_wait_time_seconds_sum[%ds]))'
                    ' / sum by (cluster_queue) (increase(kueue_admission_wait_time_seconds_count[%ds]))')
UNKNOWN_POOL = "(no pool label)"
COLUMNS = ["team", "pool", "allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours",
           "other_gpu_hours", "failed_pod_gpu_hours", "price_per_gpu_hour", "cost"]


def _fail(setting, value, fix):
    raise DomainError("usage_report_%s: %r is not valid: %s" % (setting, value, fix),
                      setting="usage_report_" + setting, value=value)


def validate(period_seconds, prices, units, busy_percent, idle_percent, sample_interval):
    if period_seconds <= 0:
        _fail("end", period_seconds, "the end of the period must be after its start")
    if not isinstance(prices, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in prices.values()):
        _fail("prices", prices, "a mapping of node pool to price per GPU hour, e.g. {h100: 4.2}")
    if not isinstance(units, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in units.values()):
        _fail("units", units, "a mapping of team (namespace) to the count of accepted units, e.g. {team-a: 12}")
    if not 0 <= idle_percent <= busy_percent <= 100:
        _fail("busy_percent", busy_percent, "0 <= idle_percent <= busy_percent <= 100")
    if sample_interval <= 0:
        _fail("sample_interval", sample_interval, "the exporter's scrape interval in seconds (ServiceMonitor interval)")


def compute(util_series, failed_pods, node_pools, prices=None, units=None, busy_percent=10.0,
            idle_percent=5.0, sample_interval=15.0, queue_wait=None):
    """util_series: [{"metric": labels, "values": [[ts, "v"], ...]}] (Prometheus matrix);
    failed_pods: set of (namespace, pod); node_pools: {node: pool}. Returns the report dict."""
    prices = prices or {}
    units = units or {}
    rows = {}
    for series in util_series:
        m = series["metric"]
        team = m.get("namespace")
        node = m.get("node") or m.get("Hostname") or m.get("hostname") or ""
        pool = node_pools.get(node, UNKNOWN_POOL)
        row = rows.setdefault((team, pool), {"team": team, "pool": pool, "allocated": 0.0, "busy": 0.0,
                                             "idle": 0.0, "failed": 0.0, "nodes": set()})
        row["nodes"].add(node)
        failed = (team, m.get("pod")) in failed_pods
        for _ts, value in series["values"]:
            v = float(value)
            row["allocated"] += sample_interval
            if v >= busy_percent:
                row["busy"] += sample_interval
            elif v < idle_percent:
                row["idle"] += sample_interval
            if failed:
                row["failed"] += sample_interval
    out_rows = []
    for (team, pool), r in sorted(rows.items()):
        price = prices.get(pool)
        hours = dict((k, r[k] / 3600.0) for k in ("allocated", "busy", "idle", "failed"))
        out_rows.append({
            "team": team, "pool": pool, "nodes": sorted(r["nodes"]),
            "allocated_gpu_hours": round(hours["allocated"], 4), "busy_gpu_hours": round(hours["busy"], 4),
            "idle_gpu_hours": round(hours["idle"], 4),
            "other_gpu_hours": round(hours["allocated"] - hours["busy"] - hours["idle"], 4),
            "failed_pod_gpu_hours": round(hours["failed"], 4),
            "price_per_gpu_hour": price,
            "cost": round(hours["allocated"] * price, 2) if price is not None else None})
    teams = {}
    for row in out_rows:
        t = teams.setdefault(row["team"], {"team": row["team"], "allocated_gpu_hours": 0.0,
                                           "busy_gpu_hours": 0.0, "idle_gpu_hours": 0.0,
                                           "failed_pod_gpu_hours": 0.0, "cost": 0.0, "priced": True})
        for k in ("allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours", "failed_pod_gpu_hours"):
            t[k] = round(t[k] + row[k], 4)
        if row["cost"] is None:
            t["priced"] = False
        else:
            t["cost"] = round(t["cost"] + row["cost"], 2)
    for t in teams.values():
        if not t.pop("priced"):
            t["cost"] = None
        t["busy_share"] = round(t["busy_gpu_hours"] / t["allocated_gpu_hours"], 4) if t["allocated_gpu_hours"] else 0
        count = units.get(t["team"])
        t["accepted_units"] = count
        t["cost_per_unit"] = round(t["cost"] / count, 2) if count and t["cost"] is not None else None
    pools = {}
    for row in out_rows:
        p = pools.setdefault(row["pool"], {"pool": row["pool"], "allocated_gpu_hours": 0.0,
                                           "busy_gpu_hours": 0.0, "idle_gpu_hours": 0.0,
                                           "failed_pod_gpu_hours": 0.0})
        for k in ("allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours", "failed_pod_gpu_hours"):
            p[k] = round(p[k] + row[k], 4)
    # With prices given, a pool without one leaves its teams' cost empty; say which pool and
    # nodes (a node without the pool label lands in UNKNOWN_POOL) rather than a silent n/a.
    unpriced = []
    if prices:
        for name in sorted(pools):
            if name not in prices:
                nodes = sorted(set(n for row in out_rows if row["pool"] == name for n in row["nodes"]))
                unpriced.append({"pool": name, "nodes": nodes})
    return {"rows": out_rows, "teams": [teams[k] for k in sorted(teams)],
            "pools": [pools[k] for k in sorted(pools)], "queue_wait": queue_wait, "unpriced": unpriced,
            "busy_percent": busy_percent, "idle_percent": idle_percent, "sample_interval": sample_interval}


def _fmt(value, digits=1):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return ("%." + str(digits) + "f") % value
    return str(value)


def markdown(report, start, end, currency="", unit_name="unit", chart=None):
    lines = ["# GPU usage %s to %s" % (start, end), ""]
    total = sum(t["allocated_gpu_hours"] for t in report["teams"])
    busy = sum(t["busy_gpu_hours"] for t in report["teams"])
    idle = sum(t["idle_gpu_hours"] for t in report["teams"])
    failed = sum(t["failed_pod_gpu_hours"] for t in report["teams"])
    lines.append("%s allocated GPU hours, %s of them at meaningful utilisation (>= %s %%), %s idle "
                 "(< %s %%), %s spent by pods that failed." % (
                     _fmt(total), _fmt(busy), _fmt(report["busy_percent"], 0), _fmt(idle),
                     _fmt(report["idle_percent"], 0), _fmt(failed)))
    lines.append("")
    if chart:
        lines += ["![GPU hours per team](%s)" % chart, ""]
    lines += ["## Per team", "",
              "| team | allocated GPU h | busy GPU h | busy share | idle GPU h | failed-pod GPU h | cost %s "
              "| %s count | cost per %s |" % (currency, unit_name, unit_name),
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in report["teams"]:
        lines.append("| %s | %s | %s | %s %% | %s | %s | %s | %s | %s |" % (
            t["team"], _fmt(t["allocated_gpu_hours"]), _fmt(t["busy_gpu_hours"]),
            _fmt(t["busy_share"] * 100, 0), _fmt(t["idle_gpu_hours"]), _fmt(t["failed_pod_gpu_hours"]),
            _fmt(t["cost"], 2), _fmt(t["accepted_units"]), _fmt(t["cost_per_unit"], 2)))
    lines += ["", "## Per node pool", "", "| pool | allocated GPU h | busy GPU h | idle GPU h | failed-pod GPU h |",
              "|---|---:|---:|---:|---:|"]
    for p in report["pools"]:
        lines.append("| %s | %s | %s | %s | %s |" % (
            p["pool"], _fmt(p["allocated_gpu_hours"]), _fmt(p["busy_gpu_hours"]),
            _fmt(p["idle_gpu_hours"]), _fmt(p["failed_pod_gpu_hours"])))
    for u in report.get("unpriced") or ():
        lines += ["", "No price for pool %s (nodes %s): no cost for its GPU hours. %s" % (
            u["pool"], ", ".join(u["nodes"]) or "-",
            "The nodes carry no pool label (usage_report_pool_label)." if u["pool"] == UNKNOWN_POOL
            else "Add it to usage_report_prices.")]
    lines += ["", "## Queue wait", ""]
    if report["queue_wait"]:
        lines += ["| queue | mean admission wait (s) |", "|---|---:|"]
        for q, seconds in sorted(report["queue_wait"].items()):
            lines.append("| %s | %s |" % (q, _fmt(seconds)))
    else:
        lines.append("N/A: Prometheus has no queue backend metrics for the period "
                     "(Kueue's kueue_admission_wait_time_seconds).")
    lines += ["", "Counted from DCGM exporter samples (%s s each); a MIG instance counts as one GPU." %
              _fmt(report["sample_interval"], 0), ""]
    return "\n".join(lines)


def csv_text(report):
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in report["rows"]:
        writer.writerow(dict((k, "" if row.get(k) is None else row[k]) for k in COLUMNS))
    return buf.getvalue()


def chart_png(report, path, title):
    """Stacked bars per team (busy / other / idle GPU hours); False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")                 # headless
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    teams = report["teams"]
    names = [t["team"] for t in teams]
    busy = [t["busy_gpu_hours"] for t in teams]
    idle = [t["idle_gpu_hours"] for t in teams]
    other = [t["allocated_gpu_hours"] - t["busy_gpu_hours"] - t["idle_gpu_hours"] for t in teams]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.6 * max(len(names), 1)), dpi=110)
    ax.barh(names, busy, color="#2e7d32", label="busy (>= %g %%)" % report["busy_percent"])
    ax.barh(names, other, left=busy, color="#f9a825", label="low utilisation")
    ax.barh(names, idle, left=[b + o for b, o in zip(busy, other)], color="#c62828",
            label="idle (< %g %%)" % report["idle_percent"])
    for i, t in enumerate(teams):
        note = "%.1f h" % t["allocated_gpu_hours"]
        if t["cost"] is not None:
            note += ", cost %.2f" % t["cost"]
        if t["failed_pod_gpu_hours"]:
            note += ", %.1f h failed" % t["failed_pod_gpu_hours"]
        ax.text(t["allocated_gpu_hours"], i, "  " + note, va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("GPU hours")
    ax.set_title(title)
    ax.set_xlim(0, max([t["allocated_gpu_hours"] for t in teams] + [1]) * 1.6)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return True


class Prometheus:
    """The HTTP API calls the report needs (open_url: proxies, CA bundle, as Ansible does)."""

    def __init__(self, url, open_url, timeout=60, validate_certs=True):
        self.url = url.rstrip("/")
        self.open_url = open_url
        self.timeout = timeout
        self.validate_certs = validate_certs

    def query(self, expr, at):
        url = "%s/api/v1/query?%s" % (self.url, urlencode({"query": expr, "time": "%.3f" % at}))
        try:
            resp = self.open_url(url, timeout=self.timeout, validate_certs=self.validate_certs)
            body = json.loads(resp.read())
        except (OSError, ValueError) as exc:   # URLError/HTTPError/timeouts are OSErrors; bad JSON
            raise DomainError("usage_report_prometheus_url: query %s at %s failed: %s" % (expr, self.url, exc),
                              query=expr)
        if body.get("status") != "success":
            raise DomainError("Prometheus refused %s: %s" % (expr, body.get("error")), query=expr)
        return body["data"]["result"]


def collect(prom, start, end, node_pools, prices=None, units=None, busy_percent=10.0, idle_percent=5.0,
            sample_interval=15.0):
    period = int(round(end - start))
    validate(period, prices or {}, units or {}, busy_percent, idle_percent, sample_interval)
    util = prom.query(UTIL_QUERY % period, end)
    failed = set()
    for s in prom.query(FAILED_QUERY_PLAIN % period, end):
        failed.add((s["metric"].get("namespace"), s["metric"].get("pod")))
    waits = {}
    for s in prom.query(QUEUE_WAIT_QUERY % (period, period), end):
        try:
            value = float(s["value"][1])
        except (TypeError, ValueError):
            continue
        if not math.isnan(value):              # NaN: no admissions in the period
            waits[s["metric"].get("cluster_queue", "")] = value
    return compute(util, failed, node_pools, prices, units, busy_percent, idle_percent, sample_interval,
                   waits or None)
