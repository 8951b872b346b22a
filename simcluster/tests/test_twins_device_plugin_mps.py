"""Device plugin twin, MPS: the real config format, replicas x GPUs once the operator's MPS control
daemon runs, the labels GFD writes, and the refusals of the real plugin.

Ported cases (NVIDIA/k8s-device-plugin at 1b826ac):
  * api/config/v1/config_test.go TestNewConfigDefaultsMPSFailRequestsGreaterThanOne and
    TestNewConfigHonorsExplicitMPSFailRequestsGreaterThanOneFalse (the same two documents);
  * internal/lm/resource_test.go "mps appends suffix and doubles count", "mps renamed does not append
    suffix" (labels nvidia.com/gpu.replicas, nvidia.com/gpu.sharing-strategy=mps, product -SHARED);
  * internal/lm/nvml_test.go TestSharingLabeler (nvidia.com/mps.capable false for time-slicing and
    no config, true for MPS without MIG devices, an error with MIG devices);
  * api/config/v1/replicas_test.go TestUnmarshalReplicatedResource (no replicas, replicas 0 / -1).
"""
import pytest
import yaml

from simcluster.twins.device_plugin import ConfigError, parse_config
from simcluster.twins.testkit import TwinCluster, pod, status_word

pytestmark = [pytest.mark.needs_shared]
DS = "nvidia-device-plugin-daemonset"
MPS_DS = "nvidia-device-plugin-mps-control-daemon"
CM = "time-slicing-config"


def mps_config(replicas, rename=None, fail_gt1=None):
    mps = {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
    if rename is not None:
        mps["renameByDefault"] = rename
    if fail_gt1 is not None:
        mps["failRequestsGreaterThanOne"] = fail_gt1
    return yaml.safe_dump({"version": "v1", "sharing": {"mps": mps}})


def install(c, data, default="", **over):
    c.namespace("gpu-operator", {"pod-security.kubernetes.io/enforce": "privileged"})
    c.store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": CM, "namespace": "gpu-operator"}, "data": data})
    c.install_operator(devicePlugin={"config": {"name": CM, "default": default}}, **over)


def test_config_test_go_mps_fail_requests_greater_than_one_defaults_true():
    cfg = parse_config("version: v1\nsharing:\n  mps:\n    resources:\n      - name: nvidia.com/gpu\n"
                       "        replicas: 2\n")
    assert cfg["sharing"] == "mps" and cfg["fail_gt1"] is True
    cfg = parse_config("version: v1\nsharing:\n  mps:\n    failRequestsGreaterThanOne: false\n    resources:\n"
                       "      - name: nvidia.com/gpu\n        replicas: 2\n")
    assert cfg["fail_gt1"] is False


@pytest.mark.parametrize("text", [
    "version: v1\nsharing:\n  mps: {resources: [{name: nvidia.com/gpu}]}\n",
    "version: v1\nsharing:\n  mps: {resources: [{name: nvidia.com/gpu, replicas: 0}]}\n",
    "version: v1\nsharing:\n  mps: {resources: [{name: nvidia.com/gpu, replicas: -1}]}\n",
    "version: v1\nsharing:\n  mps: {resources: []}\n",
])
def test_replicas_test_go_bad_replicated_resources_are_refused(text):
    with pytest.raises(ConfigError):
        parse_config(text)


def test_mps_sets_the_labels_gfd_writes_and_replicas_times_gpus():
    with TwinCluster("default.yaml", store="real") as c:
        install(c, {"mps-4": mps_config(4)})
        c.label("gpu-l40s-1", {"nvidia.com/device-plugin.config": "mps-4"})
        c.wait(lambda: c.allocatable("gpu-l40s-1") == "16", what="4 L40S x 4 MPS replicas")
        labels = c.labels("gpu-l40s-1")
        assert labels["nvidia.com/gpu.replicas"] == "4"
        assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
        assert labels["nvidia.com/mps.capable"] == "true"
        # the MPS control daemon runs only where GFD wrote mps.capable=true
        assert [p["spec"]["nodeName"] for p in c.operand_pods(MPS_DS)] == ["gpu-l40s-1"]
        assert c.labels("gpu-h100-1")["nvidia.com/mps.capable"] == "false"
        assert c.allocatable("gpu-h100-1") == "8"
        ds = c.store.get("daemonsets.apps", "gpu-operator", MPS_DS)
        assert ds["spec"]["template"]["spec"]["nodeSelector"] == {
            "nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/mps.capable": "true"}
        # failRequestsGreaterThanOne is true for MPS unless the config says false
        c.store.create("pods", pod("greedy", resources={"limits": {"nvidia.com/gpu": "2"}},
                                   nodeSelector={"kubernetes.io/hostname": "gpu-l40s-1"}))
        got = c.wait(lambda: status_word(c.pod("default", "greedy")) == "UnexpectedAdmissionError"
                     and c.pod("default", "greedy"))
        assert "maximum request size for shared resources is 1" in got["status"]["message"]


def test_mps_renamed_advertises_gpu_shared_without_the_product_suffix():
    with TwinCluster("default.yaml", store="real") as c:
        install(c, {"mps-2": mps_config(2, rename=True)}, default="mps-2")
        c.wait(lambda: c.allocatable("gpu-l40s-1", "nvidia.com/gpu.shared") == "8")
        c.wait(lambda: c.labels("gpu-l40s-1").get("nvidia.com/gpu.sharing-strategy") == "mps")
        assert c.labels("gpu-l40s-1")["nvidia.com/gpu.product"] == "NVIDIA-L40S"


def test_without_the_control_daemon_the_plugin_serves_nothing_and_says_why():
    with TwinCluster("default.yaml", store="real") as c:
        install(c, {"mps-4": mps_config(4)}, default="mps-4")
        c.wait(lambda: c.allocatable("gpu-l40s-1") == "16")
        # take the control daemon off the node: the restarted plugin waits for it
        c.label("gpu-l40s-1", {"nvidia.com/gpu.deploy.device-plugin": "false"})
        c.wait(lambda: not c.operand_pods(MPS_DS, "gpu-l40s-1") and not c.operand_pods(DS, "gpu-l40s-1"))
        c.label("gpu-l40s-1", {"nvidia.com/gpu.deploy.device-plugin": "true"})
        c.wait(lambda: c.operand_pods(DS, "gpu-l40s-1"))
        c.wait(lambda: c.allocatable("gpu-l40s-1") == "16", what="served again once the daemon runs")


def test_mps_under_the_mixed_mig_strategy_crashes_with_the_real_error():
    with TwinCluster("default.yaml", store="real") as c:
        install(c, {"mps-4": mps_config(4)}, default="mps-4", mig={"strategy": "mixed"})
        pods = c.wait(lambda: [p for p in c.operand_pods(DS) if status_word(p) == "CrashLoopBackOff"])
        log = c.logs("gpu-operator", pods[0]["metadata"]["name"], "nvidia-device-plugin")
        assert "using --mig-strategy=mixed is not supported with MPS" in log


def test_mps_on_mig_devices_crashes_with_the_real_error():
    with TwinCluster("mig.yaml", store="real") as c:
        install(c, {"mps-2": mps_config(2)}, driver={"enabled": False}, toolkit={"enabled": False},
                mig={"strategy": "single"})
        c.wait(lambda: c.labels("gpu-h100-1").get("nvidia.com/mig.config.state") == "success")
        c.label("gpu-h100-1", {"nvidia.com/mig.config": "all-1g.10gb"})
        c.wait(lambda: c.allocatable("gpu-h100-1") == "7", what="7 MIG devices")
        c.label("gpu-h100-1", {"nvidia.com/device-plugin.config": "mps-2"})
        c.store.merge_patch("daemonsets.apps", "gpu-operator", DS, {"spec": {"template": {"metadata": {
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}}}}})
        pods = c.wait(lambda: [p for p in c.operand_pods(DS, "gpu-h100-1") if status_word(p) == "CrashLoopBackOff"])
        log = c.logs("gpu-operator", pods[0]["metadata"]["name"], "nvidia-device-plugin")
        assert "sharing using MPS is not supported for MIG devices" in log
        assert c.labels("gpu-h100-1").get("nvidia.com/mps.capable") != "true"
