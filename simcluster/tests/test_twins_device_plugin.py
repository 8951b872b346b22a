"""Device plugin twin: time-slicing, the ConfigMap-edit trap, invalid configs."""
import os

import pytest
import yaml

from simcluster.twins.device_plugin import ConfigError, parse_config
from kit.paths import GPU_OPERATOR
from simcluster.twins.testkit import TwinCluster, pod, status_word

EXAMPLES = os.path.join(GPU_OPERATOR, "examples")
pytestmark = [pytest.mark.needs_shared]
DS = "nvidia-device-plugin-daemonset"


def ts_config(replicas, rename=None, fail_gt1=None, misplaced=False):
    ts = {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
    flags = {"migStrategy": "none"}
    extra = {}
    if rename is not None:
        extra["renameByDefault"] = rename
    if fail_gt1 is not None:
        extra["failRequestsGreaterThanOne"] = fail_gt1
    if misplaced:
        flags.update(extra)        # the k8s-device-plugin#1433 mistake
    else:
        ts.update(extra)
    return yaml.safe_dump({"version": "v1", "flags": flags, "sharing": {"timeSlicing": ts}})


def configmap(data, name="time-slicing-config", ns="gpu-operator"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": data}


def install(c, data, default="any"):
    c.namespace("gpu-operator", {"pod-security.kubernetes.io/enforce": "privileged"})
    c.store.create("configmaps", configmap(data))
    c.install_operator(devicePlugin={"config": {"name": "time-slicing-config", "default": default}})


def restart_device_plugin(c, stamp):
    c.store.merge_patch("daemonsets.apps", "gpu-operator", DS, {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}}}})


@pytest.fixture(params=["real"])
def store(request):
    """The real store (with admission); the fake store runs the first test too."""
    return request.param


def test_parse_config_accepts_the_upstream_examples():
    for name in ("time-slicing-config-all.yaml", "time-slicing-config-fine.yaml"):
        with open(os.path.join(EXAMPLES, name), encoding="utf-8") as fh:
            cm = yaml.safe_load(fh)
        for text in cm["data"].values():
            cfg = parse_config(text)
            assert cfg["resources"][0]["name"] == "nvidia.com/gpu"


@pytest.mark.parametrize("text,why", [
    (ts_config(4, rename=True, misplaced=True), 'unknown field "renameByDefault"'),
    ("version: v2\n", "unknown version: v2"),
    ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 0}\n",
     "invalid number of replicas"),
    ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2}\n",
     "incorrect format for resource name"),
])
def test_parse_config_refuses_mistakes(text, why):
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    assert why in str(err.value)


def test_time_slicing_multiplies_capacity_and_sets_labels(store):
    with TwinCluster("default.yaml", store=store) as c:
        install(c, {"any": ts_config(4)})
        c.wait(lambda: c.allocatable("gpu-h100-1") == "32" and c.allocatable("gpu-l40s-1") == "16")
        c.wait(lambda: c.labels("gpu-l40s-1").get("nvidia.com/gpu.replicas") == "4")
        labels = c.labels("gpu-l40s-1")
        assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
        assert c.node("gpu-l40s-1")["status"]["capacity"]["nvidia.com/gpu"] == "16"


def test_rename_by_default_advertises_gpu_shared(store):
    with TwinCluster("default.yaml", store=store) as c:
        install(c, {"any": ts_config(2, rename=True, fail_gt1=True)})
        c.wait(lambda: c.allocatable("gpu-l40s-1", "nvidia.com/gpu.shared") == "8")
        assert c.allocatable("gpu-l40s-1") == "0"
        c.wait(lambda: c.labels("gpu-l40s-1").get("nvidia.com/gpu.replicas") == "2")
        assert c.labels("gpu-l40s-1")["nvidia.com/gpu.product"] == "NVIDIA-L40S"
        c.store.create("pods", pod("shared", resources={"limits": {"nvidia.com/gpu.shared": "1"}}))
        c.wait(lambda: status_word(c.pod("default", "shared")) == "Running")
        c.store.create("pods", pod("greedy", resources={"limits": {"nvidia.com/gpu.shared": "2"}}))
        got = c.wait(lambda: status_word(c.pod("default", "greedy")) == "UnexpectedAdmissionError"
                     and c.pod("default", "greedy"))
        assert got["status"]["phase"] == "Failed"
        assert "maximum request size for shared resources is 1" in got["status"]["message"]


@pytest.mark.parametrize("store", ["fake", "real"])
def test_editing_the_configmap_needs_a_device_plugin_restart(store):
    """The real trap: the plugin reads its config at start only."""
    with TwinCluster("default.yaml", store=store) as c:
        install(c, {"any": ts_config(4)})
        c.wait(lambda: c.allocatable("gpu-l40s-1") == "16")
        c.store.merge_patch("configmaps", "gpu-operator", "time-slicing-config",
                            {"data": {"any": ts_config(2)}})
        c.settle()
        assert c.allocatable("gpu-l40s-1") == "16", "a ConfigMap edit alone must change nothing"
        restart_device_plugin(c, "2026-01-01T00:00:00Z")
        # allocatable (device plugin via kubelet) and labels (GFD) are separate writes, as in
        # a real cluster: wait for both.
        c.wait(lambda: c.allocatable("gpu-l40s-1") == "8" and c.allocatable("gpu-h100-1") == "16"
               and c.labels("gpu-l40s-1").get("nvidia.com/gpu.replicas") == "2",
               what="new replicas after the restart")


def test_policy_change_rolls_the_device_plugin(store):
    with TwinCluster("default.yaml", store=store) as c:
        install(c, {"any": ts_config(4), "two": ts_config(2)})
        c.wait(lambda: c.allocatable("gpu-l40s-1") == "16")
        c.patch_policy({"devicePlugin": {"config": {"name": "time-slicing-config", "default": "two"}}})
        c.wait(lambda: c.allocatable("gpu-l40s-1") == "8")


def test_per_node_config_label_is_followed(store):
    with TwinCluster("default.yaml", store=store) as c:
        install(c, {"any": ts_config(4), "none": "version: v1\nflags:\n  migStrategy: none\n"})
        c.wait(lambda: c.allocatable("gpu-l40s-1") == "16")
        c.label("gpu-l40s-1", {"nvidia.com/device-plugin.config": "none"})
        c.wait(lambda: c.allocatable("gpu-l40s-1") == "4", what="label picked up by config-manager")
        assert c.allocatable("gpu-h100-1") == "32"
        c.wait(lambda: c.labels("gpu-l40s-1").get("nvidia.com/gpu.sharing-strategy") == "none")


def test_misplaced_flags_crash_the_device_plugin(store):
    with TwinCluster("default.yaml", store=store) as c:
        install(c, {"any": ts_config(4, rename=True, misplaced=True)})
        pods = c.wait(lambda: [p for p in c.operand_pods(DS) if status_word(p) == "CrashLoopBackOff"])
        log = c.logs("gpu-operator", pods[0]["metadata"]["name"], "nvidia-device-plugin")
        assert 'unknown field "renameByDefault"' in log
        c.wait(lambda: "state-device-plugin" in ((c.condition("Error") or {}).get("message") or ""))
        assert c.policy_state() == "notReady"
        assert c.allocatable("gpu-l40s-1") in (None, "0")

