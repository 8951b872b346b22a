"""chart_images: what the real GPU Operator chart needs, with and without the mirror."""

import yaml

from ansible_collections.skaffon.gpu_platform.plugins.filter.driver_plan import driver_plan
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.chart_images import images, public
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.values import operator_values
from kit import charts
from kit.paths import gpu_operator_chart

CHART = gpu_operator_chart("v26.7.0")
MIRROR = "mirror.example:5000/nvidia"


def render(values):
    return charts.render(CHART, values, "helm")


def plan():
    facts = {"gpu-a": {"gpu_node": {"gpu_host": True, "gpu_count": 2, "driver": {"state": "none"},
                                    "toolkit": {"state": "none"},
                                    "container_runtime": {"nvidia_runtime": False, "nvidia_default": False},
                                    "nouveau_loaded": False,
                                    "kernel": {"headers_installed": True, "release": "6.8.0-45-generic"}}}}
    return driver_plan(facts)


def test_default_render_lists_operands_env_images_hooks_and_driver_per_os():
    listed = images(render({}), driver_os=("ubuntu22.04", "ubuntu24.04"))
    names = {i["image"]: i["sources"] for i in listed}
    assert "nvcr.io/nvidia/gpu-operator:v26.7.0" in names
    assert any("env VALIDATOR_IMAGE" in s for s in names["nvcr.io/nvidia/gpu-operator:v26.7.0"])
    assert any("Job/gpu-operator-upgrade-crd" in s for s in names["nvcr.io/nvidia/gpu-operator:v26.7.0"])
    assert "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0" in names
    assert "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04" in names
    assert "nvcr.io/nvidia/driver:595.91.07-ubuntu24.04" in names
    assert "registry.k8s.io/nfd/node-feature-discovery:v0.19.0" in names
    assert "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless" in names
    # disabled (gds) and sandbox-only components (sandboxWorkloads.enabled=false) are not needed
    assert not any(part in i for i in names for part in ("nvidia-fs", "vgpu", "kubevirt", "cc-manager", "sandbox"))
    assert public(listed) == sorted(names)


def test_mirror_values_leave_no_public_registry_in_any_rendered_object():
    values = operator_values(plan(), {}, image_mirror=MIRROR)
    docs = render(values)
    listed = images(docs)
    assert listed and public(listed, MIRROR) == []
    text = yaml.safe_dump_all(docs)
    for registry in ("nvcr.io", "registry.k8s.io", "ghcr.io", "docker.io", "quay.io"):
        assert registry + "/" not in text, registry


def test_each_upstream_image_pairs_with_its_mirror_image():
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.chart_images import mirror_pairs
    upstream = images(render(operator_values(plan(), {})))
    mirrored = images(render(operator_values(plan(), {}, image_mirror=MIRROR)))
    pairs = mirror_pairs(upstream, mirrored)
    assert {p["source"] for p in pairs} == {i["image"] for i in upstream}
    assert all(p["destination"] and p["destination"].startswith(MIRROR + "/") for p in pairs), pairs
    nfd = [p for p in pairs if "node-feature-discovery" in p["source"]]
    assert nfd and nfd[0]["destination"].endswith("/nfd/node-feature-discovery:v0.19.0")
