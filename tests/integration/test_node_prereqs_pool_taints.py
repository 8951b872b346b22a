"""Issue 11 defect 1: the taints node_prereqs puts on GPU pools must not keep the GPU Operator's
operands off those nodes, and the operator's wait must check that every GPU node offers GPUs.

The example inventory's pools (inventories/example/group_vars: the H100 training pool is
tainted gpu.skaffon.io/workload=training:NoSchedule), node_prereqs.yml then gpu_operator.yml
with the real chart against the simulated cluster. The driver plan node_prereqs printed is
handed to gpu_operator.yml as a person would (-e).
"""
import os

import pytest

from kit.kubectl import kget
from kit.paths import BIN, REPO
from kit.playbook import run_playbook
from kit.pool_inventory import cluster_file, env_without_kubeconfig, write_inventory, writes

NODE_PREREQS = os.path.join(REPO, "playbooks", "node_prereqs.yml")
GPU_OPERATOR = os.path.join(REPO, "playbooks", "gpu_operator.yml")
GPU_NODES = ("gpu-h100-1", "gpu-h100-2", "gpu-l40s-1")
POOL_TAINT = {"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    from simcluster import testing
    work = tmp_path_factory.mktemp("pool-taints")
    cluster = testing.start(cluster_file(str(work / "cluster.yaml")), str(work / "run"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def prepared(sim, tmp_path_factory):
    """node_prereqs has labelled and tainted the pools; returns (inventory, driver plan)."""
    inv = write_inventory(tmp_path_factory.mktemp("inv"), sim)
    res = run_playbook(NODE_PREREQS, env_without_kubeconfig(sim), inventory=inv)
    assert res.rc == 0, res
    plan = res.task_results("Plan driver and toolkit ownership from every host's facts", "gpu-h100-1")
    return inv, plan[0]["ansible_facts"]["node_prereqs_plan"]


def offers(sim, name):
    alloc = kget(sim, "node", name)["status"].get("allocatable") or {}
    return dict((k, v) for k, v in alloc.items() if k.startswith("nvidia.com/") and str(v) not in ("0", ""))


def test_pool_taint_is_tolerated_and_every_gpu_node_offers_gpus(sim, prepared):
    inv, plan = prepared
    taints = kget(sim, "node", "gpu-h100-1")["spec"].get("taints") or []
    assert POOL_TAINT in taints, taints  # the example pool's taint is on the node

    res = run_playbook(GPU_OPERATOR, sim.env, inventory=inv, extra_vars={"gpu_operator_driver_plan": plan})
    assert res.rc == 0, res
    tolerations = kget(sim, "clusterpolicy", "cluster-policy")["spec"]["daemonsets"]["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert dict(POOL_TAINT, operator="Equal") in tolerations, tolerations
    # every GPU node the inventory knows serves GPUs (on main: the tainted H100s offer nothing)
    for name in GPU_NODES:
        assert offers(sim, name), (name, kget(sim, "node", name)["status"].get("allocatable"))
    mig_manager = kget(sim, "daemonset", "-n", "gpu-operator", "nvidia-mig-manager")
    assert mig_manager["status"]["desiredNumberScheduled"] == 2, mig_manager["status"]

    # cluster and Helm access from the inventory alone (module_defaults), not the environment
    again = run_playbook(GPU_OPERATOR, env_without_kubeconfig(sim), inventory=inv,
                         extra_vars={"gpu_operator_driver_plan": plan})
    assert again.rc == 0 and again.changed() == 0, again


def test_foreign_taint_is_refused_before_any_write_else_named_by_the_wait(sim, prepared):
    inv, plan = prepared
    kubectl = os.path.join(BIN, "kubectl")
    sim.run(kubectl, "taint", "node", "gpu-h100-2", "example.com/reserved=yes:NoSchedule")
    try:
        sim.reset_stats()
        res = run_playbook(GPU_OPERATOR, sim.env, inventory=inv,
                           extra_vars={"gpu_operator_driver_plan": plan, "gpu_operator_values": {
                               "mig": {"strategy": "mixed"}}})
        assert res.rc != 0
        msg = " ".join(res.failure_messages())
        assert "gpu-h100-2 (taint example.com/reserved=yes:NoSchedule)" in msg, msg
        assert "daemonsets.tolerations" in msg and "node_prereqs_pool_taints" in msg, msg
        assert writes(sim.stats()) == {}, sim.stats()

        # Told not to check up front, the wait names the node that offers no GPU, and why. The
        # node's operand pods go (as after a reboot): the DaemonSets cannot bring them back.
        sim.run(kubectl, "delete", "pods", "-n", "gpu-operator", "--field-selector", "spec.nodeName=gpu-h100-2",
                "--wait=false", check=False)
        res = run_playbook(GPU_OPERATOR, sim.env, inventory=inv, extra_vars={
            "gpu_operator_driver_plan": plan, "gpu_operator_check_taints": False,
            "gpu_operator_wait_timeout": 15})
        assert res.rc != 0
        msg = " ".join(res.failure_messages())
        assert "gpu-h100-2" in msg and "example.com/reserved" in msg, msg
    finally:
        sim.run(kubectl, "taint", "node", "gpu-h100-2", "example.com/reserved-", check=False)
