"""Time-slicing configs: validation, rendering, placement and the trust rule."""
import os

import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.sharing import time_slicing as ts
from kit.paths import GPU_OPERATOR

EXAMPLES = os.path.join(GPU_OPERATOR, "examples")


def node(name, gpu=True, **labels):
    lab = dict(labels)
    if gpu:
        lab["nvidia.com/gpu.present"] = "true"
    return {"metadata": {"name": name, "labels": lab}}


def test_structured_config_renders_device_plugin_yaml():
    out = ts.render({"configs": {"any": {"replicas": 4, "rename_by_default": True}}, "default": "any"})
    config = yaml.safe_load(out["data"]["any"])
    assert config == {"version": "v1", "sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}], "renameByDefault": True}}}
    assert out["expected"]["any"] == {"resource": "nvidia.com/gpu.shared", "replicas": 4, "strategy": "time-slicing"}
    assert out["configmap"] == "time-slicing-config"


@pytest.mark.needs_shared
@pytest.mark.parametrize("example", ["time-slicing-config-all.yaml", "time-slicing-config-fine.yaml"])
def test_upstream_examples_are_accepted(example):
    path = os.path.join(EXAMPLES, example)
    if not os.path.exists(path):
        pytest.skip("upstream examples absent (../shared)")
    with open(path) as f:
        cm = yaml.safe_load(f)
    out = ts.render({"configmap": cm["metadata"]["name"], "configs": cm["data"]})
    assert out["data"] == cm["data"]  # raw strings kept byte for byte
    for key, exp in out["expected"].items():
        assert exp["resource"] == "nvidia.com/gpu" and exp["replicas"] >= 2


def test_flags_placement_is_refused_naming_the_issue():
    raw = "version: v1\nflags:\n  renameByDefault: true\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
    with pytest.raises(ts.TimeSlicingError, match=r"k8s-device-plugin#1433.*sharing.timeSlicing.renameByDefault"):
        ts.render({"configs": {"bad": raw}})


@pytest.mark.parametrize("spec,match", [
    ({"configs": {"a": {"replicas": 0}}}, "integer >= 2"),
    ({"configs": {"a": {"replicas": "4"}}}, "integer >= 2"),
    ({"configs": {"a": {"replica": 4}}}, "unknown keys replica"),
    ({"configs": {"a": {"replicas": 4}}, "default": "b"}, "default 'b' is not one of the configs: a"),
    ({"configs": {"a": {"replicas": 4}}, "nodes": {"gpu-1": "b"}}, "nodes.gpu-1 selects 'b'"),
    ({"configs": {"bad name": {"replicas": 4}}}, "valid label value"),
    ({"configs": {}}, "at least one config"),
    ({"configs": {"a": "version: v2\n"}}, "version: v1"),
    ({"configs": {"a": {"resources": [{"name": "gpu", "replicas": 2}]}}}, "nvidia.com/ resource"),
])
def test_bad_input(spec, match):
    with pytest.raises(ts.TimeSlicingError, match=match):
        ts.render(spec)


def test_checksum_changes_with_content_only():
    a = ts.render({"configs": {"any": {"replicas": 4}}})
    b = ts.render({"configs": {"any": {"replicas": 4}}, "default": "any"})
    c = ts.render({"configs": {"any": {"replicas": 8}}})
    assert a["checksum"] == b["checksum"] != c["checksum"]


def test_placement_default_per_node_and_label():
    out = ts.render({"configs": {"any": {"replicas": 4}, "big": {"replicas": 8}}, "default": "any",
                     "nodes": {"gpu-2": "big"}})
    nodes = [node("gpu-1"), node("gpu-2"), node("gpu-3", **{"nvidia.com/device-plugin.config": "big"}),
             node("cpu-1", gpu=False)]
    # the role owns the label: gpu-3's old label is removed, so it falls back to the default
    assert ts.placement(out, nodes) == {"gpu-1": "any", "gpu-2": "big", "gpu-3": "any"}
    assert out["node_labels"] == {"gpu-2": {"nvidia.com/device-plugin.config": "big"}}
    assert ts.stale_labels(out, nodes) == ["gpu-3"]


def test_mixed_trust_pool_is_refused_unless_overridden():
    out = ts.render({"configs": {"any": {"replicas": 4}}, "default": "any"})
    nodes = [node("gpu-1", **{"gpu.skaffon.io/trust": "mixed"}), node("gpu-2", **{"gpu.skaffon.io/trust": "single"})]
    with pytest.raises(ts.TimeSlicingError, match=r"gpu-1 \(gpu.skaffon.io/trust=mixed, config any\)"):
        ts.check_trust(out, nodes, "gpu.skaffon.io/trust", ["mixed"])
    res = ts.check_trust(out, nodes, "gpu.skaffon.io/trust", ["mixed"], allow_mixed_trust=True)
    assert res["mixed_trust_nodes"] == ["gpu-1 (gpu.skaffon.io/trust=mixed, config any)"]


def test_mixed_trust_pool_with_whole_gpu_default_is_fine():
    out = ts.render({"configs": {"any": {"replicas": 4}, "whole": {"replicas": 1}}, "default": "whole",
                     "nodes": {"gpu-2": "any"}})
    assert out["data"]["whole"] == "version: v1\n" and out["expected"]["whole"] is None
    nodes = [node("gpu-1", **{"gpu.skaffon.io/trust": "mixed"}), node("gpu-2")]
    res = ts.check_trust(out, nodes, "gpu.skaffon.io/trust", ["mixed"])
    assert res["placement"] == {"gpu-1": "whole", "gpu-2": "any"} and res["mixed_trust_nodes"] == []


def test_single_config_without_default_stays_on_the_labelled_nodes():
    """The operator runs config-manager with FALLBACK_STRATEGIES=empty: an unlabelled node gets
    an empty config (whole GPUs), even when the map holds a single config."""
    out = ts.render({"configs": {"any": {"replicas": 4}}, "nodes": {"gpu-2": "any"}})
    nodes = [node("gpu-1", **{"gpu.skaffon.io/trust": "mixed"}), node("gpu-2")]
    res = ts.check_trust(out, nodes, "gpu.skaffon.io/trust", ["mixed"])
    assert res["placement"] == {"gpu-2": "any"} and res["mixed_trust_nodes"] == []
    # ...but selecting the mixed-trust node itself is refused
    out = ts.render({"configs": {"any": {"replicas": 4}}, "nodes": {"gpu-1": "any"}})
    with pytest.raises(ts.TimeSlicingError, match="gpu-1"):
        ts.check_trust(out, nodes, "gpu.skaffon.io/trust", ["mixed"])


def test_plan_gpu_nodes_count_before_the_operator_labels_them():
    out = ts.render({"configs": {"any": {"replicas": 4}}, "default": "any"})
    nodes = [node("gpu-1", gpu=False, **{"gpu.skaffon.io/trust": "mixed"})]
    assert ts.check_trust(out, nodes, "gpu.skaffon.io/trust", ["mixed"])["placement"] == {}
    with pytest.raises(ts.TimeSlicingError, match="gpu-1"):
        ts.check_trust(out, nodes, "gpu.skaffon.io/trust", ["mixed"], gpu_nodes=["gpu-1"])


def test_pending_checks_label_and_capacity():
    out = ts.render({"configs": {"any": {"replicas": 4}}, "default": "any"})
    ok = node("gpu-1", **{"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "2"})
    ok["status"] = {"capacity": {"nvidia.com/gpu": "8"}}
    stale = node("gpu-2", **{"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "2"})
    stale["status"] = {"capacity": {"nvidia.com/gpu": "2"}}
    missing = node("gpu-3")
    lines = ts.pending(out, [ok, stale, missing, node("cpu-1", gpu=False)])
    assert len(lines) == 2
    assert lines[0].startswith("gpu-2 (config any: want 4 replicas of nvidia.com/gpu") and "capacity 2 for 2 GPUs" in lines[0]
    assert lines[1].startswith("gpu-3") and "nvidia.com/gpu.replicas=None" in lines[1]
