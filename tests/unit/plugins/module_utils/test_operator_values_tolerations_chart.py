"""The pool tolerations operator_values computes, rendered by the real chart (helm template):
the ClusterPolicy hands them to every operand DaemonSet, the NFD worker DaemonSet gets its own."""
import json
import os
import subprocess

import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.values import operator_values

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
CHART = os.path.normpath(os.path.join(REPO, "..", "shared", "upstream", "gpu-operator", "charts",
                                      "gpu-operator-v26.7.0.tgz"))
HELM = os.path.join(REPO, ".venv", "bin", "helm3")
PLAN = {"driver_enabled": True, "toolkit_enabled": True, "node_labels": {}, "warnings": [], "errors": []}
TAINT = {"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}


@pytest.mark.skipif(not (os.path.exists(CHART) and os.path.exists(HELM)), reason="real chart or helm3 absent")
def test_real_chart_renders_the_pool_tolerations(tmp_path):
    values = operator_values(PLAN, pool_taints=[TAINT])
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))
    out = subprocess.run([HELM, "template", "gpu-operator", CHART, "-n", "gpu-operator", "-f", str(path)],
                         check=True, capture_output=True, text=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    policy = next(d for d in docs if d["kind"] == "ClusterPolicy")
    assert policy["spec"]["daemonsets"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, dict(TAINT, operator="Equal")]
    worker = next(d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"].endswith("-worker"))
    assert dict(TAINT, operator="Equal") in worker["spec"]["template"]["spec"]["tolerations"]
