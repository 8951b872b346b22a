"""playbooks/usage_report.yml against a real Prometheus holding simulated history.

Four hours of DCGM exporter samples (one a minute) are backfilled with
`promtool tsdb create-blocks-from openmetrics`; node pools come from the nodes'
accelerator label, which the test sets through the API as node_prereqs would
(the cluster file carries no pool label: nothing real would put one there). The
expected numbers are worked out by hand below.
"""
import csv
import datetime
import os
import shutil
import subprocess
import time

import pytest

from kit.paths import BIN, REPO
from kit.playbook import run_playbook
from kit.prometheus import BINARY, Prometheus

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
#   team-a on h100: train-1 busy 4 h; notebook-1 idle (0 %) 2 h         -> 6 h allocated
#   team-b on l40s: job-1 at 7 % (neither busy nor idle) 1 h; job-2 busy 2 h, then Failed -> 3 h
#   a free GPU (no pod) is not allocated; a sample after the period does not count
HISTORY = [
    (gpu("gpu-h100-1", 0, "train-1", "team-a"), 90, 0, 240),
    (gpu("gpu-h100-1", 1, "notebook-1", "team-a"), 0, 60, 120),
    (gpu("gpu-l40s-1", 0, "job-1", "team-b"), 7, 0, 60),
    (gpu("gpu-l40s-1", 0, "job-2", "team-b"), 60, 90, 120),
    (gpu("gpu-l40s-1", 1), 0, 0, 240),
    (gpu("gpu-h100-1", 0, "late-1", "team-a"), 95, 240, 30),
]


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    if BINARY is None or PROMTOOL is None:
        pytest.skip("prometheus/promtool not installed (Debian package prometheus; scripts/system_deps.sh)")
    work = tmp_path_factory.mktemp("history")
    t0 = (int(time.time()) // 3600 - 8) * 3600
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for labels, util, first, minutes in HISTORY:
        # samples in the middle of each minute: no sample sits on a period boundary
        for m in range(first, first + minutes):
            lines.append("DCGM_FI_DEV_GPU_UTIL{%s} %s %d" % (labels, util, t0 + m * STEP + STEP // 2))
    lines += ["# TYPE kube_pod_status_phase gauge"]
    for m in range(0, 240):
        ts = t0 + m * STEP + STEP // 2
        for pod, phase in (("job-2", "Failed" if m >= 210 else "Running"), ("train-1", "Running")):
            for p in ("Running", "Failed"):
                ns = "team-b" if pod == "job-2" else "team-a"
                lines.append('kube_pod_status_phase{namespace="%s",pod="%s",phase="%s"} %d %d'
                             % (ns, pod, p, 1 if p == phase else 0, ts))
    # Kueue's admission wait histogram for one ClusterQueue: 30 s per admission on average
    for suffix, per_minute in (("sum", 30), ("count", 1)):
        lines.append("# TYPE kueue_admission_wait_time_seconds_%s unknown" % suffix)
        for m in range(0, 240):
            lines.append('kueue_admission_wait_time_seconds_%s{cluster_queue="team-a-cq"} %d %d'
                         % (suffix, (m + 1) * per_minute, t0 + m * STEP + STEP // 2))
    lines.append("# EOF")
    (work / "history.om").write_text("\n".join(lines) + "\n")
    data = work / "data"
    res = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(work / "history.om"),
                          str(data)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    prom = Prometheus(work / "prom", {"global": {"scrape_interval": "1m"}, "scrape_configs": []},
                      extra_args=["--storage.tsdb.retention.time=30d"], data_dir=data)
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
    assert a["failed_pod_gpu_hours"] == 0
    assert a["cost"] == 24.0 and a["accepted_units"] == 12 and a["cost_per_unit"] == 2.0   # 6 h x 4.0
    assert (b["allocated_gpu_hours"], b["busy_gpu_hours"], b["idle_gpu_hours"]) == (3.0, 2.0, 0.0)
    assert b["failed_pod_gpu_hours"] == 2.0
    assert b["cost"] == 4.5 and b["cost_per_unit"] is None                               # 3 h x 1.5
    pools = dict((p["pool"], p) for p in out["pools"])
    assert pools["h100"]["allocated_gpu_hours"] == 6.0 and pools["l40s"]["allocated_gpu_hours"] == 3.0
    assert out["queue_wait"] == {"team-a-cq": pytest.approx(30.0)}
    md = (dest / "gpu-usage.md").read_text()
    assert "| team-a | 6.0 | 4.0 | 67 % | 2.0 | 0.0 | 24.00 | 12 | 2.00 |" in md
    assert "| team-a-cq | 30.0 |" in md
    with open(dest / "gpu-usage.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["team"], r["pool"], r["allocated_gpu_hours"], r["cost"]) for r in rows] == [
        ("team-a", "h100", "6.0", "24.0"), ("team-b", "l40s", "3.0", "4.5")]
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
        assert dict((t["team"], t["cost"]) for t in out["teams"]) == {"team-a": 24.0, "team-b": 4.5}
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
