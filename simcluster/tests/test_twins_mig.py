"""MIG manager twin: mig.config -> pending -> success/failed, labels and resources per strategy."""
import json
import os

import pytest
import yaml

from simcluster.twins.mig_manager import MigError, parse_configs, plan
from kit.paths import GPU_OPERATOR as UPSTREAM
from simcluster.twins.testkit import TwinCluster, pod

pytestmark = [pytest.mark.needs_shared]
STATE = "nvidia.com/mig.config.state"
PAUSABLE = ["device-plugin", "gpu-feature-discovery", "dcgm", "dcgm-exporter"]


def default_configs():
    with open(os.path.join(UPSTREAM, "default-mig-parted-config.yaml"), encoding="utf-8") as fh:
        return parse_configs(yaml.safe_load(fh)["data"]["config.yaml"])


@pytest.fixture(params=["real"])
def store(request):
    """The real store (with admission); the fake store runs the first test too."""
    return request.param


def ready_cluster(c, strategy="single", **over):
    c.install_operator(driver={"enabled": False}, toolkit={"enabled": False},
                       mig={"strategy": strategy}, **over)
    c.wait(lambda: c.policy_state() == "ready" and c.ready_reason() == "Reconciled")
    c.wait(lambda: c.labels("gpu-h100-1").get(STATE) == "success")


def set_profile(c, node, name):
    c.label(node, {"nvidia.com/mig.config": name})


def record_labels(c, node):
    """Every value the node's labels take, in order (to see transient states)."""
    seen = []

    def cb(etype, resource, obj):
        if resource == "nodes" and obj["metadata"]["name"] == node:
            seen.append(dict(obj["metadata"].get("labels") or {}))
    c.store.subscribe(cb)
    return seen


def test_plan_uses_device_filters_per_model():
    cfg = default_configs()
    assert plan(cfg, "all-1g.10gb", 2, "NVIDIA-H100-80GB-HBM3") == [{"1g.10gb": 7}] * 2
    assert plan(cfg, "all-1g.10gb", 1, "NVIDIA-A100-SXM4-40GB") == [{"1g.10gb": 4}]
    assert plan(cfg, "all-balanced", 1, "NVIDIA-A100-SXM4-40GB") == [{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}]
    assert plan(cfg, "all-disabled", 3, "NVIDIA-H100-80GB-HBM3") == [None] * 3
    with pytest.raises(MigError, match="unsupported MIG profile 1g.5gb"):
        plan(cfg, "all-1g.5gb", 1, "NVIDIA-H100-80GB-HBM3")
    with pytest.raises(MigError, match="not found"):
        plan(cfg, "all-2g.99gb", 1, "NVIDIA-H100-80GB-HBM3")


@pytest.mark.parametrize("store", ["fake", "real"])
def test_single_strategy_profile(store):
    with TwinCluster("mig.yaml", store=store) as c:
        ready_cluster(c)
        seen = record_labels(c, "gpu-h100-1")
        set_profile(c, "gpu-h100-1", "all-1g.10gb")
        c.wait(lambda: c.labels("gpu-h100-1").get(STATE) == "success"
               and c.allocatable("gpu-h100-1") == "7", what="7 MIG devices as nvidia.com/gpu")
        states = [s.get(STATE) for s in seen]
        assert "pending" in states and states.index("pending") < len(states) - 1
        paused = [s for s in seen if s.get(STATE) == "pending"
                  and all(s.get("nvidia.com/gpu.deploy." + k) == "paused-for-mig-change" for k in PAUSABLE)]
        assert paused, "GPU clients are paused while pending"
        c.wait(lambda: c.labels("gpu-h100-1").get("nvidia.com/gpu.product")
               == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb")
        labels = c.labels("gpu-h100-1")
        assert labels["nvidia.com/gpu.count"] == "7" and labels["nvidia.com/gpu.memory"] == "9984"
        assert labels["nvidia.com/mig.strategy"] == "single"
        assert all(labels["nvidia.com/gpu.deploy." + k] == "true" for k in PAUSABLE)
        c.wait(lambda: c.events("MigConfigApplied", "gpu-h100-1"), what="MigConfigApplied event")


def test_mixed_strategy_matches_the_real_label_set(store):
    with open(os.path.join(UPSTREAM, "examples", "mig-mixed-node-labels.json"), encoding="utf-8") as fh:
        real = json.load(fh)
    with TwinCluster("mig.yaml", store=store) as c:
        ready_cluster(c, strategy="mixed")
        set_profile(c, "gpu-h100-1", "all-balanced")
        c.wait(lambda: c.allocatable("gpu-h100-1", "nvidia.com/mig-1g.10gb") == "2")
        assert c.allocatable("gpu-h100-1", "nvidia.com/mig-2g.20gb") == "1"
        assert c.allocatable("gpu-h100-1", "nvidia.com/mig-3g.40gb") == "1"
        assert c.allocatable("gpu-h100-1") == "0"
        c.wait(lambda: "nvidia.com/mig-3g.40gb.count" in c.labels("gpu-h100-1"))
        labels = c.labels("gpu-h100-1")
        want = {k: v for k, v in real.items() if k.startswith("nvidia.com/mig-")}
        got = {k: v for k, v in labels.items() if k.startswith("nvidia.com/mig-")}
        assert got == want
        for k in ("nvidia.com/mig.strategy", "nvidia.com/mig.config", "nvidia.com/mig.config.state",
                  "nvidia.com/gpu.replicas", "nvidia.com/gpu.product", "nvidia.com/gpu.count"):
            assert labels[k] == real[k], k
        c.store.create("pods", pod("mig", resources={"limits": {"nvidia.com/mig-3g.40gb": "1"}}))
        c.wait(lambda: c.pod("default", "mig")["spec"].get("nodeName") == "gpu-h100-1")


def test_a100_balanced_uses_its_own_device_filter(store):
    with TwinCluster("mig.yaml", store=store) as c:
        ready_cluster(c, strategy="mixed")
        set_profile(c, "gpu-a100-1", "all-balanced")
        c.wait(lambda: c.allocatable("gpu-a100-1", "nvidia.com/mig-1g.5gb") == "4")
        assert c.allocatable("gpu-a100-1", "nvidia.com/mig-3g.20gb") == "2"


def test_unknown_profile_fails_with_event_and_log(store):
    with TwinCluster("mig.yaml", store=store) as c:
        ready_cluster(c)
        seen = record_labels(c, "gpu-h100-1")
        set_profile(c, "gpu-h100-1", "all-9g.99gb")
        c.wait(lambda: c.labels("gpu-h100-1").get(STATE) == "failed")
        assert "pending" not in [s.get(STATE) for s in seen], "an unknown name fails before pending"
        ev = c.wait(lambda: c.events("MigConfigFailed", "gpu-h100-1"))
        assert "all-9g.99gb" in ev[0]["message"] and ev[0]["type"] == "Warning"
        mm = c.operand_pods("nvidia-mig-manager", "gpu-h100-1")[0]
        assert "all-9g.99gb" in c.logs("gpu-operator", mm["metadata"]["name"], "nvidia-mig-manager")
        assert c.allocatable("gpu-h100-1") == "1"


def test_profile_the_gpu_does_not_support_is_not_in_the_generated_config(store):
    with TwinCluster("mig.yaml", store=store) as c:
        ready_cluster(c)
        cm = c.wait(lambda: c.store.get("configmaps", "gpu-operator", "gpu-h100-1-mig-config"))
        node_configs = parse_configs(cm["data"]["config.yaml"])
        assert "all-balanced" in node_configs and "all-1g.10gb" in node_configs
        assert "all-1g.5gb" not in node_configs, "an A100-40GB profile does not fit an H100"
        seen = record_labels(c, "gpu-h100-1")
        set_profile(c, "gpu-h100-1", "all-1g.5gb")
        c.wait(lambda: c.labels("gpu-h100-1").get(STATE) == "failed")
        assert "pending" not in [s.get(STATE) for s in seen]


def test_unsupported_profile_in_a_custom_config_fails_after_pending(store):
    custom = {"version": "v1", "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "wrong-gpu": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]}}
    with TwinCluster("mig.yaml", store=store) as c:
        c.namespace("gpu-operator", {"pod-security.kubernetes.io/enforce": "privileged"})
        c.store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                      "metadata": {"name": "custom", "namespace": "gpu-operator"},
                                      "data": {"config.yaml": yaml.safe_dump(custom)}})
        ready_cluster(c, migManager={"config": {"name": "custom"}})
        seen = record_labels(c, "gpu-h100-1")
        set_profile(c, "gpu-h100-1", "wrong-gpu")
        c.wait(lambda: c.labels("gpu-h100-1").get(STATE) == "failed")
        assert "pending" in [s.get(STATE) for s in seen]
        c.wait(lambda: c.labels("gpu-h100-1").get("nvidia.com/gpu.deploy.device-plugin") == "true")
        ev = c.wait(lambda: c.events("MigConfigFailed", "gpu-h100-1"))
        assert "unsupported MIG profile 1g.5gb" in ev[0]["message"]
        assert c.store.get("configmaps", "gpu-operator", "gpu-h100-1-mig-config") is None


def test_running_gpu_pods_keep_it_pending_until_they_go(store):
    with TwinCluster("mig.yaml", store=store) as c:
        ready_cluster(c)
        c.store.create("pods", pod("busy", gpus=1, nodeSelector={"kubernetes.io/hostname": "gpu-h100-1"}))
        c.wait(lambda: (c.pod("default", "busy").get("status") or {}).get("phase") == "Running")
        set_profile(c, "gpu-h100-1", "all-1g.10gb")
        c.wait(lambda: c.labels("gpu-h100-1").get(STATE) == "pending")
        c.settle()
        assert c.labels("gpu-h100-1")[STATE] == "pending"
        c.store.delete("pods", "default", "busy")
        c.wait(lambda: c.labels("gpu-h100-1").get(STATE) == "success")
        c.wait(lambda: c.allocatable("gpu-h100-1") == "7")


def test_pending_forever_fault(store):
    with TwinCluster("mig.yaml", store=store) as c:
        ready_cluster(c)
        set_profile(c, "gpu-h100-2", "all-3g.40gb")
        c.wait(lambda: c.labels("gpu-h100-2").get(STATE) == "pending")
        c.settle()
        assert c.labels("gpu-h100-2")[STATE] == "pending"


def test_all_disabled_returns_to_plain_gpus(store):
    with TwinCluster("mig.yaml", store=store) as c:
        ready_cluster(c)
        set_profile(c, "gpu-h100-1", "all-3g.40gb")
        c.wait(lambda: c.allocatable("gpu-h100-1") == "2")
        set_profile(c, "gpu-h100-1", "all-disabled")
        c.wait(lambda: c.labels("gpu-h100-1").get(STATE) == "success" and c.allocatable("gpu-h100-1") == "1")
        c.wait(lambda: c.labels("gpu-h100-1").get("nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3")
        assert "nvidia.com/gpu.slices.gi" not in c.labels("gpu-h100-1")


def test_custom_mig_parted_configmap(store):
    with open(os.path.join(UPSTREAM, "examples", "custom-mig-config.yaml"), encoding="utf-8") as fh:
        cm = yaml.safe_load(fh)
    with TwinCluster("mig.yaml", store=store) as c:
        c.namespace("gpu-operator", {"pod-security.kubernetes.io/enforce": "privileged"})
        cm["metadata"]["namespace"] = "gpu-operator"
        c.store.create("configmaps", cm)
        ready_cluster(c, strategy="mixed", migManager={"config": {"name": "custom-mig-config"}})
        set_profile(c, "gpu-h100-1", "five-1g-one-2g")
        c.wait(lambda: c.allocatable("gpu-h100-1", "nvidia.com/mig-1g.10gb") == "5")
        assert c.allocatable("gpu-h100-1", "nvidia.com/mig-2g.20gb") == "1"
        set_profile(c, "gpu-h100-1", "all-1g.10gb")     # only in the default config
        c.wait(lambda: c.labels("gpu-h100-1").get(STATE) == "failed")


def test_default_mig_parted_configmap_is_created(store):
    with TwinCluster("mig.yaml", store=store) as c:
        ready_cluster(c)
        cm = c.store.get("configmaps", "gpu-operator", "default-mig-parted-config")
        assert "all-balanced" in parse_configs(cm["data"]["config.yaml"])
