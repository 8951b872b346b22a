"""playbooks/verify.yml's sharing-verified on a site whose inference pool takes KAI GPU fractions.

The site: an H100 training pool and an L40S inference pool (4 GPUs) whose team takes fractions
(queues_kai_gpu_sharing, queues_kai_fraction_pools), teams and queues from tenants.yml and queues.yml
(the real KAI chart, its scheduler and binder twins), then verify.yml as a site runs it: two pods of
gpu-fraction 0.5 through team-b's queue share one GPU of gpu-l40s-1 under binpack, and each hold a
GPU of their own under spread (KAI's gpuspread); without a fraction pool nothing is probed.
"""
import os

import pytest

from kit.paths import BIN, KAI_CHART, REPO
from kit.playbook import run_playbook
from kit.kubectl import kget, kubectl
from kit.queues import inventory, start_cluster

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
TRAINING = {"gpu.skaffon.io/accelerator": "h100", "gpu.skaffon.io/topology": "nvlink",
            "gpu.skaffon.io/workload": "training"}
INFERENCE = {"gpu.skaffon.io/accelerator": "l40s", "gpu.skaffon.io/topology": "pcie",
             "gpu.skaffon.io/workload": "inference"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_HOSTS = {
    "gpu-h100-1": {"node_prereqs_pool": {"accelerator": "h100", "topology": "nvlink", "workload": "training"},
                   "node_prereqs_pool_taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}]},
    "gpu-l40s-1": {"node_prereqs_pool": {"accelerator": "l40s", "topology": "pcie", "workload": "inference"},
                   "node_prereqs_pool_taints": [GPU_TAINT]},
}
NODES = [
    {"name": "gpu-h100-1", "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 4, "memory_mib": 81559},
     "host_driver": "550.54.15", "cpu": "64", "memory": "512Gi", "labels": TRAINING,
     "taints": [{"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}]},
    {"name": "gpu-l40s-1", "gpus": {"model": "NVIDIA-L40S", "count": 4, "memory_mib": 46068},
     "host_driver": "550.54.15", "cpu": "32", "memory": "256Gi", "labels": INFERENCE, "taints": [GPU_TAINT]},
    {"name": "cpu-1", "cpu": "16", "memory": "64Gi"},
]


def site_vars(**over):
    values = {
        "tenants_queue_backend": "kai",
        "queues_chart_source": "archive", "queues_chart_ref": KAI_CHART, "queues_chart_version": "v0.17.0",
        "queues_wait_timeout": 120, "queues_helm_binary": os.path.join(BIN, "helm4"),
        "queues_kai_gpu_sharing": True,
        "queues_kai_fraction_pools": ["l40s-pcie-inference"],
        "queues_departments": [{"name": "research", "gpu": {"quota": 4}}, {"name": "serving", "gpu": {"quota": 4}}],
        "tenants_list": [
            {"name": "team-a", "queue": {"parent": "research", "pool": "h100-nvlink-training", "gpu": {"quota": 4}}},
            {"name": "team-b", "queue": {"parent": "serving", "pool": "l40s-pcie-inference", "gpu": {"quota": 2}}},
        ],
        "acceptance_pod_timeout": 120,
    }
    values.update(over)
    return values


def run(sim, inv, name, **extra):
    return run_playbook(os.path.join(REPO, "playbooks", name), sim.env, inventory=inv, extra_vars=extra or None,
                        limit="localhost")


def converge(sim, inv):
    for playbook in ("tenants.yml", "queues.yml"):
        res = run(sim, inv, playbook)
        assert res.rc == 0, res


def sharing(sim, inv, report):
    res = run(sim, inv, "verify.yml", acceptance_report_dir=str(report), acceptance_checks=["sharing-verified"])
    results = dict((r["id"], r) for r in res.task_results("Run the hand-over checks")[0]["results"])
    return res, results["sharing-verified"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "verify-fractions", nodes=NODES)
    kubectl(sim, "patch", "node", "gpu-l40s-1", "--subresource=status", "--type=merge", "-p",
            '{"status": {"allocatable": {"nvidia.com/gpu": "4"}, "capacity": {"nvidia.com/gpu": "4"}}}')
    kubectl(sim, "patch", "node", "gpu-h100-1", "--subresource=status", "--type=merge", "-p",
            '{"status": {"allocatable": {"nvidia.com/gpu": "4"}, "capacity": {"nvidia.com/gpu": "4"}}}')
    for ns in ("team-a", "team-b", "team-c"):   # adopt the namespaces the helper created
        kubectl(sim, "label", "namespace", ns, "app.kubernetes.io/managed-by=skaffon.gpu_platform")
    yield sim
    sim.stop()


def test_two_halves_share_one_gpu_of_the_fraction_pool_under_binpack(site, tmp_path):
    inv = inventory(tmp_path / "binpack", site_vars(), GPU_HOSTS)
    converge(site, inv)
    res, check = sharing(site, inv, tmp_path / "report")
    assert res.rc == 0 and check["status"] == "PASS", (res, check)
    assert check["summary"] == ("every GPU node is exclusive (whole GPUs), as configured; KAI fractions: 2 x 0.5 GPU "
                                "of team-b share GPU-0 of gpu-l40s-1 (pool l40s-pcie-inference, binpack)"), check
    evidence = "\n".join(check["evidence"])
    assert "pod team-b/acceptance-fraction-2 gpu-fraction=0.5 through queue team-b: Running on gpu-l40s-1" in evidence
    assert "reservation pod kai-resource-reservation/gpu-reservation-gpu-l40s-1-" in evidence
    assert "NVIDIA_VISIBLE_DEVICES of the pods (their GPU-sharing ConfigMaps): GPU-0, GPU-0" in evidence
    text = (tmp_path / "report" / "acceptance.md").read_text()
    assert "| 1 | `sharing-verified` Sharing mode as configured | PASS | every GPU node is exclusive" in text
    # the probes are gone, and with them the reservation pod (KAI's binder removes an unused one)
    assert not (kget(site, "pods", "-n", "team-b") or {}).get("items")


def test_under_spread_each_half_holds_its_own_gpu_and_no_fraction_pool_means_no_probe(site, tmp_path):
    spread = site_vars(queues_kai_placement={"h100-nvlink-training": "binpack", "l40s-pcie-inference": "spread"})
    inv = inventory(tmp_path / "spread", spread, GPU_HOSTS)
    converge(site, inv)
    res, check = sharing(site, inv, tmp_path / "report")
    assert res.rc == 0 and check["status"] == "PASS", (res, check)
    # the probes carry the shard label of team-b's queue: the inference shard answers them
    assert "KAI fractions: 2 x 0.5 GPU of team-b on a GPU each (GPU-0 of gpu-l40s-1, GPU-1 of gpu-l40s-1), as " \
           "spread places them (pool l40s-pcie-inference)" in check["summary"], check
    assert "KAI fractions: placement of the pool's KAI scheduling shard: spread" in check["evidence"]

    none = site_vars(queues_kai_gpu_sharing=False, queues_kai_fraction_pools=None)
    res, check = sharing(site, inventory(tmp_path / "none", none, GPU_HOSTS), tmp_path / "report2")
    assert res.rc == 0 and check["status"] == "PASS", (res, check)
    assert "KAI" not in check["summary"]
    assert check["evidence"][-1].startswith("KAI GPU fractions: not applicable, no pool takes them")
