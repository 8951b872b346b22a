"""The names the modules read are the ones the REAL gpu-operator chart renders (issue 9).

`helm template` of ../shared/upstream/gpu-operator/charts/gpu-operator-v26.7.0.tgz: the operator
Deployment carries app.kubernetes.io/component=gpu-operator (only its pod template has app=),
its container is gpu-operator, and no NFD object matches our selector.
"""
import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.cluster_policy import OPERATOR_SELECTOR

from kit import charts
from kit.paths import gpu_operator_chart

CHART = gpu_operator_chart("v26.7.0")

pytestmark = [pytest.mark.needs_shared]


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in (term.split("=", 1) for term in selector.split(",")))


@pytest.fixture(scope="module", params=["gpu-operator", "my-release"])
def rendered(request):
    return charts.render(CHART, helm="helm", release=request.param, namespace="ops")


def test_operator_deployment_is_found_by_the_component_label_only(rendered):
    workloads = [d for d in rendered if d["kind"] in ("Deployment", "DaemonSet")]
    found = [d for d in workloads if matches(OPERATOR_SELECTOR, d["metadata"].get("labels") or {})]
    assert [(d["kind"], d["metadata"]["name"]) for d in found] == [("Deployment", "gpu-operator")]
    dep = found[0]
    assert OPERATOR_SELECTOR == upstream.GPU_OPERATOR_COMPONENT_SELECTOR == "app.kubernetes.io/component=gpu-operator"
    assert "app" not in dep["metadata"]["labels"]                       # the old selector found nothing
    assert dep["spec"]["template"]["metadata"]["labels"]["app"] == "gpu-operator"
    assert [c["name"] for c in dep["spec"]["template"]["spec"]["containers"]] == [upstream.GPU_OPERATOR_CONTAINER]
    # NFD (subchart) objects must not be mistaken for the operator
    assert all(not matches(OPERATOR_SELECTOR, d["metadata"].get("labels") or {})
               for d in workloads if "node-feature-discovery" in d["metadata"]["name"])


def test_nfd_worker_config_yields_the_pci_label_we_read(rendered):
    """NFD labels feature.node.kubernetes.io/pci-<vendor>.present for the whitelisted classes: the chart's
    worker config must keep vendor as the only label field and list the GPU classes (0300 VGA, 0302 3D)."""
    conf = [d for d in rendered if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("worker-conf")]
    pci = yaml.safe_load(conf[0]["data"]["nfd-worker.conf"])["sources"]["pci"]
    assert pci["deviceLabelFields"] == ["vendor"] and {"0300", "0302"} <= set(pci["deviceClassWhitelist"])
    assert upstream.LABEL_NFD_NVIDIA_PCI == "feature.node.kubernetes.io/pci-10de.present"
