"""What roles/monitoring renders, checked against the real upstream files.

- the PrometheusRule against the Prometheus Operator CRD schema (strict: unknown fields fail);
- the dcgmExporter values rendered by the real GPU Operator chart (helm template): our metrics
  CSV lands in the chart's ConfigMap under dcgm-metrics.csv, the ClusterPolicy points at it,
  the ServiceMonitor settings pass the ClusterPolicy CRD;
- every metric name of our CSV is a field of the exporter's upstream CSVs (or FB_TOTAL & co);
- the refusals: unknown metric names, rules on metrics the CSV does not export, bad settings.
"""
import copy
import json
import os
import re

import jsonschema
import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import dashboards as monitoring_dashboards
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import objects as monitoring
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from kit import charts
from kit.paths import CLUSTERPOLICY_CRD, UPSTREAM, gpu_operator_chart, need

RULE_CRD = os.path.join(UPSTREAM, "prometheus-operator", "crds", "monitoring.coreos.com_prometheusrules.yaml")
CP_CRD = CLUSTERPOLICY_CRD
CHART = gpu_operator_chart("v26.7.0")
DCGM = os.path.join(UPSTREAM, "dcgm-exporter")


def _metrics_csv_fields(text):
    """Field names of an exporter metrics CSV (comments and blank lines skipped)."""
    return [line.split(",")[0].strip() for line in (raw.strip() for raw in text.splitlines())
            if line and not line.startswith("#")]


def strict(schema):
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node \
                    and not node.get("x-kubernetes-preserve-unknown-fields"):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(schema)
    return schema


def crd_schema(path, version="v1"):
    with open(path, encoding="utf-8") as fh:
        crd = yaml.safe_load(fh)
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return strict(v["schema"]["openAPIV3Schema"])
    raise AssertionError(version)


def test_prometheus_rule_matches_the_operator_crd():
    need(RULE_CRD)
    obj = monitoring.prometheus_rule()
    body = dict((k, v) for k, v in obj.items() if k != "metadata")
    # Go regexes in the CRD (e.g. '^(?i)(abort|warn)?$') are not Python ones: no check_schema
    jsonschema.Draft7Validator(crd_schema(RULE_CRD)).validate(body)
    assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def upstream_fields():
    names = set()
    for name in ("default-counters.csv", "dcp-metrics-included.csv"):
        with open(os.path.join(DCGM, name), encoding="utf-8") as fh:
            names.update(re.findall(r"^#?\s*(DCGM_[A-Z0-9_]+)\s*,", fh.read(), re.M))
    return names


def test_metrics_csv_uses_exporter_fields_and_adds_what_the_default_leaves_out():
    need(DCGM)
    ours = _metrics_csv_fields(monitoring.metrics_csv(monitoring.settings()))
    upstream = upstream_fields()
    extra = {"DCGM_FI_DEV_FB_TOTAL", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}
    assert set(ours) - upstream <= extra
    assert upstream - {"DCGM_EXP_CLOCK_EVENTS_COUNT"} >= set(ours) - extra
    # every known field we accept from users exists upstream or is one of the documented extras
    assert upstream <= monitoring.KNOWN_FIELDS
    with open(os.path.join(DCGM, "default-counters.csv"), encoding="utf-8") as fh:
        default = set(_metrics_csv_fields(fh.read()))
    for needed in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_RETIRED_PENDING",
                   "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_THERMAL_VIOLATION",
                   "DCGM_FI_DEV_FB_TOTAL"):
        assert needed not in default and needed in ours


def test_dcgm_values_render_with_the_real_chart():
    need(CP_CRD)
    values = monitoring.dcgm_values({"service_monitor": {"labels": {"release": "prom"}},
                                     "pod_labels": ["^app$", "^kueue\\.x-k8s\\.io/queue-name$"]})
    docs = charts.render(CHART, values, "helm3")
    cms = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "skaffon-dcgm-metrics"]
    assert len(cms) == 1
    csv = cms[0]["data"]["dcgm-metrics.csv"]
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter" in csv
    cp = [d for d in docs if d["kind"] == "ClusterPolicy"][0]
    exp = cp["spec"]["dcgmExporter"]
    assert exp["config"] == {"name": "skaffon-dcgm-metrics"}
    sm = exp["serviceMonitor"]
    assert sm["enabled"] is True and sm["honorLabels"] is True
    assert sm["additionalLabels"] == {"release": "prom"}
    assert sm["relabelings"][0]["targetLabel"] == "node"
    assert exp["enablePodLabels"] is True
    assert exp["podLabelAllowlistRegex"] == ["^app$", "^kueue\\.x-k8s\\.io/queue-name$"]
    jsonschema.Draft7Validator(crd_schema(CP_CRD)["properties"]["spec"]["properties"]["dcgmExporter"]
                               ).validate(cp["spec"]["dcgmExporter"])


def test_dashboards_are_sidecar_configmaps_on_real_metric_names():
    boards = monitoring.dashboards({"dashboard_label": {"grafana_dashboard": "1"}})
    assert [b["metadata"]["name"] for b in boards] == ["skaffon-gpu-nodes", "skaffon-gpu-teams"]
    records = set(r["record"] for g in monitoring.rule_groups(monitoring.settings()) for r in g["rules"]
                  if "record" in r)
    fields = set(m[0] for m in monitoring.metrics(monitoring.settings()))
    for board in boards:
        assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
        queries = monitoring_dashboards.queries(board)
        assert len(queries) >= 6
        for _board, _panel, expr in queries:
            names = set(re.findall(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\{", expr))
            assert names <= fields | records | {"up"}, expr


@pytest.mark.parametrize("given, fragment", [
    ({"extra_metrics": ["DCGM_FI_DEV_GPU_TEMPERATURE"]}, "not a DCGM field"),
    ({"extra_metrics": [{"name": "DCGM_FI_DEV_FB_USED", "type": "histogram"}]}, "type must be one of"),
    ({"extra_rules": [{"name": "site", "rules": [
        {"alert": "Nvlink", "expr": "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0 > 0"}]}]}, "does not export"),
    ({"thresholds": {"temperature_warning": 95}}, "below the critical"),
    ({"thresholds": {"idle_for": "an hour"}}, "Prometheus duration"),
    ({"thresholds": {"fatal_xids": []}}, "fatal_xids"),
    ({"rule_labels": {"release": 1}}, "mapping of Kubernetes label keys"),
    ({"dashboard_label": {}}, "sidecar selects"),
    ({"service_monitor": {"interval": "often"}}, "interval"),
    ({"service_monitr": {}}, "unknown setting"),
    ({"pod_labels": ["(app"]}, "not a regular expression"),
])
def test_refusals_name_the_setting_and_the_fix(given, fragment):
    with pytest.raises(DomainError) as err:
        monitoring.prometheus_rule(given)
    assert fragment in err.value.msg
    assert err.value.msg.startswith("monitoring_")


def test_extra_metrics_make_extra_rules_possible():
    given = {"extra_metrics": [{"name": "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", "type": "counter"}],
             "extra_rules": [{"name": "site", "rules": [
                 {"alert": "Nvlink", "expr": "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0 > 0"}]}]}
    groups = monitoring.prometheus_rule(given)["spec"]["groups"]
    assert groups[-1]["name"] == "site"
    assert "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0, counter" in monitoring.metrics_csv(monitoring.settings(given))


def test_fragment_survives_the_gpu_operator_roles_value_merge():
    """The site flow: gpu_operator_values = site values deep-merged with the fragment; the role's
    own service_monitor default (false) must not switch the ServiceMonitor off."""
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator import values as ov
    plan = {"driver_enabled": False, "toolkit_enabled": False, "node_labels": {}, "warnings": [], "errors": []}
    site = {"dcgmExporter": {"resources": {"limits": {"memory": "1Gi"}}}}
    fragment = monitoring.dcgm_values({"service_monitor": {"labels": {"release": "prom"}}})
    merged = ov.deep_merge(site, fragment)      # as `site | combine(fragment, recursive=true)`
    values = ov.operator_values(plan, user_values=merged, service_monitor=False)
    exp = values["dcgmExporter"]
    assert exp["serviceMonitor"]["enabled"] is True
    assert exp["serviceMonitor"]["additionalLabels"] == {"release": "prom"}
    assert exp["config"]["name"] == "skaffon-dcgm-metrics" and "DCGM_FI_DEV_FB_TOTAL" in exp["config"]["data"]
    assert exp["resources"] == {"limits": {"memory": "1Gi"}}


def test_required_crds_follow_the_service_monitor_setting():
    assert monitoring.required_crds() == ["prometheusrules.monitoring.coreos.com",
                                          "servicemonitors.monitoring.coreos.com"]
    assert monitoring.required_crds({"service_monitor": {"enabled": False}}) == [
        "prometheusrules.monitoring.coreos.com"]


def test_the_gpu_cluster_stack_names_its_exporter_nvidia_dcgm_exporter_dra():
    """gpucluster manifests state-dcgm-exporter: DaemonSet, Service and ServiceMonitor (jobLabel app) are
    nvidia-dcgm-exporter-dra; the alerts and the dashboard select that job and DaemonSet in DRA mode."""
    def exprs(rule):
        return "\n".join(r.get("expr", "") for g in rule["spec"]["groups"] for r in g["rules"])

    dra = exprs(monitoring.prometheus_rule({"allocation_api": "dra"}))
    assert 'up{job="nvidia-dcgm-exporter-dra"} == 0' in dra and 'absent(up{job="nvidia-dcgm-exporter-dra"})' in dra
    assert 'daemonset="nvidia-dcgm-exporter-dra"' in dra and 'job="nvidia-dcgm-exporter"}' not in dra
    # no node offers an nvidia.com resource with the GPUCluster stack: the alerts on them would always fire
    assert "kube_node_status_allocatable" not in dra
    plugin = exprs(monitoring.prometheus_rule())
    assert "kube_node_status_allocatable" in plugin
    assert 'absent(up{job="nvidia-dcgm-exporter"})' in plugin and 'daemonset="nvidia-dcgm-exporter"}' in plugin
    boards = json.dumps(monitoring.dashboards({"allocation_api": "dra"}))
    assert "nvidia-dcgm-exporter-dra" in boards
    with pytest.raises(DomainError):
        monitoring.prometheus_rule({"allocation_api": "gpucluster"})
