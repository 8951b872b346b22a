# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU monitoring as data: the DCGM exporter metrics CSV, the GPU Operator's dcgmExporter values,
the PrometheusRule (alerts + recording rules) and the Grafana dashboards, all from one settings dict.

The role, the filters and the tests call the same functions, so what promtool tests is what the
role applies. Every input mistake raises DomainError naming the setting, the value and the fix.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import dashboards as monitoring_dashboards
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream as U
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import is_dns_label, label_key_problem

# DCGM field names the exporter accepts in its CSV (go-dcgm const_fields.go; the exporter refuses
# unknown ones at start and the pod crash-loops). The fields of etc/default-counters.csv and
# etc/dcp-metrics-included.csv, plus FB_TOTAL, the throttle/event reasons and the power limit.
KNOWN_FIELDS = frozenset("""
DCGM_FI_DEV_SM_CLOCK DCGM_FI_DEV_MEM_CLOCK DCGM_FI_DEV_MEMORY_TEMP DCGM_FI_DEV_GPU_TEMP
DCGM_FI_DEV_POWER_USAGE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION DCGM_FI_DEV_POWER_MGMT_LIMIT
DCGM_FI_DEV_PCIE_REPLAY_COUNTER DCGM_FI_DEV_GPU_UTIL DCGM_FI_DEV_MEM_COPY_UTIL
DCGM_FI_DEV_ENC_UTIL DCGM_FI_DEV_DEC_UTIL DCGM_FI_DEV_XID_ERRORS DCGM_FI_DEV_POWER_VIOLATION
DCGM_FI_DEV_THERMAL_VIOLATION DCGM_FI_DEV_SYNC_BOOST_VIOLATION DCGM_FI_DEV_BOARD_LIMIT_VIOLATION
DCGM_FI_DEV_LOW_UTIL_VIOLATION DCGM_FI_DEV_RELIABILITY_VIOLATION DCGM_FI_DEV_CLOCK_THROTTLE_REASONS
DCGM_FI_DEV_CLOCKS_EVENT_REASONS DCGM_FI_DEV_FB_TOTAL DCGM_FI_DEV_FB_FREE DCGM_FI_DEV_FB_USED
DCGM_FI_DEV_FB_RESERVED DCGM_FI_DEV_ECC_SBE_VOL_TOTAL DCGM_FI_DEV_ECC_DBE_VOL_TOTAL
DCGM_FI_DEV_ECC_SBE_AGG_TOTAL DCGM_FI_DEV_ECC_DBE_AGG_TOTAL DCGM_FI_DEV_RETIRED_SBE
DCGM_FI_DEV_RETIRED_DBE DCGM_FI_DEV_RETIRED_PENDING DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL
DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL
DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL
DCGM_FI_DEV_NVLINK_BANDWIDTH_L0 DCGM_FI_DEV_VGPU_LICENSE_STATUS
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS
DCGM_FI_DEV_ROW_REMAP_FAILURE DCGM_FI_DRIVER_VERSION DCGM_FI_NVML_VERSION DCGM_FI_DEV_BRAND
DCGM_FI_DEV_SERIAL DCGM_FI_DEV_OEM_INFOROM_VER DCGM_FI_DEV_ECC_INFOROM_VER
DCGM_FI_DEV_POWER_INFOROM_VER DCGM_FI_DEV_INFOROM_IMAGE_VER DCGM_FI_DEV_VBIOS_VERSION
DCGM_FI_PROF_GR_ENGINE_ACTIVE DCGM_FI_PROF_SM_ACTIVE DCGM_FI_PROF_SM_OCCUPANCY
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE DCGM_FI_PROF_DRAM_ACTIVE DCGM_FI_PROF_PIPE_FP64_ACTIVE
DCGM_FI_PROF_PIPE_FP32_ACTIVE DCGM_FI_PROF_PIPE_FP16_ACTIVE DCGM_FI_PROF_PCIE_TX_BYTES
DCGM_FI_PROF_PCIE_RX_BYTES DCGM_FI_PROF_NVLINK_TX_BYTES DCGM_FI_PROF_NVLINK_RX_BYTES
DCGM_EXP_CLOCK_EVENTS_COUNT DCGM_EXP_XID_ERRORS_COUNT DCGM_EXP_GPU_HEALTH_STATUS DCGM_EXP_P2P_STATUS
""".split())
METRIC_TYPES = ("gauge", "counter", "label")

# Our metrics CSV: the exporter's defaults plus what the alerts need and the default leaves out
# (ECC, retired pages, NVLink errors, throttling, FB_TOTAL).
DEFAULT_METRICS = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in ns)."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in ns)."),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event (throttle) reasons bitmask."),
    ("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Total number of single-bit persistent ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors."),
    ("DCGM_FI_DEV_RETIRED_SBE", "counter", "Total number of retired pages due to single-bit errors."),
    ("DCGM_FI_DEV_RETIRED_DBE", "counter", "Total number of retired pages due to double-bit errors."),
    ("DCGM_FI_DEV_RETIRED_PENDING", "counter", "Total number of pages pending retirement."),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter",
     "Total number of NVLink flow-control CRC errors."),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink data CRC errors."),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink retries."),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink recovery errors."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
]

# Xids that mean the GPU (or its memory or NVLink) needs a person: the node is drained and the
# GPU reset or replaced (NVIDIA Xid catalogue). Others (13, 31, 43, ...) are usually the job's own.
DEFAULT_FATAL_XIDS = [48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120]

DEFAULTS = {
    "namespace": "monitoring",
    "rule_name": "skaffon-gpu-alerts",
    "rule_labels": {"release": "kube-prometheus-stack"},
    "service_monitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"},
                        "interval": "15s", "honor_labels": True},
    "metrics_configmap": "skaffon-dcgm-metrics",
    # pod labels copied onto the GPU series (regexes; the operator then grants the exporter pod reads)
    "pod_labels": [],
    "extra_metrics": [],
    # null: the exporter of the operator's stack (ClusterPolicy: nvidia-dcgm-exporter; GPUCluster with
    # allocation_api dra: nvidia-dcgm-exporter-dra, its ServiceMonitor's job and its DaemonSet)
    "exporter_job": None,
    "allocation_api": "device-plugin",
    "runbook_base_url": "https://github.com/skaffon/gpu_platform/blob/main/docs/runbooks",
    "dashboard_label": {"grafana_dashboard": "1"},
    "dashboard_folder": "GPU",
    "dashboard_folder_annotation": "grafana_folder",
    "extra_rules": [],
    "thresholds": {
        "temperature_warning": 85, "temperature_critical": 90,
        "memory_full_percent": 95, "idle_percent": 5, "idle_for": "1h",
        "busy_percent": 10, "fatal_xids": list(DEFAULT_FATAL_XIDS),
        "exporter_down_for": "5m", "throttle_ratio": 0.2,
    },
}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
METRIC_IN_EXPR = re.compile(r"\b(DCGM_(?:FI|EXP)_[A-Z0-9_]+)\b")


def _fail(setting, value, fix):
    raise DomainError("monitoring_%s: %r is not valid: %s" % (setting, value, fix),
                      setting="monitoring_" + setting, value=value)


def settings(given=None):
    """Defaults deep-merged with the given settings, then validated; returns a new dict."""
    out = copy.deepcopy(DEFAULTS)
    for key, value in (given or {}).items():
        if key not in DEFAULTS:
            _fail(key, value, "unknown setting; known: %s" % ", ".join(sorted(DEFAULTS)))
        if isinstance(DEFAULTS[key], dict) and isinstance(value, dict) and key not in (
                "rule_labels", "dashboard_label"):
            unknown = set(value) - set(DEFAULTS[key])
            if unknown:
                _fail(key, value, "unknown key(s) %s; known: %s" % (
                    sorted(unknown), ", ".join(sorted(DEFAULTS[key]))))
            out[key].update(value)
        elif value is not None:
            out[key] = copy.deepcopy(value)
    _validate(out)
    if out["exporter_job"] is None:
        out["exporter_job"] = exporter_app(out)
    return out


def exporter_app(s):
    """The DCGM exporter DaemonSet (= its pods' app label, the job of its targets) of the operator's stack."""
    return U.DCGM_EXPORTER_DRA_APP if s.get("allocation_api") == "dra" else U.DCGM_EXPORTER_APP


def _validate(s):
    if s["allocation_api"] not in ("device-plugin", "dra"):
        _fail("allocation_api", s["allocation_api"], "device-plugin or dra (the GPU Operator's stack)")
    if not is_dns_label(s["namespace"]):
        _fail("namespace", s["namespace"], "a namespace name (DNS-1123 label), e.g. monitoring")
    for key in ("rule_name", "metrics_configmap"):
        if not is_dns_label(s[key]):
            _fail(key, s[key], "an object name (lowercase letters, digits, '-')")
    for key in ("rule_labels", "dashboard_label"):
        labels = s[key]
        if not isinstance(labels, dict) or not all(
                label_key_problem(k) is None and isinstance(v, str) for k, v in labels.items()):
            _fail(key, labels, "a mapping of Kubernetes label keys to string values, "
                  "e.g. {release: kube-prometheus-stack}")
    if not s["dashboard_label"]:
        _fail("dashboard_label", s["dashboard_label"], "the Grafana sidecar selects dashboards by a "
              "label; give at least one (kube-prometheus-stack: {grafana_dashboard: '1'})")
    sm = s["service_monitor"]
    if not isinstance(sm["enabled"], bool) or not isinstance(sm["honor_labels"], bool):
        _fail("service_monitor", sm, "enabled and honor_labels are true or false")
    if not isinstance(sm["labels"], dict) or not all(
            label_key_problem(k) is None and isinstance(v, str) for k, v in sm["labels"].items()):
        _fail("service_monitor", sm, "labels: a mapping of label keys to string values")
    if not isinstance(sm["interval"], str) or not DURATION.match(sm["interval"]):
        _fail("service_monitor", sm, "interval: a Prometheus duration such as 15s")
    t = s["thresholds"]
    for key in ("temperature_warning", "temperature_critical", "memory_full_percent",
                "idle_percent", "busy_percent", "throttle_ratio"):
        if isinstance(t[key], bool) or not isinstance(t[key], (int, float)) or t[key] < 0:
            _fail("thresholds", {key: t[key]}, "%s must be a number >= 0" % key)
    if t["temperature_warning"] >= t["temperature_critical"]:
        _fail("thresholds", {"temperature_warning": t["temperature_warning"],
                             "temperature_critical": t["temperature_critical"]},
              "the warning temperature must be below the critical one")
    if t["idle_percent"] > t["busy_percent"]:
        _fail("thresholds", {"idle_percent": t["idle_percent"], "busy_percent": t["busy_percent"]},
              "idle_percent must not exceed busy_percent (a GPU cannot be idle and busy)")
    for key in ("idle_for", "exporter_down_for"):
        if not isinstance(t[key], str) or not DURATION.match(t[key]):
            _fail("thresholds", {key: t[key]}, "%s must be a Prometheus duration such as 1h" % key)
    xids = t["fatal_xids"]
    if not isinstance(xids, list) or not xids or not all(
            isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in xids):
        _fail("thresholds", {"fatal_xids": xids}, "fatal_xids must be a non-empty list of Xid numbers")
    if not isinstance(s["runbook_base_url"], str) or not s["runbook_base_url"]:
        _fail("runbook_base_url", s["runbook_base_url"], "a URL prefix of the docs/runbooks folder")
    metrics(s)  # validates extra_metrics
    if not isinstance(s["pod_labels"], list) or not all(isinstance(r, str) and r for r in s["pod_labels"]):
        _fail("pod_labels", s["pod_labels"], "a list of label-name regexes, e.g. ['^app$', '^kueue\\.x-k8s\\.io/.*$']")
    for regex in s["pod_labels"]:
        try:
            re.compile(regex)
        except re.error as exc:
            _fail("pod_labels", regex, "not a regular expression (%s)" % exc)
    if not isinstance(s["extra_rules"], list):
        _fail("extra_rules", s["extra_rules"], "a list of Prometheus rule groups ({name, rules})")


# --- metrics CSV ----------------------------------------------------------------------------------

def metrics(s):
    """[(field, type, help)]: ours plus extra_metrics (list of {name, type, help} or 'NAME')."""
    out = list(DEFAULT_METRICS)
    seen = set(m[0] for m in out)
    for item in s.get("extra_metrics") or []:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            _fail("extra_metrics", item, "each entry is a DCGM field name or {name, type, help}")
        name = item["name"].strip()
        if name not in KNOWN_FIELDS:
            close = sorted(f for f in KNOWN_FIELDS if f.split("_")[-1] == name.split("_")[-1])[:3]
            _fail("extra_metrics", name, "not a DCGM field the exporter knows (the pod would crash-loop "
                  "at start)%s" % ("; did you mean %s?" % ", ".join(close) if close else ""))
        mtype = item.get("type", "gauge")
        if mtype not in METRIC_TYPES:
            _fail("extra_metrics", item, "type must be one of %s" % ", ".join(METRIC_TYPES))
        if name in seen:
            continue
        seen.add(name)
        out.append((name, mtype, str(item.get("help") or name).replace(",", ";")))
    return out


def metrics_csv(s):
    lines = ["# Format", "# If line starts with a '#' it is considered a comment",
             "# DCGM FIELD, Prometheus metric type, help message",
             "# Rendered by skaffon.gpu_platform (roles/monitoring): the exporter defaults plus",
             "# ECC, retired pages, NVLink errors, throttling and FB_TOTAL, which the alerts need."]
    for name, mtype, text in metrics(s):
        lines.append("%s, %s, %s" % (name, mtype, text))
    return "\n".join(lines) + "\n"


def dcgm_values(given=None):
    """The dcgmExporter fragment of the GPU Operator chart values (deep-merge it into
    gpu_operator_values): our metrics CSV as a chart-created ConfigMap, the ServiceMonitor."""
    s = settings(given)
    sm = s["service_monitor"]
    extra = {}
    if s["pod_labels"]:
        # opt-in, bounded: only the listed labels (Prometheus cardinality)
        extra = {"enablePodLabels": True, "podLabelAllowlistRegex": list(s["pod_labels"])}
    return {"dcgmExporter": dict(extra, **{
        "config": {"name": s["metrics_configmap"], "create": True, "data": metrics_csv(s)},
        "serviceMonitor": {
            "enabled": sm["enabled"], "interval": sm["interval"],
            # keep the pod/namespace/container labels the exporter maps from the kubelet's
            # pod-resources API; without it Prometheus renames them exported_pod etc.
            "honorLabels": sm["honor_labels"],
            "additionalLabels": dict(sm["labels"]),
            # node name as a stable label: the exporter's own host label changed case
            # (Hostname -> hostname) in dcgm-exporter 4.8.3
            "relabelings": [{"sourceLabels": [U.PROM_META_POD_NODE_NAME],
                             "targetLabel": "node", "action": "replace"}],
        }})}


# --- PrometheusRule -------------------------------------------------------------------------------

def _runbook(s, page):
    return "%s/%s.md" % (s["runbook_base_url"].rstrip("/"), page)


def _alert(s, name, expr, severity, summary, description, runbook, for_=None):
    rule = {"alert": name, "expr": expr, "labels": {"severity": severity},
            "annotations": {"summary": summary, "description": description,
                            "runbook_url": _runbook(s, runbook)}}
    if for_:
        rule["for"] = for_
    return rule


_GPUS_NOW = "count by (node) (count by (node, gpu) (DCGM_FI_DEV_GPU_TEMP))"
_GPUS_1H = "count by (node) (count by (node, gpu) (last_over_time(DCGM_FI_DEV_GPU_TEMP[1h])))"


# With the GPUCluster stack no node offers an nvidia.com resource (its GPUs are ResourceSlice devices):
# these two alerts would fire on every GPU node
DEVICE_PLUGIN_ONLY_ALERTS = ("GpuNodeResourcesMissing", "GpuNodeResourcesShort")


def alert_rules(s):
    rules = _alert_rules(s)
    if s["allocation_api"] == "dra":
        rules = [r for r in rules if r["alert"] not in DEVICE_PLUGIN_ONLY_ALERTS]
    return rules


def _alert_rules(s):
    t = s["thresholds"]
    job = s["exporter_job"]
    fatal = " or ".join("DCGM_FI_DEV_XID_ERRORS == %d" % x for x in sorted(set(t["fatal_xids"])))
    where = "GPU {{ $labels.gpu }} ({{ $labels.UUID }}) on node {{ $labels.node }}"
    return [
        _alert(s, "GpuXidFatal", fatal, "critical",
               "GPU reported fatal Xid {{ $value }}",
               where + " reported Xid {{ $value }}: the GPU needs a reset or replacement; drain the node.",
               "gpu-xid-error"),
        _alert(s, "GpuXidError",
               "DCGM_FI_DEV_XID_ERRORS > 0 unless (%s)" % fatal, "warning",
               "GPU reported Xid {{ $value }}",
               where + " reported Xid {{ $value }} (usually the job's fault: check the pod "
               "{{ $labels.namespace }}/{{ $labels.pod }}).", "gpu-xid-error", "1m"),
        # fewer physical GPUs (not MIG instances, which come and go with a MIG change) than during
        # the last hour, or none at all, while the exporter answers
        _alert(s, "GpuMissing",
               "(%s > %s or %s unless on (node) %s) and on (node) (up{job=\"%s\"} == 1)"
               % (_GPUS_1H, _GPUS_NOW, _GPUS_1H, _GPUS_NOW, job), "critical",
               "A GPU disappeared from node {{ $labels.node }}",
               "Node {{ $labels.node }} reported more GPUs in the last hour than now (fallen off the "
               "bus, Xid 79?).", "node-failure", "2m"),
        _alert(s, "GpuExporterDown", "up{job=\"%s\"} == 0" % job, "critical",
               "DCGM exporter on {{ $labels.node }} is not scraped",
               "Prometheus cannot scrape the DCGM exporter on node {{ $labels.node }} "
               "({{ $labels.instance }}): no GPU alert works for this node.", "driver-problem",
               t["exporter_down_for"]),
        # a crash-looping exporter pod leaves the Service endpoints: its target vanishes, no up == 0
        _alert(s, "GpuExporterUnavailable",
               "kube_daemonset_status_number_unavailable{daemonset=\"%s\"} > 0" % exporter_app(s),
               "warning", "{{ $value }} DCGM exporter pods unavailable",
               "{{ $value }} pods of DaemonSet {{ $labels.namespace }}/{{ $labels.daemonset }} are not "
               "ready: GPUs on those nodes are not monitored.", "driver-problem", "10m"),
        _alert(s, "GpuExporterMissing", "absent(up{job=\"%s\"})" % job, "critical",
               "No DCGM exporter target at all",
               "Prometheus has no DCGM exporter target (job %s): the ServiceMonitor is not selected or "
               "the exporter DaemonSet runs nowhere." % job, "driver-problem", "10m"),
        _alert(s, "GpuTemperatureHigh",
               "DCGM_FI_DEV_GPU_TEMP > %s" % t["temperature_warning"], "warning",
               "GPU temperature {{ $value }} C",
               where + " runs at {{ $value }} C (warning above %s C)." % t["temperature_warning"],
               "gpu-temperature", "10m"),
        _alert(s, "GpuTemperatureCritical",
               "DCGM_FI_DEV_GPU_TEMP > %s" % t["temperature_critical"], "critical",
               "GPU overheating at {{ $value }} C",
               where + " runs at {{ $value }} C (critical above %s C): it throttles and may shut "
               "down." % t["temperature_critical"], "gpu-temperature", "2m"),
        _alert(s, "GpuThermalThrottling",
               "rate(DCGM_FI_DEV_THERMAL_VIOLATION[10m]) / 1e9 > %s" % t["throttle_ratio"], "warning",
               "GPU is thermally throttled",
               where + " spent {{ $value | humanizePercentage }} of the time thermally throttled.",
               "gpu-temperature", "15m"),
        _alert(s, "GpuDoubleBitEccErrors",
               "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", "critical",
               "Uncorrectable (double-bit) ECC errors",
               where + " had uncorrectable ECC errors: jobs on it may have produced wrong results.",
               "gpu-memory-errors"),
        _alert(s, "GpuRowRemapFailure", "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0", "critical",
               "GPU memory row remapping failed",
               where + " could not remap a failing memory row: replace the GPU.", "gpu-memory-errors"),
        _alert(s, "GpuRetiredPagesPending", "DCGM_FI_DEV_RETIRED_PENDING > 0", "warning",
               "GPU memory pages wait for retirement",
               where + " has pages pending retirement: reset the GPU when it is idle.",
               "gpu-memory-errors", "5m"),
        _alert(s, "GpuNvlinkErrors",
               "increase(DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL[10m]) > 0"
               " or increase(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL[10m]) > 0", "warning",
               "NVLink errors", where + " reports NVLink data CRC or recovery errors.",
               "gpu-memory-errors", "5m"),
        _alert(s, "GpuMemoryNearlyFull",
               "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) * 100 > %s"
               % t["memory_full_percent"], "warning",
               "GPU memory {{ $value | humanize }}% used",
               where + " (pod {{ $labels.namespace }}/{{ $labels.pod }}) has used more than %s%% of "
               "its memory for 15 minutes: the next allocation fails with out-of-memory."
               % t["memory_full_percent"], "gpu-memory-full", "15m"),
        _alert(s, "GpuAllocatedIdle",
               "DCGM_FI_DEV_GPU_UTIL{pod!=\"\"} < %s" % t["idle_percent"], "info",
               "Allocated GPU idle for %s" % t["idle_for"],
               "Pod {{ $labels.namespace }}/{{ $labels.pod }} holds " + where + " but used it below "
               "%s%% for %s." % (t["idle_percent"], t["idle_for"]), "gpu-idle-allocated", t["idle_for"]),
        _alert(s, "GpuNodeResourcesMissing",
               "count by (node) (DCGM_FI_DEV_GPU_TEMP)"
               " unless on (node) (sum by (node) (kube_node_status_allocatable{resource=~\"%s\"}) > 0)"
               % U.KSM_GPU_RESOURCE_REGEX, "warning",
               "GPU node {{ $labels.node }} offers no GPU resource",
               "Node {{ $labels.node }} has {{ $value }} GPUs but its allocatable lists no nvidia.com "
               "resource (device plugin down, MIG or time-slicing not applied).",
               "gpu-node-resources", "15m"),
        # every healthy layout (whole GPUs, time-slicing replicas, MIG single or mixed) offers at
        # least one nvidia.com resource per physical GPU
        _alert(s, "GpuNodeResourcesShort",
               "(sum by (node) (kube_node_status_allocatable{resource=~\"%s\"}) > 0)"
               " < on (node) %s" % (U.KSM_GPU_RESOURCE_REGEX, _GPUS_NOW), "warning",
               "GPU node {{ $labels.node }} offers fewer GPU resources than it has GPUs",
               "Node {{ $labels.node }} offers {{ $value }} nvidia.com resources, fewer than its GPUs "
               "(a GPU lost, MIG or time-slicing half applied).", "gpu-node-resources", "15m"),
    ]


def recording_rules(s):
    t = s["thresholds"]
    held = "DCGM_FI_DEV_GPU_UTIL{namespace!=\"\",pod!=\"\"}"
    return [
        {"record": "namespace:dcgm_gpu_allocated:count", "expr": "count by (namespace) (%s)" % held},
        {"record": "namespace:dcgm_gpu_utilization:avg", "expr": "avg by (namespace) (%s)" % held},
        # "or ... * 0": a team holding GPUs with none busy (idle) shows 0, not no data
        {"record": "namespace:dcgm_gpu_busy:count",
         "expr": "count by (namespace) (%s >= %s) or count by (namespace) (%s) * 0"
                 % (held, t["busy_percent"], held)},
        {"record": "namespace:dcgm_gpu_idle:count",
         "expr": "count by (namespace) (%s < %s) or count by (namespace) (%s) * 0"
                 % (held, t["idle_percent"], held)},
        {"record": "namespace:dcgm_fb_used_bytes:sum",
         "expr": "sum by (namespace) (DCGM_FI_DEV_FB_USED{namespace!=\"\",pod!=\"\"}) * 1048576"},
        {"record": "namespace:dcgm_power_usage_watts:sum",
         "expr": "sum by (namespace) (DCGM_FI_DEV_POWER_USAGE{namespace!=\"\",pod!=\"\"})"},
        {"record": "node:dcgm_gpu_utilization:avg", "expr": "avg by (node) (DCGM_FI_DEV_GPU_UTIL)"},
        {"record": "node:dcgm_gpu_allocated:count",
         "expr": "count by (node) (DCGM_FI_DEV_GPU_UTIL{pod!=\"\"})"},
        {"record": "node:dcgm_gpu:count", "expr": "count by (node) (DCGM_FI_DEV_GPU_UTIL)"},
        {"record": "node:dcgm_power_usage_watts:sum", "expr": "sum by (node) (DCGM_FI_DEV_POWER_USAGE)"},
    ]


def rule_groups(s):
    groups = [{"name": "skaffon.gpu.alerts", "rules": alert_rules(s)},
              {"name": "skaffon.gpu.usage", "interval": "1m", "rules": recording_rules(s)}]
    groups += copy.deepcopy(s["extra_rules"])
    _check_rule_metrics(s, groups)
    return groups


def _check_rule_metrics(s, groups):
    """Every DCGM metric a rule reads is in our CSV, or the rule can never fire."""
    have = set(m[0] for m in metrics(s))
    names = set()
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("rules"), list) or not group.get("name"):
            _fail("extra_rules", group, "each group needs name and a list of rules")
        for rule in group["rules"]:
            if not isinstance(rule, dict) or not isinstance(rule.get("expr"), str) or not (
                    rule.get("alert") or rule.get("record")):
                _fail("extra_rules", rule, "each rule needs expr and alert or record")
            names.update(METRIC_IN_EXPR.findall(rule["expr"]))
    missing = sorted(n for n in names if n not in have)
    if missing:
        _fail("extra_metrics", missing, "rules read these DCGM fields but the metrics CSV does not "
              "export them (alerts on them would never fire); add them to monitoring_extra_metrics")


def prometheus_rule(given=None):
    s = settings(given)
    return {"apiVersion": U.PROMETHEUS_RULE_API_VERSION, "kind": "PrometheusRule",
            "metadata": {"name": s["rule_name"], "namespace": s["namespace"],
                         "labels": dict(s["rule_labels"], **{U.LABEL_PART_OF: U.PART_OF_VALUE})},
            "spec": {"groups": rule_groups(s)}}


def dashboards(given=None):
    """ConfigMaps the Grafana sidecar loads (one dashboard JSON each)."""
    return monitoring_dashboards.configmaps(settings(given))


def required_crds(given=None):
    """CRDs the cluster must serve before anything is written: the PrometheusRule's, and the
    ServiceMonitor's when the exporter values ask for one."""
    s = settings(given)
    return [U.CRD_PROMETHEUS_RULES] + ([U.CRD_SERVICE_MONITORS] if s["service_monitor"]["enabled"] else [])


def objects(given=None):
    """Everything the role applies, in order: the PrometheusRule, then the dashboards."""
    return [prometheus_rule(given)] + dashboards(given)
