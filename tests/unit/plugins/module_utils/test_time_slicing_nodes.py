"""Issue 11 defect 5: a time-slicing node name that is not a node is refused before any write."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.sharing.time_slicing import (
    TimeSlicingError, check_trust, render)

NODES = [{"metadata": {"name": n, "labels": {}}} for n in ("gpu-l40s-1", "gpu-h100-1", "cpu-1")]


def test_unknown_node_is_refused_with_the_known_names():
    rendered = render({"configs": {"l40s": {"replicas": 4}}, "nodes": {"gpu-l40s-9": "l40s"}})
    with pytest.raises(TimeSlicingError) as err:
        check_trust(rendered, NODES, "gpu.skaffon.io/trust", ["mixed"])
    assert "gpu-l40s-9 (did you mean gpu-l40s-1?)" in str(err.value)
    assert "known nodes: cpu-1, gpu-h100-1, gpu-l40s-1" in str(err.value)


def test_known_node_passes():
    rendered = render({"configs": {"l40s": {"replicas": 4}}, "nodes": {"gpu-l40s-1": "l40s"}})
    assert check_trust(rendered, NODES, "gpu.skaffon.io/trust", ["mixed"])["placement"] == {"gpu-l40s-1": "l40s"}
