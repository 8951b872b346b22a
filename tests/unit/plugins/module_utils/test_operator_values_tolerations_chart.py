"""The pool tolerations operator_values computes, rendered by the real chart (helm template):
the ClusterPolicy hands them to every operand DaemonSet, the NFD worker DaemonSet gets its own."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.values import operator_values
from kit import charts
from kit.paths import gpu_operator_chart

pytestmark = pytest.mark.needs_shared
PLAN = {"driver_enabled": True, "toolkit_enabled": True, "node_labels": {}, "warnings": [], "errors": []}
TAINT = {"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}


def test_real_chart_renders_the_pool_tolerations():
    values = operator_values(PLAN, pool_taints=[TAINT])
    docs = charts.render(gpu_operator_chart("v26.7.0"), values, "helm3")
    policy = next(d for d in docs if d["kind"] == "ClusterPolicy")
    assert policy["spec"]["daemonsets"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, dict(TAINT, operator="Equal")]
    worker = next(d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"].endswith("-worker"))
    assert dict(TAINT, operator="Equal") in worker["spec"]["template"]["spec"]["tolerations"]
