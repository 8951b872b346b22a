"""The values we compute, rendered by the REAL gpu-operator chart (v26.7.0 from ../shared).

Rendered with the real helm 3 and helm 4 binaries; the ClusterPolicy is validated against
the chart's own ClusterPolicy openAPIV3Schema, strictly (unknown fields fail, as they would
be pruned by the API server and silently lost). What the collection reads from the chart's
objects (labels, selectors, names, container names) is checked against this rendering.
"""
import copy
import os

import jsonschema
import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator import values as ov
from kit.charts import by_kind, render
from kit.paths import CLUSTERPOLICY_CRD as CRD, GPU_OPERATOR as UPSTREAM, gpu_operator_chart

CHART = gpu_operator_chart("v26.7.0")
PUBLIC = ("nvcr.io", "registry.k8s.io", "ghcr.io", "docker.io", "quay.io", "gcr.io")

pytestmark = [pytest.mark.needs_shared, pytest.mark.slow]


def _strict(schema):
    """Copy of an OpenAPI schema where objects refuse unknown properties."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node \
                    and not node.get("x-kubernetes-preserve-unknown-fields"):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(schema)
    return schema


@pytest.fixture(scope="module")
def schema():
    if not os.path.exists(CRD):
        pytest.skip("ClusterPolicy CRD not found at %s (../shared absent)" % CRD)
    with open(CRD) as f:
        crd = yaml.safe_load(f)
    return _strict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


PLAN_HOST = {"driver_enabled": False, "toolkit_enabled": False, "errors": []}
PLAN_NONE = {"driver_enabled": True, "toolkit_enabled": True, "errors": []}


@pytest.mark.parametrize("helm", ["helm3", "helm4"])
@pytest.mark.parametrize("plan", [PLAN_HOST, PLAN_NONE], ids=["host-drivers", "no-drivers"])
def test_cluster_policy_valid_and_follows_values(helm, plan, schema):
    values = ov.operator_values(plan, mig_strategy="mixed", service_monitor=False,
                                device_plugin_config={"name": "ts", "default": "any"},
                                user_values={"migManager": {"config": {"name": "custom-mig"}}})
    docs = render(CHART, values, helm)
    (cp,) = by_kind(docs, "ClusterPolicy")
    jsonschema.validate(cp, schema)
    spec = cp["spec"]
    assert cp["metadata"]["name"] == "cluster-policy"
    assert spec["driver"]["enabled"] is plan["driver_enabled"]
    assert spec["toolkit"]["enabled"] is plan["toolkit_enabled"]
    assert spec["driver"]["useNvidiaDriverCRD"] is False
    assert spec["mig"]["strategy"] == "mixed"
    assert spec["dcgmExporter"]["serviceMonitor"]["enabled"] is False
    assert spec["devicePlugin"]["config"] == {"name": "ts", "default": "any"}
    assert spec["migManager"]["config"]["name"] == "custom-mig"
    for field in ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd",
                  "nodeStatusExporter", "operator", "toolkit"):
        assert field in spec  # CRD `required`


@pytest.mark.parametrize("helm", ["helm3", "helm4"])
def test_operator_deployment_identity(helm):
    """What cluster_policy_wait and mig_config select on is what the chart renders."""
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
    docs = render(CHART, {}, helm)
    (dep,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "gpu-operator"]
    assert dep["metadata"]["namespace"] == "gpu-operator"
    key, value = upstream.GPU_OPERATOR_COMPONENT_SELECTOR.split("=", 1)
    assert dep["metadata"]["labels"][key] == value
    # the trap of issue 9: only the pod template carries `app`
    assert "app" not in dep["metadata"]["labels"]
    assert dep["spec"]["template"]["metadata"]["labels"]["app"] == "gpu-operator"
    selected = [d for d in docs if d["kind"] == "Deployment"
                and d["metadata"]["labels"].get(key) == value]
    assert [d["metadata"]["name"] for d in selected] == ["gpu-operator"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == "gpu-operator" and container["command"] == ["gpu-operator"]
    assert container["image"] == "nvcr.io/nvidia/gpu-operator:v26.7.0"
    env = dict((e["name"], e.get("value")) for e in container["env"])
    assert env["VALIDATOR_IMAGE"] == "nvcr.io/nvidia/gpu-operator:v26.7.0"
    (cp,) = by_kind(docs, "ClusterPolicy")
    assert cp["metadata"]["name"] == "cluster-policy"
    (nfd,) = by_kind(docs, "DaemonSet")
    assert nfd["metadata"]["name"] == "gpu-operator-node-feature-discovery-worker"
    assert nfd["spec"]["template"]["spec"]["containers"][0]["command"] == ["nfd-worker"]
    # chart default: operands and NFD workers tolerate only the nvidia.com/gpu taint (FACTS.md)
    assert cp["spec"]["daemonsets"]["tolerations"] == [
        {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]


def test_a_misspelt_spec_field_fails_validation(schema):
    """The strict schema check is not vacuous."""
    (cp,) = by_kind(render(CHART, {}, "helm3"), "ClusterPolicy")
    cp["spec"]["devicePlugin"]["configs"] = {"name": "x"}
    with pytest.raises(jsonschema.ValidationError, match="configs"):
        jsonschema.validate(cp, schema)


@pytest.mark.parametrize("helm", ["helm3", "helm4"])
def test_mirror_leaves_no_public_registry(helm, schema):
    """Every image, hook Jobs and the operator's image env vars included, comes from the mirror."""
    values = ov.operator_values(PLAN_NONE, image_mirror="mirror.example:5000/nvidia",
                                image_pull_secrets=["regcred"])
    values = ov.deep_merge(values, {"nodeStatusExporter": {"enabled": True}})
    docs = render(CHART, values, helm, args=["--is-upgrade"])     # --is-upgrade: pre-upgrade hooks too
    text = yaml.safe_dump_all(docs)
    for registry in PUBLIC:
        assert registry not in text, registry
    (cp,) = by_kind(docs, "ClusterPolicy")
    jsonschema.validate(cp, schema)
    assert cp["spec"]["toolkit"]["imagePullSecrets"] == ["regcred"]
    (nfd,) = by_kind(docs, "DaemonSet")
    assert nfd["spec"]["template"]["spec"]["containers"][0]["image"].startswith(
        "mirror.example:5000/nvidia/nfd/node-feature-discovery:")
    assert nfd["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    (dep,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "gpu-operator"]
    assert dep["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    env = dict((e["name"], e.get("value")) for e in dep["spec"]["template"]["spec"]["containers"][0]["env"])
    assert env["VALIDATOR_IMAGE"].startswith("mirror.example:5000/nvidia/")
    assert env["DRIVER_MANAGER_IMAGE"].startswith("mirror.example:5000/nvidia/")
    jobs = dict((j["metadata"]["name"], j) for j in by_kind(docs, "Job"))
    assert "gpu-operator-upgrade-crd" in jobs
    for job in jobs.values():
        for c in job["spec"]["template"]["spec"]["containers"]:
            assert c["image"].startswith("mirror.example:5000/nvidia/"), (job["metadata"]["name"], c["image"])


@pytest.mark.parametrize("helm", ["helm3", "helm4"])
def test_time_slicing_configmap(helm):
    data = {"any": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"}
    docs = render(CHART, {"devicePlugin": {"config": {"create": True, "name": "ts", "default": "any",
                                                      "data": data}}}, helm)
    (cm,) = [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"] == "ts"]
    assert cm["data"] == data
    # without a config the chart renders only the NFD subchart's own ConfigMaps
    assert [d["metadata"]["name"] for d in by_kind(render(CHART, {}, helm), "ConfigMap")] == [
        "gpu-operator-node-feature-discovery-master-conf", "gpu-operator-node-feature-discovery-worker-conf"]


def test_real_chart_values_match_the_shared_values_file():
    """../shared/upstream/gpu-operator/values.yaml is the v26.7.0 chart's values.yaml."""
    import tarfile
    if not os.path.exists(CHART):
        pytest.skip("real chart absent")
    with tarfile.open(CHART) as tar:
        chart_values = yaml.safe_load(tar.extractfile("gpu-operator/values.yaml").read())
    with open(os.path.join(UPSTREAM, "values.yaml")) as f:
        assert yaml.safe_load(f) == chart_values
