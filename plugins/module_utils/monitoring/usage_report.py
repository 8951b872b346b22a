# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU usage and cost per team (namespace), node pool and workload over a period, from Prometheus:
the guide's three perspectives (time, normalised cost, workloads).

Time, counted from the raw DCGM exporter samples of the period (a range selector, not a resampled
range query, so a series that ends does not linger for the 5 minute lookback): every sample of a
GPU held by a pod (`pod` label set) stands for `sample_interval` seconds of that GPU. A MIG instance
counts as one GPU unit. The allocated samples are split into four parts that add up to allocated:

- failed-run: every sample of a pod kube-state-metrics reported in phase Failed during the period
  (`kube_pod_status_phase`), whatever its utilisation: the GPU time of a run that did not finish;
- busy (productive): at >= busy_percent utilisation, pod not failed;
- idle: below idle_percent, pod not failed;
- other: between the two, pod not failed.

Normalised cost per team, the guide's
`(compute + network + storage + support + idle + failed_runs + operations) / accepted_units`:
compute, idle and failed_runs are GPU hours x the pool's price per GPU hour, with compute = allocated
- idle - failed-run hours (busy + other), so the three add up to the allocated GPU cost; network,
storage, support and operations come from the inventory, per month (prorated to the period with
HOURS_PER_MONTH; a site-wide amount is shared by allocated GPU hours, a per-team mapping is the
team's) and/or per allocated GPU hour. accepted_units is the inventory's count per team.

Workloads: per controlling object of the GPU pods (`kube_pod_owner`: a Job, a ReplicaSet, ...; a pod
without one is its own workload), its image (`kube_pod_container_info`), the configured pod labels
(owner, model, dataset: `kube_pod_labels`, which carries only the labels in kube-state-metrics'
`--metric-labels-allowlist`), failed pods, container restarts
(`kube_pod_container_status_restarts_total`), the containers' termination reasons
(`kube_pod_container_status_terminated_reason`, `..._last_terminated_reason`) and a Job's failure
reason (`kube_job_status_failed`).

Queue wait: Kueue's admission wait histogram per ClusterQueue, when Prometheus has it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import io
import json
import math
import re
from urllib.parse import urlencode

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError

UTIL_QUERY = 'DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[%ds]'
FAILED_QUERY_PLAIN = 'max_over_time(kube_pod_status_phase{phase="Failed"}[%ds]) == 1'
QUEUE_WAIT_QUERY = ('sum by (cluster_queue) (increase(kueue_admission_wait_time_seconds_sum[%ds]))'
                    ' / sum by (cluster_queue) (increase(kueue_admission_wait_time_seconds_count[%ds]))')
# kube-state-metrics' pod and Job series over the period (max_over_time: a pod deleted during the
# period still answers); names and labels as kube-state-metrics v2 exports them (internal/store/pod.go,
# job.go).
WORKLOAD_QUERIES = (
    ("owner", 'max_over_time(kube_pod_owner[%ds])'),
    ("labels", 'max_over_time(kube_pod_labels[%ds])'),
    ("image", 'max_over_time(kube_pod_container_info[%ds])'),
    ("restarts", 'max_over_time(kube_pod_container_status_restarts_total[%ds])'),
    ("terminated", 'max_over_time(kube_pod_container_status_terminated_reason[%ds]) == 1'),
    ("last_terminated", 'max_over_time(kube_pod_container_status_last_terminated_reason[%ds]) == 1'),
    ("job_failed", 'max_over_time(kube_job_status_failed[%ds])'),
)
UNKNOWN_POOL = "(no pool label)"
HOURS_PER_MONTH = 730.0          # 365 x 24 / 12, as cloud price lists count a month
TIME_KEYS = ("allocated", "busy", "other", "idle", "failed")
OTHER_TERMS = ("network", "storage", "support", "operations")
# the guide's order of the numerator's terms
TERMS = ("compute", "network", "storage", "support", "idle", "failed_runs", "operations")
WORKLOAD_FIELDS = ("owner", "model", "dataset")
COLUMNS = ["team", "pool", "allocated_gpu_hours", "busy_gpu_hours", "other_gpu_hours", "idle_gpu_hours",
           "failed_run_gpu_hours", "price_per_gpu_hour", "compute_cost", "idle_cost", "failed_runs_cost", "cost"]
COST_COLUMNS = (["team", "allocated_gpu_hours"] + list(TERMS) + ["total", "accepted_units", "cost_per_unit"])
WORKLOAD_COLUMNS = ["team", "workload", "owner", "image", "model", "dataset", "pods", "failed_pods", "restarts",
                    "retries", "termination", "allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours",
                    "failed_run_gpu_hours"]
LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")
LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")


def _fail(setting, value, fix):
    raise DomainError("usage_report_%s: %r is not valid: %s" % (setting, value, fix),
                      setting="usage_report_" + setting, value=value)


def _amount(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def validate_costs(costs):
    """costs: {network|storage|support|operations: {per_month: amount or {team: amount},
    per_gpu_hour: amount}}; None or {} for a term not given."""
    for term, spec in sorted((costs or {}).items()):
        setting = "%s_cost" % term
        if term not in OTHER_TERMS:
            _fail("costs", term, "the terms are %s" % ", ".join(OTHER_TERMS))
        if spec is None:
            continue
        if not isinstance(spec, dict) or not set(spec) <= {"per_month", "per_gpu_hour"}:
            _fail(setting, spec, "a mapping with per_month (an amount for the site, or {team: amount}) "
                  "and/or per_gpu_hour (an amount per allocated GPU hour), e.g. {per_month: 1800}")
        month = spec.get("per_month")
        if month is not None and not _amount(month) and not (
                isinstance(month, dict) and all(_amount(v) for v in month.values())):
            _fail(setting, spec, "per_month is an amount >= 0 for the site or a mapping {team: amount}")
        rate = spec.get("per_gpu_hour")
        if rate is not None and not _amount(rate):
            _fail(setting, spec, "per_gpu_hour is an amount >= 0 per allocated GPU hour")


def validate_label_keys(label_keys):
    """label_keys: {owner|model|dataset: pod label key}."""
    if not isinstance(label_keys, dict) or not set(label_keys) <= set(WORKLOAD_FIELDS) or not all(
            isinstance(v, str) and v for v in label_keys.values()):
        _fail("workload_labels", label_keys, "a mapping of %s to a pod label key, e.g. {model: gpu.skaffon.io/model}"
              % ", ".join(WORKLOAD_FIELDS))


def validate(period_seconds, prices, units, busy_percent, idle_percent, sample_interval, costs=None,
             label_keys=None):
    if period_seconds <= 0:
        _fail("end", period_seconds, "the end of the period must be after its start")
    if not isinstance(prices, dict) or not all(_amount(v) for v in prices.values()):
        _fail("prices", prices, "a mapping of node pool to price per GPU hour, e.g. {h100: 4.2}")
    if not isinstance(units, dict) or not all(_amount(v) and v > 0 for v in units.values()):
        _fail("units", units, "a mapping of team (namespace) to the count of accepted units, e.g. {team-a: 12}")
    if not 0 <= idle_percent <= busy_percent <= 100:
        _fail("busy_percent", busy_percent, "0 <= idle_percent <= busy_percent <= 100")
    if sample_interval <= 0:
        _fail("sample_interval", sample_interval, "the exporter's scrape interval in seconds (ServiceMonitor interval)")
    validate_costs(costs)
    validate_label_keys(label_keys or {})


def ksm_label_name(key):
    """The Prometheus label kube-state-metrics gives a Kubernetes label in kube_pod_labels
    (label_ + the key with every character outside [a-zA-Z0-9_] turned into _, snake_case)."""
    return "label_" + LOWER_UPPER.sub(r"\1_\2", LABEL_CHARS.sub("_", key)).lower()


def pod_info(answers, label_keys=None):
    """Per (namespace, pod) what kube-state-metrics said about it during the period.

    answers: {query id of WORKLOAD_QUERIES: Prometheus vector}; label_keys: {field: pod label key}."""
    label_keys = label_keys or {}
    pods = {}
    jobs = {}

    def pod(m):
        return pods.setdefault((m.get("namespace"), m.get("pod")), {
            "owner_kind": "", "owner_name": "", "labels": {}, "images": set(), "restarts": {},
            "reasons": set()})

    for s in answers.get("owner") or ():
        m = s["metric"]
        p = pod(m)
        # the controlling owner wins over other owner references
        if m.get("owner_kind") and (m.get("owner_is_controller") == "true" or not p["owner_kind"]):
            p["owner_kind"], p["owner_name"] = m["owner_kind"], m.get("owner_name", "")
    for s in answers.get("labels") or ():
        m = s["metric"]
        p = pod(m)
        for field, key in label_keys.items():
            value = m.get(ksm_label_name(key))
            if value:
                p["labels"][field] = value
    for s in answers.get("image") or ():
        m = s["metric"]
        image = m.get("image_spec") or m.get("image")
        if image:
            pod(m)["images"].add(image)
    for s in answers.get("restarts") or ():
        m = s["metric"]
        restarts = pod(m)["restarts"]
        container = m.get("container", "")
        restarts[container] = max(restarts.get(container, 0), int(float(s["value"][1])))
    for key in ("terminated", "last_terminated"):
        for s in answers.get(key) or ():
            m = s["metric"]
            if m.get("reason"):
                pod(m)["reasons"].add(m["reason"])
    for s in answers.get("job_failed") or ():
        m = s["metric"]
        job = jobs.setdefault((m.get("namespace"), m.get("job_name")), {"failed": 0, "reason": ""})
        value = float(s["value"][1])
        if m.get("reason"):
            # a Job with a Failed condition: one series per known reason, 1 for the one that applies
            if value >= 1:
                job["reason"] = m["reason"]
        else:
            job["failed"] = max(job["failed"], int(value))
    return {"pods": pods, "jobs": jobs}


def _workload_key(team, pod, info):
    p = (info or {}).get("pods", {}).get((team, pod))
    if p and p["owner_kind"]:
        return "%s/%s" % (p["owner_kind"], p["owner_name"])
    return "Pod/%s" % pod


def _prorate(amount, period_hours):
    return amount * period_hours / HOURS_PER_MONTH


def _other_costs(costs, team_hours, period_hours):
    """{term: {team: amount}} and {term: amount not attributable to a team} for the inventory terms."""
    total_hours = sum(team_hours.values())
    per_team = {}
    unshared = {}
    for term in OTHER_TERMS:
        spec = (costs or {}).get(term) or {}
        amounts = dict((t, 0.0) for t in team_hours)
        rest = 0.0
        month = spec.get("per_month")
        if isinstance(month, dict):
            for t, value in month.items():
                if t in amounts:
                    amounts[t] += _prorate(value, period_hours)
                else:                    # a team that held no GPU in the period
                    rest += _prorate(value, period_hours)
        elif month:
            site = _prorate(month, period_hours)
            if total_hours:
                for t, hours in team_hours.items():
                    amounts[t] += site * hours / total_hours
            else:
                rest += site
        rate = spec.get("per_gpu_hour")
        if rate:
            for t, hours in team_hours.items():
                amounts[t] += rate * hours
        per_team[term] = amounts
        unshared[term] = rest
    return per_team, unshared


def _source(term, costs, report):
    """Where a term of the normalised cost comes from, in words."""
    idle = report["idle_percent"]
    if term == "compute":
        return ("metrics: DCGM_FI_DEV_GPU_UTIL samples of GPUs held by pods, not idle (>= %g %%) and not of a "
                "failed pod, x inventory usage_report_prices" % idle)
    if term == "idle":
        return ("metrics: DCGM_FI_DEV_GPU_UTIL samples below %g %% of pods that did not fail, x inventory "
                "usage_report_prices" % idle)
    if term == "failed_runs":
        return ("metrics: DCGM_FI_DEV_GPU_UTIL samples of pods kube_pod_status_phase reported Failed, x inventory "
                "usage_report_prices")
    if term == "accepted_units":
        return "inventory: usage_report_units"
    spec = (costs or {}).get(term) or {}
    parts = []
    month = spec.get("per_month")
    if isinstance(month, dict):
        parts.append("per_month per team %s, prorated to the period (%g h of %g h a month)" % (
            ", ".join("%s %s" % (t, _fmt(float(v), 2)) for t, v in sorted(month.items())),
            report["period_hours"], HOURS_PER_MONTH))
    elif month:
        parts.append("per_month %s for the site, prorated to the period (%g h of %g h a month) and shared "
                     "by allocated GPU hours" % (_fmt(float(month), 2), report["period_hours"], HOURS_PER_MONTH))
    if spec.get("per_gpu_hour"):
        parts.append("per_gpu_hour %s x allocated GPU hours" % _fmt(float(spec["per_gpu_hour"]), 4))
    if not parts:
        return "inventory: usage_report_%s_cost not set (0)" % term
    return "inventory: usage_report_%s_cost: %s" % (term, "; ".join(parts))


def compute(util_series, failed_pods, node_pools, prices=None, units=None, busy_percent=10.0,
            idle_percent=5.0, sample_interval=15.0, queue_wait=None, costs=None, period_seconds=None,
            info=None, label_keys=None):
    """util_series: [{"metric": labels, "values": [[ts, "v"], ...]}] (Prometheus matrix);
    failed_pods: set of (namespace, pod); node_pools: {node: pool}; costs: the inventory terms
    (validate_costs); period_seconds: the period (for prorating monthly amounts); info: pod_info().
    Returns the report dict."""
    prices = prices or {}
    units = units or {}
    label_keys = label_keys or {}
    rows = {}
    workloads = {}
    for series in util_series:
        m = series["metric"]
        team = m.get("namespace")
        pod = m.get("pod")
        node = m.get("node") or m.get("Hostname") or m.get("hostname") or ""
        pool = node_pools.get(node, UNKNOWN_POOL)
        row = rows.setdefault((team, pool), dict([("team", team), ("pool", pool), ("nodes", set())] +
                                                 [(k, 0.0) for k in TIME_KEYS]))
        row["nodes"].add(node)
        wkey = (team, _workload_key(team, pod, info))
        w = workloads.setdefault(wkey, dict([("pods", set()), ("failed_pods", set()), ("pools", set())] +
                                            [(k, 0.0) for k in TIME_KEYS]))
        w["pods"].add(pod)
        w["pools"].add(pool)
        failed = (team, pod) in failed_pods
        if failed:
            w["failed_pods"].add(pod)
        for _ts, value in series["values"]:
            v = float(value)
            if failed:
                part = "failed"
            elif v >= busy_percent:
                part = "busy"
            elif v < idle_percent:
                part = "idle"
            else:
                part = "other"
            for target in (row, w):
                target["allocated"] += sample_interval
                target[part] += sample_interval
    out_rows = []
    for (team, pool), r in sorted(rows.items()):
        price = prices.get(pool)
        hours = dict((k, r[k] / 3600.0) for k in TIME_KEYS)
        priced = price is not None
        out_rows.append({
            "team": team, "pool": pool, "nodes": sorted(r["nodes"]),
            "allocated_gpu_hours": round(hours["allocated"], 4), "busy_gpu_hours": round(hours["busy"], 4),
            "other_gpu_hours": round(hours["other"], 4), "idle_gpu_hours": round(hours["idle"], 4),
            "failed_run_gpu_hours": round(hours["failed"], 4),
            "price_per_gpu_hour": price,
            "compute_cost": round((hours["busy"] + hours["other"]) * price, 2) if priced else None,
            "idle_cost": round(hours["idle"] * price, 2) if priced else None,
            "failed_runs_cost": round(hours["failed"] * price, 2) if priced else None,
            "cost": round(hours["allocated"] * price, 2) if priced else None})
    hour_keys = ("allocated_gpu_hours", "busy_gpu_hours", "other_gpu_hours", "idle_gpu_hours", "failed_run_gpu_hours")
    teams = {}
    for row in out_rows:
        t = teams.setdefault(row["team"], dict([("team", row["team"]), ("priced", True)] +
                                               [(k, 0.0) for k in hour_keys] +
                                               [(k, 0.0) for k in ("compute_cost", "idle_cost", "failed_runs_cost",
                                                                   "cost")]))
        for k in hour_keys:
            t[k] = round(t[k] + row[k], 4)
        if row["cost"] is None:
            t["priced"] = False
        else:
            for k in ("compute_cost", "idle_cost", "failed_runs_cost", "cost"):
                t[k] = round(t[k] + row[k], 2)
    period_hours = (period_seconds or 0) / 3600.0
    per_team, unshared = _other_costs(costs, dict((name, t["allocated_gpu_hours"]) for name, t in teams.items()),
                                      period_hours)
    normalised = []
    for name in sorted(teams):
        t = teams[name]
        if not t.pop("priced"):
            for k in ("compute_cost", "idle_cost", "failed_runs_cost", "cost"):
                t[k] = None
        t["busy_share"] = round(t["busy_gpu_hours"] / t["allocated_gpu_hours"], 4) if t["allocated_gpu_hours"] else 0
        count = units.get(name)
        t["accepted_units"] = count
        t["cost_per_unit"] = round(t["cost"] / count, 2) if count and t["cost"] is not None else None
        terms = {"compute": t["compute_cost"], "idle": t["idle_cost"], "failed_runs": t["failed_runs_cost"]}
        for term in OTHER_TERMS:
            terms[term] = round(per_team[term][name], 2)
        total = None if t["cost"] is None else round(sum(terms[k] for k in TERMS), 2)
        normalised.append(dict([("team", name), ("allocated_gpu_hours", t["allocated_gpu_hours"])] +
                               [(k, terms[k]) for k in TERMS] +
                               [("total", total), ("accepted_units", count),
                                ("cost_per_unit", round(total / count, 2) if count and total is not None else None)]))
    site = dict([("team", "(site)"), ("allocated_gpu_hours", round(sum(n["allocated_gpu_hours"] for n in normalised), 4))])
    for k in TERMS:
        values = [n[k] for n in normalised]
        site[k] = None if None in values else round(sum(values) + unshared.get(k, 0.0), 2)
    totals = [n["total"] for n in normalised]
    site["total"] = None if None in totals else round(sum(site[k] for k in TERMS), 2)
    # one unit_name for the site: its cost per unit when every team that held GPUs has a count
    counted = [n["accepted_units"] for n in normalised]
    site["accepted_units"] = sum(units.values()) if units else None
    site["cost_per_unit"] = (round(site["total"] / site["accepted_units"], 2)
                             if site["total"] is not None and counted and None not in counted else None)
    pools = {}
    for row in out_rows:
        p = pools.setdefault(row["pool"], dict([("pool", row["pool"])] + [(k, 0.0) for k in hour_keys]))
        for k in hour_keys:
            p[k] = round(p[k] + row[k], 4)
    # With prices given, a pool without one leaves its teams' cost empty; say which pool and
    # nodes (a node without the pool label lands in UNKNOWN_POOL) rather than a silent n/a.
    unpriced = []
    if prices:
        for name in sorted(pools):
            if name not in prices:
                nodes = sorted(set(n for row in out_rows if row["pool"] == name for n in row["nodes"]))
                unpriced.append({"pool": name, "nodes": nodes})
    report = {"rows": out_rows, "teams": [teams[k] for k in sorted(teams)],
              "pools": [pools[k] for k in sorted(pools)], "queue_wait": queue_wait, "unpriced": unpriced,
              "busy_percent": busy_percent, "idle_percent": idle_percent, "sample_interval": sample_interval,
              "period_hours": round(period_hours, 4), "normalised_cost": normalised, "site_cost": site}
    report["cost_sources"] = dict((term, _source(term, costs, report)) for term in TERMS + ("accepted_units",))
    report["workloads"] = _workload_rows(workloads, info, label_keys)
    report["missing_labels"] = _missing_labels(report["workloads"], info, label_keys)
    return report


def _workload_rows(workloads, info, label_keys):
    pods_info = (info or {}).get("pods", {})
    jobs = (info or {}).get("jobs", {})
    out = []
    for (team, key), w in sorted(workloads.items()):
        images, reasons, values, restarts = set(), {}, {}, 0
        for pod in w["pods"]:
            p = pods_info.get((team, pod))
            if not p:
                continue
            images |= p["images"]
            restarts += sum(p["restarts"].values())
            for reason in p["reasons"]:
                reasons[reason] = reasons.get(reason, 0) + 1
            for field, value in p["labels"].items():
                values.setdefault(field, set()).add(value)
        kind, _sep, name = key.partition("/")
        job = jobs.get((team, name)) if kind == "Job" else None
        # the Job controller's count covers failed pods deleted before a scrape saw them
        failed_pods = max(len(w["failed_pods"]), job["failed"] if job else 0)
        termination = ", ".join("%s (%d pod%s)" % (r, n, "" if n == 1 else "s") for r, n in sorted(reasons.items()))
        if job and job["reason"]:
            termination = "; ".join(x for x in (termination, "Job failed: %s" % job["reason"]) if x)
        row = {"team": team, "workload": key, "image": ", ".join(sorted(images)) or None,
               "pods": len(w["pods"]), "failed_pods": failed_pods, "restarts": restarts,
               "failed_pods_unseen": failed_pods - len(w["failed_pods"]),
               "retries": failed_pods + restarts, "termination": termination or None,
               "pools": sorted(w["pools"]), "found": bool(info)}
        for field in WORKLOAD_FIELDS:
            row[field] = ", ".join(sorted(values.get(field, ()))) or None
        for k in TIME_KEYS:
            row[("failed_run" if k == "failed" else k) + "_gpu_hours"] = round(w[k] / 3600.0, 4)
        out.append(row)
    out.sort(key=lambda r: (r["team"], -r["allocated_gpu_hours"], r["workload"]))
    return out


def _missing_labels(workloads, info, label_keys):
    """The configured pod label keys no GPU pod carried in kube_pod_labels (not in kube-state-metrics'
    allowlist, or not set on the pods)."""
    if not workloads or not info:
        return []
    return sorted(key for field, key in label_keys.items()
                  if field in WORKLOAD_FIELDS and not any(w.get(field) for w in workloads))


def _fmt(value, digits=1):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return ("%." + str(digits) + "f") % value
    return str(value)


def _cell(value):
    return "-" if value in (None, "") else str(value).replace("|", "\\|")


SIMULATED_BANNER = ("> **Figures from a simulated cluster.** The GPU samples, pods and Jobs behind this report "
                    "come from the simulated cluster (simcluster), not from real GPUs: the arithmetic is real, the "
                    "figures are not a measurement.")


def markdown(report, start, end, currency="", unit_name="unit", chart=None, simulated=False, label_keys=None):
    lines = []
    if simulated:
        lines += [SIMULATED_BANNER, ""]
    lines += ["# GPU usage %s to %s" % (start, end), ""]
    teams = report["teams"]
    total = sum(t["allocated_gpu_hours"] for t in teams)
    busy = sum(t["busy_gpu_hours"] for t in teams)
    idle = sum(t["idle_gpu_hours"] for t in teams)
    failed = sum(t["failed_run_gpu_hours"] for t in teams)
    lines.append("%s allocated GPU hours: %s productive (>= %s %% utilisation), %s idle (< %s %%), %s in runs "
                 "that failed, the rest (%s) at low utilisation." % (
                     _fmt(total), _fmt(busy), _fmt(report["busy_percent"], 0), _fmt(idle),
                     _fmt(report["idle_percent"], 0), _fmt(failed), _fmt(total - busy - idle - failed)))
    site = report.get("site_cost") or {}
    if site.get("total") is not None:
        lines.append("")
        lines.append("Cost of the period: %s %s (GPU %s, of it idle %s and failed runs %s; network, storage, "
                     "support and operations %s)." % (
                         _fmt(site["total"], 2), currency,
                         _fmt(site["compute"] + site["idle"] + site["failed_runs"], 2), _fmt(site["idle"], 2),
                         _fmt(site["failed_runs"], 2),
                         _fmt(sum(site[k] for k in OTHER_TERMS), 2)))
    lines.append("")
    if chart:
        lines += ["![GPU hours and cost per team](%s)" % chart, ""]
    lines += ["## 1. Time: allocated, productive, idle and failed-run GPU hours", "",
              "Every allocated GPU hour is in exactly one column: failed-run (any sample of a pod that "
              "kube-state-metrics reported Failed), else productive (>= %s %%), idle (< %s %%) or low "
              "(in between)." % (_fmt(report["busy_percent"], 0), _fmt(report["idle_percent"], 0)), "",
              "### Per team", "",
              "| team | allocated GPU h | productive GPU h | productive share | low-utilisation GPU h | idle GPU h "
              "| failed-run GPU h |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for t in teams:
        lines.append("| %s | %s | %s | %s %% | %s | %s | %s |" % (
            t["team"], _fmt(t["allocated_gpu_hours"]), _fmt(t["busy_gpu_hours"]), _fmt(t["busy_share"] * 100, 0),
            _fmt(t["other_gpu_hours"]), _fmt(t["idle_gpu_hours"]), _fmt(t["failed_run_gpu_hours"])))
    lines += ["", "### Per node pool", "",
              "| pool | allocated GPU h | productive GPU h | low-utilisation GPU h | idle GPU h | failed-run GPU h |",
              "|---|---:|---:|---:|---:|---:|"]
    for p in report["pools"]:
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            p["pool"], _fmt(p["allocated_gpu_hours"]), _fmt(p["busy_gpu_hours"]), _fmt(p["other_gpu_hours"]),
            _fmt(p["idle_gpu_hours"]), _fmt(p["failed_run_gpu_hours"])))
    lines += _cost_section(report, currency, unit_name)
    lines += _workload_section(report, label_keys or {})
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


def _cost_section(report, currency, unit_name):
    cur = (" " + currency) if currency else ""
    lines = ["", "## 2. Normalised cost per %s" % unit_name, "",
             "`(compute + network + storage + support + idle + failed_runs + operations) / accepted_units`, "
             "per team. compute, idle and failed_runs are the team's GPU hours x the pool's price per GPU hour, "
             "split as in section 1: compute = allocated - idle - failed-run hours (productive and low "
             "utilisation), so compute + idle + failed_runs is the whole allocated GPU cost and idle and failed "
             "runs are not counted twice. network, storage, support and operations come from the inventory.", "",
             "| team | " + " | ".join("%s%s" % (k, cur) for k in TERMS) +
             " | total%s | accepted %ss | cost per %s%s |" % (cur, unit_name, unit_name, cur),
             "|---|" + "---:|" * (len(TERMS) + 3)]
    for n in report["normalised_cost"] + [report["site_cost"]]:
        lines.append("| %s | %s | %s | %s | %s |" % (
            n["team"], " | ".join(_fmt(n[k], 2) for k in TERMS), _fmt(n["total"], 2),
            _fmt(n["accepted_units"]), _fmt(n["cost_per_unit"], 2)))
    lines += ["", "The (site) row adds amounts the inventory gives for teams that held no GPU in the period "
              "(or a site-wide amount when no GPU was allocated); its cost per %s needs the count of every team "
              "that held GPUs." % unit_name, "", "| term | source |", "|---|---|"]
    for term in TERMS + ("accepted_units",):
        lines.append("| %s | %s |" % (term, _cell(report["cost_sources"][term])))
    for u in report.get("unpriced") or ():
        lines += ["", "No price for pool %s (nodes %s): no cost for its GPU hours. %s" % (
            u["pool"], ", ".join(u["nodes"]) or "-",
            "The nodes carry no pool label (usage_report_pool_label)." if u["pool"] == UNKNOWN_POOL
            else "Add it to usage_report_prices.")]
    missing = [n["team"] for n in report["normalised_cost"] if n["accepted_units"] is None]
    if missing:
        lines += ["", "No accepted units for %s (usage_report_units): no cost per %s." % (
            ", ".join(missing), unit_name)]
    return lines


def _workload_section(report, label_keys):
    lines = ["", "## 3. Workloads", ""]
    rows = report["workloads"]
    if not rows:
        return lines + ["No pod held a GPU in the period."]
    if not any(w["found"] for w in rows):
        lines += ["Prometheus has no kube-state-metrics pod series for the period (kube_pod_owner, "
                  "kube_pod_container_info, ...): every GPU pod is its own workload, without image, labels or "
                  "termination reason.", ""]
    lines += ["One row per controlling object of the GPU pods (kube_pod_owner). owner, model and dataset are the "
              "pod labels %s (kube_pod_labels); retries = failed pods + container restarts." % ", ".join(
                  "%s=`%s`" % (f, label_keys[f]) for f in WORKLOAD_FIELDS if f in label_keys), "",
              "| team | workload | owner | image | model | dataset | pods | failed pods | restarts | retries "
              "| termination | allocated GPU h | productive GPU h | idle GPU h | failed-run GPU h |",
              "|---|---|---|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for w in rows:
        lines.append("| %s |" % " | ".join(
            [_cell(w[k]) for k in ("team", "workload", "owner", "image", "model", "dataset")] +
            [str(w[k]) for k in ("pods", "failed_pods", "restarts", "retries")] + [_cell(w["termination"])] +
            [_fmt(w[k]) for k in ("allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours", "failed_run_gpu_hours")]))
    unseen = [w for w in rows if w.get("failed_pods_unseen")]
    if unseen:
        lines += ["", "Failed pods kube-state-metrics did not see in phase Failed during the period (they failed "
                  "before it, or were deleted before a scrape): their GPU hours in the period, if any, are not "
                  "failed-run hours. %s." % "; ".join(
                      "%s %s: the Job counts %d failed, %d seen" % (
                          w["team"], w["workload"], w["failed_pods"], w["failed_pods"] - w["failed_pods_unseen"])
                      for w in unseen)]
    for key in report.get("missing_labels") or ():
        lines += ["", "No GPU pod carried the label %s in kube_pod_labels: kube-state-metrics exports only the "
                  "labels of its --metric-labels-allowlist (kube-prometheus-stack: kube-state-metrics."
                  "metricLabelsAllowlist: [\"pods=[%s]\"]), or the pods do not set it." % (key, key)]
    return lines


def _csv(rows, columns):
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(dict((k, "" if row.get(k) is None else row[k]) for k in columns))
    return buf.getvalue()


def csv_text(report):
    """One row per team and node pool: the time split and its GPU cost."""
    return _csv(report["rows"], COLUMNS)


def cost_csv_text(report):
    """One row per team and one for the site: the terms of the normalised cost."""
    return _csv(report["normalised_cost"] + [report["site_cost"]], COST_COLUMNS)


def workloads_csv_text(report):
    return _csv(report["workloads"], WORKLOAD_COLUMNS)


def chart_png(report, path, title):
    """Per team: stacked bars of GPU hours (productive / low / idle / failed-run) and of the normalised
    cost's terms; False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")                 # headless
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    teams = report["teams"]
    names = [t["team"] for t in teams]
    height = 2.2 + 0.6 * max(len(names), 1)
    fig, (ax, cx) = plt.subplots(1, 2, figsize=(12, height), dpi=110)
    parts = (("busy_gpu_hours", "#2e7d32", "productive (>= %g %%)" % report["busy_percent"]),
             ("other_gpu_hours", "#f9a825", "low utilisation"),
             ("idle_gpu_hours", "#c62828", "idle (< %g %%)" % report["idle_percent"]),
             ("failed_run_gpu_hours", "#6a1b9a", "failed runs"))
    left = [0.0] * len(teams)
    for key, colour, label in parts:
        values = [t[key] for t in teams]
        ax.barh(names, values, left=left, color=colour, label=label)
        left = [a + b for a, b in zip(left, values)]
    for i, t in enumerate(teams):
        ax.text(t["allocated_gpu_hours"], i, "  %.1f h" % t["allocated_gpu_hours"], va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("GPU hours")
    ax.set_title(title)
    ax.set_xlim(0, max([t["allocated_gpu_hours"] for t in teams] + [1]) * 1.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=4, fontsize=7, frameon=False)
    colours = ("#2e7d32", "#1565c0", "#00838f", "#6d4c41", "#c62828", "#6a1b9a", "#757575")
    costs = dict((n["team"], n) for n in report["normalised_cost"])
    left = [0.0] * len(teams)
    for term, colour in zip(TERMS, colours):
        values = [(costs[name][term] or 0.0) for name in names]
        cx.barh(names, values, left=left, color=colour, label=term)
        left = [a + b for a, b in zip(left, values)]
    for i, name in enumerate(names):
        n = costs[name]
        note = "n/a" if n["total"] is None else "%.2f" % n["total"]
        if n["cost_per_unit"] is not None:
            note += " (%.2f per unit)" % n["cost_per_unit"]
        cx.text(left[i], i, "  " + note, va="center", fontsize=8)
    cx.invert_yaxis()
    cx.set_xlabel("cost")
    cx.set_title("Normalised cost terms")
    cx.set_xlim(0, max(left + [1]) * 1.5)
    cx.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=4, fontsize=7, frameon=False)
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
            sample_interval=15.0, costs=None, label_keys=None):
    period = int(round(end - start))
    validate(period, prices or {}, units or {}, busy_percent, idle_percent, sample_interval, costs, label_keys)
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
    answers = dict((key, prom.query(expr % period, end)) for key, expr in WORKLOAD_QUERIES)
    info = pod_info(answers, label_keys) if any(answers.values()) else None
    return compute(util, failed, node_pools, prices, units, busy_percent, idle_percent, sample_interval,
                   waits or None, costs, end - start, info, label_keys)
