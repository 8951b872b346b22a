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
    return exprs


def test_every_kube_state_metrics_series_read_is_rendered_by_the_twin():
    read = set(n for e in shipped_expressions() for n in KSM_NAME.findall(e))
    assert read == {"kube_node_status_allocatable", "kube_daemonset_status_number_unavailable",
                    "kube_pod_status_phase"}
    assert read <= set(ksm.METRIC_NAMES), sorted(read - set(ksm.METRIC_NAMES))


def test_the_gpu_resource_regex_matches_the_labels_kube_state_metrics_writes():
    regex = re.compile("^(?:%s)$" % U.KSM_GPU_RESOURCE_REGEX)   # PromQL =~ is anchored
    for resource in ("nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb",
                     "nvidia.com/mig-3g.40gb"):
        label, unit = ksm.resource_unit(resource)
        assert regex.match(label) and unit == "integer", (resource, label)
    for resource in ("cpu", "memory", "pods", "ephemeral-storage"):
        assert not regex.match(ksm.resource_unit(resource)[0])
