"""Integration: an inventory whose design puts the L40S pool on MPS drives the roles end to end.

The example fleet (kit.pool_inventory: two H100 nodes, one L40S node) with platform_pools choosing
`allocation: mps` for the L40S pool; the roles take platform_design.roles, as inventories/example does:
gpu_operator.yml converges (MPS config selected on gpu-l40s-1, GPUs x replicas advertised once the
operator's MPS control daemon runs), tenants.yml writes what each team's pods get on its namespace,
and both re-run with changed=0. The same inventory with a MIG pool is refused by the design before
anything is written (the mixed MIG strategy the design then needs is refused by the device plugin with MPS).
"""
import json
import os

import pytest

from kit.kubectl import kget
from kit.paths import REPO
from kit.playbook import run_playbook
from kit.pool_inventory import cluster_file, env_without_kubeconfig, write_inventory, writes

NODE_PREREQS = os.path.join(REPO, "playbooks", "node_prereqs.yml")
GPU_OPERATOR = os.path.join(REPO, "playbooks", "gpu_operator.yml")
TENANTS = os.path.join(REPO, "playbooks", "tenants.yml")

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]

DESIGN = {
    "platform_pools": {
        "pool_h100_nvlink_training": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 2,
                                      "teams": ["team-vision", "team-nlp"]},
        "pool_l40s_inference": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["team-inference"],
                                "allocation": "mps", "mps_replicas": 4},
    },
    "platform_requirements": {"queue_backend": "none",
                              "teams": {"team-inference": {"workload": "inference", "trust": "internal"}}},
    "tenants_list": [
        {"name": "team-vision", "quota": {"requests.nvidia.com/gpu": 2}},
        {"name": "team-nlp", "quota": {"requests.nvidia.com/gpu": 2}},
        {"name": "team-inference", "quota": {"requests.nvidia.com/gpu": 8}},
    ],
    "platform_design": (
        "{{ platform_pools | skaffon.gpu_platform.platform_design(tenants=tenants_list, "
        "requirements=platform_requirements, "
        "inventory=groups | skaffon.gpu_platform.platform_inventory_pools(hostvars | default(none))) }}"),
    "gpu_operator_time_slicing": "{{ platform_design.roles.gpu_operator_time_slicing }}",
    "gpu_operator_mig_strategy": "{{ platform_design.roles.gpu_operator_mig_strategy }}",
    "tenants_queue_backend": "{{ platform_design.roles.tenants_queue_backend }}",
    "tenants_gpu_allocation": "{{ platform_design.roles.tenants_gpu_allocation }}",
}
# the L40S pool's node label says what the design decides (no sharing_label_differs warning)
POOLS = {"pool_l40s_inference": {"node_prereqs_pool": {"accelerator": "l40s", "workload": "inference",
                                                       "sharing": "mps", "trust": "single"}}}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    from simcluster import testing
    work = tmp_path_factory.mktemp("design-mps")
    cluster = testing.start(cluster_file(str(work / "cluster.yaml")), str(work / "run"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def prepared(sim, tmp_path_factory):
    inv = write_inventory(tmp_path_factory.mktemp("inv"), sim, all_vars=DESIGN, pool_vars=POOLS)
    res = run_playbook(NODE_PREREQS, env_without_kubeconfig(sim), inventory=inv)
    assert res.rc == 0, res
    plan = res.task_results("Plan driver and toolkit ownership from every host's facts", "gpu-h100-1")
    return inv, plan[0]["ansible_facts"]["node_prereqs_plan"]


def test_a_mig_pool_next_to_the_mps_pool_is_refused_before_any_write(sim, prepared, tmp_path):
    _inv, plan = prepared
    design = json.loads(json.dumps(DESIGN))
    design["platform_pools"]["pool_h100_nvlink_training"]["allocation"] = "mig"
    design["tenants_list"][0]["quota"]["requests.nvidia.com/mig-1g.10gb"] = 7
    inv = write_inventory(tmp_path, sim, all_vars=design, pool_vars=POOLS)
    sim.reset_stats()
    res = run_playbook(GPU_OPERATOR, sim.env, inventory=inv, extra_vars={"gpu_operator_driver_plan": plan})
    assert res.rc != 0, res
    msg = " ".join(res.failure_messages())
    assert "platform_pools.pool_l40s_inference.allocation: mps refused: pool pool_h100_nvlink_training uses MIG" \
        in msg, msg
    assert writes(sim.stats()) == {}, sim.stats()


def test_the_design_drives_mps_and_the_namespace_says_what_pods_get(sim, prepared):
    inv, plan = prepared
    first = run_playbook(GPU_OPERATOR, sim.env, inventory=inv, extra_vars={"gpu_operator_driver_plan": plan})
    assert first.rc == 0, first
    node = kget(sim, "node", "gpu-l40s-1")
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/device-plugin.config"] == "mps-4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps" and labels["nvidia.com/gpu.replicas"] == "4"
    assert int(node["status"]["allocatable"]["nvidia.com/gpu"]) == 16
    h100 = kget(sim, "node", "gpu-h100-1")       # exclusive: whole GPUs, no config selected
    assert "nvidia.com/device-plugin.config" not in h100["metadata"]["labels"]
    assert int(h100["status"]["allocatable"]["nvidia.com/gpu"]) == 2
    again = run_playbook(GPU_OPERATOR, sim.env, inventory=inv, extra_vars={"gpu_operator_driver_plan": plan})
    assert again.rc == 0 and again.changed() == 0, again

    teams = run_playbook(TENANTS, sim.env, inventory=inv)
    assert teams.rc == 0, teams
    ann = kget(sim, "namespace", "team-inference")["metadata"]["annotations"]
    assert ann["gpu-platform.skaffon.io/gpu-allocation"] == "MPS share (1/4 of a GPU's memory and compute)"
    assert kget(sim, "namespace", "team-vision")["metadata"]["annotations"][
        "gpu-platform.skaffon.io/gpu-allocation"] == "full GPU"
    again = run_playbook(TENANTS, sim.env, inventory=inv)
    assert again.rc == 0 and again.changed() == 0, again
