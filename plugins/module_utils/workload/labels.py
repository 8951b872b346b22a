# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The step labels-exported: the series that GPU time, queue use and cost are reported from carry
what attributes them to the training run, its team, pool and cost centre.

Three families, read from Prometheus over the time since the training Job started (the pods may
be gone by now, so `last_over_time` over that window):
- GPU: DCGM_FI_DEV_GPU_UTIL of dcgm-exporter, whose `pod`/`namespace`/`container` labels name the
  pod holding the GPU (its kubelet pod-resources mapping; with a ServiceMonitor without
  honor_labels they arrive as `exported_pod`/`exported_namespace`).
- Workload labels: kube-state-metrics' kube_pod_labels{namespace, pod, label_<key>}, which carries
  a pod label only when kube-state-metrics is started with --metric-labels-allowlist naming it
  (label keys sanitised: every character outside [a-zA-Z0-9_] becomes `_`). The pods' team, pool
  and cost labels come from the team's job template; joined on (namespace, pod) they put the DCGM
  series under team, pool and cost centre.
- Queue: KAI's queue controller (v0.17, pkg/queuecontroller/metrics) exports seven gauges per Queue
  with the labels queue_name, queue_metadata_name, queue_display_name: queue_info,
  queue_deserved_gpus (the GPU quota), queue_quota_cpu_cores, queue_quota_memory_bytes,
  queue_allocated_gpus, queue_allocated_cpu_cores, queue_allocated_memory_bytes, each prefixed by its
  --metrics-namespace (Config spec.queueController.metricsNamespace), `kai` unless set: kai_queue_info.
  It serves them on the Service queue-controller, port `metrics` (8080); KAI writes a ServiceMonitor
  for it only with its chart's prometheus.enabled, so a site usually adds its own. Kueue exports per
  `cluster_queue` (kueue_admitted_workloads_total, kueue_cluster_queue_resource_usage). Without a
  queue backend this family is not asked for.
The evidence lists the labels each series carries, so a failing family says what is there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import re

from ansible.module_utils.six.moves.urllib.parse import urlencode
from ansible.module_utils.urls import open_url

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import objects
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.runner import (
    FAIL, PASS, RUN_LABEL, SKIP, Result, step)

GPU_METRIC = "DCGM_FI_DEV_GPU_UTIL"
POD_LABELS_METRIC = "kube_pod_labels"
# the queue controller's gauges under any metrics namespace (kai_ by default) or none
KAI_QUEUE_METRICS = ("([a-zA-Z_:][a-zA-Z0-9_:]*_)?queue_(info|deserved_gpus|quota_cpu_cores|quota_memory_bytes|allocated_gpus|"
                     "allocated_cpu_cores|allocated_memory_bytes)")
KUEUE_QUEUE_METRICS = "kueue_(admitted_workloads_total|cluster_queue_resource_usage|pending_workloads)"
KUEUE_API = "kueue.x-k8s.io/v1beta1"
# labels of the template that are not about cost attribution
NOT_ATTRIBUTION = ("app.kubernetes.io/", "batch.kubernetes.io/", "controller-uid", "job-name", RUN_LABEL)
INVALID = re.compile(r"[^a-zA-Z0-9_]")
SLACK_SECONDS = 120


def ksm_label(key):
    """The name kube-state-metrics gives a pod label: label_ + the key with [^a-zA-Z0-9_] as _."""
    return "label_" + INVALID.sub("_", key)


def quote(value):
    return '"%s"' % str(value).replace("\\", "\\\\").replace('"', '\\"')


def attribution_labels(job):
    """{key: value} of the Job's pod template labels that attribute cost (team, pool, cost centre, queue);
    not a node label the pods also select on (a KAI shard's pool label: placement, not ownership)."""
    template = ((job or {}).get("spec") or {}).get("template") or {}
    labels = objects.meta(template).get("labels") or {}
    placement = set(((template.get("spec") or {}).get("nodeSelector") or {}))
    return dict((k, str(v)) for k, v in sorted(labels.items())
                if k not in placement and not any(k.startswith(p) or k == p for p in NOT_ATTRIBUTION))


def prometheus_query(ctx):
    url = ctx.params["prometheus_url"].rstrip("/")

    def query(promql):
        try:
            resp = open_url("%s/api/v1/query?%s" % (url, urlencode({"query": promql})), timeout=15,
                            validate_certs=ctx.params.get("prometheus_validate_certs", True))
            data = json.loads(resp.read())
        except Exception as exc:  # URLError, HTTPError, timeouts, bad JSON: one message naming the URL
            raise ApiError("GET", "Prometheus query", promql, status=getattr(exc, "code", None),
                           message=str(exc), url=url)
        return (data.get("data") or {}).get("result") or []
    return query


def _names(series):
    return sorted(set(k for s in series for k in (s.get("metric") or {}) if k != "__name__"))


def _describe(series, limit=4):
    out = []
    for s in series[:limit]:
        metric = dict(s.get("metric") or {})
        name = metric.pop("__name__", "?")
        out.append("%s{%s}" % (name, ", ".join("%s=%s" % (k, metric[k]) for k in sorted(metric))))
    if len(series) > limit:
        out.append("... %d series in all" % len(series))
    return "; ".join(out)


def check(ctx, query, now):
    """Result of the step given a PromQL query function (pure apart from the queries and one read)."""
    training = ctx.state.get("training") or {}
    queue = ctx.state.get("queue") or {}
    namespace = training.get("namespace") or queue.get("namespace") or ctx.params["namespace"]
    job_name = training.get("job") or queue.get("job")
    started = training.get("started") or now - 3600
    window = int(math.ceil(max(60, now - started + SLACK_SECONDS)))
    # Indexed Job pods are <job>-<index>-<suffix>; a Job name is a DNS label ('.' the only regex character)
    pods = '%s-.*' % job_name.replace(".", "[.]") if job_name else ".+"
    job = objects.pick(objects.prepare(ctx, (ctx.params.get("manifests") or {}).get("training"), "training"),
                       "Job", "training", required=False)
    want = attribution_labels(job)
    backend = ctx.params.get("queue_backend") or "none"
    evidence, failures = [], []
    figures = {"window_seconds": window}

    # GPU series of the training pods
    gpu = query('last_over_time(%s{namespace=%s, pod=~%s}[%ds])' % (GPU_METRIC, quote(namespace), quote(pods), window))
    figures["gpu_series"] = len(gpu)
    if gpu:
        evidence.append("GPU: %d %s series of the training pods carry: %s" % (len(gpu), GPU_METRIC,
                                                                              ", ".join(_names(gpu))))
        evidence.append("GPU series: %s" % _describe(gpu))
    else:
        renamed = query('last_over_time(%s{exported_namespace=%s, exported_pod=~%s}[%ds])' % (
            GPU_METRIC, quote(namespace), quote(pods), window))
        unmapped = [] if renamed else query('count(last_over_time(%s[%ds]))' % (GPU_METRIC, window))
        if renamed:
            failures.append("the GPU series name the pods as exported_pod/exported_namespace: the ServiceMonitor "
                            "of dcgm-exporter needs honor_labels: true (monitoring_service_monitor.honor_labels)")
            evidence.append("GPU series: %s" % _describe(renamed))
        elif unmapped and float((unmapped[0].get("value") or [0, "0"])[1]) > 0:
            failures.append("%s series exist but none names a pod of %s in namespace %s: dcgm-exporter's pod "
                            "mapping is off (DCGM_EXPORTER_KUBERNETES) or cannot read the kubelet's pod-resources "
                            "socket" % (GPU_METRIC, job_name or "the training Job", namespace))
        else:
            failures.append("no %s series in Prometheus in the last %d s: is dcgm-exporter scraped "
                            "(playbooks/monitoring.yml, its ServiceMonitor)?" % (GPU_METRIC, window))

    # the pods' team, pool, cost centre and queue labels, as kube-state-metrics exports them
    pod_labels = query('last_over_time(%s{namespace=%s, pod=~%s}[%ds])' % (
        POD_LABELS_METRIC, quote(namespace), quote(pods), window))
    figures["pod_label_series"] = len(pod_labels)
    carried = _names(pod_labels)
    missing = [k for k in want if ksm_label(k) not in carried]
    figures["labels_wanted"] = ", ".join(sorted(want)) or "-"
    figures["labels_missing"] = ", ".join(missing) or "-"
    if not pod_labels:
        failures.append("no %s series of the training pods: kube-state-metrics is not scraped, or runs without "
                        "the pods resource" % POD_LABELS_METRIC)
    else:
        evidence.append("workload labels: %d %s series carry: %s" % (len(pod_labels), POD_LABELS_METRIC,
                                                                     ", ".join(carried)))
        if missing:
            failures.append("%s lacks %s: start kube-state-metrics with --metric-labels-allowlist=pods=[%s] "
                            "(kube-prometheus-stack: kube-state-metrics.metricLabelsAllowlist)" % (
                                POD_LABELS_METRIC, ", ".join(ksm_label(k) for k in missing), ",".join(missing)))
    if gpu and pod_labels:
        keep = [ksm_label(k) for k in want if k not in missing]
        # one kube_pod_labels series per pod on the right (a pod relabelled within the window has two)
        joined = query('count(last_over_time(%s{namespace=%s, pod=~%s}[%ds]) * on (namespace, pod) group_left(%s) '
                       'topk by (namespace, pod) (1, last_over_time(%s{namespace=%s}[%ds])))' % (
                           GPU_METRIC, quote(namespace), quote(pods), window, ", ".join(keep),
                           POD_LABELS_METRIC, quote(namespace), window))
        count = int(float((joined[0].get("value") or [0, "0"])[1])) if joined else 0
        figures["gpu_series_attributed"] = count
        evidence.append("%d GPU series join kube_pod_labels on (namespace, pod)" % count)
        if not count:
            failures.append("no GPU series joins kube_pod_labels on (namespace, pod): GPU time cannot be "
                            "attributed to team, pool and cost centre")

    # the queue's own series
    queue_name = queue.get("queue")
    if backend == "none":
        evidence.append("queue: no queue backend, no queue series asked for")
    elif not queue_name:
        failures.append("the training Job names no %s queue, so no queue series can be matched" % backend)
    else:
        if backend == "kai":
            selector = '{__name__=~%s, queue_name=%s}' % (quote(KAI_QUEUE_METRICS), quote(queue_name))
            where = "KAI queue %s" % queue_name
        else:
            local = ctx.kube.get(KUEUE_API, "LocalQueue", queue_name, namespace)
            cluster_queue = ((local or {}).get("spec") or {}).get("clusterQueue") or queue_name
            selector = '{__name__=~%s, cluster_queue=%s}' % (quote(KUEUE_QUEUE_METRICS), quote(cluster_queue))
            where = "Kueue ClusterQueue %s (of LocalQueue %s)" % (cluster_queue, queue_name)
        series = query('last_over_time(%s[%ds])' % (selector, window))
        figures["queue_series"] = len(series)
        if series:
            evidence.append("queue: %d series of the %s carry: %s" % (len(series), where, ", ".join(_names(series))))
            evidence.append("queue series: %s" % _describe(series))
        elif backend == "kai":
            failures.append("no series of the %s (%s): is the KAI queue controller scraped? (a ServiceMonitor "
                            "for the Service queue-controller, port metrics, in KAI's namespace: KAI writes one "
                            "only with its chart's prometheus.enabled)" % (where, selector))
        else:
            failures.append("no series of the %s (%s): is the Kueue controller's metrics endpoint scraped?" % (
                where, selector))
    if failures:
        return Result("labels-exported", FAIL, "; ".join(failures), evidence, figures)
    # the counts in the summary too: the report's table of steps shows the summary, not the figures
    return Result("labels-exported", PASS, "%d GPU series name the pods, %d of them joined to kube_pod_labels "
                  "(%d series) carrying %s%s" % (
                      len(gpu), figures.get("gpu_series_attributed", 0), len(pod_labels),
                      ", ".join(sorted(want)) or "no labels", "" if backend == "none" else
                      "; the %s queue %s: %d series" % (backend, queue_name, figures.get("queue_series", 0))),
                  evidence, figures)


@step("labels-exported")
def labels_exported(ctx):
    if not ctx.params.get("prometheus_url"):
        return Result("labels-exported", SKIP, "no prometheus_url: the series cannot be read "
                      "(set workload_acceptance_prometheus_url)")
    return check(ctx, prometheus_query(ctx), ctx.clock())
