"""playbooks/usage_report.yml against a real Prometheus holding simulated history.

Four hours of DCGM exporter and kube-state-metrics samples (one a minute) are backfilled with
`promtool tsdb create-blocks-from openmetrics`; node pools come from the nodes'
accelerator label, which the test sets through the API as node_prereqs would
(the cluster file carries no pool label: nothing real would put one there). The
expected numbers are worked out by hand below. The last test takes the kube-state-metrics
series of a Job that really failed in the simulated cluster (the twin's /metrics text) into
such a history.
"""
import csv
import datetime
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from kit.paths import BIN, REPO
from kit.playbook import run_playbook
from kit.prometheus import BINARY, KSM_SELECTOR, Prometheus, kube_state_metrics_deployment

HERE = os.path.dirname(os.path.abspath(__file__))
PLAYBOOK = os.path.join(REPO, "playbooks", "usage_report.yml")
INVENTORY = os.path.join(HERE, "inventories", "usage_report")

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared, pytest.mark.cluster("default.yaml")]
PROMTOOL = shutil.which("promtool")
KUBECTL = os.path.join(BIN, "kubectl")
# node_prereqs_pool.accelerator of each GPU host (inventories/example), as the role labels the node
ACCELERATOR = {"gpu-h100-1": "h100", "gpu-l40s-1": "l40s"}


def label_pools(sim, prefix):
    for node, accelerator in ACCELERATOR.items():
        sim.run(KUBECTL, "label", "node", node, "--overwrite", "%saccelerator=%s" % (prefix, accelerator))


@pytest.fixture(scope="module")
def pools(simcluster):
    label_pools(simcluster, "gpu.skaffon.io/")
    return simcluster
STEP = 60
HOURS = 4


def gpu(node, index, pod=None, namespace=None):
    labels = {"gpu": str(index), "UUID": "GPU-%s-%d" % (node, index), "modelName": "sim",
              "hostname": node, "node": node, "job": "nvidia-dcgm-exporter",
              "pod": pod or "", "namespace": namespace or "", "container": "main" if pod else ""}
    return ",".join('%s="%s"' % (k, v) for k, v in labels.items() if v)


# (labels, util %, first minute, minutes) -- by hand, for the period of HOURS hours:
#   team-a on h100: train-1 (Job train) busy 4 h; notebook-1 idle (0 %) 2 h            -> 6 h allocated
#   team-b on l40s: job-1 (Job sweep) at 7 % (neither busy nor idle) 1 h;
#                   job-3 (Job eval) 50 % for 30 min, Failed, deleted 2 min later;
#                   job-2 (Job finetune) busy 2 h, then Failed (OOMKilled);
#                   job-2b, the Job's retry, 80 % for 30 min (Succeeds after the period) -> 4 h allocated:
#                   1 h low, 0.5 h productive, 2.5 h failed-run
#   a free GPU (no pod) is not allocated; a sample after the period does not count
HISTORY = [
    (gpu("gpu-h100-1", 0, "train-1", "team-a"), 90, 0, 240),
    (gpu("gpu-h100-1", 1, "notebook-1", "team-a"), 0, 60, 120),
    (gpu("gpu-l40s-1", 0, "job-1", "team-b"), 7, 0, 60),
    (gpu("gpu-l40s-1", 0, "job-3", "team-b"), 50, 60, 30),
    (gpu("gpu-l40s-1", 0, "job-2", "team-b"), 60, 90, 120),
    (gpu("gpu-l40s-1", 0, "job-2b", "team-b"), 80, 210, 30),
    (gpu("gpu-l40s-1", 1), 0, 0, 240),
    (gpu("gpu-h100-1", 0, "late-1", "team-a"), 95, 240, 30),
]
# pod: (namespace, phase by minute, owner Job, labels, container state reason once terminated)
KSM_PODS = {
    "train-1": ("team-a", lambda m: "Running", "train",
                {"gpu.skaffon.io/owner": "alice", "gpu.skaffon.io/model": "llama-3-8b",
                 "gpu.skaffon.io/dataset": "c4-sample"}, None),
    "notebook-1": ("team-a", lambda m: "Running" if m < 180 else None, None, {}, None),
    "job-1": ("team-b", lambda m: "Running" if m < 60 else "Succeeded", "sweep", {}, "Completed"),
    # deleted two minutes after it failed: its series end there
    "job-3": ("team-b", lambda m: "Running" if m < 90 else "Failed" if m < 92 else None, "eval", {}, "Error"),
    "job-2": ("team-b", lambda m: None if m < 90 else "Running" if m < 210 else "Failed", "finetune",
              {"gpu.skaffon.io/model": "mistral-7b"}, "OOMKilled"),
    "job-2b": ("team-b", lambda m: None if m < 210 else "Running", "finetune",
               {"gpu.skaffon.io/model": "mistral-7b"}, None),
}
IMAGE = "registry.example.com/ml/train:1.4.2"


def ksm_lines(m, ts):
    """kube-state-metrics samples of minute m, label names and values as kube-state-metrics v2 writes them."""
    out = []
    for pod, (ns, phase_at, job, labels, reason) in KSM_PODS.items():
        phase = phase_at(m)
        if phase is None:
            continue
        base = 'namespace="%s",pod="%s",uid="uid-%s"' % (ns, pod, pod)
        for p in ("Pending", "Succeeded", "Failed", "Unknown", "Running"):
            out.append('kube_pod_status_phase{%s,phase="%s"} %d %d' % (base, p, 1 if p == phase else 0, ts))
        out.append('kube_pod_owner{%s,owner_kind="%s",owner_name="%s",owner_is_controller="%s"} 1 %d' % (
            base, "Job" if job else "", job or "", "true" if job else "", ts))
        out.append("kube_pod_labels{%s} 1 %d" % (",".join(
            [base] + ['label_%s="%s"' % (k.replace(".", "_").replace("/", "_"), v) for k, v in sorted(labels.items())]),
            ts))
        out.append('kube_pod_container_info{%s,container="main",image_spec="%s",image="%s",image_id="",'
                   'container_id="containerd://%s"} 1 %d' % (base, IMAGE, IMAGE, pod, ts))
        out.append('kube_pod_container_status_restarts_total{%s,container="main"} 0 %d' % (base, ts))
        if reason and phase in ("Succeeded", "Failed"):
            out.append('kube_pod_container_status_terminated_reason{%s,container="main",reason="%s"} 1 %d'
                       % (base, reason, ts))
    # the Jobs: eval gave up (backoffLimit 0) once job-3 failed; finetune counts job-2's failure
    if m >= 90:
        for r in ("BackoffLimitExceeded", "DeadlineExceeded", "Evicted"):
            out.append('kube_job_status_failed{namespace="team-b",job_name="eval",reason="%s"} %d %d'
                       % (r, 1 if r == "BackoffLimitExceeded" else 0, ts))
    if m >= 210:
        out.append('kube_job_status_failed{namespace="team-b",job_name="finetune",reason=""} 1 %d' % ts)
    return out


def openmetrics(t0, extra=()):
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for labels, util, first, minutes in HISTORY:
        # samples in the middle of each minute: no sample sits on a period boundary
        for m in range(first, first + minutes):
            lines.append("DCGM_FI_DEV_GPU_UTIL{%s} %s %d" % (labels, util, t0 + m * STEP + STEP // 2))
    # OpenMetrics wants a family's samples together: one family at a time
    ksm = {}
    for m in range(0, 240):
        for line in ksm_lines(m, t0 + m * STEP + STEP // 2):
            ksm.setdefault(line.split("{", 1)[0], []).append(line)
    for name, rows in sorted(ksm.items()):
        lines.append("# TYPE %s unknown" % name)
        lines += rows
    # Kueue's admission wait histogram for one ClusterQueue: 30 s per admission on average
    for suffix, per_minute in (("sum", 30), ("count", 1)):
        lines.append("# TYPE kueue_admission_wait_time_seconds_%s unknown" % suffix)
        for m in range(0, 240):
            lines.append('kueue_admission_wait_time_seconds_%s{cluster_queue="team-a-cq"} %d %d'
                         % (suffix, (m + 1) * per_minute, t0 + m * STEP + STEP // 2))
    lines += list(extra)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def backfilled(work, text):
    (work / "history.om").write_text(text)
    data = work / "data"
    res = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(work / "history.om"),
                          str(data)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return Prometheus(work / "prom", {"global": {"scrape_interval": "1m"}, "scrape_configs": []},
                      extra_args=["--storage.tsdb.retention.time=30d"], data_dir=data)


def hour0():
    return (int(time.time()) // 3600 - 8) * 3600


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    if BINARY is None or PROMTOOL is None:
        pytest.skip("prometheus/promtool not installed (Debian package prometheus; scripts/system_deps.sh)")
    work = tmp_path_factory.mktemp("history")
    t0 = hour0()
    prom = backfilled(work, openmetrics(t0))
    try:
        prom.wait(lambda: prom.query("count(DCGM_FI_DEV_GPU_UTIL)", time=t0 + 3600), 60, "backfilled blocks")
        yield prom, t0, work
    finally:
        prom.stop()


def test_report_numbers_by_hand(pools, history):
    simcluster = pools
    prom, t0, work = history
    dest = work / "report"
    iso = datetime.datetime.fromtimestamp(t0, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    res = run_playbook(PLAYBOOK, simcluster.env, inventory=INVENTORY, extra_vars={
        "usage_report_prometheus_url": prom.url, "usage_report_start": iso,
        "usage_report_end": str(t0 + HOURS * 3600), "usage_report_dest": str(dest)})
    assert res.rc == 0, res
    out = res.task_results("Query Prometheus and write the report")[0]
    teams = dict((t["team"], t) for t in out["teams"])
    a, b = teams["team-a"], teams["team-b"]
    assert (a["allocated_gpu_hours"], a["busy_gpu_hours"], a["idle_gpu_hours"]) == (6.0, 4.0, 2.0)
    assert a["failed_run_gpu_hours"] == 0
    assert a["cost"] == 24.0                                                              # 6 h x 4.0
    # team-b: a failed pod's hours are failed-run, not productive, whatever its utilisation: job-2
    # (2 h, its Job's retry later ran) and job-3 (0.5 h, deleted after it failed)
    assert (b["allocated_gpu_hours"], b["busy_gpu_hours"], b["other_gpu_hours"], b["idle_gpu_hours"],
            b["failed_run_gpu_hours"]) == (4.0, 0.5, 1.0, 0.0, 2.5)
    assert b["cost"] == 6.0                                                               # 4 h x 1.5
    pools = dict((p["pool"], p) for p in out["pools"])
    assert pools["h100"]["allocated_gpu_hours"] == 6.0 and pools["l40s"]["allocated_gpu_hours"] == 4.0
    assert pools["l40s"]["failed_run_gpu_hours"] == 2.5
    assert out["queue_wait"] == {"team-a-cq": pytest.approx(30.0)}
    # the normalised cost, each term (inventory: a 4 h period of a 730 h month; shared 6 : 4 by GPU hours)
    cost = dict((n["team"], n) for n in out["normalised_cost"])
    #   team-a: compute 4 h x 4 = 16, idle 2 h x 4 = 8, network 730 x 4/730 x 0.6, storage 365 x 4/730,
    #   support 6 h x 0.25, operations 1825 x 4/730 x 0.6; 35.90 / 12 models
    assert [cost["team-a"][k] for k in ("compute", "network", "storage", "support", "idle", "failed_runs",
                                        "operations", "total", "accepted_units", "cost_per_unit")] == [
        16.0, 2.4, 2.0, 1.5, 8.0, 0.0, 6.0, 35.9, 12, 2.99]
    #   team-b: compute 1.5 h x 1.5, failed runs 2.5 h x 1.5; 13.60 / 4 models
    assert [cost["team-b"][k] for k in ("compute", "network", "storage", "support", "idle", "failed_runs",
                                        "operations", "total", "accepted_units", "cost_per_unit")] == [
        2.25, 1.6, 1.0, 1.0, 0.0, 3.75, 4.0, 13.6, 4, 3.4]
    assert out["site_cost"]["total"] == 49.5
    assert out["cost_sources"]["network"].startswith("inventory: usage_report_network_cost: per_month 730.00")
    assert out["cost_sources"]["failed_runs"].startswith("metrics:")
    # the workloads, from the kube-state-metrics series
    work_rows = dict(((w["team"], w["workload"]), w) for w in out["workloads"])
    assert sorted(work_rows) == [("team-a", "Job/train"), ("team-a", "Pod/notebook-1"), ("team-b", "Job/eval"),
                                 ("team-b", "Job/finetune"), ("team-b", "Job/sweep")]
    train = work_rows[("team-a", "Job/train")]
    assert (train["owner"], train["model"], train["dataset"], train["image"]) == (
        "alice", "llama-3-8b", "c4-sample", IMAGE)
    tune = work_rows[("team-b", "Job/finetune")]
    assert (tune["pods"], tune["failed_pods"], tune["retries"], tune["termination"], tune["model"]) == (
        2, 1, 1, "OOMKilled (1 pod)", "mistral-7b")
    assert (tune["allocated_gpu_hours"], tune["busy_gpu_hours"], tune["failed_run_gpu_hours"]) == (2.5, 0.5, 2.0)
    ev = work_rows[("team-b", "Job/eval")]
    assert (ev["failed_pods"], ev["termination"], ev["failed_run_gpu_hours"]) == (
        1, "Error (1 pod); Job failed: BackoffLimitExceeded", 0.5)
    assert work_rows[("team-b", "Job/sweep")]["termination"] == "Completed (1 pod)"
    md = (dest / "gpu-usage.md").read_text()
    assert md.startswith("# GPU usage ")                     # not simulated: no banner
    assert "| team-a | 6.0 | 4.0 | 67 % | 0.0 | 2.0 | 0.0 |" in md
    assert "| team-b | 4.0 | 0.5 | 12 % | 1.0 | 0.0 | 2.5 |" in md
    assert "| team-a | 16.00 | 2.40 | 2.00 | 1.50 | 8.00 | 0.00 | 6.00 | 35.90 | 12 | 2.99 |" in md
    assert "| team-b | 2.25 | 1.60 | 1.00 | 1.00 | 0.00 | 3.75 | 4.00 | 13.60 | 4 | 3.40 |" in md
    assert ("| team-b | Job/finetune | - | %s | mistral-7b | - | 2 | 1 | 0 | 1 | OOMKilled (1 pod) | 2.5 | 0.5 | 0.0 "
            "| 2.0 |" % IMAGE) in md
    assert "| team-a-cq | 30.0 |" in md
    with open(dest / "gpu-usage.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["team"], r["pool"], r["allocated_gpu_hours"], r["failed_run_gpu_hours"], r["cost"]) for r in rows] == [
        ("team-a", "h100", "6.0", "0.0", "24.0"), ("team-b", "l40s", "4.0", "2.5", "6.0")]
    with open(dest / "gpu-usage-cost.csv", encoding="utf-8") as fh:
        assert [r["total"] for r in csv.DictReader(fh)] == ["35.9", "13.6", "49.5"]
    with open(dest / "gpu-usage-workloads.csv", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == 5
    png = dest / "gpu-usage.png"
    if png.exists():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    else:
        pytest.importorskip("matplotlib")
        raise AssertionError("matplotlib is installed but no chart was written")
    again = run_playbook(PLAYBOOK, simcluster.env, inventory=INVENTORY, extra_vars={
        "usage_report_prometheus_url": prom.url, "usage_report_start": str(t0),
        "usage_report_end": str(t0 + HOURS * 3600), "usage_report_dest": str(dest)})
    assert again.rc == 0 and again.changed() == 0, again
    sim = run_playbook(PLAYBOOK, simcluster.env, inventory=INVENTORY, extra_vars={
        "usage_report_prometheus_url": prom.url, "usage_report_start": str(t0),
        "usage_report_end": str(t0 + HOURS * 3600), "usage_report_dest": str(work / "sim"),
        "usage_report_simulated": True})
    assert sim.rc == 0, sim
    assert (work / "sim" / "gpu-usage.md").read_text().startswith("> **Figures from a simulated cluster.**")


def test_report_refuses_a_reversed_period(simcluster, history):
    prom, t0, work = history
    res = run_playbook(PLAYBOOK, simcluster.env, inventory=INVENTORY, extra_vars={
        "usage_report_prometheus_url": prom.url, "usage_report_start": str(t0 + 3600),
        "usage_report_end": str(t0), "usage_report_dest": str(work / "never")})
    assert res.rc != 0
    assert "usage_report_end" in " ".join(res.failure_messages())
    assert not (work / "never").exists()


def test_report_names_the_url_when_prometheus_does_not_answer(simcluster, history, tmp_path):
    _prom, t0, _work = history
    res = run_playbook(PLAYBOOK, simcluster.env, inventory=INVENTORY, extra_vars={
        "usage_report_prometheus_url": "http://127.0.0.1:9", "usage_report_start": str(t0),
        "usage_report_end": str(t0 + 3600), "usage_report_dest": str(tmp_path / "r")})
    assert res.rc != 0
    msg = " ".join(res.failure_messages())
    assert "usage_report_prometheus_url" in msg and "127.0.0.1:9" in msg


def test_check_mode_writes_nothing(pools, history):
    simcluster = pools
    prom, t0, work = history
    res = run_playbook(PLAYBOOK, simcluster.env, inventory=INVENTORY, check=True, extra_vars={
        "usage_report_prometheus_url": prom.url, "usage_report_start": str(t0),
        "usage_report_end": str(t0 + HOURS * 3600), "usage_report_dest": str(work / "dry")})
    assert res.rc == 0 and res.changed() == 1, res
    assert res.task_results("Query Prometheus and write the report")[0]["teams"][0]["allocated_gpu_hours"] == 6.0
    assert not (work / "dry").exists()


def test_pools_follow_the_sites_label_prefix(pools, history, tmp_path):
    """A site with its own prefix: the report reads <prefix>accelerator, the label node_prereqs writes there."""
    simcluster = pools
    prom, t0, _work = history
    label_pools(simcluster, "gpu.example.org/")
    try:
        # the old prefix's labels go, as node_prereqs removes labels under a prefix it no longer owns
        for node in ACCELERATOR:
            simcluster.run(KUBECTL, "label", "node", node, "gpu.skaffon.io/accelerator-")
        res = run_playbook(PLAYBOOK, simcluster.env, inventory=INVENTORY, extra_vars={
            "gpu_platform_label_prefix": "gpu.example.org/", "usage_report_prometheus_url": prom.url,
            "usage_report_start": str(t0), "usage_report_end": str(t0 + HOURS * 3600),
            "usage_report_dest": str(tmp_path / "r")})
        assert res.rc == 0, res
        out = res.task_results("Query Prometheus and write the report")[0]
        assert sorted(p["pool"] for p in out["pools"]) == ["h100", "l40s"], out["pools"]
        assert dict((t["team"], t["cost"]) for t in out["teams"]) == {"team-a": 24.0, "team-b": 6.0}
        # and a node without the label is named, not silently left unpriced
        simcluster.run(KUBECTL, "label", "node", "gpu-l40s-1", "gpu.example.org/accelerator-")
        res = run_playbook(PLAYBOOK, simcluster.env, inventory=INVENTORY, extra_vars={
            "gpu_platform_label_prefix": "gpu.example.org/", "usage_report_prometheus_url": prom.url,
            "usage_report_start": str(t0), "usage_report_end": str(t0 + HOURS * 3600),
            "usage_report_dest": str(tmp_path / "r2")})
        assert res.rc == 0, res
        out = res.task_results("Query Prometheus and write the report")[0]
        assert dict((t["team"], t["cost"]) for t in out["teams"]) == {"team-a": 24.0, "team-b": None}
        assert "No price for pool (no pool label) (nodes gpu-l40s-1)" in (tmp_path / "r2" / "gpu-usage.md").read_text()
    finally:
        label_pools(simcluster, "gpu.skaffon.io/")


def test_a_failed_job_of_the_simulated_cluster(pools, tmp_path):
    """The kube-state-metrics series of a Job that failed in the simulated cluster (two pods, then
    BackoffLimitExceeded), as the twin serves them, make the workload view and the failed-run hours;
    the GPU samples of its pods are an hour of history (the twin's pods run for a fraction of a second)."""
    if BINARY is None or PROMTOOL is None:
        pytest.skip("prometheus/promtool not installed (Debian package prometheus; scripts/system_deps.sh)")
    sim = pools
    sim.run(KUBECTL, "create", "namespace", "monitoring", check=False)
    sim.run(KUBECTL, "apply", "-f", "-", input=json.dumps(kube_state_metrics_deployment("monitoring")))
    sim.run(KUBECTL, "create", "namespace", "team-c", check=False)
    labels = {"gpu.skaffon.io/owner": "bob", "gpu.skaffon.io/model": "llama-3-8b",
              "gpu.skaffon.io/dataset": "c4-sample"}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "tune", "namespace": "team-c"},
           "spec": {"backoffLimit": 1, "template": {
               "metadata": {"labels": labels, "annotations": {"simcluster.skaffon.io/behaviour": "fail"}},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": IMAGE}]}}}}
    sim.run(KUBECTL, "apply", "-f", "-", input=json.dumps(job))

    def failed():
        got = json.loads(sim.run(KUBECTL, "get", "job", "-n", "team-c", "tune", "-o", "json").stdout)
        return any(c["type"] == "Failed" and c["status"] == "True" for c in got["status"].get("conditions") or [])

    def scraped():
        try:
            with urllib.request.urlopen(sim.url + "/_sim/kube-state-metrics/metrics", timeout=10) as resp:
                return resp.read().decode()
        except urllib.error.HTTPError:
            return None                      # 503 until the kube-state-metrics pod runs
    Prometheus.wait(failed, 60, "Job tune failed")
    text = Prometheus.wait(scraped, 60, "kube-state-metrics pod Running (%s)" % KSM_SELECTOR)
    mine = [line for line in text.splitlines() if not line.startswith("#") and 'namespace="team-c"' in line]
    pods = sorted(set(re.search(r'pod="([^"]+)"', line).group(1) for line in mine if 'pod="' in line))
    assert len(pods) == 2, mine
    t0 = hour0()
    history = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for i, pod in enumerate(pods):                  # 30 min each at 70 % on one L40S, one after the other
        for m in range(i * 30, i * 30 + 30):
            history.append("DCGM_FI_DEV_GPU_UTIL{%s} 70 %d" % (gpu("gpu-l40s-1", 2, pod, "team-c"),
                                                              t0 + m * STEP + STEP // 2))
    families = {}
    for line in mine:
        families.setdefault(line.split("{", 1)[0], []).extend(
            "%s %d" % (line, t0 + m * STEP + STEP // 2) for m in range(60))
    for name, rows in sorted(families.items()):
        history += ["# TYPE %s unknown" % name] + rows
    prom = backfilled(tmp_path, "\n".join(history + ["# EOF"]) + "\n")
    try:
        prom.wait(lambda: prom.query("count(DCGM_FI_DEV_GPU_UTIL)", time=t0 + 1800), 60, "backfilled blocks")
        res = run_playbook(PLAYBOOK, sim.env, inventory=INVENTORY, extra_vars={
            "usage_report_prometheus_url": prom.url, "usage_report_start": str(t0),
            "usage_report_end": str(t0 + 3600), "usage_report_dest": str(tmp_path / "r"),
            "usage_report_simulated": True})
    finally:
        prom.stop()
    assert res.rc == 0, res
    out = res.task_results("Query Prometheus and write the report")[0]
    team = out["teams"][0]
    assert (team["team"], team["allocated_gpu_hours"], team["failed_run_gpu_hours"], team["busy_gpu_hours"]) == (
        "team-c", 1.0, 1.0, 0.0)
    assert out["normalised_cost"][0]["failed_runs"] == 1.5 and out["normalised_cost"][0]["compute"] == 0.0
    (row,) = out["workloads"]
    assert (row["workload"], row["owner"], row["model"], row["dataset"], row["image"]) == (
        "Job/tune", "bob", "llama-3-8b", "c4-sample", IMAGE)
    assert (row["pods"], row["failed_pods"], row["restarts"], row["retries"]) == (2, 2, 0, 2)
    assert row["termination"] == "Error (2 pods); Job failed: BackoffLimitExceeded"
    md = (tmp_path / "r" / "gpu-usage.md").read_text()
    assert md.startswith("> **Figures from a simulated cluster.**")
    assert "| team-c | Job/tune | bob | %s | llama-3-8b | c4-sample | 2 | 2 | 0 | 2 |" % IMAGE in md
