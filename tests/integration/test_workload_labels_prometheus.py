"""The labels-exported step's PromQL against a real Prometheus (Debian package prometheus).

Prometheus scrapes one loopback endpoint that serves what the three exporters print for a training
run: dcgm-exporter's DCGM_FI_DEV_GPU_UTIL with the pod mapping, kube-state-metrics' kube_pod_labels
with the allowlisted labels (or without them), the KAI queue controller's queue gauges. The step's
queries (last_over_time windows, the join on namespace and pod) run as written.
"""
import http.server
import threading
import time

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import labels, runner
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube
from kit.prometheus import BINARY, Prometheus

pytestmark = [pytest.mark.slow, pytest.mark.skipif(BINARY is None, reason="no prometheus binary")]
NS = "team-vision"
OTHER = "team-nlp"
PODS = ("wla-train-0-abcde", "wla-train-1-fghij")
TEMPLATE = {"app.kubernetes.io/name": "wla-train", "cost-center": "4711",
            "gpu-platform.skaffon.io/pool": "pool_h100_nvlink_training", "gpu-platform.skaffon.io/team": NS,
            "kai.scheduler/queue": NS}


def exposition():
    """team-vision: kube-state-metrics allowlists its labels, the KAI queue exports; OTHER: neither."""
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for n, (ns, pod) in enumerate([(NS, p) for p in PODS] + [(OTHER, p) for p in PODS]):
        lines.append('DCGM_FI_DEV_GPU_UTIL{gpu="%d",UUID="GPU-%d",device="nvidia%d",modelName="NVIDIA H100 80GB HBM3",'
                     'Hostname="gpu-h100-%d",container="trainer",namespace="%s",pod="%s"} 80' % (n, n, n, n + 1, ns, pod))
    lines.append("# TYPE kube_pod_labels gauge")
    for pod in PODS:
        extra = "".join(',%s="%s"' % (labels.ksm_label(k), v) for k, v in sorted(TEMPLATE.items()))
        lines.append('kube_pod_labels{namespace="%s",pod="%s",uid="u-%s"%s} 1' % (NS, pod, pod, extra))
        lines.append('kube_pod_labels{namespace="%s",pod="%s",uid="v-%s"} 1' % (OTHER, pod, pod))
    # KAI v0.17's queue controller: its default metrics namespace kai_, three queue labels
    lines += ["# TYPE kai_queue_allocated_gpus gauge",
              'kai_queue_allocated_gpus{queue_display_name="",queue_metadata_name="%s",queue_name="%s"} 2' % (NS, NS)]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):       # noqa: N802 (http.server's name)
            body = exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = {"global": {"scrape_interval": "1s"}, "scrape_configs": [{
        "job_name": "exporters", "honor_labels": True, "scrape_interval": "1s",
        "static_configs": [{"targets": ["127.0.0.1:%d" % server.server_address[1]]}]}]}
    prom = Prometheus(tmp_path_factory.mktemp("prom"), config)
    prom.wait(lambda: prom.query("kai_queue_allocated_gpus"), 30, "the first scrape")
    yield prom
    prom.stop()
    server.shutdown()


def ctx(url, namespace=NS):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "wla-train", "namespace": namespace},
           "spec": {"template": {"metadata": {"labels": dict(TEMPLATE, **{"kai.scheduler/queue": namespace})},
                                 "spec": {}}}}
    out = runner.Context(FakeKube(), {"namespace": namespace, "queue_backend": "kai", "prometheus_url": url,
                                      "manifests": {"training": [job]}}, run_label="wla-test")
    out.state["queue"] = {"job": "wla-train", "namespace": namespace, "queue": namespace}
    out.state["training"] = {"job": "wla-train", "namespace": namespace, "started": time.time() - 30}
    return out


def test_labels_pass_on_the_exporters_series(prometheus):
    res = runner.STEPS["labels-exported"](ctx(prometheus.url))
    assert res.status == runner.PASS, (res.summary, res.evidence)
    assert res.figures["gpu_series"] == 2 and res.figures["gpu_series_attributed"] == 2
    assert res.figures["queue_series"] == 1 and res.figures["labels_missing"] == "-"
    assert any("carry: Hostname, UUID, container, device, gpu, instance, job, modelName, namespace, pod" in e
               for e in res.evidence), res.evidence


def test_labels_fail_without_the_allowlist_and_the_queue_series(prometheus):
    c = ctx(prometheus.url, OTHER)
    res = labels.check(c, labels.prometheus_query(c), time.time())
    assert res.status == runner.FAIL
    assert res.figures["gpu_series"] == 2 and res.figures["pod_label_series"] == 2
    assert "--metric-labels-allowlist=pods=[cost-center,gpu-platform.skaffon.io/pool,gpu-platform.skaffon.io/team," \
           "kai.scheduler/queue]" in res.summary, res.summary
    assert "no series of the KAI queue team-nlp" in res.summary
