"""MPS configs for the device plugin: one rendering and one rule with time-slicing (sharing/time_slicing.py).

What is refused follows NVIDIA/k8s-device-plugin (1b826ac): api/config/v1/sharing.go, replicas.go,
internal/plugin/mps.go, cmd/nvidia-device-plugin/main.go validateFlags, cmd/mps-control-daemon/mps/device.go."""
import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator import values as ov
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.sharing import time_slicing as ts


def node(name, **labels):
    lab = {"nvidia.com/gpu.present": "true"}
    lab.update(labels)
    return {"metadata": {"name": name, "labels": lab}}


def spec(**configs):
    return {"configs": configs or {"mps-4": {"replicas": 4, "strategy": "mps",
                                             "fail_requests_greater_than_one": True}},
            "nodes": {"gpu-1": "mps-4"}}


def test_structured_mps_config_renders_sharing_mps():
    out = ts.render(spec())
    assert yaml.safe_load(out["data"]["mps-4"]) == {"version": "v1", "sharing": {"mps": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}], "failRequestsGreaterThanOne": True}}}
    assert out["expected"]["mps-4"] == {"resource": "nvidia.com/gpu", "replicas": 4, "strategy": "mps"}
    assert out["mps_configs"] == ["mps-4"]
    assert out["node_labels"] == {"gpu-1": {"nvidia.com/device-plugin.config": "mps-4"}}


def test_raw_mps_config_as_the_device_plugin_docs_write_it():
    raw = ("version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 10\n")
    out = ts.render({"configs": {"mps-10": raw}, "nodes": {"gpu-1": "mps-10"}})
    assert out["data"]["mps-10"] == raw
    assert out["expected"]["mps-10"]["strategy"] == "mps"


def test_one_configmap_carries_time_slicing_and_mps():
    out = ts.render({"configs": {"shared-4": {"replicas": 4}, "mps-2": {"replicas": 2, "strategy": "mps"}},
                     "nodes": {"a": "shared-4", "b": "mps-2"}})
    assert out["expected"]["shared-4"]["strategy"] == "time-slicing"
    assert out["mps_configs"] == ["mps-2"]


@pytest.mark.parametrize("config, match", [
    ({"replicas": 1, "resources": [{"name": "nvidia.com/gpu", "replicas": 1}], "strategy": "mps"}, ">= 2"),
    ({"replicas": 49, "strategy": "mps"}, "at most 48 clients"),
    ({"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}], "strategy": "mps"}, "MIG devices"),
    ({"replicas": 4, "strategy": "mps", "mig_strategy": "mixed"}, "mig-strategy=mixed is not supported with MPS"),
    ({"replicas": 4, "strategy": "mig"}, "strategy must be time-slicing or mps"),
    ("version: v1\nsharing:\n  timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}]}\n"
     "  mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}\n", "both timeSlicing and mps"),
])
def test_mps_refusals_name_the_field_and_the_reason(config, match):
    with pytest.raises(ts.TimeSlicingError, match=match):
        ts.render({"configs": {"m": config}})


def test_mps_on_a_mig_node_is_refused_before_any_write():
    out = ts.render(spec())
    nodes = [node("gpu-1", **{"nvidia.com/mig.config": "all-1g.10gb"})]
    with pytest.raises(ts.TimeSlicingError, match=r"MPS refused on gpu-1 \(nvidia.com/mig.config=all-1g.10gb"):
        ts.check_trust(out, nodes, "gpu.skaffon.io/trust", ["mixed"])
    # all-disabled (the operator's default on MIG-capable nodes) serves whole GPUs: MPS is fine
    ok = ts.check_trust(out, [node("gpu-1", **{"nvidia.com/mig.config": "all-disabled"})],
                        "gpu.skaffon.io/trust", ["mixed"])
    assert ok["placement"] == {"gpu-1": "mps-4"}


def test_mps_with_the_mixed_mig_strategy_is_refused_everywhere():
    out = ts.render(spec())
    with pytest.raises(ts.TimeSlicingError, match="gpu_operator_mig_strategy is mixed"):
        ts.check_trust(out, [node("gpu-1")], "gpu.skaffon.io/trust", ["mixed"], mig_strategy="mixed")
    ts.check_trust(out, [node("gpu-1")], "gpu.skaffon.io/trust", ["mixed"], mig_strategy="single")


def test_mps_for_tenants_of_different_trust_is_refused_like_time_slicing():
    out = ts.render(spec())
    nodes = [node("gpu-1", **{"gpu.skaffon.io/trust": "mixed"})]
    with pytest.raises(ts.TimeSlicingError, match=r"^MPS refused on gpu-1 \(gpu.skaffon.io/trust=mixed, config mps-4, "
                                                  r"MPS\).*Error Containment"):
        ts.check_trust(out, nodes, "gpu.skaffon.io/trust", ["mixed"])
    assert ts.check_trust(out, nodes, "gpu.skaffon.io/trust", ["mixed"], allow_mixed_trust=True)["mixed_trust_nodes"]


def test_pending_wants_the_mps_strategy_label_and_replicas_times_gpus():
    out = ts.render(spec())
    labels = {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "4"}
    timesliced = dict(labels, **{"nvidia.com/gpu.sharing-strategy": "time-slicing"})
    n = node("gpu-1", **timesliced)
    n["status"] = {"capacity": {"nvidia.com/gpu": "8"}}
    assert "shared by MPS" in ts.pending(out, [n])[0]
    n["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] = "mps"
    assert ts.pending(out, [n]) == []
    n["status"]["capacity"]["nvidia.com/gpu"] = "2"     # daemon not up yet: whole GPUs only
    assert ts.pending(out, [n])


def test_chart_values_carry_the_mps_root_only_for_mps():
    plan = {"driver_enabled": False, "toolkit_enabled": False, "node_labels": {}, "errors": []}
    values = ov.operator_values(plan, device_plugin_config={"name": "cm", "default": "", "mps_root": "/run/nvidia/mps"})
    assert values["devicePlugin"]["mps"] == {"root": "/run/nvidia/mps"}
    values = ov.operator_values(plan, device_plugin_config={"name": "cm", "default": ""})
    assert "mps" not in values["devicePlugin"]
    with pytest.raises(ov.OperatorValuesError, match="does not pass devicePlugin.mps.root"):
        ov.operator_values(plan, device_plugin_config={"name": "cm", "mps_root": "/var/mps"})
