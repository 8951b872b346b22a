"""Workload acceptance steps 1-5 on the unit tests' FakeKube, driven by a small job controller.

Cluster below plays what the API server's controllers and the pods' programs do between two
reads (each ctx.sleep): Kueue's Workload and admission, the Job controller's Indexed pods, GC of
a deleted Job's pods, the programs' JSON-lines logs (stage.py, train.py per the contract) and
nccl-tests' output (real outputs from tests/unit/fixtures/nccl, see SOURCES.md there).
"""

import copy
import itertools
import json
import os

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import runner
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import allreduce, lines, training
# imported for their @step functions (data-staged)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import data as data_step  # noqa: F401 pylint: disable=unused-import
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import queue as queue_step  # noqa: F401
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube

HERE = os.path.dirname(os.path.abspath(__file__))
NCCL = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "nccl"))
NS = "team-a"
NODES = ["gpu-h100-1", "gpu-h100-2", "gpu-h100-3", "gpu-h100-4"]
T0 = 1764662400.0
INDEX = "batch.kubernetes.io/job-completion-index"


def nccl_text(name="all_reduce__bdf__16-ranks-2-hosts__h100.txt", avg=None):
    with open(os.path.join(NCCL, name)) as handle:
        text = handle.read()
    if avg is not None:
        # a slower ring: same table, lower average (what parse() compares)
        text = text.replace("# Avg bus bandwidth    : 70.742", "# Avg bus bandwidth    : %s" % avg)
    return text


def jl(event, time, **fields):
    return json.dumps(dict(event=event, time=round(time, 3), **fields))


class Clock(object):
    def __init__(self):
        self.now = T0

    def __call__(self):
        return self.now


class Cluster(object):
    """Controllers and programs between two reads; programs[job name prefix](cluster, pod, age) -> (log, phase)."""

    def __init__(self, backend="none", admit_after=0, admit=True, programs=None, unschedulable=None,
                 job_controller_lag=0):
        self.kube = FakeKube()
        self.job_controller_lag = job_controller_lag   # passes between the pods' end and the Job's condition
        self.clock = Clock()
        self.backend = backend
        self.admit_after = admit_after
        self.admit = admit
        self.programs = programs or {}
        self.unschedulable = unschedulable
        self.checkpoints = {}
        self.started = {}
        self.uids = itertools.count(1)
        self.ticks = 0

    def sleep(self, seconds):
        self.clock.now += seconds
        self.ticks += 1
        self.reconcile()

    def objects(self, kind):
        return [o for (k, _ns, _n), o in sorted(self.kube.objects.items()) if k == kind]

    def pods_of(self, name):
        return [p for p in self.objects("Pod") if p["metadata"]["labels"].get("batch.kubernetes.io/job-name") == name]

    def reconcile(self):
        jobs = dict((j["metadata"]["name"], j) for j in self.objects("Job"))
        self.most_pair_jobs = max(getattr(self, "most_pair_jobs", 0), sum(1 for n in jobs if "-pair" in n))
        for pod in self.objects("Pod"):
            if pod["metadata"]["labels"].get("batch.kubernetes.io/job-name") not in jobs:
                self.kube.objects.pop(("Pod", NS, pod["metadata"]["name"]))
        for name, job in jobs.items():
            job["_passes"] = job.get("_passes", 0) + 1
            if self.backend == "kueue":
                self.kueue(job)
            if job["spec"].get("suspend"):
                continue
            self.job_controller(job)

    def kueue(self, job):
        name = job["metadata"]["name"]
        key = ("Workload", NS, "job-%s-1a2b3" % name)
        wl = self.kube.objects.get(key) or {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": key[2], "namespace": NS,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "controller": True}]},
            "status": {}}
        if self.admit and job["_passes"] >= self.admit_after:   # one pass a second
            wl["status"]["conditions"] = [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue team-a-cq"},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"}]
            job["spec"]["suspend"] = False
        else:
            wl["status"]["conditions"] = [
                {"type": "QuotaReserved", "status": "False", "reason": "Pending",
                 "message": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
                            "in flavor h100, 16 more needed"}]
        self.kube.put(wl)

    def job_controller(self, job):
        name = job["metadata"]["name"]
        spec = job["spec"]
        size = min(spec.get("parallelism", 1), spec.get("completions", 1))
        pods = self.pods_of(name)
        have = set(int(p["metadata"]["annotations"][INDEX]) for p in pods)
        template = spec["template"]["spec"]
        affinity = template.get("affinity", {}).get("nodeAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms")
        nodes = affinity[0]["matchExpressions"][-1]["values"] if affinity else NODES
        for index in range(size):
            if index in have:
                continue
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "%s-%d-%05d" % (name, index, next(self.uids)), "namespace": NS,
                                "uid": "uid-%d" % next(self.uids),
                                "labels": dict(spec["template"]["metadata"].get("labels") or {},
                                               **{"batch.kubernetes.io/job-name": name, INDEX: str(index)}),
                                "annotations": {INDEX: str(index)}},
                   "spec": copy.deepcopy(template), "status": {"phase": "Pending"}}
            problem = self.unschedulable(pod) if self.unschedulable else None
            if problem:
                pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                "message": problem}]
            else:
                pod["spec"]["nodeName"] = nodes[index % len(nodes)]
                pod["status"]["phase"] = "Running"
                self.started[pod["metadata"]["uid"]] = self.clock.now
            self.kube.put(pod)
        for pod in self.pods_of(name):
            uid = pod["metadata"]["uid"]
            if uid not in self.started or pod["status"]["phase"] != "Running":
                continue
            program = next((fn for prefix, fn in self.programs.items() if name.startswith(prefix)), None)
            if program is None:
                continue
            text, phase = program(self, pod, self.clock.now - self.started[uid])
            self.kube.logs[(NS, pod["metadata"]["name"])] = text
            pod["status"]["phase"] = phase
            self.kube.put(pod)
        pods = self.pods_of(name)
        if pods and all(p["status"]["phase"] == "Succeeded" for p in pods):
            job["_ended"] = job.get("_ended", 0) + 1
            if job["_ended"] > self.job_controller_lag:
                job.setdefault("status", {})["conditions"] = [{"type": "Complete", "status": "True"}]
        elif any(p["status"]["phase"] == "Failed" for p in pods):
            job.setdefault("status", {})["conditions"] = [{"type": "Failed", "status": "True",
                                                           "reason": "BackoffLimitExceeded"}]
        self.kube.put(job)

    def context(self, **params):
        base = dict(namespace=NS, queue_backend=self.backend, pod_timeout=30, queue_timeout=60, stage_timeout=120,
                    benchmark_timeout=60, checkpoint_timeout=60, training_window_seconds=20, min_busbw_fraction=0.8,
                    scripts={"train.py": "print()", "stage.py": "print()"}, manifests=manifests())
        base.update(params)
        return runner.Context(self.kube, base, clock=self.clock, sleep=self.sleep, run_label="wla-test")


# --- manifests as the role renders them (trimmed to what the steps read) ---------------------

def job(name, command, gpus=0, size=1, labels=None, volumes=(), mounts=(), annotations=None, suspend=False):
    container = {"name": "main", "image": "registry.example.com/ml/train:1.4", "command": command,
                 "resources": {"limits": {"nvidia.com/gpu": gpus}} if gpus else {},
                 "volumeMounts": [dict(m) for m in mounts]}
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
            "spec": {"completionMode": "Indexed", "parallelism": size, "completions": size, "backoffLimit": 3,
                     "template": {"metadata": {"labels": dict(labels or {})},
                                  "spec": {"restartPolicy": "Never", "subdomain": name, "containers": [container],
                                           "volumes": [dict(v) for v in volumes]}}}}
    if suspend:
        body["spec"]["suspend"] = True
    return body


def pvc(name):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}}},
            "status": {"phase": "Bound"}}


def service(name):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"clusterIP": "None", "selector": {"job-name": name}, "ports": [{"port": 29500}]}}


QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}
CKPT_MOUNT = {"name": "checkpoints", "mountPath": "/checkpoints"}
TRAIN_CMD = ["torchrun", "--nnodes=2", "--nproc-per-node=8", "/opt/skaffon/acceptance/train.py", "--data", "/data",
             "--checkpoint-dir", "/checkpoints", "--checkpoint-every", "10", "--seconds", "600"]
NCCL_CMD = ["/bin/bash", "-c", 'if [ "$JOB_COMPLETION_INDEX" = "0" ]; then mpirun --allow-run-as-root -np 32 -N 8 '
            "--hostfile /etc/mpi/hostfile all_reduce_perf -b 8 -e 8G -f 2 -g 1 -c 1; else /usr/sbin/sshd -D -e; fi"]


def manifests(checkpoint="claim", queue=None):
    labels = dict(queue or {})
    suspend = bool(queue)
    if checkpoint == "claim":
        volumes = [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": "wla-checkpoints"}}]
        ckpt = [pvc("wla-checkpoints")]
    elif checkpoint == "missing":
        volumes = [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": "wla-checkpoints"}}]
        ckpt = []
    else:
        volumes = [{"name": "checkpoints", "emptyDir": {}}]
        ckpt = []
    return {
        "training": [service("wla-train"), job("wla-train", TRAIN_CMD, gpus=8, size=2, labels=labels,
                                               volumes=volumes, mounts=[CKPT_MOUNT], suspend=suspend)],
        "checkpoint": ckpt,
        "data": [pvc("wla-data"), job("wla-stage", ["python3", "/opt/skaffon/acceptance/stage.py", "--dest", "/data"],
                                      labels=labels, suspend=suspend)],
        "nccl": [service("wla-nccl"), job("wla-nccl", NCCL_CMD, gpus=8, size=4, labels=labels, suspend=suspend)],
    }


# --- the programs ---------------------------------------------------------------------------

def stage_program(sources, fail=None):
    def program(cluster, pod, age):
        out, t = ["Collecting sources"], cluster.started[pod["metadata"]["uid"]]
        total_b = total_s = 0
        for name, url, size, seconds in sources:
            t += seconds
            if age < t - cluster.started[pod["metadata"]["uid"]]:
                return "\n".join(out), "Running"
            if fail == name:
                out.append(jl("stage-failed", t, name=name, url=url, error="HTTP Error 404: Not Found"))
                return "\n".join(out), "Failed"
            out.append(jl("staged", t, name=name, url=url, bytes=size, seconds=seconds))
            total_b, total_s = total_b + size, total_s + seconds
        out.append(jl("stage-done", t, bytes=total_b, seconds=total_s))
        return "\n".join(out), "Succeeded"
    return program


def train_program(step_seconds=0.5, samples=64, every=10, load_seconds=2.0):
    """train.py: resume from the claim's checkpoint (or start at 0), a step per step_seconds, a checkpoint every `every`."""
    def program(cluster, pod, age):
        if pod["metadata"]["annotations"][INDEX] != "0":
            return "", "Running"
        uid = pod["metadata"]["uid"]
        start = cluster.started[uid]
        vol = next(v for v in pod["spec"]["volumes"] if v["name"] == "checkpoints")
        key = (NS, vol["persistentVolumeClaim"]["claimName"]) if "persistentVolumeClaim" in vol else uid
        begin = cluster.checkpoints.setdefault(("begin", uid), cluster.checkpoints.get(key, 0))
        out = ["W1202 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process"]
        t = start + 1.0
        if begin:
            out.append("[default0]:" + jl("resume", t, step=begin, path="/checkpoints/step-%d.pt" % begin,
                                          seconds=load_seconds))
            t += load_seconds
        else:
            out.append(jl("start", t, step=0, reason="no checkpoint in /checkpoints"))
        n = begin
        while t + step_seconds <= start + age:
            t += step_seconds
            n += 1
            out.append(jl("step", t, step=n, samples=samples, loss=round(2.0 / n, 4)))
            if n % every == 0:
                out.append(jl("checkpoint", t, step=n, path="/checkpoints/step-%d.pt" % n, bytes=1073741824,
                              seconds=0.5))
                cluster.checkpoints[key] = n
        return "\n".join(out), "Running"
    return program


def nccl_program(text_for):
    def program(cluster, pod, age):
        if pod["metadata"]["annotations"][INDEX] != "0":
            return "Server listening on 0.0.0.0 port 22.", "Running" if age < 2 else "Succeeded"
        if age < 1:
            return "", "Running"
        job = pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]
        nodes = sorted(p["spec"]["nodeName"] for p in cluster.pods_of(job))
        text, phase = text_for(nodes)
        return text, phase
    return program


# --- queued-job -------------------------------------------------------------------------------

def test_queued_job_default_scheduler_admits_when_all_pods_are_bound_then_removes_the_job():
    cluster = Cluster(programs={"wla-train": train_program()})
    result = runner.run(cluster.context(), ["queued-job"])[0]
    assert result.status == runner.PASS, result.summary
    assert result.figures["admission_reason"] == "Scheduled"
    assert result.figures["wait_seconds"] == 1.0
    assert "all 2 pods bound by default-scheduler" in result.summary
    assert "gpu-h100-1, gpu-h100-2" in result.summary
    # the Job is gone before the next step (its GPUs are needed), the claim and the Service lived to the end
    deletes = [(c.kind, c.name) for c in cluster.kube.writes() if c.verb == "DELETE"]
    assert deletes[0] == ("Job", "wla-train")
    assert ("PersistentVolumeClaim", "wla-checkpoints") in deletes and ("ConfigMap", "wla-scripts") in deletes
    created = [c for c in cluster.kube.calls if c.verb in ("CREATE", "APPLY")]
    assert [(c.kind, c.name) for c in created][:4] == [("ConfigMap", "wla-scripts"), (
        "PersistentVolumeClaim", "wla-checkpoints"), ("Service", "wla-train"), ("Job", "wla-train")]


def test_queued_job_objects_carry_the_run_label_on_the_pods_too():
    cluster = Cluster()
    ctx = cluster.context(steps=["queued-job"])
    queue_step.submit(ctx, queue_step.training_objects(ctx), "training")
    job = cluster.kube.get("batch/v1", "Job", "wla-train", NS)
    assert job["metadata"]["labels"][runner.RUN_LABEL] == "wla-test"
    assert job["spec"]["template"]["metadata"]["labels"][runner.RUN_LABEL] == "wla-test"
    assert all(p["metadata"]["labels"][runner.RUN_LABEL] == "wla-test" for p in cluster.objects("Pod"))


def test_queued_job_kueue_wait_is_creation_to_unsuspend_with_the_workload_reason():
    cluster = Cluster(backend="kueue", admit_after=3)
    result = runner.run(cluster.context(manifests=manifests(queue=QUEUE)), ["queued-job"])[0]
    assert result.status == runner.PASS, result.summary
    assert result.figures["wait_seconds"] == 3.0
    assert result.figures["admission_reason"] == "Admitted"
    assert result.figures["queue"] == "team-a"
    assert "Kueue LocalQueue team-a" in result.summary and "Quota reserved in ClusterQueue team-a-cq" in result.summary


def test_queued_job_never_admitted_fails_naming_the_queue_and_the_last_reason():
    cluster = Cluster(backend="kueue", admit=False)
    result = runner.run(cluster.context(manifests=manifests(queue=QUEUE), queue_timeout=10),
                        ["queued-job", "training-window", "checkpoint-restore"])
    assert result[0].status == runner.FAIL
    assert result[0].summary.startswith("Kueue LocalQueue team-a did not admit Job wla-train within 10 s: last reason "
                                        "Pending: couldn't assign flavors to pod set main: insufficient unused quota")
    assert [r.status for r in result[1:]] == [runner.SKIP, runner.SKIP]
    assert result[1].summary == "needs queued-job, which failed"
    # the suspended Job is removed at the end all the same
    assert cluster.kube.get("batch/v1", "Job", "wla-train", NS) is None


def test_queued_job_pods_that_never_bind_fail_with_the_schedulers_message():
    msg = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available"
    cluster = Cluster(backend="kai", unschedulable=lambda pod: "Unschedulable: " + msg)
    result = runner.run(cluster.context(queue_timeout=5), ["queued-job"])[0]
    assert result.status == runner.FAIL
    assert "KAI (the Job names no queue" in result.summary
    assert msg in result.summary and "pod wla-train-0-" in result.summary


# --- data-staged ------------------------------------------------------------------------------

SOURCES = [("sample", "https://data.example.com/sample.tar", 2147483648, 4.3),
           ("weights", "https://models.example.com/base.safetensors", 536870912, 1.1)]


def test_data_staged_reports_bytes_and_seconds_per_source():
    cluster = Cluster(programs={"wla-stage": stage_program(SOURCES)})
    result = runner.run(cluster.context(), ["data-staged"])[0]
    assert result.status == runner.PASS, (result.summary, result.evidence)
    assert result.figures["bytes"] == 2147483648 + 536870912
    assert result.figures["seconds"] == 5.4
    assert [s["name"] for s in result.figures["sources"]] == ["sample", "weights"]
    assert result.figures["sources"][0]["mbps"] == 499.4
    assert any("staged sample from https://data.example.com/sample.tar: 2147483648 bytes" in e for e in result.evidence)


def test_data_staged_waits_for_the_job_controller_after_the_pod_succeeded():
    # the pod's Succeeded lands seconds before the Job's Complete condition (a busy controller manager)
    cluster = Cluster(programs={"wla-stage": stage_program(SOURCES)}, job_controller_lag=3)
    result = runner.run(cluster.context(), ["data-staged"])[0]
    assert result.status == runner.PASS, (result.summary, result.evidence)
    assert result.figures["bytes"] == 2147483648 + 536870912


def test_data_staged_fails_naming_the_url_and_the_error():
    cluster = Cluster(programs={"wla-stage": stage_program(SOURCES, fail="weights")})
    result = runner.run(cluster.context(), ["data-staged"])[0]
    assert result.status == runner.FAIL
    assert result.summary == ("staging weights from https://models.example.com/base.safetensors failed: "
                              "HTTP Error 404: Not Found")
    assert result.figures["sources"][0]["name"] == "sample"


# --- nccl-allreduce -----------------------------------------------------------------------------

def test_nccl_allreduce_passes_with_rows_and_average_against_the_expectation():
    cluster = Cluster(programs={"wla-nccl": nccl_program(lambda nodes: (nccl_text(), "Succeeded"))})
    result = runner.run(cluster.context(expected_busbw_gbps=80.0), ["nccl-allreduce"])[0]
    assert result.status == runner.PASS, (result.summary, result.evidence)
    assert result.figures["avg_busbw_gbps"] == 70.742 and result.figures["expected_busbw_gbps"] == 80.0
    assert len(result.figures["rows"]) == 31
    assert result.figures["rows"][-1] == {
        "size": 8589934592, "type": "float", "redop": "sum", "time_us": 47535.0, "algbw_gbps": 180.71,
        "busbw_gbps": 338.82, "in_place_busbw_gbps": 337.35, "wrong": 0, "in_place_wrong": 0}
    assert result.figures["nodes"] == NODES
    assert cluster.kube.get("batch/v1", "Job", "wla-nccl", NS) is None   # removed within the step


def test_nccl_allreduce_names_the_slow_node_from_pair_runs():
    slow = "gpu-h100-3"

    def text(nodes):
        return nccl_text(avg=17.7 if slow in nodes else None), "Succeeded"
    cluster = Cluster(programs={"wla-nccl": nccl_program(text)})
    result = runner.run(cluster.context(expected_busbw_gbps=80.0), ["nccl-allreduce"])[0]
    assert result.status == runner.FAIL
    assert result.summary.startswith("avg bus bandwidth 17.7 GB/s is below 64.0 GB/s (0.8 x expected 80.0 GB/s) on "
                                     "the nodes gpu-h100-1, gpu-h100-2, gpu-h100-3, gpu-h100-4")
    assert result.summary.endswith("; slow node gpu-h100-3 (every pair with it is slow)")
    assert result.figures["bad_nodes"] == [slow]
    pairs = [e for e in result.evidence if e.startswith("pair ")]
    # round 1: disjoint pairs; round 2: each node of the bad pair with a node of the good pair
    assert [p.split(":")[0] for p in pairs] == [
        "pair gpu-h100-1+gpu-h100-2 on gpu-h100-1, gpu-h100-2", "pair gpu-h100-3+gpu-h100-4 on gpu-h100-3, gpu-h100-4",
        "pair gpu-h100-3+gpu-h100-1 on gpu-h100-1, gpu-h100-3", "pair gpu-h100-4+gpu-h100-2 on gpu-h100-2, gpu-h100-4"]
    assert cluster.most_pair_jobs == 2      # the two pairs of a round ran at the same time
    assert not cluster.objects("Job")


def test_pair_rounds_never_put_a_node_in_two_runs_at_once():
    assert allreduce.rounds([("a", "b"), ("c", "d"), ("e", "a")]) == [[("a", "b"), ("c", "d")], [("e", "a")]]
    assert allreduce.rounds([("c", "a"), ("d", "a"), ("e", "b")]) == [[("c", "a"), ("e", "b")], [("d", "a")]]


def test_nccl_allreduce_wrong_results_fail_naming_the_nodes():
    bad = "gpu-h100-2"

    def text(nodes):
        if bad in nodes:
            return nccl_text("all_reduce__wrong-results__2-hosts__oob-108.txt"), "Failed"
        return nccl_text(), "Succeeded"
    cluster = Cluster(programs={"wla-nccl": nccl_program(text)})
    result = runner.run(cluster.context(expected_busbw_gbps=80.0), ["nccl-allreduce"])[0]
    assert result.status == runner.FAIL
    assert result.summary.startswith("wrong results from all_reduce_perf (")
    assert "on the nodes gpu-h100-1, gpu-h100-2, gpu-h100-3, gpu-h100-4" in result.summary
    assert result.summary.endswith("; node gpu-h100-2 gives wrong results (every pair with it does)")


def test_pair_objects_pin_two_nodes_and_scale_mpirun():
    ctx = Cluster().context()
    objs = allreduce.objects.prepare(ctx, manifests()["nccl"], "nccl")
    svc, pair_job = allreduce.pair_objects(objs, ("gpu-h100-3", "gpu-h100-1"), 2)
    assert svc["metadata"]["name"] == "wla-nccl-pair2" and svc["spec"]["selector"] == {"job-name": "wla-nccl-pair2"}
    spec = pair_job["spec"]
    assert (spec["parallelism"], spec["completions"], spec["template"]["spec"]["subdomain"]) == (2, 2, "wla-nccl-pair2")
    assert spec["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-h100-3", "gpu-h100-1"]}]}]}
    assert "mpirun --allow-run-as-root -np 16 -N 8" in spec["template"]["spec"]["containers"][0]["command"][2]
    assert objs[1]["spec"]["parallelism"] == 4   # the original is untouched


def test_pair_objects_spread_the_copy_by_its_own_name():
    """One pod per node: the copy's anti-affinity selects the copy's pods, not the original Job's."""
    ctx = Cluster().context()
    objs = allreduce.objects.prepare(ctx, manifests()["nccl"], "nccl")
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {
        "matchLabels": {"job-name": "wla-nccl"},
        "matchExpressions": [{"key": "job-name", "operator": "In", "values": ["wla-nccl", "other"]}]}}
    objs[1]["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    pair_job = allreduce.pair_objects(objs, ("gpu-h100-1", "gpu-h100-2"), 3)[1]
    copied = pair_job["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]
    assert copied["matchLabels"] == {"job-name": "wla-nccl-pair3"}
    assert copied["matchExpressions"][0]["values"] == ["wla-nccl-pair3", "other"]
    assert term["labelSelector"]["matchLabels"] == {"job-name": "wla-nccl"}    # the original is untouched
    # the list form: mpirun's -np scaled, all_reduce_perf's own -n (iterations) kept
    objs[1]["spec"]["template"]["spec"]["containers"][0]["command"] = [
        "mpirun", "-np", "32", "-N", "8", "all_reduce_perf", "-b", "8", "-e", "8G", "-n", "20"]
    pair_job = allreduce.pair_objects(objs, ("gpu-h100-1", "gpu-h100-2"), 1)[1]
    assert pair_job["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "mpirun", "-np", "16", "-N", "8", "all_reduce_perf", "-b", "8", "-e", "8G", "-n", "20"]


def test_pair_objects_rewrite_a_hostfile_the_launcher_writes():
    # the shape of docs/templates/nccl-allreduce-job.yaml.j2: the launcher lists <job>-$i.<service> itself
    script = ('if [ "$JOB_COMPLETION_INDEX" = "0" ]; then for i in $(seq 0 3); do echo "wla-nccl-$i.wla-nccl slots=8"; '
              'done > /tmp/hostfile; mpirun -np 32 -N 8 --hostfile /tmp/hostfile -x NCCL_DEBUG=INFO all_reduce_perf '
              '-b 8 -e 8G -f 2 -g 1 -c 1 -n 20; else /usr/sbin/sshd -D -e -p 2222; fi')
    body = manifests()["nccl"]
    body[1]["spec"]["template"]["spec"]["containers"][0].update(command=["/bin/bash", "-c"], args=[script])
    objs = allreduce.objects.prepare(Cluster().context(), body, "nccl")
    args = allreduce.pair_objects(objs, ("gpu-h100-1", "gpu-h100-2"), 1)[1]["spec"]["template"]["spec"][
        "containers"][0]["args"][0]
    assert args == script.replace("seq 0 3", "seq 0 1").replace("wla-nccl-$i.wla-nccl", "wla-nccl-pair1-$i.wla-nccl-pair1") \
        .replace("-np 32", "-np 16")


# --- training-window and checkpoint-restore ---------------------------------------------------------

def test_training_window_throughput_from_the_step_lines():
    cluster = Cluster(programs={"wla-train": train_program()})
    ctx = cluster.context()
    result = runner.run(ctx, ["training-window"])[0]
    assert result.status == runner.PASS, (result.summary, result.evidence)
    # 64 samples every 0.5 s; the window runs from the first step line 20 s on
    assert result.figures["throughput_samples_per_s"] == 128.0
    assert result.figures["steps"] == 41 and result.figures["samples"] == 2560 and result.figures["seconds"] == 20.0
    assert result.figures["gpus"] == 16 and result.figures["gpu_seconds"] == 320.0
    tr = ctx.state["training"]
    assert (tr["job"], tr["namespace"], tr["units"], tr["throughput"], tr["gpus"]) == ("wla-train", NS, 2560, 128.0, 16)
    assert tr["nodes"] == ["gpu-h100-1", "gpu-h100-2"] and tr["ended"] - tr["started"] == 20.0


def test_checkpoint_restore_resumes_from_the_claim_and_times_the_recovery():
    cluster = Cluster(programs={"wla-train": train_program()})
    results = runner.run(cluster.context(), ["training-window", "checkpoint-restore"])
    result = results[1]
    assert result.status == runner.PASS, (result.summary, result.evidence)
    figures = result.figures
    assert figures["checkpoint_seconds"] == 0.5 and figures["checkpoint_step"] % 10 == 0
    assert figures["resumed_step"] == figures["checkpoint_step"]
    # delete -> replacement created on the next pass (1 s), started 1 s later, loads 2 s, first step 0.5 s later
    assert figures["recovery_seconds"] == 4.5
    assert figures["restore_seconds"] == 2.0
    assert any(e.startswith("checkpoint directory /checkpoints of pod wla-train-0-") and
               e.endswith("on a bound PersistentVolumeClaim") for e in result.evidence)
    assert sum(1 for c in cluster.kube.writes() if c.verb == "DELETE" and c.kind == "Pod") == 1


def test_checkpoint_on_an_empty_dir_restores_from_step_0_with_the_cause():
    cluster = Cluster(programs={"wla-train": train_program()})
    result = runner.run(cluster.context(manifests=manifests(checkpoint="emptydir")),
                        ["training-window", "checkpoint-restore"])[1]
    assert result.status == runner.FAIL
    assert result.summary == ("restored from step 0: /checkpoints is not a persistent volume: volume checkpoints "
                              "mounted at /checkpoints is emptyDir")
    assert result.figures["resumed_step"] == 0


def test_checkpoint_claim_that_is_not_bound_is_the_cause():
    cluster = Cluster(programs={"wla-train": train_program()})
    ctx = cluster.context()
    pending = pvc("wla-checkpoints")
    pending["metadata"]["namespace"] = NS
    pending["status"] = {"phase": "Pending"}
    cluster.kube.put(pending)
    cluster.kube.put({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "wla-checkpoints.1", "namespace": NS},
                      "involvedObject": {"kind": "PersistentVolumeClaim", "name": "wla-checkpoints"},
                      "reason": "ProvisioningFailed", "lastTimestamp": "2026-12-02T08:00:00Z",
                      "message": 'storageclass.storage.k8s.io "fast-nvme" not found'})
    pod = {"metadata": {"namespace": NS}, "spec": {
        "containers": [{"volumeMounts": [CKPT_MOUNT]}],
        "volumes": [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": "wla-checkpoints"}}]}}
    assert training.persistence_problem(ctx, pod, "/checkpoints") == (
        '/checkpoints is on claim wla-checkpoints, which is Pending: ProvisioningFailed: storageclass.storage.k8s.io '
        '"fast-nvme" not found')
    cluster.kube.delete("v1", "PersistentVolumeClaim", "wla-checkpoints", NS)
    assert training.persistence_problem(ctx, pod, "/checkpoints") == (
        "/checkpoints is on claim wla-checkpoints, which does not exist")
    assert training.persistence_problem(ctx, {"spec": {"containers": [{}]}}, "/ckpt") == (
        "/ckpt is not a persistent volume: it is in the container's own filesystem")


def test_no_checkpoint_within_the_timeout_fails():
    cluster = Cluster(programs={"wla-train": train_program(every=100000)})
    result = runner.run(cluster.context(checkpoint_timeout=5), ["training-window", "checkpoint-restore"])[1]
    assert result.status == runner.FAIL
    assert result.summary.startswith("no checkpoint written within 5 s by wla-train-0-")
    assert result.summary.endswith("(directory /checkpoints)")


def test_checkpoint_dir_is_read_from_the_program_arguments():
    pod = {"spec": {"containers": [{"command": ["/bin/sh", "-c", "torchrun train.py --checkpoint-dir=/ckpt/run1 --seconds 9"]}]}}
    assert training.checkpoint_dir(pod) == "/ckpt/run1"
    pod = {"spec": {"containers": [{"env": [{"name": "CHECKPOINT_DIR", "value": "/mnt/ck"}]}]}}
    assert training.checkpoint_dir(pod) == "/mnt/ck"


def test_lines_reader_takes_json_objects_behind_prefixes_and_skips_the_rest():
    text = "\n".join([
        "2026-12-02T08:00:00.1Z " + jl("step", 10.5, step=1, samples=64, loss=2.0),
        "[default0]:" + jl("checkpoint", 11, step=1, path="/c/1", bytes=5, seconds=0.2),
        "Traceback (most recent call last):",
        '{"event": "step", "time": 12.0, "step": 2, "sampl',   # cut while written
        '{"no_event": 1, "time": 3}',
        '{"event": "step", "time": "soon"}',
    ])
    found = lines.read(text)
    assert [(f["event"], f["time"]) for f in found] == [("step", 10.5), ("checkpoint", 11.0)]
    assert lines.first(found, "checkpoint", after=10.5)["step"] == 1
    assert lines.number({"bytes": "x"}, "bytes") == 0.0


def test_a_manifest_for_another_namespace_is_refused():
    ctx = Cluster().context()
    other = manifests()["nccl"]
    other[1]["metadata"]["namespace"] = "team-b"
    with pytest.raises(runner.DomainError) as err:
        allreduce.objects.prepare(ctx, other, "nccl")
    assert "manifests.nccl[1] (Job wla-nccl) is for namespace team-b" in err.value.msg


def test_training_that_crashes_before_a_step_fails_with_its_log():
    def crash(cluster, pod, age):
        text = "\n".join(["Traceback (most recent call last):", '  File "/opt/skaffon/acceptance/train.py", line 12',
                          "RuntimeError: No CUDA GPUs are available"])
        pod["status"]["containerStatuses"] = [{"name": "main", "state": {"terminated": {
            "exitCode": 1, "reason": "Error"}}}]
        return text, "Failed"
    cluster = Cluster(programs={"wla-train": crash})
    result = runner.run(cluster.context(), ["training-window", "checkpoint-restore"])
    assert result[0].status == runner.FAIL
    assert result[0].summary.startswith("the training Job wla-train printed 0 step lines before it ended (Failed): "
                                        "container main exited 1 (Error)")
    assert result[0].evidence[-1].endswith("RuntimeError: No CUDA GPUs are available")
    assert result[1].status == runner.SKIP


def test_nccl_launcher_without_a_table_fails_with_what_mpirun_said():
    orte = "\n".join(["ssh: Could not resolve hostname wla-nccl-3.wla-nccl: Name or service not known",
                      "ORTE was unable to reliably start one or more daemons."])
    cluster = Cluster(programs={"wla-nccl": nccl_program(lambda nodes: (orte, "Failed"))})
    result = runner.run(cluster.context(expected_busbw_gbps=80.0), ["nccl-allreduce"])[0]
    assert result.status == runner.FAIL
    assert result.summary.startswith("nccl-tests did not complete: the launcher pod wla-nccl-0-")
    assert result.summary.endswith("ended Failed without a result table: ssh: Could not resolve hostname "
                                   "wla-nccl-3.wla-nccl: Name or service not known | ORTE was unable to reliably "
                                   "start one or more daemons.")


def test_nccl_failure_after_the_header_is_the_runs_own_message():
    text = nccl_text("all_reduce__header-then-nccl-failure__2-gpus.txt")
    cluster = Cluster(programs={"wla-nccl": nccl_program(lambda nodes: (text, "Failed"))})
    result = runner.run(cluster.context(expected_busbw_gbps=80.0), ["nccl-allreduce"])[0]
    assert result.status == runner.FAIL
    assert "GENOA-06: Test NCCL failure common.cu:392" in result.summary
    assert not [e for e in result.evidence if e.startswith("pair ")]


def test_no_replacement_after_the_delete_fails_naming_what_was_seen():
    cluster = Cluster(programs={"wla-train": train_program()})
    ctx = cluster.context(checkpoint_timeout=5, pod_timeout=5)
    assert runner.run(ctx, ["training-window"])[0].status == runner.PASS
    # from now on the Job controller makes no pod (a Job that failed on the delete, backoffLimit 0)
    cluster.job_controller = lambda job: None
    result = runner.STEPS["checkpoint-restore"](ctx)
    assert result.status == runner.FAIL
    assert result.summary == "no replacement pod resumed within 10 s of the delete: no new pod"


def test_an_odd_node_count_pairs_the_last_node_with_the_first_and_runs_no_pair_twice():
    slow = "gpu-h100-3"

    def text(nodes):
        return nccl_text(avg=17.7 if slow in nodes else None), "Succeeded"
    cluster = Cluster(programs={"wla-nccl": nccl_program(text)})
    body = manifests()
    body["nccl"][1]["spec"]["parallelism"] = body["nccl"][1]["spec"]["completions"] = 3
    result = runner.run(cluster.context(expected_busbw_gbps=80.0, manifests=body), ["nccl-allreduce"])[0]
    assert result.summary.endswith("; slow node gpu-h100-3 (every pair with it is slow)")
    assert [e.split(" on ")[0] for e in result.evidence if e.startswith("pair ")] == [
        "pair gpu-h100-1+gpu-h100-2", "pair gpu-h100-3+gpu-h100-1"]


def test_a_teams_own_object_of_the_same_name_is_never_replaced():
    cluster = Cluster()
    theirs = job("wla-train", ["python3", "their-train.py"])
    theirs["metadata"]["namespace"] = NS
    cluster.kube.put(theirs)
    result = runner.run(cluster.context(), ["queued-job"])[0]
    assert result.status == runner.FAIL
    assert result.summary == ("Job team-a/wla-train exists and is not an acceptance object (no label "
                              "skaffon.io/acceptance-run): rename the acceptance's objects or remove it")
    assert cluster.kube.get("batch/v1", "Job", "wla-train", NS)["spec"]["template"]["spec"]["containers"][0][
        "command"] == ["python3", "their-train.py"]


def test_a_leftover_of_an_earlier_run_is_replaced():
    cluster = Cluster(programs={"wla-train": train_program()})
    old = job("wla-train", ["python3", "old.py"], labels={runner.RUN_LABEL: "wla-20261201-000000"})
    old["metadata"]["namespace"] = NS
    cluster.kube.put(old)
    result = runner.run(cluster.context(), ["queued-job"])[0]
    assert result.status == runner.PASS, result.summary
    jobs = [(c.verb, c.name) for c in cluster.kube.writes() if c.kind == "Job"]
    assert jobs[:3] == [("CREATE", "wla-train"), ("DELETE", "wla-train"), ("CREATE", "wla-train")]


def test_a_run_without_checking_says_wrong_results_cannot_show():
    text = nccl_text("all_reduce__check-0__wrong-n-a__kubectl-logs.txt")
    cluster = Cluster(programs={"wla-nccl": nccl_program(lambda nodes: (text, "Succeeded"))})
    result = runner.run(cluster.context(), ["nccl-allreduce"])[0]
    assert "nccl-tests checked no result (-c 0): wrong results cannot show in this run" in result.evidence
