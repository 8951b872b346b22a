"""GPU monitoring end to end: real GPU Operator chart with our dcgmExporter values, the monitoring
playbook, the simulated DCGM exporter, and a real Prometheus evaluating the rules the role applied.

"GPU metrics appear in the dashboard, a simulated GPU failure fires the alarm": every dashboard
panel's query returns series, and an injected Xid 79 fires GpuXidFatal in Prometheus' API.
Prometheus also scrapes the simulated kube-state-metrics (a kube-state-metrics pod runs, as
kube-prometheus-stack brings one): every series selector of every shipped rule matches series,
and a rule on kube-state-metrics series fires when a GPU node stops offering its GPUs.
"""
import json
import os
import time
import urllib.request

import pytest
import yaml

from kit.paths import BIN, CLUSTERPOLICY_CRD, NVIDIADRIVER_CRD, REPO, UPSTREAM, gpu_operator_chart
from kit.playbook import run_playbook
from kit.prometheus import (BINARY, KSM_SELECTOR, Prometheus, kube_state_metrics_deployment, scrape_config,
                            series_selectors)

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = gpu_operator_chart("v26.7.0")
CRDS = [CLUSTERPOLICY_CRD, NVIDIADRIVER_CRD,
        os.path.join(UPSTREAM, "prometheus-operator", "crds", "monitoring.coreos.com_prometheusrules.yaml"),
        os.path.join(UPSTREAM, "prometheus-operator", "crds", "monitoring.coreos.com_servicemonitors.yaml")]
INVENTORY = os.path.join(HERE, "inventories", "monitoring")
PLAYBOOK = os.path.join(REPO, "playbooks", "monitoring.yml")
GPU_NODES = ["gpu-h100-1", "gpu-l40s-1"]

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


def kubectl(sim, *args, stdin=None, check=True):
    return sim.run(os.path.join(BIN, "kubectl"), *args, input=stdin, check=check)


def kget(sim, *args):
    return json.loads(kubectl(sim, "get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from simcluster import testing
    work = tmp_path_factory.mktemp("monitoring")
    spec = {"crds": CRDS, "nfd": "preinstalled", "nodes": [
        {"name": "gpu-h100-1", "host_driver": "550.54.15", "labels": {"gpu.skaffon.io/accelerator": "h100"},
         "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 2, "memory_mib": 81559, "mig_capable": True}},
        {"name": "gpu-l40s-1", "host_driver": "550.54.15", "labels": {"gpu.skaffon.io/accelerator": "l40s"},
         "gpus": {"model": "NVIDIA-L40S", "count": 2, "memory_mib": 46068, "mig_capable": False}},
        {"name": "cpu-1"}]}
    (work / "cluster.yaml").write_text(yaml.safe_dump(spec))
    sim = testing.start(str(work / "cluster.yaml"), str(work / "run"))
    try:
        yield sim, work
    finally:
        sim.stop()


def test_refuses_before_any_write_when_prometheus_rule_crd_missing(tmp_path_factory):
    from simcluster import testing
    work = tmp_path_factory.mktemp("no-crds")
    (work / "cluster.yaml").write_text(yaml.safe_dump({"crds": CRDS[:1], "nodes": [{"name": "cpu-1"}]}))
    sim = testing.start(str(work / "cluster.yaml"), str(work / "run"))
    try:
        kubectl(sim, "create", "namespace", "monitoring")
        res = run_playbook(PLAYBOOK, sim.env, inventory=INVENTORY)
        assert res.rc != 0
        msg = " ".join(res.failure_messages())
        assert "prometheusrules.monitoring.coreos.com" in msg
        assert "servicemonitors.monitoring.coreos.com" in msg
        assert kubectl(sim, "get", "configmaps", "-n", "monitoring", "-o", "name").stdout.count(
            "skaffon-gpu") == 0
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def installed(cluster):
    """GPU Operator (real chart) with the role's dcgmExporter values, then the monitoring playbook."""
    sim, work = cluster
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import objects as monitoring
    with open(os.path.join(INVENTORY, "group_vars", "all", "monitoring.yml"), encoding="utf-8") as fh:
        site = yaml.safe_load(fh)
    values = monitoring.dcgm_values({"service_monitor": site["monitoring_service_monitor"]})
    values.update({"driver": {"enabled": False}, "nfd": {"enabled": False}})
    (work / "values.yaml").write_text(yaml.safe_dump(values))
    kubectl(sim, "create", "namespace", "gpu-operator")
    kubectl(sim, "label", "namespace", "gpu-operator", "pod-security.kubernetes.io/enforce=privileged")
    kubectl(sim, "create", "namespace", "monitoring")
    sim.run(os.path.join(BIN, "helm3"), "install", "gpu-operator", CHART, "-n", "gpu-operator",
            "-f", str(work / "values.yaml"))
    # The operator twin selects the Deployment by app=gpu-operator as well, which only the
    # pod template of the real chart carries (FACTS.md); harmless once the twin reads the chart.
    kubectl(sim, "-n", "gpu-operator", "label", "deployment", "gpu-operator", "app=gpu-operator",
            "--overwrite")
    Prometheus.wait(lambda: len([p for p in kget(sim, "pods", "-n", "gpu-operator", "-l",
                                                  "app=nvidia-dcgm-exporter")["items"]
                                 if p["status"].get("phase") == "Running"]) == 2, 60,
                    "two nvidia-dcgm-exporter pods Running")
    first = run_playbook(PLAYBOOK, sim.env, inventory=INVENTORY, diff=True)
    return first


def test_playbook_applies_rule_and_dashboards_then_is_idempotent(cluster, installed):
    sim, _ = cluster
    assert installed.rc == 0, installed
    assert installed.changed() == 1
    rule = kget(sim, "prometheusrule", "-n", "monitoring", "skaffon-gpu-alerts")
    assert rule["metadata"]["labels"]["release"] == "prom"
    alerts = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert "GpuXidFatal" in alerts and "GpuAllocatedIdle" in alerts
    idle = [r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == "GpuAllocatedIdle"][0]
    assert idle["for"] == "30m"                       # inventory threshold reached the cluster
    cms = kget(sim, "configmaps", "-n", "monitoring", "-l", "grafana_dashboard=1")["items"]
    assert sorted(c["metadata"]["name"] for c in cms) == ["skaffon-gpu-nodes", "skaffon-gpu-teams"]
    sim.reset_stats()
    again = run_playbook(PLAYBOOK, sim.env, inventory=INVENTORY)
    assert again.rc == 0, again
    assert again.changed() == 0, again
    # a re-run writes nothing: one LIST of CRDs, one per kind of ours, one namespace GET
    stats = sim.stats()["by_resource"]
    assert stats["prometheusrules.monitoring.coreos.com"] == {"list": 1}, stats
    assert stats["configmaps"] == {"list": 1}, stats
    assert stats["customresourcedefinitions.apiextensions.k8s.io"] == {"list": 1}, stats
    check = run_playbook(PLAYBOOK, sim.env, inventory=INVENTORY, check=True,
                         extra_vars={"monitoring_thresholds": {"idle_for": "2h"}})
    assert check.rc == 0 and check.changed() == 1, check
    rule = kget(sim, "prometheusrule", "-n", "monitoring", "skaffon-gpu-alerts")
    idle = [r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == "GpuAllocatedIdle"][0]
    assert idle["for"] == "30m"                       # check mode wrote nothing


def test_example_inventory_settings_validate_in_check_mode(cluster, installed):
    sim, _ = cluster
    res = run_playbook(PLAYBOOK, sim.env, inventory=os.path.join(REPO, "inventories", "example"), check=True)
    assert res.rc == 0, res
    assert res.changed() == 1             # other rule labels than the test inventory's: a dry-run apply
    rule = kget(sim, "prometheusrule", "-n", "monitoring", "skaffon-gpu-alerts")
    assert rule["metadata"]["labels"]["release"] == "prom"


def test_refuses_unknown_metric_and_bad_promql_before_any_write(cluster, installed):
    sim, _ = cluster
    before = kget(sim, "prometheusrule", "-n", "monitoring", "skaffon-gpu-alerts")["metadata"]["resourceVersion"]
    bad = run_playbook(PLAYBOOK, sim.env, inventory=INVENTORY,
                       extra_vars={"monitoring_extra_metrics": ["DCGM_FI_DEV_GPU_TEMPERATURE"]})
    assert bad.rc != 0 and "not a DCGM field" in " ".join(bad.failure_messages())
    if BINARY is not None:
        bad = run_playbook(PLAYBOOK, sim.env, inventory=INVENTORY, extra_vars={"monitoring_extra_rules": [
            {"name": "site", "rules": [{"alert": "Broken", "expr": "sum by (node (DCGM_FI_DEV_GPU_UTIL)"}]}]})
        assert bad.rc != 0 and "promtool refused" in " ".join(bad.failure_messages()), bad
    bad = run_playbook(PLAYBOOK, sim.env, inventory=INVENTORY,
                       extra_vars={"monitoring_promtool": "/nonexistent/promtool"})
    assert bad.rc != 0 and "/nonexistent/promtool not found" in " ".join(bad.failure_messages()), bad
    after = kget(sim, "prometheusrule", "-n", "monitoring", "skaffon-gpu-alerts")["metadata"]["resourceVersion"]
    assert before == after


def post_faults(sim, faults):
    req = urllib.request.Request(sim.url + "/_sim/dcgm/faults", data=json.dumps(faults).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def prometheus(cluster, installed, tmp_path_factory):
    if BINARY is None:
        pytest.skip("prometheus not installed (Debian package prometheus; scripts/system_deps.sh)")
    sim, _ = cluster
    groups = rule_groups(sim)
    config = cluster_scrape_config(sim)
    assert sorted(c["job_name"] for c in config["scrape_configs"]) == [
        "dcgm-%s" % n for n in GPU_NODES] + ["kube-state-metrics"]
    prom = Prometheus(tmp_path_factory.mktemp("prometheus"), config, groups)
    try:
        prom.wait(lambda: len(prom.query('up{job="nvidia-dcgm-exporter"} == 1')) == len(GPU_NODES), 60,
                  "both exporter targets scraped")
        prom.wait(lambda: prom.query('up{job="kube-state-metrics"} == 1'), 60, "kube-state-metrics scraped")
        yield prom
    finally:
        prom.stop()


def rule_groups(sim):
    """The rule groups of the PrometheusRule the role applied, evaluated every second so the
    tests need no minute-long waits."""
    groups = kget(sim, "prometheusrule", "-n", "monitoring", "skaffon-gpu-alerts")["spec"]["groups"]
    for group in groups:
        group["interval"] = "1s"
    return groups


def cluster_scrape_config(sim):
    """A kube-state-metrics pod as kube-prometheus-stack runs one (the platform installs none),
    then the shared scrape config of the simulated cluster (DCGM exporters + kube-state-metrics)."""
    kubectl(sim, "apply", "-f", "-", stdin=json.dumps(kube_state_metrics_deployment("monitoring")))
    Prometheus.wait(lambda: [p for p in kget(sim, "pods", "-n", "monitoring", "-l", KSM_SELECTOR)["items"]
                             if p["status"].get("phase") == "Running"], 60, "kube-state-metrics Running")
    return scrape_config(sim.url, kget(sim, "pods", "-A")["items"])


def test_gpu_failure_fires_the_alert_in_prometheus(cluster, prometheus):
    sim, _ = cluster
    kubectl(sim, "create", "namespace", "team-a")
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "train-1", "namespace": "team-a",
                        "annotations": {"simcluster.skaffon.io/gpu-util": "90"}},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-h100-1"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "containers": [{"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.1-base",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    kubectl(sim, "apply", "-f", "-", stdin=json.dumps(pod))
    held = prometheus.wait(lambda: prometheus.query('DCGM_FI_DEV_GPU_UTIL{namespace="team-a"}'), 60,
                           "the pod's GPU in Prometheus")
    assert held[0]["metric"]["pod"] == "train-1" and held[0]["metric"]["node"] == "gpu-h100-1"
    assert float(held[0]["value"][1]) == 90
    # four GPUs, one held: the free ones have no pod label (not the exporter pod's either)
    prometheus.wait(lambda: len(prometheus.query("DCGM_FI_DEV_GPU_UTIL")) == 4, 30, "four GPU series")
    assert len(prometheus.query('DCGM_FI_DEV_GPU_UTIL{pod!=""}')) == 1
    prometheus.wait(lambda: prometheus.query('namespace:dcgm_gpu_allocated:count{namespace="team-a"} == 1'),
                    30, "the per-team recording rule")
    assert prometheus.query('ALERTS{alertstate="firing"}') == []  # healthy: nothing fires
    post_faults(sim, {"gpu_xid": [{"node": "gpu-l40s-1", "gpu": 1, "xid": 79}]})

    def firing():
        return [a for a in prometheus.api("alerts")["alerts"]
                if a["labels"]["alertname"] == "GpuXidFatal" and a["state"] == "firing"]
    alerts = prometheus.wait(firing, 60, "GpuXidFatal firing")
    assert len(alerts) == 1
    assert alerts[0]["labels"]["node"] == "gpu-l40s-1" and alerts[0]["labels"]["gpu"] == "1"
    assert alerts[0]["labels"]["severity"] == "critical"
    assert alerts[0]["annotations"]["runbook_url"].endswith("/gpu-xid-error.md")
    # an allocated GPU at 0 % and an overheating GPU: their alerts go pending (their `for` is
    # 30m / 2m; promtool's unit tests check the firing)
    idle = json.loads(json.dumps(pod))
    idle["metadata"].update(name="notebook-1", annotations={"simcluster.skaffon.io/gpu-util": "0"})
    kubectl(sim, "apply", "-f", "-", stdin=json.dumps(idle))
    post_faults(sim, {"gpu_overheat": [{"node": "gpu-l40s-1", "gpu": 0, "temp": 96}]})

    def pending(name):
        return [a for a in prometheus.api("alerts")["alerts"] if a["labels"]["alertname"] == name]
    got = prometheus.wait(lambda: pending("GpuAllocatedIdle"), 60, "GpuAllocatedIdle pending")
    assert [(a["labels"]["pod"], a["state"]) for a in got] == [("notebook-1", "pending")]
    got = prometheus.wait(lambda: pending("GpuTemperatureCritical"), 60, "GpuTemperatureCritical pending")
    assert got[0]["labels"]["node"] == "gpu-l40s-1" and got[0]["labels"]["gpu"] == "0"
    post_faults(sim, {"gpu_overheat": []})
    kubectl(sim, "delete", "pod", "-n", "team-a", "notebook-1", "--wait=false")
    # the exporter of a node stops answering: its target goes down
    post_faults(sim, {"dcgm_exporter_down": ["gpu-h100-1"]})
    prometheus.wait(lambda: prometheus.query('up{node="gpu-h100-1"} == 0'), 60, "up == 0 for gpu-h100-1")
    post_faults(sim, {"dcgm_exporter_down": [], "gpu_xid": []})


def test_every_dashboard_panel_query_returns_series(cluster, prometheus):
    sim, _ = cluster
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring.dashboards import queries as panel_queries
    prometheus.wait(lambda: prometheus.query('up{node="gpu-h100-1"} == 1'), 60, "exporter back up")
    cms = kget(sim, "configmaps", "-n", "monitoring", "-l", "grafana_dashboard=1")["items"]
    queries = [q for cm in cms for q in panel_queries(cm)]
    assert len(queries) >= 14
    empty = []
    for board, panel, expr in queries:
        expr = expr.replace("$node", ".*").replace("$namespace", ".*")

        def answer(expr=expr):
            return prometheus.query(expr)
        try:
            prometheus.wait(answer, 30, expr)
        except AssertionError:
            empty.append((board, panel, expr))
    assert empty == []


def ksm_alerts(groups):
    """Names of the alerts whose expression reads a kube-state-metrics series."""
    return sorted(r["alert"] for g in groups for r in g["rules"] if "alert" in r and any(
        sel.startswith("kube_") for sel in series_selectors(r["expr"])))


def test_every_rule_and_dashboard_selector_matches_series(cluster, prometheus):
    """Every series selector of every shipped rule (and dashboard panel, and the usage report's
    kube-state-metrics query) matches series in a Prometheus scraping the simulated cluster, and
    Prometheus evaluates every rule without error: no rule reads a series nothing exports."""
    sim, _ = cluster
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import usage_report
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring.dashboards import queries as panel_queries
    # a pod holding a GPU, so the selectors on pod-held GPUs have a series to match
    kubectl(sim, "create", "namespace", "team-a", check=False)
    kubectl(sim, "apply", "-f", "-", stdin=json.dumps(gpu_pod("ksm-train", "gpu-h100-1", 70)))
    groups = kget(sim, "prometheusrule", "-n", "monitoring", "skaffon-gpu-alerts")["spec"]["groups"]
    assert ksm_alerts(groups) == ["GpuExporterUnavailable", "GpuNodeResourcesMissing", "GpuNodeResourcesShort"]
    exprs = [(r.get("alert") or r.get("record"), r["expr"]) for g in groups for r in g["rules"]]
    cms = kget(sim, "configmaps", "-n", "monitoring", "-l", "grafana_dashboard=1")["items"]
    exprs += [(panel, q.replace("$node", ".*").replace("$namespace", ".*"))
              for cm in cms for _b, panel, q in panel_queries(cm)]
    exprs.append(("usage report: failed pods", usage_report.FAILED_QUERY_PLAIN % 300))
    # the usage report's workload view: a Job whose pod failed (terminated reason, the Job's failed
    # count) and a pod whose container crashed and restarted (restarts, last terminated reason)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ksm-fail", "namespace": "team-a"},
           "spec": {"backoffLimit": 0, "template": {
               "metadata": {"labels": {"gpu.skaffon.io/model": "llama-3-8b"},
                            "annotations": {"simcluster.skaffon.io/behaviour": "fail"}},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}}}}
    crash = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "ksm-crash", "namespace": "team-a", "annotations": {"simcluster.skaffon.io/behaviour": "crash"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}
    for obj in (job, crash):
        kubectl(sim, "apply", "-f", "-", stdin=json.dumps(obj))
    exprs += [("usage report: %s" % key, expr % 300) for key, expr in usage_report.WORKLOAD_QUERIES]
    selectors = sorted(set((name, sel) for name, e in exprs for sel in series_selectors(e)))
    assert any(sel.startswith("kube_node_status_allocatable") for _n, sel in selectors)
    empty = []
    for name, sel in selectors:
        try:
            prometheus.wait(lambda sel=sel: prometheus.query(sel), 30, sel)
        except AssertionError:
            empty.append((name, sel))
    assert empty == []
    # the allowlisted pod label and the Job's failure reason, as the workload view reads them
    prometheus.wait(lambda: prometheus.query(
        'kube_pod_labels{namespace="team-a",label_gpu_skaffon_io_model="llama-3-8b"}'), 30,
        "the model label of the Job's pod")
    prometheus.wait(lambda: prometheus.query(
        'kube_job_status_failed{namespace="team-a",job_name="ksm-fail",reason="BackoffLimitExceeded"} == 1'), 30,
        "the Job's failure reason")
    # the GPU resources of both nodes, with the label values kube-state-metrics writes
    alloc = prometheus.query('kube_node_status_allocatable{unit="integer",resource=~"nvidia_com_.+"}')
    assert sorted((s["metric"]["node"], s["metric"]["resource"]) for s in alloc if float(s["value"][1]) > 0) == [
        ("gpu-h100-1", "nvidia_com_gpu"), ("gpu-l40s-1", "nvidia_com_gpu")], alloc

    def evaluated():
        rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
        return all(r["health"] != "unknown" for r in rules) and rules
    rules = prometheus.wait(evaluated, 30, "every rule evaluated")
    assert len(rules) == len([r for g in groups for r in g["rules"]])
    assert [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []


def gpu_pod(name, node, util):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a",
                         "annotations": {"simcluster.skaffon.io/gpu-util": str(util)}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                     "containers": [{"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.1-base",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def test_kube_state_metrics_alert_fires_when_a_gpu_node_offers_no_gpus(cluster, prometheus, tmp_path_factory):
    """GpuNodeResourcesMissing on real kube-state-metrics series: quiet on the healthy cluster,
    firing for the node whose device plugin is switched off (the kubelet keeps the capacity and
    drops the allocatable to 0), quiet again once the plugin is back. The alerts' `for` (15m) is
    cut to 1s here; promtool's unit tests check the real durations."""
    sim, _ = cluster
    groups = rule_groups(sim)
    names = ksm_alerts(groups)
    for group in groups:
        for rule in group["rules"]:
            if rule.get("alert") in names:
                rule["for"] = "1s"
    prom = Prometheus(tmp_path_factory.mktemp("prometheus-ksm"), cluster_scrape_config(sim), groups)
    node = "gpu-l40s-1"
    label = "nvidia.com/gpu.deploy.device-plugin"

    def firing(name=None):
        return [a["labels"] for a in prom.api("alerts")["alerts"]
                if a["state"] == "firing" and a["labels"]["alertname"] in names
                and (name is None or a["labels"]["alertname"] == name)]
    try:
        prom.wait(lambda: len(prom.query("up == 1")) == len(GPU_NODES) + 1, 60, "every target scraped")
        # before the first kube-state-metrics scrape the condition may hold for a moment
        prom.wait(lambda: not firing(), 30, "no kube-state-metrics alert firing on the healthy cluster")
        time.sleep(4)
        assert firing() == []
        kubectl(sim, "label", "node", node, "%s=false" % label, "--overwrite")
        got = prom.wait(lambda: firing("GpuNodeResourcesMissing"), 90, "GpuNodeResourcesMissing firing")
        assert [(a["node"], a["severity"]) for a in got] == [(node, "warning")]
        gpus = prom.query('sum by (node) (kube_node_status_allocatable{node="%s",resource="nvidia_com_gpu"})' % node)
        assert float(gpus[0]["value"][1]) == 0
        kubectl(sim, "label", "node", node, "%s=true" % label, "--overwrite")
        prom.wait(lambda: not firing("GpuNodeResourcesMissing"), 90, "GpuNodeResourcesMissing resolved")
    finally:
        kubectl(sim, "label", "node", node, "%s=true" % label, "--overwrite", check=False)
        prom.stop()


def test_usage_report_on_live_series(cluster, prometheus, tmp_path):
    """playbooks/usage_report.yml on what Prometheus scraped from the simulated DCGM exporter and
    kube-state-metrics a moment ago: a GPU pod with the model label is a workload with its image and
    model, its GPU seconds are counted, and the report says the figures are simulated."""
    sim, _ = cluster
    kubectl(sim, "create", "namespace", "team-a", check=False)
    pod = gpu_pod("usage-train", "gpu-l40s-1", 70)      # the H100s are held by the pods of the tests above
    pod["metadata"]["labels"] = {"gpu.skaffon.io/model": "llama-3-8b", "gpu.skaffon.io/dataset": "c4-sample"}
    start = time.time() - 2
    kubectl(sim, "apply", "-f", "-", stdin=json.dumps(pod))
    prometheus.wait(lambda: prometheus.query(
        'count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="team-a",pod="usage-train"}[1m]) >= 5'), 60,
        "five GPU samples of the pod")
    prometheus.wait(lambda: prometheus.query('kube_pod_labels{pod="usage-train",label_gpu_skaffon_io_model!=""}'),
                    30, "the pod's labels in kube-state-metrics")
    res = run_playbook(os.path.join(REPO, "playbooks", "usage_report.yml"), sim.env,
                       inventory=os.path.join(HERE, "inventories", "usage_report"), extra_vars={
                           "usage_report_prometheus_url": prometheus.url, "usage_report_start": "%d" % start,
                           "usage_report_end": "%d" % (time.time() + 1), "usage_report_sample_interval": 1,
                           "usage_report_node_pools": {"gpu-h100-1": "h100", "gpu-l40s-1": "l40s"},
                           "usage_report_dest": str(tmp_path), "usage_report_simulated": True})
    kubectl(sim, "delete", "pod", "-n", "team-a", "usage-train", "--wait=false", check=False)
    assert res.rc == 0, res
    out = res.task_results("Query Prometheus and write the report")[0]
    (row,) = [w for w in out["workloads"] if w["workload"] == "Pod/usage-train"]
    assert (row["team"], row["image"], row["model"], row["dataset"], row["failed_pods"]) == (
        "team-a", "nvcr.io/nvidia/cuda:12.4.1-base", "llama-3-8b", "c4-sample", 0)
    assert row["allocated_gpu_hours"] * 3600 >= 5 and row["busy_gpu_hours"] == row["allocated_gpu_hours"]
    assert (tmp_path / "gpu-usage.md").read_text().startswith("> **Figures from a simulated cluster.**")
