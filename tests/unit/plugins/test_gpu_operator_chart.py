"""The stand-in gpu-operator chart renders a ClusterPolicy the real CRD accepts.

Rendered with the real helm 3 and helm 4 binaries; validated against the real
ClusterPolicy openAPIV3Schema from ../shared/upstream, strictly (unknown fields
fail, as they would be pruned by the API server and silently lost).
"""
import copy
import os
import subprocess

import jsonschema
import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils import operator_values as ov

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CHART = os.path.join(REPO, "tests", "charts", "gpu-operator")
UPSTREAM = os.path.join(REPO, "..", "shared", "upstream", "gpu-operator")
CRD = os.path.join(UPSTREAM, "crds", "nvidia.com_clusterpolicies.yaml")
BIN = os.path.join(REPO, ".venv", "bin")
HELMS = [h for h in ("helm3", "helm4") if os.path.exists(os.path.join(BIN, h))]
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


def render(helm, values, tmp_path):
    if not HELMS:
        pytest.skip("no helm binary in .venv/bin")
    vf = tmp_path / "values.yaml"
    vf.write_text(yaml.safe_dump(values))
    out = subprocess.run([os.path.join(BIN, helm), "template", "gpu-operator", CHART, "-n", "gpu-operator",
                          "-f", str(vf)], check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


PLAN_HOST = {"driver_enabled": False, "toolkit_enabled": False, "errors": []}
PLAN_NONE = {"driver_enabled": True, "toolkit_enabled": True, "errors": []}


@pytest.mark.parametrize("helm", ["helm3", "helm4"])
@pytest.mark.parametrize("plan", [PLAN_HOST, PLAN_NONE], ids=["host-drivers", "no-drivers"])
def test_cluster_policy_valid_and_follows_values(helm, plan, schema, tmp_path):
    values = ov.operator_values(plan, mig_strategy="mixed", service_monitor=False,
                                device_plugin_config={"name": "ts", "default": "any"},
                                user_values={"migManager": {"config": {"name": "custom-mig"}}})
    docs = render(helm, values, tmp_path)
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
def test_operator_deployment_identity(helm, tmp_path):
    docs = render(helm, {}, tmp_path)
    (dep,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "gpu-operator"]
    assert dep["metadata"]["namespace"] == "gpu-operator"
    for labels in (dep["metadata"]["labels"], dep["spec"]["template"]["metadata"]["labels"]):
        assert labels["app"] == "gpu-operator"
        assert labels["app.kubernetes.io/component"] == "gpu-operator"
    image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "nvcr.io/nvidia/gpu-operator:v26.7.0"


def test_a_misspelt_spec_field_fails_validation(schema, tmp_path):
    """The strict schema check is not vacuous."""
    (cp,) = by_kind(render("helm3", {}, tmp_path), "ClusterPolicy")
    cp["spec"]["devicePlugin"]["configs"] = {"name": "x"}
    with pytest.raises(jsonschema.ValidationError, match="configs"):
        jsonschema.validate(cp, schema)


@pytest.mark.parametrize("helm", ["helm3", "helm4"])
def test_mirror_leaves_no_public_registry(helm, schema, tmp_path):
    values = ov.operator_values(PLAN_NONE, image_mirror="mirror.example:5000/nvidia",
                                image_pull_secrets=["regcred"])
    values = ov.deep_merge(values, {"nodeStatusExporter": {"enabled": True}})
    docs = render(helm, values, tmp_path)
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
    (dep,) = by_kind(docs, "Deployment")
    assert dep["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]


@pytest.mark.parametrize("helm", ["helm3", "helm4"])
def test_time_slicing_configmap(helm, tmp_path):
    data = {"any": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"}
    docs = render(helm, {"devicePlugin": {"config": {"create": True, "name": "ts", "default": "any",
                                                     "data": data}}}, tmp_path)
    (cm,) = by_kind(docs, "ConfigMap")
    assert cm["metadata"]["name"] == "ts" and cm["data"] == data
    assert not by_kind(render(helm, {}, tmp_path), "ConfigMap")


def test_chart_values_carry_the_upstream_keys(tmp_path):
    """Every leaf key of the stand-in values exists upstream (or is a subchart key)."""
    if not os.path.exists(os.path.join(UPSTREAM, "values.yaml")):
        pytest.skip("upstream values.yaml absent")
    with open(os.path.join(UPSTREAM, "values.yaml")) as f:
        upstream = yaml.safe_load(f)
    with open(os.path.join(CHART, "values.yaml")) as f:
        ours = yaml.safe_load(f)
    missing = []
    for path, _v in ov.leaf_items(ours):
        if path[0] == ov.NFD_SUBCHART and path[1] in ("image", "imagePullSecrets"):
            continue  # subchart's own values
        node = upstream
        for key in path:
            if not isinstance(node, dict) or key not in node:
                missing.append(".".join(path))
                break
            node = node[key]
    assert not missing
