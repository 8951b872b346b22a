"""The kube-state-metrics series the shipped rules, dashboards and usage report read are the ones
the simulator's kube-state-metrics twin (simcluster/ksm.py) renders, with the resource label values
the rules match: a new rule on a series the twin does not export fails here, naming it."""
import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import dashboards
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import objects as monitoring
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import usage_report
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream as U

from simcluster import ksm

KSM_NAME = re.compile(r"\bkube_[a-z_]+\b")


def shipped_expressions():
    exprs = [r["expr"] for g in monitoring.prometheus_rule()["spec"]["groups"] for r in g["rules"]]
    exprs += [q for cm in monitoring.dashboards() for _b, _p, q in dashboards.queries(cm)]
    exprs += [usage_report.UTIL_QUERY, usage_report.FAILED_QUERY_PLAIN]
    exprs += [expr for _key, expr in usage_report.WORKLOAD_QUERIES]
    return exprs


def test_every_kube_state_metrics_series_read_is_rendered_by_the_twin():
    read = set(n for e in shipped_expressions() for n in KSM_NAME.findall(e))
    assert read == {"kube_node_status_allocatable", "kube_daemonset_status_number_unavailable",
                    "kube_pod_status_phase", "kube_pod_owner", "kube_pod_labels", "kube_pod_container_info",
                    "kube_pod_container_status_restarts_total", "kube_pod_container_status_terminated_reason",
                    "kube_pod_container_status_last_terminated_reason", "kube_job_status_failed"}
    assert read <= set(ksm.METRIC_NAMES), sorted(read - set(ksm.METRIC_NAMES))


def test_the_gpu_resource_regex_matches_the_labels_kube_state_metrics_writes():
    regex = re.compile("^(?:%s)$" % U.KSM_GPU_RESOURCE_REGEX)   # PromQL =~ is anchored
    for resource in ("nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb",
                     "nvidia.com/mig-3g.40gb"):
        label, unit = ksm.resource_unit(resource)
        assert regex.match(label) and unit == "integer", (resource, label)
    for resource in ("cpu", "memory", "pods", "ephemeral-storage"):
        assert not regex.match(ksm.resource_unit(resource)[0])


def test_the_report_reads_pod_labels_under_the_name_the_twin_writes():
    for key in ("gpu.skaffon.io/model", "gpu.example.org/dataset", "camelCase/Key"):
        assert usage_report.ksm_label_name(key) == ksm.prometheus_label(key)
