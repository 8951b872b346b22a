"""Failures that name the variable or object, the value and what to do next: an inventory of GPU
hosts that all report no GPU, a pool name that is no label value, a node name that does not exist,
a MIG apply failure, a device plugin without NVML, an image that cannot be pulled."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.filter.mig_rollout import mig_rollout_plan
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator import cluster_policy as cp
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig import config as mc
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.driver_plan import driver_plan

from kit import mig_workflow as mw


def _no_gpu():
    return {"gpu_host": False, "gpu_count": 0, "driver": {"state": "none"}, "toolkit": {"state": "none"}}


def test_gpu_group_whose_hosts_all_report_no_gpu_is_an_error_naming_group_hosts_and_causes():
    hosts = {"gpu-a": {"ansible_facts": {"gpu_node": _no_gpu()}}, "gpu-b": {"gpu_node": _no_gpu()}}
    plan = driver_plan(hosts, only=["gpu-a", "gpu-b"], group="gpu_nodes")
    assert [i["code"] for i in plan["issues"] if i["severity"] == "error"] == ["no_gpu_nodes"]
    msg = plan["blocking_errors"][0]
    assert "none of the 2 host(s) of group gpu_nodes reports an NVIDIA GPU (gpu-a, gpu-b)" in msg
    for cause in ("gpu_node_facts_root", "not the GPU servers", "typo in the group", "gpu_operator_gpu_hosts"):
        assert cause in msg
    # an empty input (no GPU group at all) still only warns
    assert driver_plan({}, group="gpu_nodes")["errors"] == []


def test_one_gpu_host_among_non_gpu_hosts_plans_and_warns():
    hosts = {"cpu": {"gpu_node": _no_gpu()}, "gpu": {"gpu_node": dict(_no_gpu(), gpu_host=True, gpu_count=2)}}
    plan = driver_plan(hosts, group="gpu_nodes", driver_precompiled=True)
    assert plan["errors"] == [] and plan["ignored_nodes"] == ["cpu"]
    assert any(w.startswith("no NVIDIA GPU found on cpu") for w in plan["warnings"])


def test_mig_pool_that_is_no_label_value_is_refused():
    hostvars = {"h1": {"group_names": ["pool_a"], "mig_profile": "all-1g.10gb", "mig_pool": "H100 Training!",
                       "mig_allow_whole_pool": True}}
    defaults = {"mig_pool_group_prefix": "pool_", "mig_drain": False, "mig_timeout": 600,
                "mig_verify_timeout": 120, "mig_eviction_timeout": 300}
    plan = mig_rollout_plan(hostvars, ["h1"], 1, defaults=defaults)
    assert len(plan["errors"]) == 1
    msg = plan["errors"][0]
    assert msg.startswith("mig_pool of h1 is 'H100 Training!', not a label value")
    assert "h100-nvlink-training" in msg and "leave mig_pool unset" in msg


def test_missing_node_names_the_variable_and_the_nodes():
    api = mw.FakeApi([mw._node(), mw._node("n2")])
    api.node_names = lambda: sorted(api.nodes)
    with pytest.raises(mc.MigConfigError) as err:
        mw._run(api, nodes=["ghost"])
    assert ("Node ghost does not exist (nodes of the cluster: n1, n2): set mig_node_name" in err.value.msg)


def test_mig_apply_failure_names_the_fix_in_the_first_report():
    api = mw.FakeApi([mw._node()], script=[mw.PENDING, ({"nvidia.com/mig.config.state": "failed"}, None)])
    with pytest.raises(mc.MigConfigError) as err:
        mw._run(api)
    assert err.value.details["mig_state"] == "failed"
    assert "A re-run with the same profile stops at once" in err.value.msg
    assert "restart the mig-manager pod on n1" in err.value.msg
    assert "kubectl delete pod -n gpu-operator -l app=nvidia-mig-manager --field-selector spec.nodeName=n1" \
        in err.value.msg


def _plugin(log_line):
    pod = {"metadata": {"name": "nvidia-device-plugin-daemonset-x", "namespace": "gpu-operator"},
           "spec": {"nodeName": "gpu-1"},
           "status": {"phase": "Running", "containerStatuses": [
               {"name": "nvidia-device-plugin", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}
    labels = {"feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true"}
    node = {"metadata": {"name": "gpu-1", "labels": labels}, "spec": {}}
    return cp.why_no_gpus("gpu-1", node, [], [pod], logs={pod["metadata"]["name"]: log_line})


def test_device_plugin_nvml_failure_gets_a_next_step():
    why = " ".join(_plugin("main.go:176] error starting plugins: failed to initialize NVML: Unknown Error"))
    assert "cannot load NVML" in why and "nvidia-smi on gpu-1" in why
    assert "delete the device plugin pod on gpu-1" in why
    assert "cannot load NVML" not in " ".join(_plugin("some other error"))


def test_image_pull_failure_names_the_image_and_drops_the_validator_log_hint():
    image = "registry.example/mirror/nvidia/cloud-native/gpu-operator-validator:v26.7.0"
    pod = {"metadata": {"name": "nvidia-operator-validator-abcde"}, "spec": {"nodeName": "gpu-1"},
           "status": {"phase": "Pending", "initContainerStatuses": [
               {"name": "driver-validation", "image": image, "state": {"waiting": {
                   "reason": "ImagePullBackOff",
                   "message": 'Back-off pulling image "%s": not found' % image}}}]}}
    summary = {"exists": True, "state": "notReady", "reason": "OperandNotReady", "message": "",
               "namespace": "gpu-operator"}
    lines = cp.diagnose(summary, [], [pod])[0]
    text = "\n".join(lines)
    assert ("pod gpu-operator/nvidia-operator-validator-abcde on gpu-1: Init:ImagePullBackOff (container "
            "driver-validation): image %s: Back-off pulling image" % image) in text
    assert "hint: images cannot be pulled (%s (pod nvidia-operator-validator-abcde))" % image in text
    assert "read its log" not in text
