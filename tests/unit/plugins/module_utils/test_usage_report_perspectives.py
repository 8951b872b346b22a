"""The usage report's three perspectives (time, normalised cost, workloads) computed from answers
shaped as Prometheus returns them for kube-state-metrics v2 and DCGM exporter series scraped by
kube-prometheus-stack (honorLabels: the exporter's labels win; max_over_time drops __name__).
The figures are worked out by hand in the comments."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import usage_report as ur
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError

END = 1796083200.0                   # 2026-12-01T00:00:00Z
PERIOD = 24 * 3600
KSM = {"job": "kube-state-metrics", "instance": "10.42.0.17:8080", "endpoint": "http",
       "service": "kube-prometheus-stack-kube-state-metrics"}
LABELS = {"owner": "gpu.skaffon.io/owner", "model": "gpu.skaffon.io/model", "dataset": "gpu.skaffon.io/dataset"}


def dcgm(node, gpu, ns, pod, values, first=0):
    """A DCGM_FI_DEV_GPU_UTIL matrix series: one sample a minute from `first` minutes into the period."""
    metric = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": str(gpu), "UUID": "GPU-%s-%d" % (node, gpu),
              "device": "nvidia%d" % gpu, "modelName": "NVIDIA H100 80GB HBM3", "Hostname": node, "node": node,
              "DCGM_FI_DRIVER_VERSION": "570.124.06", "container": "main", "namespace": ns, "pod": pod,
              "job": "nvidia-dcgm-exporter", "instance": "10.42.1.5:9400"}
    t0 = END - PERIOD
    return {"metric": metric, "values": [[t0 + (first + i) * 60 + 30, str(v)] for i, v in enumerate(values)]}


def ksm(ns, pod, value="1", uid="", **labels):
    metric = dict(KSM, namespace=ns, pod=pod, uid=uid or "uid-" + pod)
    metric.update(labels)
    return {"metric": metric, "value": [END, value]}


PODS = {   # pod: (team, owner kind, owner name)
    "llm-pretrain-0-abcde": ("team-a", "Job", "llm-pretrain"),
    "llm-pretrain-0-fghij": ("team-a", "Job", "llm-pretrain"),
    "notebook-1": ("team-a", "", ""),
    "serve-5d8f6b9c7-x2x7q": ("team-b", "ReplicaSet", "serve-5d8f6b9c7"),
    "eval-k8w2p": ("team-b", "Job", "eval"),
}

# time, sample_interval 60 s:
#   team-a/h100: llm-pretrain-0-abcde 3 h at 90 % then Failed (OOMKilled) -> 3 h failed-run;
#                its retry llm-pretrain-0-fghij 2 h at 85 %, Succeeded   -> 2 h productive;
#                notebook-1 1 h at 0 %                                   -> 1 h idle
#   team-b/l40s: serve-... 4 h at 7 %                                    -> 4 h low;
#                eval-k8w2p 1 h at 60 %, Failed, then deleted             -> 1 h failed-run
UTIL = [dcgm("gpu-h100-1", 0, "team-a", "llm-pretrain-0-abcde", [90] * 180),
        dcgm("gpu-h100-1", 0, "team-a", "llm-pretrain-0-fghij", [85] * 120, first=200),
        dcgm("gpu-h100-1", 1, "team-a", "notebook-1", [0] * 60),
        dcgm("gpu-l40s-1", 0, "team-b", "serve-5d8f6b9c7-x2x7q", [7] * 240),
        dcgm("gpu-l40s-1", 1, "team-b", "eval-k8w2p", [60] * 60, first=300)]


def answers(with_labels=True):
    owner = [ksm(ns, pod, owner_kind=kind, owner_name=name, owner_is_controller="true" if kind else "")
             for pod, (ns, kind, name) in PODS.items()]
    labels = []
    if with_labels:
        labels = [ksm("team-a", pod, label_gpu_skaffon_io_owner="alice", label_gpu_skaffon_io_model="llama-3-8b",
                      label_gpu_skaffon_io_dataset="c4-sample", label_batch_kubernetes_io_job_name="llm-pretrain")
                  for pod in ("llm-pretrain-0-abcde", "llm-pretrain-0-fghij")]
        labels += [ksm(ns, pod) for pod, (ns, _k, _n) in PODS.items() if not pod.startswith("llm-")]
    image = [ksm(ns, pod, container="main", image_spec=img, image=img.replace("registry.example.com/", ""),
                 image_id="registry.example.com/x@sha256:0f3a", container_id="containerd://9c1e")
             for pod, (ns, _k, _n), img in (
                 (p, PODS[p], "registry.example.com/ml/train:1.4.2") for p in PODS if p.startswith("llm-"))]
    image += [ksm("team-b", "serve-5d8f6b9c7-x2x7q", container="main", image_spec="nvcr.io/nvidia/tritonserver:25.01-py3",
                  image="nvcr.io/nvidia/tritonserver:25.01-py3", image_id="", container_id="containerd://1")]
    restarts = [ksm(ns, pod, "2" if pod.startswith("serve") else "0", container="main")
                for pod, (ns, _k, _n) in PODS.items()]
    terminated = [ksm("team-a", "llm-pretrain-0-abcde", container="main", reason="OOMKilled"),
                  ksm("team-a", "llm-pretrain-0-fghij", container="main", reason="Completed"),
                  ksm("team-b", "eval-k8w2p", container="main", reason="Error")]
    last_terminated = [ksm("team-b", "serve-5d8f6b9c7-x2x7q", container="main", reason="Error")]
    job_failed = [{"metric": dict(KSM, namespace="team-a", job_name="llm-pretrain", reason=""), "value": [END, "1"]}]
    job_failed += [{"metric": dict(KSM, namespace="team-b", job_name="eval", reason=r), "value": [END, v]}
                   for r, v in (("BackoffLimitExceeded", "1"), ("DeadlineExceeded", "0"), ("Evicted", "0"))]
    return {"owner": owner, "labels": labels, "image": image, "restarts": restarts, "terminated": terminated,
            "last_terminated": last_terminated, "job_failed": job_failed}


FAILED = [ksm("team-a", "llm-pretrain-0-abcde", phase="Failed"), ksm("team-b", "eval-k8w2p", phase="Failed")]
COSTS = {"network": {"per_month": 730},                         # 24 h: 24, shared 6 : 5 by GPU hours
         "storage": {"per_month": {"team-a": 146, "team-b": 73, "team-c": 365}},   # 4.8, 2.4; team-c 12
         "support": {"per_gpu_hour": 0.5},                       # 3.0, 2.5
         "operations": {"per_month": 1460}}                      # 48, shared 6 : 5


class FakePrometheus:
    def __init__(self, table):
        self.table = table
        self.asked = []

    def query(self, expr, at):
        self.asked.append((expr, at))
        return self.table.get(expr, [])


def prometheus(with_ksm=True, with_labels=True):
    table = {ur.UTIL_QUERY % PERIOD: UTIL}
    if with_ksm:
        table[ur.FAILED_QUERY_PLAIN % PERIOD] = FAILED
        got = answers(with_labels)
        table.update((expr % PERIOD, got[key]) for key, expr in ur.WORKLOAD_QUERIES)
    return FakePrometheus(table)


def report(**kw):
    args = dict(node_pools={"gpu-h100-1": "h100", "gpu-l40s-1": "l40s"}, prices={"h100": 4.0, "l40s": 1.5},
                units={"team-a": 3}, sample_interval=60, costs=COSTS, label_keys=LABELS)
    args.update(kw)
    with_ksm = args.pop("with_ksm", True)
    with_labels = args.pop("with_labels", True)
    return ur.collect(prometheus(with_ksm, with_labels), END - PERIOD, END, **args)


def test_time_split_adds_up_and_counts_failed_runs():
    rep = report()
    a, b = rep["teams"]
    # failed pods are failed-run whatever their utilisation; the four parts add up to allocated
    assert (a["allocated_gpu_hours"], a["busy_gpu_hours"], a["other_gpu_hours"], a["idle_gpu_hours"],
            a["failed_run_gpu_hours"]) == (6.0, 2.0, 0.0, 1.0, 3.0)
    assert (b["allocated_gpu_hours"], b["busy_gpu_hours"], b["other_gpu_hours"], b["idle_gpu_hours"],
            b["failed_run_gpu_hours"]) == (5.0, 0.0, 4.0, 0.0, 1.0)
    pools = dict((p["pool"], p) for p in rep["pools"])
    assert pools["h100"]["failed_run_gpu_hours"] == 3.0 and pools["l40s"]["failed_run_gpu_hours"] == 1.0


def test_normalised_cost_has_every_term_and_its_source():
    rep = report()
    a, b = rep["normalised_cost"]
    # team-a: compute (2 h productive) x 4 = 8, idle 1 h x 4 = 4, failed 3 h x 4 = 12: 24 = 6 h x 4
    assert (a["compute"], a["idle"], a["failed_runs"]) == (8.0, 4.0, 12.0)
    assert a["compute"] + a["idle"] + a["failed_runs"] == rep["teams"][0]["cost"] == 24.0
    # network 24 x 6/11, storage 146 x 24/730, support 6 h x 0.5, operations 48 x 6/11
    assert (a["network"], a["storage"], a["support"], a["operations"]) == (13.09, 4.8, 3.0, 26.18)
    assert a["total"] == 71.07 and a["accepted_units"] == 3 and a["cost_per_unit"] == 23.69
    # team-b: 4 h low x 1.5 = 6 compute, 1 h failed x 1.5; no units: no cost per unit
    assert (b["compute"], b["idle"], b["failed_runs"], b["network"], b["storage"], b["support"],
            b["operations"]) == (6.0, 0.0, 1.5, 10.91, 2.4, 2.5, 21.82)
    assert b["total"] == 45.13 and b["cost_per_unit"] is None
    site = rep["site_cost"]
    # the site adds team-c's storage (365 x 24/730 = 12), which held no GPU
    assert (site["network"], site["storage"], site["operations"], site["total"]) == (24.0, 19.2, 48.0, 128.2)
    src = rep["cost_sources"]
    assert src["compute"].startswith("metrics: DCGM_FI_DEV_GPU_UTIL") and "usage_report_prices" in src["compute"]
    assert "kube_pod_status_phase" in src["failed_runs"]
    assert src["network"].startswith("inventory: usage_report_network_cost: per_month 730.00 for the site")
    assert "per team team-a 146.00, team-b 73.00, team-c 365.00" in src["storage"]
    assert src["support"] == "inventory: usage_report_support_cost: per_gpu_hour 0.5000 x allocated GPU hours"
    assert src["accepted_units"] == "inventory: usage_report_units"
    md = ur.markdown(rep, "s", "e", "EUR", "model", label_keys=LABELS)
    assert ("| team | compute EUR | network EUR | storage EUR | support EUR | idle EUR | failed_runs EUR | "
            "operations EUR | total EUR | accepted models | cost per model EUR |") in md
    assert "| team-a | 8.00 | 13.09 | 4.80 | 3.00 | 4.00 | 12.00 | 26.18 | 71.07 | 3 | 23.69 |" in md
    assert "| (site) | 14.00 | 24.00 | 19.20 | 5.50 | 4.00 | 13.50 | 48.00 | 128.20 | 3 | n/a |" in md
    assert "| network | inventory: usage_report_network_cost: per_month 730.00" in md
    assert "No accepted units for team-b (usage_report_units): no cost per model." in md
    rows = ur.cost_csv_text(rep).splitlines()
    assert rows[0] == ("team,allocated_gpu_hours,compute,network,storage,support,idle,failed_runs,operations,"
                       "total,accepted_units,cost_per_unit")
    assert rows[1] == "team-a,6.0,8.0,13.09,4.8,3.0,4.0,12.0,26.18,71.07,3,23.69"


def test_terms_not_given_are_zero_and_say_so():
    rep = report(costs=None)
    a = rep["normalised_cost"][0]
    assert (a["network"], a["storage"], a["support"], a["operations"], a["total"]) == (0, 0, 0, 0, 24.0)
    assert rep["cost_sources"]["storage"] == "inventory: usage_report_storage_cost not set (0)"
    # no price for the pool: the GPU terms and the total are unknown, not 0
    b = report(prices={"h100": 4.0})["normalised_cost"][1]
    assert (b["compute"], b["failed_runs"], b["total"]) == (None, None, None)


def test_workload_view_from_kube_state_metrics():
    rep = report()
    w = dict(((r["team"], r["workload"]), r) for r in rep["workloads"])
    job = w[("team-a", "Job/llm-pretrain")]
    assert (job["owner"], job["image"], job["model"], job["dataset"]) == (
        "alice", "registry.example.com/ml/train:1.4.2", "llama-3-8b", "c4-sample")
    assert (job["pods"], job["failed_pods"], job["restarts"], job["retries"]) == (2, 1, 0, 1)
    assert job["termination"] == "Completed (1 pod), OOMKilled (1 pod)"
    assert (job["allocated_gpu_hours"], job["busy_gpu_hours"], job["failed_run_gpu_hours"]) == (5.0, 2.0, 3.0)
    assert w[("team-a", "Pod/notebook-1")]["idle_gpu_hours"] == 1.0
    serve = w[("team-b", "ReplicaSet/serve-5d8f6b9c7")]
    assert (serve["restarts"], serve["retries"], serve["termination"], serve["model"]) == (2, 2, "Error (1 pod)", None)
    assert serve["image"] == "nvcr.io/nvidia/tritonserver:25.01-py3"
    ev = w[("team-b", "Job/eval")]
    assert ev["termination"] == "Error (1 pod); Job failed: BackoffLimitExceeded"
    assert (ev["failed_pods"], ev["failed_run_gpu_hours"]) == (1, 1.0)
    assert rep["missing_labels"] == []
    md = ur.markdown(rep, "s", "e", label_keys=LABELS)
    assert ("| team-a | Job/llm-pretrain | alice | registry.example.com/ml/train:1.4.2 | llama-3-8b | c4-sample "
            "| 2 | 1 | 0 | 1 | Completed (1 pod), OOMKilled (1 pod) | 5.0 | 2.0 | 0.0 | 3.0 |") in md
    assert ur.workloads_csv_text(rep).splitlines()[1].startswith(
        "team-a,Job/llm-pretrain,alice,registry.example.com/ml/train:1.4.2,llama-3-8b,c4-sample,2,1,0,1,")


def test_a_jobs_failed_pods_deleted_before_a_scrape_still_count_as_retries():
    table = prometheus().table
    expr = dict(ur.WORKLOAD_QUERIES)["job_failed"] % PERIOD
    table[expr] = [{"metric": dict(KSM, namespace="team-a", job_name="llm-pretrain", reason=""), "value": [END, "3"]}]
    rep = ur.collect(FakePrometheus(table), END - PERIOD, END, {"gpu-h100-1": "h100"}, sample_interval=60,
                     label_keys=LABELS)
    job = [r for r in rep["workloads"] if r["workload"] == "Job/llm-pretrain"][0]
    assert (job["failed_pods"], job["retries"], job["failed_pods_unseen"]) == (3, 3, 2)
    assert ("Failed pods kube-state-metrics did not see in phase Failed during the period (they failed before it, "
            "or were deleted before a scrape): their GPU hours in the period, if any, are not failed-run hours. "
            "team-a Job/llm-pretrain: the Job counts 3 failed, 1 seen.") in ur.markdown(rep, "s", "e")
    assert "did not see" not in ur.markdown(report(), "s", "e")


def test_labels_kube_state_metrics_does_not_export_are_named():
    rep = report(with_labels=False)
    assert rep["missing_labels"] == ["gpu.skaffon.io/dataset", "gpu.skaffon.io/model", "gpu.skaffon.io/owner"]
    md = ur.markdown(rep, "s", "e", label_keys=LABELS)
    assert ('No GPU pod carried the label gpu.skaffon.io/model in kube_pod_labels: kube-state-metrics exports only '
            'the labels of its --metric-labels-allowlist (kube-prometheus-stack: kube-state-metrics.'
            'metricLabelsAllowlist: ["pods=[gpu.skaffon.io/model]"]), or the pods do not set it.') in md


def test_without_kube_state_metrics_every_pod_is_its_own_workload():
    rep = report(with_ksm=False)
    assert rep["teams"][0]["failed_run_gpu_hours"] == 0
    assert sorted(r["workload"] for r in rep["workloads"])[0] == "Pod/eval-k8w2p"
    md = ur.markdown(rep, "s", "e", label_keys=LABELS)
    assert "Prometheus has no kube-state-metrics pod series for the period" in md
    assert rep["missing_labels"] == []


def test_simulated_banner_is_the_first_line():
    rep = report()
    assert ur.markdown(rep, "s", "e", simulated=True).startswith("> **Figures from a simulated cluster.**")
    assert "simulated" not in ur.markdown(rep, "s", "e")


@pytest.mark.parametrize("key, expected", [
    ("gpu.skaffon.io/model", "label_gpu_skaffon_io_model"),
    ("app.kubernetes.io/name", "label_app_kubernetes_io_name"),
    ("batch.kubernetes.io/job-name", "label_batch_kubernetes_io_job_name"),
    ("modelName", "label_model_name"),
])
def test_ksm_label_names(key, expected):
    assert ur.ksm_label_name(key) == expected


@pytest.mark.parametrize("costs, setting", [
    ({"power": {"per_month": 1}}, "usage_report_costs"),
    ({"network": 100}, "usage_report_network_cost"),
    ({"storage": {"monthly": 1}}, "usage_report_storage_cost"),
    ({"support": {"per_month": -1}}, "usage_report_support_cost"),
    ({"support": {"per_month": {"team-a": "10"}}}, "usage_report_support_cost"),
    ({"operations": {"per_gpu_hour": True}}, "usage_report_operations_cost"),
])
def test_cost_refusals(costs, setting):
    with pytest.raises(DomainError) as err:
        ur.validate(3600, {}, {}, 10, 5, 15, costs)
    assert err.value.msg.startswith(setting + ":")


def test_every_query_is_asked_at_the_end_of_the_period():
    prom = prometheus()
    ur.collect(prom, END - PERIOD, END, {}, sample_interval=60, label_keys=LABELS)
    assert set(at for _e, at in prom.asked) == {END}
    assert [e for e, _at in prom.asked][-len(ur.WORKLOAD_QUERIES):] == [e % PERIOD for _k, e in ur.WORKLOAD_QUERIES]


def test_site_cost_per_unit_needs_every_teams_count():
    assert report()["site_cost"]["cost_per_unit"] is None             # team-b has no count
    site = report(units={"team-a": 3, "team-b": 2})["site_cost"]
    assert (site["total"], site["accepted_units"], site["cost_per_unit"]) == (128.2, 5, 25.64)


@pytest.mark.parametrize("keys", [{"team": "gpu.skaffon.io/team"}, {"model": ""}, ["gpu.skaffon.io/model"]])
def test_workload_label_refusals(keys):
    with pytest.raises(DomainError) as err:
        ur.validate(3600, {}, {}, 10, 5, 15, None, keys)
    assert err.value.msg.startswith("usage_report_workload_labels:")
