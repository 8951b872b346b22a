"""The GPU alerts and recording rules, checked and unit-tested by the real promtool.

The rule file is rendered by module_utils.monitoring exactly as the role renders the
PrometheusRule (spec.groups is a Prometheus rule file). Scenarios: a GPU fallen off the bus
(Xid 79), an overheating GPU, an allocated idle GPU, a missing or unscrapable exporter, memory
errors, a GPU node offering no resource; a healthy fleet fires no alert at all.
"""
import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import objects as monitoring

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian package prometheus; "
    "scripts/system_deps.sh installs it as root)")

JOB = 'job="nvidia-dcgm-exporter"'
GPU0 = ('gpu="0",UUID="GPU-aaaa",modelName="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:8D:00.0",'
        'device="nvidia0",hostname="gpu-1",node="gpu-1",instance="10.0.0.1:9400",' + JOB)
GPU1 = GPU0.replace('gpu="0"', 'gpu="1"').replace("GPU-aaaa", "GPU-bbbb").replace(
    "nvidia0", "nvidia1").replace("8D:00", "91:00")
HELD = 'pod="train-1",namespace="team-a",container="main"'


def labels_of(series):
    return dict(re.findall(r'(\w+)="([^"]*)"', series))


def expand(text, lbls, value):
    """The annotation templates we use: $labels.x, $value, | humanize, | humanizePercentage."""
    def one(match):
        expr = match.group(1).strip()
        if expr.startswith("$labels."):
            return lbls.get(expr[len("$labels."):], "")
        if expr == "$value | humanizePercentage":
            return "%.4g%%" % (value * 100)
        if expr in ("$value", "$value | humanize"):
            return "%.4g" % value
        raise AssertionError("template %r not handled by the test" % expr)
    return re.sub(r"{{(.*?)}}", one, text)


def expected(rules, alert, series_labels, value, drop=()):
    rule = rules[alert]
    lbls = dict((k, v) for k, v in series_labels.items() if k not in drop)
    lbls.update(rule["labels"])
    lbls["alertname"] = alert
    exp_labels = dict((k, v) for k, v in lbls.items() if k != "alertname")
    return {"exp_labels": exp_labels,
            "exp_annotations": dict((k, expand(v, lbls, value)) for k, v in rule["annotations"].items())}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    obj = monitoring.prometheus_rule()
    path = tmp_path_factory.mktemp("rules") / "gpu-rules.yml"
    path.write_text(yaml.safe_dump(obj["spec"]))
    alerts = dict((r["alert"], r) for g in obj["spec"]["groups"] for r in g["rules"] if "alert" in r)
    return path, alerts


def promtool(*args):
    return subprocess.run([PROMTOOL] + list(args), capture_output=True, text=True, timeout=120, check=False)


def run_tests(tmp_path, rule_file, tests):
    path = tmp_path / "tests.yml"
    path.write_text(yaml.safe_dump({"rule_files": [str(rule_file)], "evaluation_interval": "1m",
                                    "tests": tests}))
    return promtool("test", "rules", str(path))


def test_promtool_check_rules_accepts_the_rendered_rules(rendered):
    res = promtool("check", "rules", str(rendered[0]))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 27 rules found" in res.stdout


def test_promtool_check_refuses_bad_promql(tmp_path):
    """The same check the role runs before any write refuses an unparsable extra rule."""
    bad = monitoring.prometheus_rule({"extra_rules": [
        {"name": "site", "rules": [{"alert": "Broken", "expr": "sum by (node (DCGM_FI_DEV_GPU_UTIL)"}]}]})
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(bad["spec"]))
    res = promtool("check", "rules", str(path))
    assert res.returncode != 0
    assert "parse error" in res.stdout + res.stderr


def healthy_series():
    return [
        {"series": "DCGM_FI_DEV_GPU_TEMP{%s}" % GPU0, "values": "55+0x120"},
        {"series": "DCGM_FI_DEV_GPU_TEMP{%s}" % GPU1, "values": "60+0x120"},
        {"series": "DCGM_FI_DEV_GPU_UTIL{%s,%s}" % (GPU0, HELD), "values": "85+0x120"},
        {"series": "DCGM_FI_DEV_GPU_UTIL{%s}" % GPU1, "values": "0+0x120"},
        {"series": "DCGM_FI_DEV_XID_ERRORS{%s}" % GPU0, "values": "0+0x120"},
        {"series": "DCGM_FI_DEV_XID_ERRORS{%s}" % GPU1, "values": "0+0x120"},
        {"series": "DCGM_FI_DEV_FB_USED{%s,%s}" % (GPU0, HELD), "values": "40000+0x120"},
        {"series": "DCGM_FI_DEV_FB_FREE{%s,%s}" % (GPU0, HELD), "values": "41000+0x120"},
        {"series": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{%s}" % GPU0, "values": "0+0x120"},
        {"series": "DCGM_FI_DEV_ROW_REMAP_FAILURE{%s}" % GPU0, "values": "0+0x120"},
        {"series": "DCGM_FI_DEV_RETIRED_PENDING{%s}" % GPU0, "values": "0+0x120"},
        {"series": "DCGM_FI_DEV_THERMAL_VIOLATION{%s}" % GPU0, "values": "0+0x120"},
        {"series": "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL{%s}" % GPU0, "values": "0+0x120"},
        {"series": 'up{%s,node="gpu-1",instance="10.0.0.1:9400"}' % JOB, "values": "1+0x120"},
        {"series": 'kube_node_status_allocatable{node="gpu-1",resource="nvidia_com_gpu",unit="integer"}',
         "values": "2+0x120"},
        {"series": 'kube_daemonset_status_number_unavailable{namespace="gpu-operator",'
                   'daemonset="nvidia-dcgm-exporter"}', "values": "0+0x120"},
    ]


def replace(series, name_part, values):
    """healthy_series() with the series matching name_part given new values."""
    out = []
    for s in series:
        if s["series"].startswith(name_part.split("{")[0]) and all(
                p in s["series"] for p in re.findall(r'\w+="[^"]*"', name_part)):
            s = dict(s, values=values)
        out.append(s)
    return out


def test_healthy_fleet_fires_no_alert(rendered, tmp_path):
    rule_file, alerts = rendered
    tests = [{"interval": "1m", "input_series": healthy_series(),
              "alert_rule_test": [{"eval_time": t, "alertname": name, "exp_alerts": []}
                                  for name in sorted(alerts) for t in ("5m", "30m", "119m")]}]
    res = run_tests(tmp_path, rule_file, tests)
    assert res.returncode == 0, res.stdout + res.stderr


def test_fault_scenarios_fire_their_alerts(rendered, tmp_path):
    rule_file, rules = rendered
    g0, g1 = labels_of(GPU0), labels_of(GPU1)
    held = dict(g0, **labels_of(HELD))
    tests = []
    # Xid 79 (fallen off the bus) on GPU 0 pages at once; Xid 13 on GPU 1 is a warning after 1m.
    s = replace(replace(healthy_series(), "DCGM_FI_DEV_XID_ERRORS{%s}" % GPU0, "0 0 79+0x20"),
                "DCGM_FI_DEV_XID_ERRORS{%s}" % GPU1, "0 0 13+0x20")
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "1m", "alertname": "GpuXidFatal", "exp_alerts": []},
        {"eval_time": "2m", "alertname": "GpuXidFatal",
         "exp_alerts": [expected(rules, "GpuXidFatal", g0, 79, drop=("__name__",))]},
        {"eval_time": "2m", "alertname": "GpuXidError", "exp_alerts": []},
        {"eval_time": "4m", "alertname": "GpuXidError",
         "exp_alerts": [expected(rules, "GpuXidError", g1, 13)]},
    ]})
    # The GPU that fell off the bus stops reporting: GpuMissing once it is gone from the
    # 5 minute lookback (min 10 + 5) and for 2 minutes.
    s = replace(healthy_series(), "DCGM_FI_DEV_GPU_TEMP{%s}" % GPU1, "60+0x10")
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "14m", "alertname": "GpuMissing", "exp_alerts": []},
        {"eval_time": "20m", "alertname": "GpuMissing",
         "exp_alerts": [expected(rules, "GpuMissing", {"node": "gpu-1"}, 1)]},
    ]})
    # Every GPU of the node gone while its exporter still answers (driver crashed): GpuMissing too.
    s = replace(replace(healthy_series(), "DCGM_FI_DEV_GPU_TEMP{%s}" % GPU1, "60+0x10"),
                "DCGM_FI_DEV_GPU_TEMP{%s}" % GPU0, "55+0x10")
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "20m", "alertname": "GpuMissing",
         "exp_alerts": [expected(rules, "GpuMissing", {"node": "gpu-1"}, 2)]},
    ]})
    # The exporter pod of a node crash-loops: out of the endpoints, so no up == 0; the DaemonSet says it.
    s = replace(healthy_series(), "kube_daemonset_status_number_unavailable{", "0 1+0x30")
    ds = {"namespace": "gpu-operator", "daemonset": "nvidia-dcgm-exporter"}
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "10m", "alertname": "GpuExporterUnavailable", "exp_alerts": []},
        {"eval_time": "12m", "alertname": "GpuExporterUnavailable",
         "exp_alerts": [expected(rules, "GpuExporterUnavailable", ds, 1)]},
    ]})
    # MIG disabled on GPU 0: its two instances give way to the whole GPU; no GPU is missing.
    mig = [GPU0 + ',GPU_I_PROFILE="3g.40gb",GPU_I_ID="%d"' % i for i in (1, 2)]
    s = [x for x in healthy_series() if not x["series"].startswith("DCGM_FI_DEV_GPU_TEMP{%s}" % GPU0)]
    s += [{"series": "DCGM_FI_DEV_GPU_TEMP{%s}" % m, "values": "50+0x10"} for m in mig]
    s += [{"series": "DCGM_FI_DEV_GPU_TEMP{%s}" % GPU0, "values": "_x12 50+0x60"}]
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": t, "alertname": "GpuMissing", "exp_alerts": []} for t in ("5m", "20m", "40m")]})
    # Overheating: 95 C from minute 1: critical after 2m, warning after 10m.
    s = replace(healthy_series(), "DCGM_FI_DEV_GPU_TEMP{%s}" % GPU0, "70 95+0x30")
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "2m", "alertname": "GpuTemperatureCritical", "exp_alerts": []},
        {"eval_time": "4m", "alertname": "GpuTemperatureCritical",
         "exp_alerts": [expected(rules, "GpuTemperatureCritical", g0, 95)]},
        {"eval_time": "9m", "alertname": "GpuTemperatureHigh", "exp_alerts": []},
        {"eval_time": "12m", "alertname": "GpuTemperatureHigh",
         "exp_alerts": [expected(rules, "GpuTemperatureHigh", g0, 95)]},
    ]})
    # A pod holds GPU 0 at 1 %: info after the idle time (1h); the free GPU 1 at 0 % does not count.
    s = replace(healthy_series(), "DCGM_FI_DEV_GPU_UTIL{%s,%s}" % (GPU0, HELD), "1+0x100")
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "59m", "alertname": "GpuAllocatedIdle", "exp_alerts": []},
        {"eval_time": "61m", "alertname": "GpuAllocatedIdle",
         "exp_alerts": [expected(rules, "GpuAllocatedIdle", held, 1)]},
    ]})
    # Exporter not scrapable from minute 2 (up == 0): after 5m.
    s = replace(healthy_series(), "up{%s}" % JOB, "1 1 0+0x30")
    up = {"job": "nvidia-dcgm-exporter", "node": "gpu-1", "instance": "10.0.0.1:9400"}
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "6m", "alertname": "GpuExporterDown", "exp_alerts": []},
        {"eval_time": "8m", "alertname": "GpuExporterDown",
         "exp_alerts": [expected(rules, "GpuExporterDown", up, 0)]},
    ]})
    # No exporter target at all (ServiceMonitor not selected): absent(up) after 10m.
    s = [x for x in healthy_series() if not x["series"].startswith("up{")]
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "9m", "alertname": "GpuExporterMissing", "exp_alerts": []},
        {"eval_time": "11m", "alertname": "GpuExporterMissing",
         "exp_alerts": [expected(rules, "GpuExporterMissing", {"job": "nvidia-dcgm-exporter"}, 1)]},
    ]})
    # Memory errors: a double-bit ECC error, a failed row remap.
    s = replace(replace(healthy_series(), "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{%s}" % GPU0, "0 0 0 2+0x20"),
                "DCGM_FI_DEV_ROW_REMAP_FAILURE{%s}" % GPU0, "0 0 0 1+0x20")
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "2m", "alertname": "GpuDoubleBitEccErrors", "exp_alerts": []},
        {"eval_time": "5m", "alertname": "GpuDoubleBitEccErrors",
         "exp_alerts": [expected(rules, "GpuDoubleBitEccErrors", g0, 2, drop=("__name__",))]},
        {"eval_time": "5m", "alertname": "GpuRowRemapFailure",
         "exp_alerts": [expected(rules, "GpuRowRemapFailure", g0, 1)]},
    ]})
    # The node's allocatable lost its GPUs (device plugin gone): warning after 15m.
    s = replace(healthy_series(), "kube_node_status_allocatable{", "2 0+0x40")
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "15m", "alertname": "GpuNodeResourcesMissing", "exp_alerts": []},
        {"eval_time": "17m", "alertname": "GpuNodeResourcesMissing",
         "exp_alerts": [expected(rules, "GpuNodeResourcesMissing", {"node": "gpu-1"}, 2)]},
        {"eval_time": "17m", "alertname": "GpuNodeResourcesShort", "exp_alerts": []},
    ]})
    # One of the two GPUs lost from allocatable (a MIG change half applied): short after 15m.
    s = replace(healthy_series(), "kube_node_status_allocatable{", "2 1+0x40")
    tests.append({"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "15m", "alertname": "GpuNodeResourcesShort", "exp_alerts": []},
        {"eval_time": "17m", "alertname": "GpuNodeResourcesShort",
         "exp_alerts": [expected(rules, "GpuNodeResourcesShort", {"node": "gpu-1"}, 1)]},
        {"eval_time": "17m", "alertname": "GpuNodeResourcesMissing", "exp_alerts": []},
    ]})
    res = run_tests(tmp_path, rule_file, tests)
    assert res.returncode == 0, res.stdout + res.stderr


def test_recording_rules_per_team_and_node(rendered, tmp_path):
    rule_file = rendered[0]
    tests = [{"interval": "1m", "input_series": healthy_series(), "promql_expr_test": [
        {"expr": "namespace:dcgm_gpu_allocated:count", "eval_time": "10m",
         "exp_samples": [{"labels": 'namespace:dcgm_gpu_allocated:count{namespace="team-a"}', "value": 1}]},
        {"expr": "namespace:dcgm_gpu_busy:count", "eval_time": "10m",
         "exp_samples": [{"labels": 'namespace:dcgm_gpu_busy:count{namespace="team-a"}', "value": 1}]},
        {"expr": "namespace:dcgm_gpu_idle:count", "eval_time": "10m",
         "exp_samples": [{"labels": 'namespace:dcgm_gpu_idle:count{namespace="team-a"}', "value": 0}]},
        {"expr": "namespace:dcgm_fb_used_bytes:sum", "eval_time": "10m",
         "exp_samples": [{"labels": 'namespace:dcgm_fb_used_bytes:sum{namespace="team-a"}',
                          "value": 40000 * 1048576}]},
        {"expr": "node:dcgm_gpu:count", "eval_time": "10m",
         "exp_samples": [{"labels": 'node:dcgm_gpu:count{node="gpu-1"}', "value": 2}]},
        {"expr": "node:dcgm_gpu_allocated:count", "eval_time": "10m",
         "exp_samples": [{"labels": 'node:dcgm_gpu_allocated:count{node="gpu-1"}', "value": 1}]},
        {"expr": "node:dcgm_gpu_utilization:avg", "eval_time": "10m",
         "exp_samples": [{"labels": 'node:dcgm_gpu_utilization:avg{node="gpu-1"}', "value": 42.5}]},
    ]}]
    res = run_tests(tmp_path, rule_file, tests)
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_alert_has_a_runbook_page(rendered):
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "runbooks")
    for name, rule in rendered[1].items():
        page = rule["annotations"]["runbook_url"].rsplit("/", 1)[1]
        assert os.path.isfile(os.path.join(docs, page)), (name, page)
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
