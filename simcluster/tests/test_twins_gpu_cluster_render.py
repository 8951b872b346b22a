"""What the GPU Operator twin renders for a GPUCluster, against the operator's own golden files.

Port of TestGPUClusterRenderGolden (NVIDIA/gpu-operator v26.7.0, internal/state/
gpucluster_render_test.go): the same sample CRs (sampleGPUCluster, fullSpecGPUCluster,
PassthroughSupport, dcgm on, exporter embedded / remote engine), namespace test-operator and the
test images of the Go tests' environment. The twin renders no RBAC or ServiceAccounts, so only the
kinds it renders are compared, object by object.
"""

import copy
import os

import pytest
import yaml

from simcluster.twins import gpu_cluster

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "upstream", "gpu-operator",
                      "gpucluster-v26.7.0", "internal", "state", "testdata", "golden")
KINDS = {"DeviceClass", "DaemonSet", "Deployment", "ValidatingAdmissionPolicy",
         "ValidatingAdmissionPolicyBinding", "ResourceClaimTemplate", "Service"}
ENV = {"VALIDATOR_IMAGE": "nvcr.io/nvidia/gpu-operator-validator:test",
       "DCGM_IMAGE": "nvcr.io/nvidia/cloud-native/dcgm:test",
       "DCGM_EXPORTER_IMAGE": "nvcr.io/nvidia/k8s/dcgm-exporter:test"}


def sample():
    """sampleGPUCluster() of dra_driver_test.go."""
    return {"draDriver": {"repository": "nvcr.io/nvidia", "image": "k8s-dra-driver-gpu", "version": "v0.1.0",
                          "imagePullPolicy": "IfNotPresent",
                          "featureGates": {"MPSSupport": True, "AdminAccess": False}},
            "daemonsets": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                            "effect": "NoSchedule"}],
                           "priorityClassName": "system-node-critical"},
            "hostPaths": {"driverInstallDir": "/run/nvidia/driver", "kubeletRootDir": "/var/lib/kubelet"}}


def full_spec():
    """fullSpecGPUCluster() of gpucluster_render_test.go."""
    spec = sample()
    spec["draDriver"]["gpus"] = {"kubeletPlugin": {
        "env": [{"name": "GPUS_EXTRA", "value": "1"}],
        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                      "requests": {"cpu": "100m", "memory": "128Mi"}},
        "healthcheck": {"port": 52000}}}
    spec["draDriver"]["computeDomains"] = {
        "enabled": True, "controller": {"env": [{"name": "CD_CONTROLLER_EXTRA", "value": "1"}]},
        "kubeletPlugin": {"env": [{"name": "CD_PLUGIN_EXTRA", "value": "1"}],
                          "resources": {"limits": {"cpu": "300m", "memory": "512Mi"},
                                        "requests": {"cpu": "200m", "memory": "64Mi"}}}}
    return spec


def golden(name):
    path = os.path.join(GOLDEN, name + ".yaml")
    if not os.path.exists(path):
        pytest.skip("golden file %s not found (../shared next to the repo?)" % path)
    with open(path, encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d and d.get("kind") in KINDS]


def key(obj):
    return (obj["kind"], obj["metadata"]["name"])


def _sorted_env(obj):
    """The Go renderer orders nothing differently from the manifest, but maps (labels) are
    unordered either way: compare as data, after a YAML round trip (quoting, folding)."""
    return yaml.safe_load(yaml.safe_dump(obj))


def compare(rendered, name):
    want = {key(o): _sorted_env(o) for o in golden(name)}
    got = {key(o): _sorted_env(o) for o in rendered if o["kind"] in KINDS}
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k] == want[k], k


def env(name):
    return ENV.get(name)


def exporter(spec_exporter):
    spec = sample()
    spec["dcgmExporter"] = spec_exporter
    return spec


@pytest.mark.parametrize("name,render", [
    ("gpucluster-dra-driver-gpus-only", lambda: gpu_cluster.render_dra_driver(sample(), "test-operator", env)),
    ("gpucluster-dra-driver-full-spec", lambda: gpu_cluster.render_dra_driver(full_spec(), "test-operator", env)),
    ("gpucluster-dra-driver-passthrough-support", lambda: gpu_cluster.render_dra_driver(
        dict(sample(), draDriver=dict(sample()["draDriver"], featureGates={
            "MPSSupport": True, "AdminAccess": False, "PassthroughSupport": True})), "test-operator", env)),
    ("gpucluster-dra-validation", lambda: gpu_cluster.render_dra_validation(sample(), "test-operator", env)),
    ("gpucluster-dcgm", lambda: gpu_cluster.render_dcgm(dict(sample(), dcgm={"enabled": True}),
                                                        "test-operator", env)),
    ("gpucluster-dcgm-exporter-embedded", lambda: gpu_cluster.render_dcgm_exporter(
        exporter({}), "test-operator", env)),
    ("gpucluster-dcgm-exporter-remote-engine", lambda: gpu_cluster.render_dcgm_exporter(
        dict(exporter({}), dcgm={"enabled": True}), "test-operator", env)),
])
def test_golden(name, render):
    compare(render(), name)


def test_device_classes_select_by_the_driver_type_attribute():
    objs = gpu_cluster.render_dra_driver(sample(), "gpu-operator", env)
    classes = {o["metadata"]["name"]: o["spec"]["selectors"][0]["cel"]["expression"]
               for o in objs if o["kind"] == "DeviceClass"}
    assert sorted(classes) == ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"]
    assert classes["mig.nvidia.com"] == ("device.driver == 'gpu.nvidia.com' && "
                                         "device.attributes['gpu.nvidia.com'].type == 'mig'")


def test_compute_domains_add_the_controller_and_two_device_classes():
    spec = copy.deepcopy(sample())
    spec["draDriver"]["computeDomains"] = {"enabled": True}
    objs = gpu_cluster.render_dra_driver(spec, "gpu-operator", env)
    names = {key(o) for o in objs}
    assert ("Deployment", "nvidia-dra-driver-controller") in names
    assert ("DeviceClass", "compute-domain-daemon.nvidia.com") in names
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    assert [c["name"] for c in ds["spec"]["template"]["spec"]["containers"]] == ["gpus", "compute-domains"]


def test_image_falls_back_to_the_operator_env():
    spec = sample()
    spec["draDriver"] = {}
    objs = gpu_cluster.render_dra_driver(spec, "gpu-operator",
                                         {"DRA_DRIVER_IMAGE": "reg.local/dra:v9",
                                          "VALIDATOR_IMAGE": "reg.local/op:v1"}.get)
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "reg.local/dra:v9"


def test_missing_images_fail_the_state_as_the_operator_words_it():
    spec = dict(sample(), dcgmExporter={})
    states = {name: err for name, _, err in gpu_cluster.render_states(spec, "gpu-operator", lambda n: None)}
    assert states["state-dcgm-exporter"] == (
        "failed to create k8s objects from manifests: failed to construct state-dcgm-exporter image path: "
        "empty image path provided through both CR and ENV DCGM_EXPORTER_IMAGE")
    assert states["state-dra-driver"] == (
        "failed to create k8s objects from manifests: failed to construct DRA driver spec: failed to construct "
        "DRA driver validator image path: empty image path provided through both CR and ENV VALIDATOR_IMAGE")
    assert states["state-dcgm"] is None          # off unless enabled: true


def test_exporter_is_off_without_its_section():
    assert [n for n, objs, _ in gpu_cluster.render_states(sample(), "ns", env) if objs] == [
        "state-dra-driver", "state-dra-validation"]
