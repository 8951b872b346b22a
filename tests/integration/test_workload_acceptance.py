"""Integration: playbooks/workload_acceptance.yml with the example inventory on the simulated cluster.

The cluster is tests/clusters/example.yaml plus a third H100 node, gpu-h100-3, whose fabric link is
degraded (fault nccl_degraded_link); it is not in the pool (no pool labels) until the degraded case
labels it and names it in the inventory. The platform parts the acceptance runs through are real
runs or what their roles leave: node_prereqs' pool labels and taints (set here), the GPU Operator
twin offering whole GPUs (no MIG layout applied), playbooks/tenants.yml and playbooks/queues.yml
(KAI from the real chart) with the example inventory. The playbook runs as a site runs it: the
example inventory plus an overlay that only says how to reach the cluster and shortens timeouts.
"""
import atexit
import os
import shutil
import tempfile
import time
import xml.etree.ElementTree as ET

import pytest
import yaml

from kit.paths import BIN, CLUSTERS, KAI_CHART, MIG_PARTED_CONFIG, REPO
from kit.playbook import run_playbook

EXAMPLE = os.path.join(REPO, "inventories", "example")
PLAYBOOKS = os.path.join(REPO, "playbooks")
OPERATOR_NS = "gpu-operator"
PREFIX = "gpu.skaffon.io/"
H100 = {"accelerator": "h100", "topology": "nvlink", "fabric": "ib", "workload": "training", "sharing": "mig",
        "trust": "mixed"}
L40S = {"accelerator": "l40s", "topology": "pcie", "fabric": "ethernet", "workload": "inference",
        "sharing": "fraction", "trust": "single"}
STEPS = ["queued-job", "data-staged", "nccl-allreduce", "training-window", "checkpoint-restore", "labels-exported",
         "cost-baseline", "inference-serving"]


def _cluster_file():
    """example.yaml with absolute paths, a third H100 node and its degraded link."""
    with open(os.path.join(CLUSTERS, "example.yaml")) as handle:
        spec = yaml.safe_load(handle)
    spec["crds"] = [os.path.normpath(os.path.join(CLUSTERS, p)) for p in spec["crds"]]
    spec["audit"]["policy"] = os.path.join(CLUSTERS, spec["audit"]["policy"])
    third = dict(spec["nodes"][1], name="gpu-h100-3")
    spec["nodes"].insert(2, third)
    spec["faults"] = {"nccl_degraded_link": ["gpu-h100-3"]}
    folder = tempfile.mkdtemp(prefix="wla-cluster-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "example-wla.yaml")
    with open(path, "w") as handle:
        yaml.safe_dump(spec, handle)
    return path


pytestmark = [pytest.mark.slow, pytest.mark.needs_shared, pytest.mark.cluster(_cluster_file())]


def wait(what, fn, timeout=120):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def pool_node(core, name, labels, taint):
    """What node_prereqs puts on a pool's Node: the pool labels and taint under the site's prefix."""
    core.patch_node(name, {"metadata": {"labels": dict((PREFIX + k, v) for k, v in labels.items())},
                           "spec": {"taints": [taint]}})


def overlay(tmp, hosts=None, **settings):
    """How the test reaches the cluster's charts and what it shortens; nothing about the platform."""
    inv = os.path.join(str(tmp), "overlay")
    os.makedirs(os.path.join(inv, "group_vars"), exist_ok=True)
    with open(os.path.join(inv, "hosts.yml"), "w") as handle:
        yaml.safe_dump({"all": {"children": {"gpu_nodes": {"children": {
            "pool_h100_nvlink_training": {"hosts": dict((h, None) for h in (hosts or []))}}}}}}, handle)
    values = {"queues_chart_source": "archive", "queues_chart_ref": KAI_CHART, "queues_chart_version": "v0.17.0",
              "queues_helm_binary": os.path.join(BIN, "helm"), "queues_wait_timeout": 120,
              # the chart's mig-parted ConfigMap, which the operator would have created
              "tenants_mig_parted_config": MIG_PARTED_CONFIG,
              "workload_acceptance_pod_timeout": 90, "workload_acceptance_queue_timeout": 90,
              "workload_acceptance_checkpoint_timeout": 120, "workload_acceptance_stage_timeout": 120,
              "workload_acceptance_benchmark_timeout": 120}
    values.update(settings)
    with open(os.path.join(inv, "group_vars", "all.yml"), "w") as handle:
        yaml.safe_dump(values, handle)
    return inv


@pytest.fixture(scope="module")
def platform(simcluster, tmp_path_factory):
    from kubernetes import client
    from simcluster.twins.testkit import chart_workloads
    api = simcluster.api_client()
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    taint_h100 = {"key": PREFIX + "workload", "value": "training", "effect": "NoSchedule"}
    for node in ("gpu-h100-1", "gpu-h100-2"):
        pool_node(core, node, H100, taint_h100)
    pool_node(core, "gpu-l40s-1.cluster.example", L40S, {"key": "nvidia.com/gpu", "value": "present",
                                                         "effect": "NoSchedule"})
    core.create_namespace({"metadata": {"name": OPERATOR_NS, "labels": {
        "pod-security.kubernetes.io/enforce": "privileged"}}})
    for obj in chart_workloads(OPERATOR_NS):
        if obj["kind"] == "Deployment":
            apps.create_namespaced_deployment(OPERATOR_NS, obj)
        else:       # the NFD worker tolerates the pools' taints, as the gpu_operator role's values make it
            obj["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
            apps.create_namespaced_daemon_set(OPERATOR_NS, obj)
    custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"operator": {}, "daemonsets": {"tolerations": [{"operator": "Exists"}]},
                 "dcgm": {"enabled": False}, "dcgmExporter": {"enabled": True}, "devicePlugin": {"enabled": True},
                 "driver": {"enabled": True}, "toolkit": {"enabled": True}, "gfd": {"enabled": True},
                 "nodeStatusExporter": {"enabled": False}, "migManager": {"enabled": False}}})

    def offered():
        alloc = dict((n.metadata.name, (n.status.allocatable or {}).get("nvidia.com/gpu"))
                     for n in core.list_node().items)
        return all(alloc.get(n) == "4" for n in ("gpu-h100-1", "gpu-h100-2", "gpu-h100-3",
                                                 "gpu-l40s-1.cluster.example")) or alloc
    wait("the GPU Operator twin to offer 4 GPUs per node", lambda: offered() is True, timeout=180)
    base = tmp_path_factory.mktemp("wla")
    inv = overlay(base)
    for playbook in ("tenants.yml", "queues.yml"):
        res = run_playbook(os.path.join(PLAYBOOKS, playbook), simcluster.env, inventory=[EXAMPLE, inv],
                           limit="localhost")
        assert res.rc == 0, res
    return simcluster, base


def acceptance(sim, tmp, hosts=None, extra=None, **settings):
    report = os.path.join(str(tmp), "report")
    inv = overlay(tmp, hosts, workload_acceptance_report_dir=report, **settings)
    res = run_playbook(os.path.join(PLAYBOOKS, "workload_acceptance.yml"), sim.env, inventory=[EXAMPLE, inv],
                       extra_vars=extra, limit="localhost", timeout=900)
    results = {}
    for task in ("Run the steps in the team namespace", "Run the serving step in the serving team's namespace"):
        for out in res.task_results(task):
            for result in out.get("results") or []:
                results[result["id"]] = result
    return res, results, report


def _report(folder):
    path = os.path.join(folder, "workload-acceptance.md")
    if os.path.exists(path):
        with open(path) as handle:
            return handle.read()
    return None


def one_pod_per_node(figures):
    """The templates spread the gang with a required podAntiAffinity on kubernetes.io/hostname: one
    pod per node, so nccl-tests measures the fabric between nodes, not NVLink within one."""
    assert len(figures.get("nodes") or []) == figures.get("ranks"), figures


def left_over(sim):
    from kubernetes import client
    api = sim.api_client()
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    found = []
    for ns in ("team-vision", "team-inference"):
        found += ["%s/job/%s" % (ns, j.metadata.name) for j in batch.list_namespaced_job(ns).items]
        found += ["%s/pvc/%s" % (ns, c.metadata.name) for c in core.list_namespaced_persistent_volume_claim(ns).items]
        found += ["%s/pod/%s" % (ns, p.metadata.name) for p in core.list_namespaced_pod(ns).items
                  if p.metadata.name.startswith("wla-")]
    return found


def test_every_step_passes_on_the_example_inventory(platform, tmp_path):
    sim, _ = platform
    res, results, report = acceptance(sim, tmp_path)
    assert res.rc == 0, _report(report) or res
    assert list(results) == STEPS
    status = dict((k, (r["status"], r["summary"])) for k, r in results.items())
    assert all(s == "PASS" for k, (s, _) in status.items() if k != "labels-exported"), status
    # no Prometheus URL in the example: the labels step says so
    assert status["labels-exported"] == ("SKIP", "no prometheus_url: the series cannot be read "
                                                  "(set workload_acceptance_prometheus_url)")
    figures = dict((k, r["figures"]) for k, r in results.items())
    # the design's whole GPUs of team-vision are on one node: 2 GPUs over NVLink, compared with the
    # inventory's figure for the pool's topology label (nvlink)
    assert figures["nccl-allreduce"]["expected_busbw_gbps"] == 360.0
    assert len(figures["nccl-allreduce"]["nodes"]) == 1 and figures["nccl-allreduce"]["ranks"] == 2
    assert 288 <= figures["nccl-allreduce"]["avg_busbw_gbps"] <= 480
    assert figures["data-staged"]["bytes"] == 2147483648 + 346293584
    assert figures["training-window"]["throughput_samples_per_s"] > 0
    assert figures["checkpoint-restore"]["resumed_step"] > 0
    assert figures["cost-baseline"]["ratio_to_baseline"] <= 1
    assert figures["inference-serving"]["errors"] == 0 and figures["inference-serving"]["errors_during_rollout"] == 0
    with open(os.path.join(report, "workload-acceptance.md")) as handle:
        text = handle.read()
    assert text.startswith("# Workload acceptance: team-vision (serving: team-inference) on pool_h100_nvlink_training")
    assert "**Figures from a simulated cluster.**" in text
    assert "Result: 7 passed, 0 failed, 1 skipped of 8 steps." in text
    suite = ET.parse(os.path.join(report, "junit.xml")).getroot()
    assert suite.get("tests") == "8" and suite.get("failures") == "0"
    wait("the run's objects to go", lambda: not left_over(sim), timeout=60)


def test_a_degraded_link_fails_nccl_naming_the_node(platform, tmp_path):
    sim, _ = platform
    from kubernetes import client
    pool_node(client.CoreV1Api(sim.api_client()), "gpu-h100-3", H100,
              {"key": PREFIX + "workload", "value": "training", "effect": "NoSchedule"})
    try:
        res, results, report = acceptance(sim, tmp_path, hosts=["gpu-h100-3"], extra={
            "workload_acceptance_steps": ["nccl-allreduce"], "workload_acceptance_nodes": 3,
            "workload_acceptance_gpus_per_node": 1})
    finally:
        client.CoreV1Api(sim.api_client()).patch_node("gpu-h100-3", {
            "metadata": {"labels": dict((PREFIX + k, None) for k in H100)}})
    result = results["nccl-allreduce"]
    one_pod_per_node(result["figures"])
    assert res.rc != 0
    assert result["status"] == "FAIL", result
    assert result["figures"]["expected_busbw_gbps"] == 180.0          # the pool's fabric (ib)
    assert "slow node gpu-h100-3" in result["summary"], result["summary"]
    assert result["figures"]["bad_nodes"] == ["gpu-h100-3"]
    assert "Workload acceptance failed: nccl-allreduce" in " ".join(res.failure_messages())
    with open(os.path.join(report, "workload-acceptance.md")) as handle:
        assert "slow node gpu-h100-3" in handle.read()
    wait("the run's objects to go", lambda: not left_over(sim), timeout=60)


def test_no_checkpoint_volume_fails_the_restore_with_the_cause(platform, tmp_path):
    sim, _ = platform
    res, results, _ = acceptance(sim, tmp_path, extra={
        "workload_acceptance_steps": ["queued-job", "training-window", "checkpoint-restore"],
        "workload_acceptance_checkpoint_volume": False})
    assert res.rc != 0
    result = results["checkpoint-restore"]
    assert result["status"] == "FAIL", result
    assert "restored from step 0" in result["summary"] and "not a persistent volume" in result["summary"], result
    assert results["training-window"]["status"] == "PASS"
    wait("the run's objects to go", lambda: not left_over(sim), timeout=60)


def test_labels_on_the_simulated_exporters(platform, tmp_path):
    """A real Prometheus scrapes the DCGM exporter twins, kube-state-metrics (with the allowlist of
    the example inventory's kube_prometheus_stack_values, as the chart renders it) and KAI's queue
    controller: the GPU series name the training pods, kube_pod_labels carries team, pool, cost
    centre and queue, the two join, and the team's queue has its seven gauges."""
    from kit.prometheus import BINARY, KSM_SELECTOR, Prometheus, kube_state_metrics_deployment, scrape_config
    if BINARY is None:
        pytest.skip("no prometheus binary (Debian package prometheus)")
    sim, _ = platform
    from kubernetes import client
    api = sim.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": "monitoring"}})
    with open(os.path.join(EXAMPLE, "group_vars", "all", "monitoring.yml")) as handle:
        allowlist = yaml.safe_load(handle)["kube_prometheus_stack_values"]["kube-state-metrics"]["metricLabelsAllowlist"]
    apps.create_namespaced_deployment("monitoring", kube_state_metrics_deployment("monitoring",
                                                                                  labels_allowlist=allowlist))
    wait("kube-state-metrics Running", lambda: [p for p in core.list_namespaced_pod(
        "monitoring", label_selector=KSM_SELECTOR).items if p.status.phase == "Running"])
    pods = [api.sanitize_for_serialization(p) for p in core.list_pod_for_all_namespaces().items]
    config = scrape_config(sim.url, pods)
    assert "queue-controller" in [c["job_name"] for c in config["scrape_configs"]], config
    prom = Prometheus(str(tmp_path / "prometheus"), config)
    try:
        prom.wait(lambda: prom.query('up{job="kube-state-metrics"} == 1'), 60, "kube-state-metrics scraped")
        prom.wait(lambda: prom.query('up{job="queue-controller"} == 1'), 60, "KAI's queue controller scraped")
        res, results, report = acceptance(sim, tmp_path, extra={
            "workload_acceptance_steps": ["queued-job", "training-window", "labels-exported"],
            "workload_acceptance_prometheus_url": prom.url})
    finally:
        prom.stop()
    result = results["labels-exported"]
    figures = result["figures"]
    assert result["status"] == "PASS", result
    assert figures["gpu_series"] >= 2 and figures["gpu_series_attributed"] >= 2, result
    assert figures["labels_missing"] == "-", result
    assert figures["queue_series"] == 7, result
    assert any("label_gpu_platform_skaffon_io_team" in e for e in result["evidence"]), result["evidence"]
    assert any("kai_queue_" in e and "queue_name=team-vision" in e for e in result["evidence"]), result["evidence"]
    assert res.rc == 0, res.stderr[-3000:]
    wait("the run's objects to go", lambda: not left_over(sim), timeout=60)
