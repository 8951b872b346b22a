"""Load twin (simcluster/twins/load.py): load.py's JSON lines against a Service's ready pods,
with a rollout of the serving Deployment during the load."""
import json
import random

import pytest

from simcluster.twins import load
from simcluster.twins.testkit import FAST, TwinCluster, deployment

NS = "serve"
SERVING = {"serving": {"latency_ms": {"p50": 40, "p90": 70, "p99": 120}, "rps_per_replica": 50}}
# pods take 0.2 s to start: 4 simulated seconds at the default load_tick (0.05 s)
TIMINGS = dict(FAST, pod_start=0.2, load_tick=0.05)


def serving(replicas=3, strategy=None):
    dep = deployment("model", NS, replicas=replicas, image="registry.local/serving:1.0",
                     containers=[{"name": "model", "image": "registry.local/serving:1.0",
                                  "ports": [{"name": "http", "containerPort": 8000}],
                                  "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}}}])
    if strategy:
        dep["spec"]["strategy"] = strategy
    return dep


def service(name="model"):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"app": "model"}, "ports": [{"port": 80, "targetPort": "http"}]}}


def load_job(url="http://model.serve.svc:80/v1/models", seconds=40, concurrency=4, mount=True):
    c = {"name": "load", "image": "python:3.12-slim",
         "command": ["python3", "/opt/skaffon/acceptance/load.py", "--url", url,
                     "--seconds", str(seconds), "--concurrency", str(concurrency)]}
    spec = {"restartPolicy": "Never", "containers": [c]}
    if mount:
        c["volumeMounts"] = [{"name": "scripts", "mountPath": "/opt/skaffon/acceptance"}]
        spec["volumes"] = [{"name": "scripts", "configMap": {"name": "wla-scripts"}}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "load", "namespace": NS},
            "spec": {"backoffLimit": 0, "template": {"spec": spec}}}


@pytest.fixture
def cluster():
    with TwinCluster("default.yaml", timings=TIMINGS, workload=SERVING) as c:
        c.namespace(NS)
        c.store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                      "metadata": {"name": "wla-scripts", "namespace": NS},
                                      "data": {"load.py": "# the acceptance's load script\n"}})
        yield c


def lines(c):
    pods = c.pods(NS, "load-")
    if not pods:
        return []
    text = c.logs(NS, pods[0]["metadata"]["name"], "load") or ""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def finished(c, timeout=10.0):
    def done():
        pods = c.pods(NS, "load-")
        return pods and (pods[0].get("status") or {}).get("phase") in ("Succeeded", "Failed") and pods[0]
    pod = c.wait(done, timeout=timeout, what="load pod finished")
    return pod, lines(c)


def ready_serving(c, replicas=3):
    c.wait(lambda: (c.store.get("deployments.apps", NS, "model").get("status") or {})
           .get("availableReplicas") == replicas, what="serving ready")


# -- the model -----------------------------------------------------------------------------

def test_latency_distribution_reproduces_the_percentiles():
    lat = load.Latency(40.0, 70.0, 120.0)
    values = sorted(lat.sample(random.Random(7), 100000))
    for p, want in ((50, 40.0), (90, 70.0), (99, 120.0)):
        assert abs(load.percentile(values, p) - want) / want < 0.02
    assert abs(sum(values) / len(values) - lat.mean_ms) < 0.5


def test_throughput_is_bounded_by_concurrency_and_by_replicas():
    lat = load.Latency(40.0, 70.0, 120.0)
    rng = random.Random(1)
    n, errors, _lat, _carry = load.second(lat, rng, 0.0, 4, 3, 50.0, None, 0)
    assert errors == 0 and n == int(4 / (lat.mean_ms / 1000.0))      # 4 workers, ~47 ms each
    n, _e, sample, _carry = load.second(lat, rng, 0.0, 16, 1, 50.0, None, 0)
    assert n == 50                                                   # one replica's capacity
    assert min(sample) >= 16 / 50.0 * 1000 - lat.mean_ms             # queued: C / capacity
    n, errors, sample, _carry = load.second(lat, rng, 0.0, 4, 0, 50.0, load.REFUSED, 0.005)
    assert n == errors == 800 and not sample


def test_arguments_and_defaults():
    c = {"command": ["sh", "-c", "python3 /opt/skaffon/acceptance/load.py --url=http://a.b.svc:8080/x "
                     "--seconds 5 && echo done"]}
    interpreter, script, args = load.invocation(c)
    assert (interpreter, script) == ("python3", "/opt/skaffon/acceptance/load.py")
    opts = load.options(args)
    assert opts["url"] == "http://a.b.svc:8080/x" and opts["seconds"] == 5.0 and opts["concurrency"] == 4
    assert load.serving_of({})["latency_ms"] == {"p50": 40.0, "p90": 70.0, "p99": 120.0}
    assert load.serving_of({"workload": {"serving": {"rps_per_replica": 9}}})["rps_per_replica"] == 9.0


# -- on a cluster ---------------------------------------------------------------------------

def test_steady_load_reports_the_cluster_files_latency(cluster):
    c = cluster
    c.store.create("deployments.apps", serving(3))
    c.store.create("services", service())
    ready_serving(c)
    c.store.create("jobs.batch", load_job(seconds=40))
    pod, out = finished(c)
    assert pod["status"]["phase"] == "Succeeded"
    ticks, summary = out[:-1], out[-1]
    assert [t["event"] for t in ticks] == ["tick"] * 40 and summary["event"] == "summary"
    assert summary["errors"] == 0 and summary["error_rate"] == 0.0 and summary["seconds"] == 40
    assert summary["requests"] == sum(t["requests"] for t in ticks)
    assert 80 <= summary["rps"] <= 90                  # 4 workers / ~47 ms mean latency
    for key, want in (("p50_ms", 40), ("p90_ms", 70), ("p99_ms", 120)):
        assert abs(summary[key] - want) / want < 0.12, (key, summary[key])
    assert all(t["endpoints"] == 3 for t in ticks)
    assert ticks[0]["time"] < ticks[-1]["time"] <= summary["time"]


def test_the_same_run_gives_the_same_figures(cluster):
    """The latencies come from a generator seeded by the run (namespace, Job, arguments), not by the
    pod's uid: a scenario's percentiles do not change from one run to the next."""
    c = cluster
    c.store.create("deployments.apps", serving(1))
    c.store.create("services", service())
    ready_serving(c, 1)
    summaries = []
    for _ in range(2):
        c.store.create("jobs.batch", load_job(seconds=20, concurrency=8))
        pod, out = finished(c)
        summaries.append({k: v for k, v in out[-1].items() if k != "time"})
        c.store.delete("jobs.batch", NS, "load")
        c.store.delete("pods", NS, pod["metadata"]["name"])
        c.wait(lambda: not c.pods(NS, "load-"), what="load pod gone")
    assert summaries[0] == summaries[1]
    assert summaries[0]["rps"] == 50.0 and summaries[0]["p99_ms"] > 120     # one replica, saturated


def test_rolling_update_without_unavailable_replicas_loses_no_request(cluster):
    c = cluster
    c.store.create("deployments.apps", serving(3, {"type": "RollingUpdate", "rollingUpdate": {
        "maxSurge": 1, "maxUnavailable": 0}}))
    c.store.create("services", service())
    ready_serving(c)
    old = {p["metadata"]["name"] for p in c.pods(NS, "model-")}
    c.store.create("jobs.batch", load_job(seconds=60))
    c.wait(lambda: len(lines(c)) >= 3, what="load running")
    c.store.merge_patch("deployments.apps", NS, "model", {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-02T08:00:00Z"}}}}})
    pod, out = finished(c)
    assert not old & {p["metadata"]["name"] for p in c.pods(NS, "model-")}, "the rollout finished"
    summary = out[-1]
    assert pod["status"]["phase"] == "Succeeded" and summary["errors"] == 0
    assert min(t["endpoints"] for t in out[:-1]) >= 3


def test_recreate_during_load_loses_the_requests_of_the_gap(cluster):
    c = cluster
    c.store.create("deployments.apps", serving(3, {"type": "Recreate"}))
    c.store.create("services", service())
    ready_serving(c)
    c.store.create("jobs.batch", load_job(seconds=60))
    c.wait(lambda: len(lines(c)) >= 3, what="load running")
    c.store.merge_patch("deployments.apps", NS, "model", {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-02T08:00:00Z"}}}}})
    pod, out = finished(c)
    summary, ticks = out[-1], out[:-1]
    gap = [t for t in ticks if t["endpoints"] == 0]
    assert pod["status"]["phase"] == "Succeeded"
    assert gap and all(t["errors"] == t["requests"] > 0 and t["error"] == load.REFUSED for t in gap)
    assert summary["errors"] == sum(t["errors"] for t in gap) and summary["error_rate"] > 0
    assert ticks[-1]["endpoints"] == 3 and ticks[-1]["errors"] == 0


def test_no_service_every_request_fails_to_resolve(cluster):
    c = cluster
    c.store.create("deployments.apps", serving(1))
    ready_serving(c, 1)
    c.store.create("jobs.batch", load_job(url="http://model.serve.svc:80/v1/models", seconds=5))
    pod, out = finished(c)
    summary = out[-1]
    assert pod["status"]["phase"] == "Succeeded"       # load.py reports, the step judges
    assert summary["errors"] == summary["requests"] > 0 and summary["error_rate"] == 1.0
    assert summary["p50_ms"] is None
    assert all(t["error"] == load.DNS_ERROR for t in out[:-1])


def test_service_without_ready_pods_refuses(cluster):
    c = cluster
    c.store.create("services", service())
    c.store.create("jobs.batch", load_job(url="http://model:80/", seconds=3))
    _pod, out = finished(c)
    assert [t["error"] for t in out[:-1]] == [load.REFUSED] * 3


def test_script_not_mounted_fails_like_python(cluster):
    c = cluster
    c.store.create("jobs.batch", load_job(mount=False, seconds=3))
    pod, _out = finished(c)
    assert pod["status"]["phase"] == "Failed"
    text = c.logs(NS, pod["metadata"]["name"], "load")
    assert text == ("python3: can't open file '/opt/skaffon/acceptance/load.py': "
                    "[Errno 2] No such file or directory\n")
