"""Integration: the module workload_acceptance against the simulated cluster (tests/clusters/workload.yaml).

The queued-job step runs against two more clusters with a queue backend installed by the queues
playbook (tests/kit/queues.py: one 8-GPU node): Kueue with team-a and team-b at 4 GPUs each in one
cohort; KAI with team-a at a quota of 2 GPUs and team-c at none, limited to 4.

Four 8-GPU H100 nodes on a 180 GB/s fabric, gpu-h100-3's link degraded to a quarter. The module runs
as operators run it: a one-task play with the cluster's credentials from the inventory. The GPU
Operator twin offers the GPUs (chart workloads + ClusterPolicy), the nccl-tests twin prints
all_reduce_perf's output.
"""
import os
import time

import pytest

from kit.paths import BIN, KAI_CHART, KUEUE_CHART
from kit.playbook import run_playbook, task_play

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared, pytest.mark.cluster("workload.yaml")]

NS = "team-a"
OPERATOR_NS = "gpu-operator"
GPU_NODES = ["gpu-h100-1", "gpu-h100-2", "gpu-h100-3", "gpu-h100-4"]
IMAGE = "ghcr.io/coreweave/nccl-tests:12.8.1-devel-ubuntu22.04-nccl2.26.2-1-0708d2e"
# the launcher pattern (docs/simcluster-clusterfile.md "nccl-tests"); large sizes only, so the
# average is close to the ring's limit, as a site's acceptance runs it
SCRIPT = ('if [ "$JOB_COMPLETION_INDEX" = "0" ]; then mpirun --allow-run-as-root -np {np} -N 8 '
          '--hostfile /etc/mpi/hostfile all_reduce_perf -b 1G -e 8G -f 2 -g 1 -c 1; '
          'else /usr/sbin/sshd -D -e; fi')


def wait(what, fn, timeout=60):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


@pytest.fixture(scope="module")
def cluster(simcluster):
    """The GPU Operator twin offering 8 GPUs per node, and the team namespace."""
    from kubernetes import client
    from simcluster.twins.testkit import chart_workloads
    api = simcluster.api_client()
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": OPERATOR_NS, "labels": {
        "pod-security.kubernetes.io/enforce": "privileged"}}})
    for obj in chart_workloads(OPERATOR_NS):
        if obj["kind"] == "Deployment":
            apps.create_namespaced_deployment(OPERATOR_NS, obj)
        else:
            apps.create_namespaced_daemon_set(OPERATOR_NS, obj)
    custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"operator": {}, "daemonsets": {}, "dcgm": {"enabled": False}, "dcgmExporter": {"enabled": False},
                 "devicePlugin": {"enabled": True}, "driver": {"enabled": False}, "toolkit": {"enabled": False},
                 "gfd": {"enabled": True}, "nodeStatusExporter": {"enabled": False},
                 "migManager": {"enabled": False}}})

    def offered():
        alloc = dict((n.metadata.name, (n.status.allocatable or {}).get("nvidia.com/gpu"))
                     for n in core.list_node().items)
        return all(alloc.get(n) == "8" for n in GPU_NODES)
    wait("the device plugin twin to offer 8 GPUs per node", offered, timeout=120)
    core.create_namespace({"metadata": {"name": NS}})
    return simcluster


def nccl_manifests(nodes):
    name = "wla-nccl"
    container = {"name": "nccl", "image": IMAGE, "command": ["/bin/bash", "-c", SCRIPT.format(np=8 * len(nodes))],
                 "resources": {"limits": {"nvidia.com/gpu": "8"}}}
    spec = {"restartPolicy": "Never", "subdomain": name, "containers": [container],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]}]}}}}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
         "spec": {"clusterIP": "None", "selector": {"job-name": name}, "ports": [{"name": "ssh", "port": 22}]}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
         "spec": {"completionMode": "Indexed", "completions": len(nodes), "parallelism": len(nodes),
                  "backoffLimit": 0, "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}},
    ]


SCRIPTS = {"train.py": "# the role's train.py\n", "stage.py": "# the role's stage.py\n"}
SCRIPTS_MOUNT = {"name": "scripts", "mountPath": "/opt/skaffon/acceptance", "readOnly": True}
SCRIPTS_VOLUME = {"name": "scripts", "configMap": {"name": "wla-scripts"}}
DATA_VOLUME = {"name": "data", "persistentVolumeClaim": {"claimName": "wla-data"}}
SOURCES = ["sample=https://data.example.com/sample.tar", "weights=https://models.example.com/base.safetensors"]


def claim(name, size="100Gi"):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}}}


def data_manifests(sources=SOURCES):
    """The data claim and the stage Job (docs/templates/data-stage-job.yaml.j2's shape)."""
    command = ["python3", "/opt/skaffon/acceptance/stage.py", "--dest", "/data"]
    for source in sources:
        command += ["--source", source]
    return [claim("wla-data"), {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "wla-stage"},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "stage", "image": "python:3.12-slim", "command": command,
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}, SCRIPTS_MOUNT]}],
            "volumes": [DATA_VOLUME, SCRIPTS_VOLUME]}}}}]


def train_manifests(checkpoint_claim=True, nodes=2, seconds=400):
    """The training Job (docs/templates/training-job.yaml.j2's shape): torchrun in an Indexed Job, one pod per node."""
    name = "wla-train"
    ckpt = ({"name": "checkpoints", "persistentVolumeClaim": {"claimName": "wla-checkpoints"}} if checkpoint_claim
            else {"name": "checkpoints", "emptyDir": {"sizeLimit": "50Gi"}})
    container = {"name": "trainer", "image": "registry.example.com/ml/train:1.4", "command": ["torchrun"],
                 "args": ["/opt/skaffon/acceptance/train.py", "--data=/data", "--checkpoint-dir=/checkpoints",
                          "--checkpoint-every=20", "--seconds=%d" % seconds],
                 "env": [{"name": "PET_NNODES", "value": str(nodes)}, {"name": "PET_NPROC_PER_NODE", "value": "8"}],
                 "resources": {"limits": {"nvidia.com/gpu": "8"}},
                 "volumeMounts": [{"name": "checkpoints", "mountPath": "/checkpoints"},
                                  {"name": "data", "mountPath": "/data", "readOnly": True}, SCRIPTS_MOUNT]}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
         "spec": {"clusterIP": "None", "selector": {"job-name": name}, "ports": [{"port": 29500}]}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
         "spec": {"completionMode": "Indexed", "completions": nodes, "parallelism": nodes, "backoffLimit": 6,
                  "template": {"metadata": {"labels": {"app.kubernetes.io/component": "trainer"}},
                               "spec": {"restartPolicy": "Never", "subdomain": name, "containers": [container],
                                        "affinity": {"podAntiAffinity": {
                                            "requiredDuringSchedulingIgnoredDuringExecution": [{
                                                "topologyKey": "kubernetes.io/hostname",
                                                "labelSelector": {"matchLabels": {"job-name": name}}}]}},
                                        "volumes": [ckpt, dict(DATA_VOLUME, persistentVolumeClaim={
                                            "claimName": "wla-data", "readOnly": True}), SCRIPTS_VOLUME]}}}},
    ]


# the waits every run gives its steps unless a test sets its own
TIMEOUTS = dict(pod_timeout=60, queue_timeout=60, benchmark_timeout=120, stage_timeout=60, checkpoint_timeout=60)


def run_module(cluster, tmp_path, name, **args):
    base = dict(TIMEOUTS, namespace=NS, team="team-a", pool="h100", queue_backend="none",
                training_window_seconds=60, scripts=SCRIPTS)
    base.update(args)
    play = task_play(tmp_path / ("%s.yml" % name), "skaffon.gpu_platform.workload_acceptance", base)
    res = run_playbook(play, cluster.env)
    assert res.rc == 0, res.stderr
    return res.task_results("under test")[0]


def objects_left(cluster):
    from kubernetes import client
    api = cluster.api_client()
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    return ([j.metadata.name for j in batch.list_namespaced_job(NS).items] +
            [s.metadata.name for s in core.list_namespaced_service(NS).items] +
            [c.metadata.name for c in core.list_namespaced_config_map(NS).items if c.metadata.name == "wla-scripts"])


def test_nccl_allreduce_passes_on_healthy_nodes(cluster, tmp_path):
    out = run_module(cluster, tmp_path, "healthy", steps=["nccl-allreduce"], expected_busbw_gbps=180.0,
                     manifests={"nccl": nccl_manifests(["gpu-h100-1", "gpu-h100-2"])})
    result = out["results"][0]
    assert result["status"] == "PASS", result
    figures = result["figures"]
    assert figures["nodes"] == ["gpu-h100-1", "gpu-h100-2"] and figures["ranks"] == 16
    assert [r["size"] for r in figures["rows"]] == [2 ** 30, 2 ** 31, 2 ** 32, 2 ** 33]
    assert 144 <= figures["avg_busbw_gbps"] <= 180
    assert out["simulated"] is True and out["kubernetes_version"].endswith("-simcluster")
    assert out["changed"] is True and out["failed_steps"] == []
    wait("the run's objects to go", lambda: not objects_left(cluster))


def test_nccl_allreduce_names_the_degraded_node(cluster, tmp_path):
    nodes = ["gpu-h100-1", "gpu-h100-2", "gpu-h100-3"]
    out = run_module(cluster, tmp_path, "degraded", steps=["nccl-allreduce"], expected_busbw_gbps=180.0,
                     manifests={"nccl": nccl_manifests(nodes)})
    result = out["results"][0]
    assert result["status"] == "FAIL", result
    assert result["summary"].endswith("; slow node gpu-h100-3 (every pair with it is slow)"), result["summary"]
    assert result["figures"]["bad_nodes"] == ["gpu-h100-3"]
    assert result["figures"]["avg_busbw_gbps"] < 50           # the ring runs at the degraded link's 45 GB/s
    pairs = [e.split(":")[0] for e in result["evidence"] if e.startswith("pair ")]
    assert pairs == ["pair gpu-h100-1+gpu-h100-2 on gpu-h100-1, gpu-h100-2",
                     "pair gpu-h100-3+gpu-h100-1 on gpu-h100-1, gpu-h100-3"], pairs
    assert out["failed_steps"] == ["nccl-allreduce"]
    wait("the run's objects to go", lambda: not objects_left(cluster))


def test_nccl_allreduce_names_the_node_with_wrong_results(cluster, tmp_path):
    out = run_module(cluster, tmp_path, "wrong", steps=["nccl-allreduce"], expected_busbw_gbps=180.0,
                     manifests={"nccl": nccl_manifests(["gpu-h100-1", "gpu-h100-2", "gpu-h100-4"])})
    result = out["results"][0]
    assert result["status"] == "FAIL", result
    assert result["summary"].startswith("wrong results from all_reduce_perf ("), result["summary"]
    assert result["summary"].endswith("; node gpu-h100-4 gives wrong results (every pair with it does)")
    assert result["figures"]["bad_nodes"] == ["gpu-h100-4"] and result["figures"]["wrong_total"] > 0
    wait("the run's objects to go", lambda: not objects_left(cluster))


def left_claims(cluster):
    from kubernetes import client
    return [c.metadata.name for c in client.CoreV1Api(cluster.api_client()).list_namespaced_persistent_volume_claim(
        NS).items]


def test_training_steps_from_queue_to_restore(cluster, tmp_path):
    manifests = {"training": [claim("wla-data")] + train_manifests(), "checkpoint": [claim("wla-checkpoints")],
                 "data": data_manifests()}
    out = run_module(cluster, tmp_path, "training", manifests=manifests, run_id="wla-it-1",
                     steps=["queued-job", "data-staged", "training-window", "checkpoint-restore"])
    by_id = dict((r["id"], r) for r in out["results"])
    assert [r["status"] for r in out["results"]] == ["PASS"] * 4, out["results"]
    assert by_id["queued-job"]["figures"]["admission_reason"] == "Scheduled"
    staged = by_id["data-staged"]["figures"]
    assert staged["bytes"] == 2147483648 + 536870912
    assert [(s["name"], s["bytes"]) for s in staged["sources"]] == [("sample", 2147483648), ("weights", 536870912)]
    assert staged["seconds"] == pytest.approx(2684354560 / 500e6, abs=0.05)
    window = by_id["training-window"]["figures"]
    # 2 pods x 8 H100 x 400 samples/s (cluster file), one step per simulated second; the window also
    # holds the checkpoint writes (0.54 s every 20 steps), as a real run's does
    assert 6400 * 20 / 20.54 - 1 <= window["throughput_samples_per_s"] <= 6400
    assert window["gpus"] == 16 and window["steps"] >= 58 and window["seconds"] <= 60
    restore = by_id["checkpoint-restore"]["figures"]
    # the newest checkpoint when the pod went: the one seen, or one written between the read and the delete
    assert restore["checkpoint_step"] % 20 == 0 and restore["resumed_step"] % 20 == 0
    assert restore["checkpoint_step"] <= restore["resumed_step"] <= restore["checkpoint_step"] + 40
    assert restore["checkpoint_seconds"] == pytest.approx(1073741824 / 2000e6, abs=0.01)
    assert restore["restore_seconds"] == pytest.approx(1073741824 / 4000e6, abs=0.01)
    # from the delete to the first step after the restore: within the wait the step gives a replacement,
    # not a figure of wall-clock time the machine's load sets
    assert 0 < restore["recovery_seconds"] <= TIMEOUTS["pod_timeout"] + TIMEOUTS["checkpoint_timeout"]
    wait("the run's objects to go", lambda: not objects_left(cluster) and not left_claims(cluster))


def test_checkpoint_on_the_pods_own_disk_restores_from_step_0(cluster, tmp_path):
    manifests = {"training": [claim("wla-data")] + train_manifests(checkpoint_claim=False), "checkpoint": []}
    out = run_module(cluster, tmp_path, "emptydir", manifests=manifests,
                     steps=["training-window", "checkpoint-restore"])
    window, restore = out["results"]
    assert window["status"] == "PASS", window
    assert restore["status"] == "FAIL"
    assert restore["summary"] == ("restored from step 0: /checkpoints is not a persistent volume: volume checkpoints "
                                  "mounted at /checkpoints is emptyDir"), restore
    assert restore["figures"]["resumed_step"] == 0
    wait("the run's objects to go", lambda: not objects_left(cluster) and not left_claims(cluster))


def test_a_checkpoint_claim_that_does_not_exist_keeps_the_job_from_starting(cluster, tmp_path):
    manifests = {"training": [claim("wla-data")] + train_manifests(), "checkpoint": []}
    out = run_module(cluster, tmp_path, "no-claim", manifests=manifests, queue_timeout=3,
                     steps=["queued-job", "training-window", "checkpoint-restore"])
    queued, window, restore = out["results"]
    assert queued["status"] == "FAIL"
    assert queued["summary"].startswith("the default scheduler (no queue backend) did not start Job wla-train within "
                                        "3 s: last reason pod wla-train-"), queued["summary"]
    assert 'persistentvolumeclaim "wla-checkpoints" not found' in queued["summary"]
    assert (window["status"], restore["status"]) == ("SKIP", "SKIP")
    assert restore["summary"] == "needs training-window, which was skipped"
    wait("the run's objects to go", lambda: not objects_left(cluster) and not left_claims(cluster))


def test_a_source_that_is_not_there_fails_the_stage_naming_it(cluster, tmp_path):
    sources = SOURCES[:1] + ["weights=https://models.example.com/missing.safetensors"]
    out = run_module(cluster, tmp_path, "stage-404", manifests={"data": data_manifests(sources)},
                     steps=["data-staged"])
    result = out["results"][0]
    assert result["status"] == "FAIL"
    assert result["summary"] == ("staging weights from https://models.example.com/missing.safetensors failed: "
                                 "HTTP Error 404: Not Found")
    assert result["figures"]["sources"][0]["bytes"] == 2147483648
    wait("the run's objects to go", lambda: not objects_left(cluster) and not left_claims(cluster))


def test_check_mode_creates_nothing(cluster, tmp_path):
    play = task_play(tmp_path / "check.yml", "skaffon.gpu_platform.workload_acceptance",
                     dict(namespace=NS, manifests={"nccl": nccl_manifests(GPU_NODES)}))
    res = run_playbook(play, cluster.env, check=True)
    assert res.rc == 0, res.stderr
    out = res.task_results("under test")[0]
    assert out["changed"] is False
    assert set(r["status"] for r in out["results"]) == {"SKIP"} and len(out["results"]) == 8
    assert out["results"][0]["summary"] == "check mode: no workload is created"
    assert objects_left(cluster) == []


# --- queued-job through Kueue -----------------------------------------------------------------

FLAVOR = "h100-nvlink-training"
KUEUE_HOSTS = {"gpu-h100-1": {
    "node_prereqs_pool": {"accelerator": "h100", "topology": "nvlink", "workload": "training"},
    "node_prereqs_pool_taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}]}}


def kueue_team(name):
    return {"name": name, "queue": {"cohort": "research", "flavors": [
        {"name": FLAVOR, "resources": {"nvidia.com/gpu": {"nominal": 4}}}]}}


@pytest.fixture(scope="module")
def kueue(tmp_path_factory):
    from kit.queues import inventory, play, start_cluster
    sim = start_cluster(tmp_path_factory, "wla-kueue")
    try:
        inv = inventory(tmp_path_factory.mktemp("inv"), {
            "tenants_queue_backend": "kueue", "queues_chart_source": "archive", "queues_chart_ref": KUEUE_CHART,
            "queues_chart_version": "0.19.2", "queues_wait_timeout": 120,
            "tenants_list": [kueue_team("team-a"), kueue_team("team-b")]}, KUEUE_HOSTS)
        res = play(sim, inv, queues_helm_binary=os.path.join(BIN, "helm4"))
        assert res.rc == 0, res
    except Exception:
        sim.stop()
        raise
    yield sim
    sim.stop()


def training_manifests(nodes, gpus):
    """A training Job as the training template renders it for Kueue (suspended, LocalQueue label)."""
    name = "wla-train"
    labels = {"kueue.x-k8s.io/queue-name": "team-a", "app.kubernetes.io/component": "trainer"}
    container = {"name": "trainer", "image": "registry.example.com/ml/train:1.4", "command": ["sleep", "3600"],
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
         "spec": {"clusterIP": "None", "selector": {"job-name": name}, "ports": [{"port": 29500}]}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": dict(labels)},
         "spec": {"suspend": True, "completionMode": "Indexed", "completions": nodes, "parallelism": nodes,
                  "backoffLimit": 3, "template": {
                      "metadata": {"labels": dict(labels),
                                   "annotations": {"simcluster.skaffon.io/behaviour": "run"}},
                      "spec": {"restartPolicy": "Never", "subdomain": name, "containers": [container]}}}},
    ]


def test_queued_job_admitted_by_kueue_with_the_reason(kueue, tmp_path):
    out = run_module(kueue, tmp_path, "kueue-admit", steps=["queued-job"], queue_backend="kueue",
                     manifests={"training": training_manifests(1, 4)})
    result = out["results"][0]
    assert result["status"] == "PASS", result
    assert result["figures"]["admission_reason"] == "Admitted" and result["figures"]["queue"] == "team-a"
    assert 0 < result["figures"]["wait_seconds"] <= TIMEOUTS["queue_timeout"]
    assert "Kueue LocalQueue team-a" in result["summary"]
    assert "Quota reserved in ClusterQueue team-a" in result["summary"]
    assert "on gpu-h100-1" in result["summary"]


def test_queued_job_never_admitted_names_the_queue_and_the_reason(kueue, tmp_path):
    # 12 GPUs: more than team-a's 4 plus the 4 team-b lends, never admitted
    out = run_module(kueue, tmp_path, "kueue-never", steps=["queued-job", "training-window"],
                     queue_backend="kueue", queue_timeout=5, manifests={"training": training_manifests(3, 4)})
    first, second = out["results"]
    assert first["status"] == "FAIL", first
    assert first["summary"].startswith("Kueue LocalQueue team-a did not admit Job wla-train within 5 s: last reason "), \
        first["summary"]
    assert "nvidia.com/gpu" in first["summary"]
    assert second["status"] == "SKIP" and second["summary"] == "needs queued-job, which failed"
    from kit.kubectl import kget
    assert not (kget(kueue, "jobs", "-n", NS) or {}).get("items")


# --- queued-job through KAI -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def kai(tmp_path_factory):
    from kit.queues import inventory, play, start_cluster
    sim = start_cluster(tmp_path_factory, "wla-kai")
    try:
        inv = inventory(tmp_path_factory.mktemp("inv"), {
            "tenants_queue_backend": "kai", "queues_chart_source": "archive", "queues_chart_ref": KAI_CHART,
            "queues_chart_version": "v0.17.0", "queues_wait_timeout": 120,
            "queues_departments": [{"name": "research", "gpu": {"quota": 4}}],
            "tenants_list": [{"name": "team-a", "queue": {"parent": "research", "gpu": {"quota": 2}}},
                             {"name": "team-c", "queue": {"parent": "research", "gpu": {"quota": 0, "limit": 4}}}]})
        res = play(sim, inv, queues_helm_binary=os.path.join(BIN, "helm4"))
        assert res.rc == 0, res
    except Exception:
        sim.stop()
        raise
    yield sim
    sim.stop()


def kai_training(team, pods, gpus):
    """The training Job as the template renders it for KAI: the queue label, kai-scheduler, a gang."""
    body = training_manifests(pods, gpus)
    job = body[1]
    for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
        labels.pop("kueue.x-k8s.io/queue-name")
        labels["kai.scheduler/queue"] = team
    job["metadata"]["annotations"] = {"kai.scheduler/batch-min-member": str(pods)}
    del job["spec"]["suspend"]
    job["spec"]["template"]["spec"]["schedulerName"] = "kai-scheduler"
    job["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "gpu.skaffon.io/workload", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]
    return body


def test_queued_job_gang_bound_by_kai(kai, tmp_path):
    out = run_module(kai, tmp_path, "kai-bound", steps=["queued-job"], queue_backend="kai", namespace="team-a",
                     manifests={"training": kai_training("team-a", 2, 1)})
    result = out["results"][0]
    assert result["status"] == "PASS", result
    assert result["figures"]["queue"] == "team-a" and result["figures"]["admission_reason"] == "Scheduled"
    assert "admitted by KAI queue team-a" in result["summary"]
    assert "all 2 pods bound by kai-scheduler" in result["summary"]


def test_queued_job_kai_gang_that_never_fits_names_the_queue_and_kais_message(kai, tmp_path):
    out = run_module(kai, tmp_path, "kai-never", steps=["queued-job"], queue_backend="kai", namespace="team-c",
                     queue_timeout=5, manifests={"training": kai_training("team-c", 2, 4)})
    result = out["results"][0]
    assert result["status"] == "FAIL", result
    assert result["summary"].startswith("KAI queue team-c did not start Job wla-train within 5 s: last reason pod "
                                        "wla-train-"), result["summary"]
    assert "Unschedulable" in result["summary"]
