"""monitoring-alert: the Xid is injected only into a standalone DCGM host engine (nvidia-dcgm pod),
addressed by that pod's IP; without one the check says what is missing and which variable sets it."""

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import runner as acceptance
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import checks as acceptance_checks
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.monitoring import AlertProbe

NODE = "gpu-h100-1"


def policy(dcgm):
    return {"metadata": {"name": "cluster-policy"}, "spec": {"dcgm": dcgm}, "status": {"namespace": "gpu-operator"}}


def engine_pod(node=NODE, ready=True, ip="10.244.1.7", app="nvidia-dcgm", name="nvidia-dcgm-x2k4p"):
    return {"metadata": {"name": name, "namespace": "gpu-operator", "labels": {"app": app}},
            "spec": {"nodeName": node},
            "status": {"phase": "Running", "podIP": ip,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class Kube:
    def __init__(self, cluster_policy, pods=()):
        self.policy, self.pods, self.created, self.lists = cluster_policy, list(pods), [], []

    def get(self, api_version, kind, name, namespace=None):
        return self.policy if kind == "ClusterPolicy" else None

    def list(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        self.lists.append((kind, namespace, label_selector, field_selector))
        return [p for p in self.pods if p["metadata"]["namespace"] == namespace], "1"

    def create(self, body, dry_run=False):
        self.created.append(body)
        return body

    def delete(self, *a, **kw):
        pass


class Probe(AlertProbe):
    """Prometheus answers: GPU_UTIL from the node; the alert fires once an Xid was injected."""

    def query(self, promql):
        if promql.startswith("DCGM_FI_DEV_GPU_UTIL"):
            return [{"metric": {"Hostname": NODE, "gpu": "0"}}]
        injected = any(c["spec"]["containers"][0]["command"][-1] == "79" for c in self.ctx.kube.created)
        return [{"metric": {"alertname": "GpuXidFatal", "Hostname": NODE}}] if injected else []


def run(kube):
    ctx = acceptance.Context(kube, dict(cluster_policy="cluster-policy", operator_namespace="gpu-operator",
                                        test_namespace="gpu-acceptance", gpu_nodes=[{"name": NODE}], pod_timeout=1,
                                        prometheus_url="http://prom:9090", alert_timeout=5, tolerations=[]),
                             clock=iter(range(1000)).__next__, sleep=lambda s: None)

    def wait_for(ctx, av, kind, name, ns, pred, timeout):
        return {"status": {"phase": "Succeeded"}}

    def pod_log(ctx, ns, name):
        return "Successfully injected field info.\n"

    return Probe(ctx, acceptance_checks.test_pod, wait_for, pod_log).run()


@pytest.mark.parametrize("dcgm", [{"enabled": False}, {}])
def test_chart_default_skips_and_names_the_variable_without_injecting(dcgm):
    kube = Kube(policy(dcgm), [engine_pod()])
    result = run(kube)
    assert result.status == acceptance.SKIP
    assert "spec.dcgm.enabled=false" in result.summary and "nothing listens on port 5555" in result.summary
    assert "set gpu_operator_dcgm_hostengine: true" in result.summary
    assert result.evidence[0].startswith("DCGM_FI_DEV_GPU_UTIL: 1 series")
    assert kube.created == []                      # no dcgmi pod sent against nothing


@pytest.mark.parametrize("pods", [[], [engine_pod(ready=False)], [engine_pod(node="gpu-l40s-1")],
                                  [engine_pod(app="nvidia-dcgm-exporter", name="nvidia-dcgm-exporter-7xq")]])
def test_enabled_but_no_ready_host_engine_on_the_node_fails_with_what_is_missing(pods):
    kube = Kube(policy({"enabled": True}), pods)
    result = run(kube)
    assert result.status == acceptance.FAIL
    assert "no Ready nvidia-dcgm pod runs on %s in namespace gpu-operator" % NODE in result.summary
    assert kube.created == []
    assert ("Pod", "gpu-operator", "app=nvidia-dcgm", "spec.nodeName=%s" % NODE) in kube.lists


def test_injection_goes_to_the_host_engine_pod_ip_and_passes():
    kube = Kube(policy({"enabled": True, "repository": "mirror.example/nvidia", "image": "dcgm",
                        "version": "4.6.0-1-ubuntu24.04"}), [engine_pod()])
    result = run(kube)
    assert result.status == acceptance.PASS, (result.summary, result.evidence)
    inject, clear = kube.created
    for pod, value in ((inject, "79"), (clear, "0")):
        container = pod["spec"]["containers"][0]
        assert container["image"] == "mirror.example/nvidia/dcgm:4.6.0-1-ubuntu24.04"
        assert container["command"] == ["dcgmi", "test", "--host", "10.244.1.7:5555", "--inject", "--gpuid", "0",
                                        "-f", "230", "-v", value]
        assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": NODE}
    assert "DCGM host engine on %s: pod nvidia-dcgm-x2k4p, 10.244.1.7:5555" % NODE in result.evidence
