"""stage.py and train.py twins (simcluster/twins/acceptance_programs.py): the JSON-lines log contract,
checkpoints kept on the claimed volume, resume after a pod is deleted, failures as the scripts fail."""
import json
import os
import time

import pytest

from simcluster.twins import acceptance_programs as ap
from simcluster.twins.testkit import TwinCluster

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "clusters", "workload-2x8.yaml")
NS = "default"
IMAGE = "registry.example.com/team-a/trainer:2.4"
SCRIPTS = {"train.py": "# the real script\n", "stage.py": "# the real script\n"}
TIMINGS = {"pod_start": 0.01, "job_run": 0.01, "crash_backoff": 0.05, "image_pull_backoff": 0.05,
           "train_step": 0.01}


class Cluster(TwinCluster):
    def __init__(self, **kw):
        kw.setdefault("timings", TIMINGS)
        super().__init__(CLUSTER, **kw)
        for node in self.store.list("nodes"):
            if node["metadata"]["name"].startswith("gpu-"):
                node["status"]["allocatable"]["nvidia.com/gpu"] = "8"   # as a running device plugin reports
                node["status"]["capacity"]["nvidia.com/gpu"] = "8"
                self.store.update_status("nodes", node)

    def scripts(self, data=None):
        self.store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": "wla-scripts", "namespace": NS},
                                         "data": dict(SCRIPTS if data is None else data)})

    def claim(self, name):
        self.store.create("persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "50Gi"}}}})

    def finished(self, job, index=0):
        return self.wait(lambda: next((p for p in self.pods(NS, "%s-%d-" % (job, index))
                                       if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")), None),
                         what="pod %d of %s to finish" % (index, job))

    def log(self, pod):
        return self.logs(NS, pod["metadata"]["name"], "main") or ""

    def running(self, job, index=0):
        return [p for p in self.pods(NS, "%s-%d-" % (job, index))
                if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def events(text):
    return [json.loads(l) for l in text.splitlines() if l.startswith("{")]


def volumes(ckpt="claim", data=True):
    vols = [{"name": "scripts", "configMap": {"name": "wla-scripts"}}]
    mounts = [{"name": "scripts", "mountPath": ap.SCRIPT_DIR, "readOnly": True}]
    if data:
        vols.append({"name": "data", "persistentVolumeClaim": {"claimName": "data"}})
        mounts.append({"name": "data", "mountPath": "/data"})
    if ckpt == "claim":
        vols.append({"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}})
        mounts.append({"name": "ckpt", "mountPath": "/checkpoints"})
    elif ckpt == "emptyDir":
        vols.append({"name": "ckpt", "emptyDir": {}})
        mounts.append({"name": "ckpt", "mountPath": "/checkpoints"})
    return vols, mounts


def job(name, command, pods=1, gpus=8, ckpt="claim", data=True, backoff=6):
    vols, mounts = volumes(ckpt, data)
    c = {"name": "main", "image": IMAGE, "command": command, "volumeMounts": mounts,
         "env": [{"name": "GPUS", "value": str(gpus)}, {"name": "NNODES", "value": str(pods)}]}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    spec = {"completions": pods, "parallelism": pods, "backoffLimit": backoff,
            "template": {"spec": {"restartPolicy": "Never", "subdomain": name, "containers": [c], "volumes": vols}}}
    if pods > 1:
        spec["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NS}, "spec": spec}


TRAIN = "%s/train.py --data /data --checkpoint-dir /checkpoints --checkpoint-every %d --seconds %d"


def torchrun(every=5, seconds=30):
    return ["torchrun", "--nnodes=$NNODES", "--nproc-per-node=$GPUS", "--rdzv-backend=c10d",
            "--rdzv-endpoint=trainer-0.trainer:29500"] + (TRAIN % (ap.SCRIPT_DIR, every, seconds)).split()


def python(every=5, seconds=30):
    return ["python3"] + (TRAIN % (ap.SCRIPT_DIR, every, seconds)).split()


@pytest.fixture
def cluster():
    with Cluster() as c:
        c.scripts()
        c.claim("data")
        c.claim("ckpt")
        yield c
        assert c.handle.errors == []


@pytest.fixture(params=["fake", "real"])
def any_store(request):
    """The in-memory fake, and the API server's store (admission, DefaultStorageClass, deletion)."""
    with Cluster(store=request.param) as c:
        c.scripts()
        c.claim("data")
        c.claim("ckpt")
        yield c
        assert c.handle.errors == []


def test_command_recognition():
    c = {"command": ["/bin/sh", "-c", "cd /work && exec torchrun --nnodes=2 --nproc-per-node=8 "
                     "/opt/skaffon/acceptance/train.py --seconds 60"]}
    program, launcher, path, args = ap.invocation(c)
    assert (program, path, args) == ("train", "/opt/skaffon/acceptance/train.py", ["--seconds", "60"])
    assert launcher[-4:-2] == ["exec", "torchrun"]
    stage = ["python3", "-u", "/opt/skaffon/acceptance/stage.py", "--dest", "/d"]
    assert ap.invocation({"command": stage})[0] == "stage"
    assert ap.invocation({"command": ["python3", "/srv/train.py"]}) is None         # another program
    assert ap.invocation({"command": ["bash", "/opt/skaffon/acceptance/train.py"]}) is None
    assert ap.invocation({"command": ["python3", "train.py"], "workingDir": "/opt/skaffon/acceptance"})[2] == \
        "/opt/skaffon/acceptance/train.py"
    assert ap.options(["--seconds=60", "--checkpoint_every", "$K", "--source", "a=u", "--source", "b=v"],
                      {"K": "7"}, repeat=("source",)) == {"seconds": "60", "checkpoint-every": "7",
                                                          "source": ["a=u", "b=v"]}


def test_two_node_training_window_then_resume_on_the_claim_after_the_pod_is_deleted(any_store):
    cluster = any_store
    cluster.store.create("jobs.batch", job("trainer", torchrun(every=5, seconds=30), pods=2))
    first = cluster.wait(lambda: (cluster.running("trainer") or [None])[0], what="rank 0 running")
    # the log grows while the pod runs
    cluster.wait(lambda: len(events(cluster.log(first))) >= 8, what="steps logged while running")
    grown = events(cluster.log(cluster.pod(NS, first["metadata"]["name"])))
    assert grown[0] == {"event": "start", "step": 0, "reason": "no checkpoint in /checkpoints",
                        "time": grown[0]["time"]}
    steps = [e for e in grown if e["event"] == "step"]
    # 400 samples/s per H100 x 8 GPUs x 2 pods, one simulated second per step
    assert steps[0]["samples"] == 6400 and steps[0]["step"] == 1
    assert steps[1]["time"] - steps[0]["time"] == pytest.approx(1.0, abs=0.002)
    ckpt = next(e for e in grown if e["event"] == "checkpoint")
    assert ckpt["step"] == 5 and ckpt["path"] == "/checkpoints/checkpoint-5.pt"
    assert ckpt["bytes"] == 1073741824 and ckpt["seconds"] == pytest.approx(1073741824 / 2000e6, abs=0.001)
    assert (cluster.pod(NS, first["metadata"]["name"])["status"]["phase"]) == "Running"
    # wait for the checkpoint at step 10, then delete rank 0 as the acceptance does
    cluster.wait(lambda: any(e["event"] == "checkpoint" and e["step"] == 10 for e in events(cluster.log(first))),
                 what="checkpoint 10")
    cluster.store.delete("pods", NS, first["metadata"]["name"])
    second = cluster.finished("trainer")
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    out = events(cluster.log(second))
    resume = out[0]
    assert resume["event"] == "resume" and resume["step"] >= 10 and resume["step"] % 5 == 0
    assert resume["path"] == "/checkpoints/checkpoint-%d.pt" % resume["step"]
    assert resume["seconds"] == pytest.approx(1073741824 / 4000e6, abs=0.001)
    first_step = next(e for e in out if e["event"] == "step")
    assert first_step["step"] == resume["step"] + 1
    done = out[-1]
    assert done["event"] == "done" and done["seconds"] >= 30
    assert second["status"]["phase"] == "Succeeded"
    # only rank 0 prints; the worker completes when rank 0 succeeded
    worker = cluster.finished("trainer", 1)
    assert worker["status"]["phase"] == "Succeeded" and events(cluster.log(worker)) == []


def test_empty_dir_checkpoints_die_with_the_pod(cluster):
    cluster.store.create("jobs.batch", job("scratch", python(every=3, seconds=40), ckpt="emptyDir"))
    first = cluster.wait(lambda: [p for p in cluster.pods(NS, "scratch-") if p["status"].get("phase") == "Running"
                                  and any(e["event"] == "checkpoint" for e in events(cluster.log(p)))],
                         what="a checkpoint in the emptyDir")[0]
    cluster.store.delete("pods", NS, first["metadata"]["name"])
    second = cluster.wait(lambda: next((p for p in cluster.pods(NS, "scratch-")
                                        if p["metadata"]["uid"] != first["metadata"]["uid"]
                                        and events(cluster.log(p))), None), what="the replacement's first line")
    assert events(cluster.log(second))[0]["event"] == "start"
    assert events(cluster.log(second))[0]["step"] == 0


def test_no_checkpoint_volume_at_all_restarts_from_zero(cluster):
    cluster.store.create("jobs.batch", job("rootfs", python(every=2, seconds=6), ckpt=None))
    pod = cluster.wait(lambda: next((p for p in cluster.pods(NS, "rootfs-")
                                     if p["status"].get("phase") == "Succeeded"), None), what="done")
    out = events(cluster.log(pod))
    assert out and out[0]["event"] == "start" and out[-1]["event"] == "done", (out, pod["status"])
    # 6 simulated seconds: steps 1-5 and two checkpoints of 0.54 s
    assert [e["step"] for e in out if e["event"] == "checkpoint"] == [2, 4] and out[-1]["step"] == 5, out
    assert out[-1]["samples_total"] == sum(e["samples"] for e in out if e["event"] == "step"), out


def test_no_gpu_visible_fails_like_torch(cluster):
    cluster.store.create("jobs.batch", job("cpu", python(), gpus=0, backoff=0))
    pod = cluster.wait(lambda: next((p for p in cluster.pods(NS, "cpu-")
                                     if p["status"].get("phase") == "Failed"), None), what="failed")
    text = cluster.log(pod)
    assert text.rstrip().endswith("RuntimeError: No CUDA GPUs are available")
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 1 and term["reason"] == "Error"


def test_stage_downloads_the_known_sources_and_fails_on_404(cluster):
    ok = ["python3", "%s/stage.py" % ap.SCRIPT_DIR, "--dest", "/data",
          "--source", "sample=https://data.example.com/sample.tar",
          "--source", "weights=https://models.example.com/base-7b.safetensors"]
    cluster.store.create("jobs.batch", job("stage", ok, gpus=0, ckpt=None))
    pod = cluster.wait(lambda: next((p for p in cluster.pods(NS, "stage-")
                                     if p["status"].get("phase") == "Succeeded"), None), what="staged")
    out = events(cluster.log(pod))
    assert [e["event"] for e in out] == ["staged", "staged", "stage-done"]
    assert out[0]["bytes"] == 2147483648 and out[0]["seconds"] == pytest.approx(2147483648 / 500e6, abs=0.001)
    assert out[0]["name"] == "sample" and out[0]["url"] == "https://data.example.com/sample.tar"
    assert out[2]["bytes"] == 3147483648 and out[2]["seconds"] == pytest.approx(3147483648 / 500e6, abs=0.002)
    bad = ok[:4] + ["--source", "sample=https://data.example.com/missing.tar"] + ok[6:]
    cluster.store.create("jobs.batch", job("stage404", bad, gpus=0, ckpt=None, backoff=0))
    pod = cluster.wait(lambda: next((p for p in cluster.pods(NS, "stage404-")
                                     if p["status"].get("phase") == "Failed"), None), what="404")
    out = events(cluster.log(pod))
    assert out == [{"event": "stage-failed", "name": "sample", "url": "https://data.example.com/missing.tar",
                    "error": "HTTP Error 404: Not Found", "time": out[0]["time"]}]
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1


def test_stage_without_a_volume_at_dest_fails_like_the_script(cluster):
    cmd = ["python3", "%s/stage.py" % ap.SCRIPT_DIR, "--dest", "/data",
           "--source", "sample=https://data.example.com/sample.tar"]
    cluster.store.create("jobs.batch", job("nodest", cmd, gpus=0, ckpt=None, data=False, backoff=0))
    pod = cluster.wait(lambda: next((p for p in cluster.pods(NS, "nodest-")
                                     if p["status"].get("phase") == "Failed"), None), what="failed")
    out = events(cluster.log(pod))
    assert out[0]["event"] == "stage-failed"
    assert out[0]["error"] == "[Errno 2] No such file or directory: '/data/sample'"


def test_missing_scripts_config_map_keeps_the_pod_container_creating():
    with Cluster() as c:
        c.claim("data")
        c.claim("ckpt")
        c.store.create("jobs.batch", job("early", python()))
        ev = c.wait(lambda: c.events("FailedMount"), what="FailedMount")
        assert ev[0]["message"] == 'MountVolume.SetUp failed for volume "scripts" : configmap "wla-scripts" not found'
        assert ev[0]["type"] == "Warning"
        # the kubelet records the event, then writes the pod's status
        pod = c.wait(lambda: next((p for p in c.pods(NS, "early-") if ((p.get("status") or {}).get(
            "containerStatuses") or [{}])[0].get("state", {}).get("waiting", {}).get("reason") == "ContainerCreating"),
            None), what="ContainerCreating")
        c.scripts()
        c.wait(lambda: any(e["event"] == "step" for e in events(c.logs(NS, pod["metadata"]["name"], "main") or "")),
               what="starts once the ConfigMap exists")
        assert c.handle.errors == []


def test_script_missing_from_the_config_map_exits_2(cluster):
    cluster.store.delete("configmaps", NS, "wla-scripts")
    cluster.scripts({"stage.py": "#"})
    cluster.store.create("jobs.batch", job("nofile", python(), backoff=0))
    pod = cluster.wait(lambda: next((p for p in cluster.pods(NS, "nofile-")
                                     if p["status"].get("phase") == "Failed"), None), what="failed")
    assert cluster.log(pod) == ("python3: can't open file '/opt/skaffon/acceptance/train.py': "
                                "[Errno 2] No such file or directory\n")
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 2


def test_a_worker_replaced_mid_run_fails_rank_0(cluster):
    cluster.store.create("jobs.batch", job("gang", torchrun(every=50, seconds=500), pods=2, backoff=0))
    rank0 = cluster.wait(lambda: (cluster.running("gang") or [None])[0], what="rank 0 running")
    cluster.wait(lambda: len(events(cluster.log(rank0))) > 3, what="steps")
    worker = cluster.wait(lambda: (cluster.running("gang", 1) or [None])[0])
    cluster.store.delete("pods", NS, worker["metadata"]["name"])
    pod = cluster.wait(lambda: next((p for p in cluster.pods(NS, "gang-0-")
                                     if p["status"].get("phase") == "Failed"), None), what="rank 0 failed")
    assert "ncclRemoteError" in cluster.log(pod)
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1


def test_window_runs_in_a_few_wall_seconds():
    # the contract's default: a 60 s window at train_step 0.05 is 3 wall seconds of steps
    with Cluster(timings=dict(TIMINGS, train_step=0.05)) as c:
        c.scripts()
        c.claim("data")
        c.claim("ckpt")
        t0 = time.monotonic()
        c.store.create("jobs.batch", job("wall", python(every=20, seconds=60)))
        pod = c.wait(lambda: next((p for p in c.pods(NS, "wall-")
                                   if p["status"].get("phase") == "Succeeded"), None), what="done")
        wall = time.monotonic() - t0
        out = events(c.logs(NS, pod["metadata"]["name"], "main"))
        assert out[-1]["event"] == "done" and out[-1]["step"] == 59     # two checkpoints of 0.54 s in the window
        assert 2.5 < wall < 3.0 * 4
        assert c.handle.errors == []


def test_checkpoints_are_per_claim_and_directory():
    # a second Job on the same claim but another subPath starts from 0; the same subPath resumes
    with Cluster() as c:
        c.scripts()
        c.claim("data")
        c.claim("ckpt")

        def run(name, sub):
            body = job(name, python(every=2, seconds=5))
            mounts = body["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
            next(m for m in mounts if m["name"] == "ckpt")["subPath"] = sub
            c.store.create("jobs.batch", body)
            pod = c.wait(lambda: next((p for p in c.pods(NS, name + "-")
                                       if p["status"].get("phase") == "Succeeded"), None), what=name)
            return events(c.log(pod))
        first = run("a", "run-1")
        assert first[0]["event"] == "start"
        assert run("b", "run-2")[0]["event"] == "start"
        again = run("c", "run-1")
        assert again[0]["event"] == "resume" and again[0]["step"] == first[-2]["step"]
        assert c.handle.errors == []


def test_max_restarts_resumes_in_the_same_pod_after_a_worker_is_replaced(cluster):
    cmd = torchrun(every=5, seconds=40)
    cmd.insert(1, "--max-restarts=3")
    cluster.store.create("jobs.batch", job("elastic", cmd, pods=2, backoff=0))
    rank0 = cluster.wait(lambda: (cluster.running("elastic") or [None])[0], what="rank 0 running")
    cluster.wait(lambda: any(e["event"] == "checkpoint" and e["step"] == 10 for e in events(cluster.log(rank0))),
                 what="checkpoint 10")
    worker = cluster.wait(lambda: (cluster.running("elastic", 1) or [None])[0])
    cluster.store.delete("pods", NS, worker["metadata"]["name"])
    done = cluster.finished("elastic")
    assert done["metadata"]["uid"] == rank0["metadata"]["uid"] and done["status"]["phase"] == "Succeeded"
    out = events(cluster.log(done))
    starts = [e for e in out if e["event"] in ("start", "resume")]
    assert [e["event"] for e in starts] == ["start", "resume"] and starts[1]["step"] >= 10
    assert out[-1]["event"] == "done"
