"""labels-exported's KAI queue family against the names KAI v0.17's queue controller registers
(pkg/queuecontroller/metrics/metrics.go: seven gauges, prefixed by --metrics-namespace, `kai` by
default) and the cause it names when none is scraped."""
import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import labels, runner
from ansible_collections.skaffon.gpu_platform.tests.unit.plugins.module_utils.test_workload_steps_h4 import (
    NS, PODS, dcgm, fake_prometheus, ksm, labels_ctx)

FAMILIES = ("queue_info", "queue_deserved_gpus", "queue_quota_cpu_cores", "queue_quota_memory_bytes",
            "queue_allocated_gpus", "queue_allocated_cpu_cores", "queue_allocated_memory_bytes")


def matches(name):
    # PromQL regex matchers are anchored at both ends
    return re.fullmatch(labels.KAI_QUEUE_METRICS, name) is not None


def test_the_regex_matches_the_queue_controller_gauges_under_any_metrics_namespace():
    for family in FAMILIES:
        assert matches("kai_" + family) and matches(family) and matches("acme_" + family), family
    # the scheduler's fair-share gauges and Kueue's are other families
    for other in ("kai_queue_fair_share_gpu", "kai_queue_gpu_usage", "kueue_pending_workloads", "kai_queue_info_x"):
        assert not matches(other), other


def test_pass_on_the_v017_series_and_the_queue_family_counted():
    series = [{"metric": {"__name__": "kai_" + f, "queue_name": NS, "queue_metadata_name": NS,
                          "queue_display_name": "", "job": "queue-controller", "service": "queue-controller"},
               "value": [0, "2"]} for f in FAMILIES]
    query = fake_prometheus({"count(last_over_time(DCGM_FI_DEV_GPU_UTIL": [{"metric": {}, "value": [0, "2"]}],
                             "last_over_time(DCGM_FI_DEV_GPU_UTIL{namespace=": [dcgm(p) for p in PODS],
                             "last_over_time(kube_pod_labels": [ksm(p) for p in PODS],
                             "queue_name=": series})
    ctx = labels_ctx()
    res = labels.check(ctx, query, ctx.clock())
    assert res.status == runner.PASS, res.summary
    assert res.figures["queue_series"] == 7
    assert any("queue_display_name, queue_metadata_name, queue_name, service" in e for e in res.evidence), res.evidence


def test_no_queue_series_names_the_service_monitor_to_add():
    query = fake_prometheus({"count(last_over_time(DCGM_FI_DEV_GPU_UTIL": [{"metric": {}, "value": [0, "2"]}],
                             "last_over_time(DCGM_FI_DEV_GPU_UTIL{namespace=": [dcgm(p) for p in PODS],
                             "last_over_time(kube_pod_labels": [ksm(p) for p in PODS]})
    ctx = labels_ctx()
    res = labels.check(ctx, query, ctx.clock())
    assert res.status == runner.FAIL
    assert res.summary.startswith("no series of the KAI queue %s" % NS), res.summary
    assert "ServiceMonitor for the Service queue-controller, port metrics" in res.summary
    assert "prometheus.enabled" in res.summary
