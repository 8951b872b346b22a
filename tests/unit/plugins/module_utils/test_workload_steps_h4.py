"""Workload acceptance steps labels-exported, cost-baseline, inference-serving (unit, no cluster)."""
import json

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import cost, inference, labels, runner
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube

NS = "team-vision"
TEMPLATE_LABELS = {"app.kubernetes.io/name": "wla-train", "app.kubernetes.io/component": "trainer",
                   "cost-center": "4711", "gpu-platform.skaffon.io/pool": "pool_h100_nvlink_training",
                   "gpu-platform.skaffon.io/team": NS, "kai.scheduler/queue": NS}
TRAIN_JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "wla-train", "namespace": NS},
             "spec": {"template": {"metadata": {"labels": dict(TEMPLATE_LABELS)}, "spec": {}}}}


class Clock(object):
    def __init__(self, start=1764662400.0):
        self.now = start

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def make_ctx(kube=None, clock=None, **params):
    clock = clock or Clock()
    base = {"namespace": NS, "queue_backend": "kai", "manifests": {"training": [TRAIN_JOB]}}
    base.update(params)
    return runner.Context(kube or FakeKube(), base, clock=clock, sleep=clock.sleep, run_label="wla-test")


# -- cost-baseline ---------------------------------------------------------------------------------

def test_unit_sizes():
    assert cost.unit_size("1000 samples") == (1000.0, "samples")
    assert cost.unit_size("1M samples") == (1e6, "samples")
    assert cost.unit_size("sample") == (1.0, "sample")
    assert cost.unit_size("2.5k images") == (2500.0, "images")
    with pytest.raises(DomainError) as err:
        cost.unit_size("")
    assert "baseline.unit" in err.value.msg


def test_cost_at_or_below_the_baseline_passes():
    # 2 GPUs x 300 s = 1/6 GPU hour at 4.20 = 0.70 EUR for 240000 samples -> 0.0029167 EUR per 1000
    training = {"gpu_seconds": 600.0, "units": 240000, "unit": "samples", "gpus": 2}
    res = cost.compare(training, 4.20, {"unit": "1000 samples", "price_per_unit": 0.004}, "EUR")
    assert res.status == runner.PASS, res.summary
    assert res.figures["cost"] == 0.7 and res.figures["cost_per_unit"] == pytest.approx(0.002917, abs=1e-6)
    assert res.figures["ratio_to_baseline"] == pytest.approx(0.7292, abs=1e-4)
    assert res.summary.startswith("0.0029 EUR per 1000 samples on this pool, 0.73 x the baseline's 0.004 EUR")


def test_cost_above_the_baseline_fails_with_the_ratio():
    training = {"gpu_seconds": 600.0, "units": 240000, "unit": "samples", "gpus": 2}
    res = cost.compare(training, 4.20, {"unit": "1000 samples", "price_per_unit": 0.002}, "EUR")
    assert res.status == runner.FAIL
    assert "1.46 x the baseline" in res.summary and "above the baseline (46 % more)" in res.summary


def test_cost_without_units_or_prices():
    res = cost.compare({"gpu_seconds": 60, "units": 0}, 1.0, {"unit": "sample", "price_per_unit": 1}, "EUR")
    assert res.status == runner.FAIL and "no accepted units" in res.summary
    ctx = make_ctx(price_per_gpu_hour=None, baseline=None)
    res = cost.cost_baseline(ctx)
    assert res.status == runner.SKIP and "price_per_gpu_hour" in res.summary
    ctx = make_ctx(price_per_gpu_hour=2.0, baseline={"unit": "1000 samples", "price_per_unit": 1.0})
    ctx.state["training"] = {"gpu_seconds": 3600.0, "units": 4000, "unit": "samples"}
    res = runner.STEPS["cost-baseline"](ctx)
    assert res.status == runner.PASS and res.figures["cost_per_unit"] == 0.5


# -- labels-exported -------------------------------------------------------------------------------

def dcgm(pod, gpu="0", node="gpu-h100-1"):
    return {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": gpu, "UUID": "GPU-%s" % gpu, "device": "nvidia" + gpu,
                       "modelName": "NVIDIA H100 80GB HBM3", "Hostname": node, "container": "trainer",
                       "namespace": NS, "pod": pod, "job": "nvidia-dcgm-exporter"}, "value": [0, "80"]}


def ksm(pod, allow=True):
    metric = {"__name__": "kube_pod_labels", "namespace": NS, "pod": pod, "uid": "u-" + pod,
              "job": "kube-state-metrics"}
    if allow:
        metric.update({labels.ksm_label(k): v for k, v in TEMPLATE_LABELS.items()})
    return {"metric": metric, "value": [0, "1"]}


def fake_prometheus(table):
    asked = []

    def query(promql):
        asked.append(promql)
        for key, value in table.items():
            if key in promql:
                return value
        return []
    query.asked = asked
    return query


def labels_ctx():
    ctx = make_ctx()
    ctx.state["queue"] = {"job": "wla-train", "namespace": NS, "queue": NS, "backend": "kai"}
    ctx.state["training"] = {"job": "wla-train", "namespace": NS, "pods": ["wla-train-0-abcde", "wla-train-1-fghij"],
                             "started": ctx.clock() - 400}
    return ctx


PODS = ("wla-train-0-abcde", "wla-train-1-fghij")
KAI = [{"metric": {"__name__": "queue_allocated_gpus", "queue_name": NS, "job": "kai-queue-controller"},
        "value": [0, "2"]}]


def test_labels_pass_when_gpu_pod_labels_and_queue_series_carry_them():
    query = fake_prometheus({"count(last_over_time(DCGM_FI_DEV_GPU_UTIL": [{"metric": {}, "value": [0, "2"]}],
                             "last_over_time(DCGM_FI_DEV_GPU_UTIL{namespace=": [dcgm(p) for p in PODS],
                             "last_over_time(kube_pod_labels": [ksm(p) for p in PODS],
                             "queue_name=": KAI})
    ctx = labels_ctx()
    res = labels.check(ctx, query, ctx.clock())
    assert res.status == runner.PASS, res.summary
    assert 'pod=~"wla-train-.*"' in query.asked[0] and "[520s]" in query.asked[0]
    assert res.figures["gpu_series"] == 2 and res.figures["labels_missing"] == "-"
    assert res.figures["labels_wanted"] == "cost-center, gpu-platform.skaffon.io/pool, gpu-platform.skaffon.io/team, " \
                                           "kai.scheduler/queue"
    assert any("carry: Hostname, UUID, container, device, gpu, job, modelName, namespace, pod" in e
               for e in res.evidence)
    assert any("label_gpu_platform_skaffon_io_team" in e for e in res.evidence)
    joined = [q for q in query.asked if "group_left" in q][0]
    assert "group_left(label_cost_center, " in joined and "topk by (namespace, pod) (1, " in joined


def test_labels_fail_names_the_allowlist_and_the_missing_queue_series():
    query = fake_prometheus({"count(last_over_time(DCGM_FI_DEV_GPU_UTIL": [{"metric": {}, "value": [0, "2"]}],
                             "last_over_time(DCGM_FI_DEV_GPU_UTIL{namespace=": [dcgm(p) for p in PODS],
                             "last_over_time(kube_pod_labels": [ksm(p, allow=False) for p in PODS]})
    ctx = labels_ctx()
    res = labels.check(ctx, query, ctx.clock())
    assert res.status == runner.FAIL
    assert "--metric-labels-allowlist=pods=[cost-center,gpu-platform.skaffon.io/pool," in res.summary
    assert "no series of the KAI queue team-vision" in res.summary


def test_labels_fail_on_exported_pod_names_honor_labels():
    renamed = dcgm(PODS[0])
    renamed["metric"]["exported_pod"] = renamed["metric"].pop("pod")
    renamed["metric"]["exported_namespace"] = renamed["metric"].pop("namespace")
    query = fake_prometheus({"exported_namespace=": [renamed]})
    ctx = labels_ctx()
    res = labels.check(ctx, query, ctx.clock())
    assert res.status == runner.FAIL and "honor_labels: true" in res.summary


def test_labels_skip_without_prometheus():
    res = runner.STEPS["labels-exported"](make_ctx())
    assert res.status == runner.SKIP and "prometheus_url" in res.summary


# -- inference-serving -----------------------------------------------------------------------------

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "wla-inference", "namespace": NS},
              "spec": {"replicas": 1, "strategy": {"type": "RollingUpdate",
                                                   "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                       "selector": {"matchLabels": {"app.kubernetes.io/name": "wla-inference"}},
                       "template": {"metadata": {"labels": {"app.kubernetes.io/name": "wla-inference"}},
                                    "spec": {"containers": [{"name": "server", "image": "triton"}]}}}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "wla-inference", "namespace": NS},
           "spec": {"selector": {"app.kubernetes.io/name": "wla-inference"}}}
PDB = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "wla-inference", "namespace": NS},
       "spec": {"minAvailable": 1}}
LOAD = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "wla-load", "namespace": NS},
        "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "load", "image": "pytorch"}]}}}}


class Cluster(FakeKube):
    """Deployment and Job controllers in miniature: the Deployment is available at once and rolls out in
    `rollout_polls` reads; the load pod logs ticks (errors during the rollout when `lossy`) and a summary."""

    def __init__(self, clock, rollout_polls=3, lossy=False, never_ready=False, summary=None):
        FakeKube.__init__(self)
        self.clock, self.rollout_polls, self.lossy, self.never_ready = clock, rollout_polls, lossy, never_ready
        self.summary = summary
        self.patched_at = None
        self.polls = 0

    def create(self, body, dry_run=False):
        out = FakeKube.create(self, body, dry_run)
        if body["kind"] == "Deployment":
            self.objects[("Deployment", NS, "wla-inference")]["metadata"]["generation"] = 1
            self.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": "wla-inference-abc", "namespace": NS, "labels": {"app.kubernetes.io/name": "wla-inference"}},
                "spec": {"nodeName": "gpu-l40s-1"}, "status": {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]}
                if self.never_ready else {"phase": "Running"}})
        if body["kind"] == "Job":
            self.started = self.clock()
            self.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": "wla-load-xyz", "namespace": NS, "labels": {"batch.kubernetes.io/job-name": "wla-load"}},
                "status": {"phase": "Running"}})
        return out

    def patch(self, api_version, kind, name, patch, namespace=None, content_type=None, dry_run=False):
        out = FakeKube.patch(self, api_version, kind, name, patch, namespace)
        if kind == "Deployment":
            self.patched_at = self.clock()
            self.objects[(kind, namespace, name)]["metadata"]["generation"] = 2
            out["metadata"]["generation"] = 2
        return out

    def get(self, api_version, kind, name, namespace=None):
        obj = FakeKube.get(self, api_version, kind, name, namespace)
        if kind == "Deployment" and obj is not None:
            gen = obj["metadata"].get("generation", 1)
            rolled = gen == 1 or self.polls >= self.rollout_polls
            if gen == 2:
                self.polls += 1
            n = 0 if self.never_ready else 1
            obj["status"] = {"observedGeneration": gen, "replicas": n if rolled else 2, "readyReplicas": n,
                             "availableReplicas": n, "updatedReplicas": n if rolled else 1}
        if kind == "PodDisruptionBudget" and obj is not None:
            obj["status"] = {"disruptionsAllowed": 0}
        return obj

    def log(self, name, namespace, container=None, tail_lines=None):
        self._call("GET", "Pod log", name, namespace)
        t0 = getattr(self, "started", self.clock())
        out = []
        for second in range(1, int(self.clock() - t0) + 1):
            t = t0 + second
            lost = 3 if self.lossy and self.patched_at and self.patched_at <= t <= self.patched_at + 2 else 0
            out.append(json.dumps({"event": "tick", "requests": 40, "errors": lost, "time": t}))
        if self.clock() - t0 >= 10:
            out.append(json.dumps(self.summary or {
                "event": "summary", "requests": 400, "errors": 6 if self.lossy else 0,
                "error_rate": 0.015 if self.lossy else 0.0, "p50_ms": 40.2, "p90_ms": 70.1, "p99_ms": 120.5,
                "rps": 40.0, "seconds": 10.0, "time": t0 + 10}))
        return "\n".join(out)


def serving_ctx(kube, clock, **inference):
    opts = {"requests_seconds": 10, "max_error_rate": 0.0, "p99_ms_max": None, "rollout": True}
    opts.update(inference)
    return make_ctx(kube, clock, pod_timeout=30, inference=opts, scripts={"load.py": "print()"},
                    manifests={"serving": [DEPLOYMENT, SERVICE, PDB], "load": [LOAD]})


def test_inference_passes_and_the_rollout_loses_nothing():
    clock = Clock()
    kube = Cluster(clock)
    res = inference.inference_serving(serving_ctx(kube, clock))
    assert res.status == runner.PASS, (res.summary, res.evidence)
    assert res.figures["p99_ms"] == 120.5 and res.figures["errors_during_rollout"] == 0
    assert res.figures["rollout_seconds"] > 0 and res.figures["pdb_disruptions_allowed"] == 0
    assert "a rollout during the load" in res.summary and "lost no request" in res.summary
    patch = [c for c in kube.calls if c.verb == "PATCH"]
    assert [(c.kind, c.name) for c in patch] == [("Deployment", "wla-inference")]
    annotations = kube.objects[("Deployment", NS, "wla-inference")]["spec"]["template"]["metadata"]["annotations"]
    assert list(annotations) == ["kubectl.kubernetes.io/restartedAt"]
    created = kube.objects[("Deployment", NS, "wla-inference")]
    assert created["metadata"]["labels"][runner.RUN_LABEL] == "wla-test"
    assert ("ConfigMap", NS, "wla-scripts") in kube.objects


def test_inference_fails_when_the_rollout_loses_requests():
    clock = Clock()
    res = inference.inference_serving(serving_ctx(Cluster(clock, lossy=True), clock))
    assert res.status == runner.FAIL
    assert "6 of 400 requests failed" in res.summary and "during the rollout" in res.summary
    assert res.figures["errors_during_rollout"] > 0


def test_inference_fails_on_p99_and_without_ready_replicas():
    clock = Clock()
    res = inference.inference_serving(serving_ctx(Cluster(clock), clock, p99_ms_max=100.0))
    assert res.status == runner.FAIL and res.summary == "p99 120.5 ms above the limit of 100.0 ms"
    clock = Clock()
    res = inference.inference_serving(serving_ctx(Cluster(clock, never_ready=True), clock))
    assert res.status == runner.FAIL
    assert res.summary.startswith("Deployment wla-inference has 0 of 1 replicas ready after 30 s: pod wla-inference-abc: "
                                  "Unschedulable: 0/4 nodes are available")


def test_inference_without_rollout_and_with_a_refused_connection():
    clock = Clock()
    summary = {"event": "summary", "requests": 50, "errors": 50, "error_rate": 1.0, "p50_ms": None, "p90_ms": None,
               "p99_ms": None, "rps": 5.0, "seconds": 10.0, "time": clock() + 10, "last_error": "[Errno 111] Connection refused"}
    res = inference.inference_serving(serving_ctx(Cluster(clock, summary=summary), clock, rollout=False))
    assert res.status == runner.FAIL
    assert res.summary == ("50 of 50 requests failed, error rate 1.0000 above 0.0 "
                           "(last: [Errno 111] Connection refused)")
