"""Integration: the mig_config module against the simulated cluster (MIG manager twin).

Strategy single. Each scenario uses its own node, so the module-scoped cluster is
shared. Scenarios run the module workflow in-process on the real kubernetes.core
client (fast); check mode, diff and idempotence go through real ansible-playbook.
"""
import time

import pytest

from kit.mig import labels, mig_module, node, run_mig, run_module_playbook, wait_pod_running

pytestmark, cluster = mig_module("mig-single.yaml", "single", pending=["gpu-h100-4"], failing=["gpu-h100-6"])



def test_check_mode_reports_and_changes_nothing(cluster, tmp_path):
    res = run_module_playbook(cluster, tmp_path, {"node": "gpu-h100-1", "profile": "all-1g.10gb"},
                              check=True, diff=True)
    assert res.rc == 0, res
    out = res.task_results("mig_config")[0]
    assert out["changed"] is True
    assert out["diff"]["after"]["gpu-h100-1"]["nvidia.com/mig.config"] == "all-1g.10gb"
    assert out["diff"]["before"]["gpu-h100-1"]["nvidia.com/mig.config"] == "all-disabled"
    assert labels(cluster, "gpu-h100-1")["nvidia.com/mig.config"] == "all-disabled"


def test_single_strategy_applies_and_offers_mig_gpus(cluster):
    cluster_info, results = run_mig(cluster, nodes=["gpu-h100-1"], profile="all-1g.10gb")
    assert cluster_info["strategy"] == "single"
    assert results[0]["changed"] and results[0]["state"] == "success"
    assert results[0]["offer"]["allocatable"] == {"nvidia.com/gpu": 14}
    now = node(cluster, "gpu-h100-1")
    assert now["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert now["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert now["status"]["allocatable"]["nvidia.com/gpu"] == "14"


def test_rerun_is_idempotent(cluster, tmp_path):
    run_mig(cluster, nodes=["gpu-h100-1"], profile="all-1g.10gb")  # converged (order independent)
    res = run_module_playbook(cluster, tmp_path, {"node": "gpu-h100-1", "profile": "all-1g.10gb"})
    assert res.rc == 0, res
    out = res.task_results("mig_config")[0]
    assert out["changed"] is False
    assert out["nodes"][0]["offer"]["allocatable"] == {"nvidia.com/gpu": 14}


def test_unknown_profile_lists_valid_ones_and_touches_nothing(cluster):
    with pytest.raises(Exception) as err:
        run_mig(cluster, nodes=["gpu-h100-2"], profile="all-1g.10gbx")
    msg = str(err.value)
    # mig-manager (26.3+, and its twin) writes a per-node ConfigMap; it wins over the default.
    assert "'all-1g.10gbx'" in msg and "gpu-operator/gpu-h100-2-mig-config" in msg
    assert "all-1g.10gb, " in msg and "all-1g.5gb" not in msg
    assert labels(cluster, "gpu-h100-2")["nvidia.com/mig.config"] == "all-disabled"


def test_not_mig_capable_node_is_refused(cluster):
    with pytest.raises(Exception, match="not MIG capable"):
        run_mig(cluster, nodes=["cpu-1"], profile="all-1g.10gb")


def test_mixed_layout_is_refused_under_single(cluster):
    with pytest.raises(Exception, match="strategy 'single'"):
        run_mig(cluster, nodes=["gpu-h100-2"], profile="all-balanced")
    assert labels(cluster, "gpu-h100-2")["nvidia.com/mig.config"] == "all-disabled"


def _gpu_pod(cluster, name, node_name, pod_labels=None):
    from kubernetes import client
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": pod_labels or {"app": name}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node_name},
                 "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                                 "command": ["sleep", "infinity"],
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    wait_pod_running(cluster, "default", name)


def test_gpu_pods_are_refused_then_drained(cluster):
    _gpu_pod(cluster, "trainer", "gpu-h100-3")
    with pytest.raises(Exception) as err:
        run_mig(cluster, nodes=["gpu-h100-3"], profile="all-3g.40gb")
    assert "default/trainer (nvidia.com/gpu=1)" in str(err.value) and "drain=true" in str(err.value)
    assert labels(cluster, "gpu-h100-3")["nvidia.com/mig.config"] == "all-disabled"

    _, results = run_mig(cluster, nodes=["gpu-h100-3"], profile="all-3g.40gb", drain=True)
    assert results[0]["evicted"] == ["default/trainer"]
    assert results[0]["offer"]["allocatable"] == {"nvidia.com/gpu": 4}
    now = node(cluster, "gpu-h100-3")
    assert not now["spec"].get("unschedulable")


def test_pod_disruption_budget_blocks_the_drain(cluster):
    from kubernetes import client
    _gpu_pod(cluster, "guarded", "gpu-h100-5", {"app": "guarded"})
    client.PolicyV1Api(cluster.api_client()).create_namespaced_pod_disruption_budget("default", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    time.sleep(0.5)  # let the disruption controller twin fill status (if any)
    with pytest.raises(Exception) as err:
        run_mig(cluster, nodes=["gpu-h100-5"], profile="all-1g.10gb", drain=True, eviction_timeout=2)
    assert "disruption budget" in str(err.value)
    now = node(cluster, "gpu-h100-5")
    assert not now["spec"].get("unschedulable")
    assert now["metadata"]["labels"]["nvidia.com/mig.config"] == "all-disabled"


def test_failed_state_reports_what_the_cluster_says(cluster):
    # a valid profile that mig-parted fails to apply on this node (cluster fault mig_apply_fails)
    with pytest.raises(Exception) as err:
        run_mig(cluster, nodes=["gpu-h100-6"], profile="all-1g.10gb")
    msg = str(err.value)
    assert "failed" in msg and "all orderings failed" in msg
    assert "MigConfigFailed" in msg or "mig-manager pod" in msg
    assert labels(cluster, "gpu-h100-6")["nvidia.com/mig.config.state"] == "failed"


def test_pending_timeout_explains_the_known_cause(cluster):
    with pytest.raises(Exception) as err:
        run_mig(cluster, nodes=["gpu-h100-4"], profile="all-1g.10gb", timeout=3)
    msg = str(err.value)
    assert "timed out after 3s" in msg and "gpu-operator#2833" in msg and "(now 'pending')" in msg
