"""Integration: MIG strategy mixed on the simulated cluster (own cluster: the strategy is cluster-wide)."""
from kit.mig import mig_module, node, run_mig

pytestmark, cluster = mig_module("mig-mixed.yaml", "mixed")


def test_mixed_strategy_offers_one_resource_per_profile(cluster):
    info, results = run_mig(cluster, nodes=["gpu-h100-1"], profile="all-balanced")
    assert info["strategy"] == "mixed"
    want = {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-2g.20gb": 2,
            "nvidia.com/mig-3g.40gb": 2}
    # the kubelet keeps nvidia.com/gpu registered at 0 once the device plugin offers only MIG devices
    assert results[0]["offer"]["allocatable"] == want
    now = node(cluster, "gpu-h100-1")["metadata"]["labels"]
    assert now["nvidia.com/mig-1g.10gb.count"] == "4"
    assert now["nvidia.com/mig-3g.40gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
    assert now["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"  # no suffix in mixed


def test_mixed_allows_a_per_gpu_layout_then_back_to_disabled(cluster):
    _, results = run_mig(cluster, nodes=["gpu-h100-2", "gpu-h100-3"], profile="all-1g.10gb.me")
    assert [r["offer"]["allocatable"].get("nvidia.com/mig-1g.10gb.me") for r in results] == [2, 2]
    _, results = run_mig(cluster, nodes=["gpu-h100-2"], profile="all-disabled")
    assert results[0]["offer"]["allocatable"].get("nvidia.com/gpu") == 2
    assert not [k for k, v in results[0]["offer"]["allocatable"].items() if k.startswith("nvidia.com/mig-") and v]
