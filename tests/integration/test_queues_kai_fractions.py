"""roles/queues with KAI GPU fractions on a pool: the real chart with global.gpuSharing, re-run unchanged,
two 0.5 pods on one GPU with one reservation pod, the GPU-fraction admission policy's refusals."""
import json
import os

import pytest

from kit.paths import BIN, KAI_CHART
from kit.kubectl import apply, kget, kubectl
from kit.queues import inventory, play, start_cluster, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
LABEL = "kai.scheduler/queue"
POOL = "h100-nvlink-training"
TOLERATION = [{"key": "gpu.skaffon.io/workload", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]


def settings():
    """group_vars/all.yml: the pool takes fractions (team-a names it), team-b's queue names no pool."""
    return {
        "tenants_queue_backend": "kai",
        "queues_chart_source": "archive",
        "queues_chart_ref": KAI_CHART,
        "queues_chart_version": "v0.17.0",
        "queues_wait_timeout": 120,
        "queues_kai_gpu_sharing": True,
        "queues_kai_placement": {POOL: "binpack"},
        "queues_kai_fraction_pools": [POOL],
        "queues_pools": {POOL: {"labels": {"gpu.skaffon.io/accelerator": "h100", "gpu.skaffon.io/topology": "nvlink",
                                           "gpu.skaffon.io/workload": "training"},
                                "taints": [{"key": "gpu.skaffon.io/workload", "value": "training",
                                            "effect": "NoSchedule"}]}},
        "queues_departments": [{"name": "research", "gpu": {"quota": 4}}],
        "tenants_list": [
            {"name": "team-a", "queue": {"parent": "research", "pool": POOL, "gpu": {"quota": 2}}},
            {"name": "team-b", "queue": {"parent": "research", "gpu": {"quota": 2}}},
        ],
    }


def fraction_pod(name, ns, value):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {LABEL: ns},
                         "annotations": {"gpu-fraction": value, "simcluster.skaffon.io/behaviour": "run"}},
            "spec": {"schedulerName": "kai-scheduler", "tolerations": TOLERATION,
                     "containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "kai-fractions")
    inv = inventory(tmp_path_factory.mktemp("inv"), settings())
    first = play(sim, inv, queues_helm_binary=os.path.join(BIN, "helm4"))
    yield sim, inv, first
    sim.stop()


def test_gpu_sharing_on_converges_and_reruns_unchanged(site):
    sim, inv, first = site
    assert first.rc == 0, first
    config = kget(sim, "configs.kai.scheduler", "kai-config")
    assert config["spec"]["admission"]["gpuSharing"] is True
    assert kget(sim, "schedulingshard", "default")["spec"]["placementStrategy"] == {"gpu": "binpack", "cpu": "binpack"}
    assert kget(sim, "namespace", "kai-resource-reservation")
    for name in ("skaffon-gpu-fraction", "skaffon-gpu-fraction-off"):
        assert kget(sim, "validatingadmissionpolicy", name)
    again = play(sim, inv, queues_helm_binary=os.path.join(BIN, "helm4"))
    assert again.rc == 0, again
    assert again.changed() == 0, again.data


def test_two_halves_on_one_gpu_and_the_queue_counts_one(site):
    sim, _inv, _first = site
    for name in ("half-1", "half-2"):
        apply(sim, fraction_pod(name, "team-a", "0.5"))

    def placed():
        pods = [kget(sim, "pod", n, "-n", "team-a") for n in ("half-1", "half-2")]
        if not all(p and p["spec"].get("nodeName") for p in pods):
            return None
        return [(p["spec"]["nodeName"], p["metadata"]["labels"].get("runai-gpu-group")) for p in pods]
    where = wait_for(placed, 60, "both halves bound")
    assert where[0] == where[1] and where[0][1], where
    reservations = kget(sim, "pods", "-n", "kai-resource-reservation")["items"]
    assert [r["metadata"]["labels"]["runai-gpu-group"] for r in reservations] == [where[0][1]]
    assert reservations[0]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    # the binder's image from the chart's Config (binder.resourceReservation.image)
    assert reservations[0]["spec"]["containers"][0]["image"] == \
        "ghcr.io/kai-scheduler/kai-scheduler/resourcereservation:v0.17.0"
    wait_for(lambda: (((kget(sim, "queue", "team-a") or {}).get("status") or {}).get("allocated") or {})
             .get("nvidia.com/gpu") == "1", 60, "team-a allocated 2 x 0.5")


def test_the_admission_policy_refuses_what_quota_cannot_count(site):
    sim, _inv, _first = site
    res = apply(sim, fraction_pod("frac", "team-b", "0.5"), check=False)
    assert res.returncode != 0
    assert ("ValidatingAdmissionPolicy 'skaffon-gpu-fraction-off' with binding 'skaffon-gpu-fraction-off' denied "
            "request: GPU fractions (gpu-fraction, gpu-memory) are not offered in namespace team-b") in res.stderr
    res = apply(sim, fraction_pod("whole", "team-a", "1.0"), check=False)
    assert res.returncode != 0
    assert ("denied request: gpu-fraction 1.0 is not a GPU fraction: KAI takes 0 < gpu-fraction < 1 "
            "(a whole GPU is nvidia.com/gpu: 1)") in res.stderr


# -- placement per pool: one SchedulingShard per pool ------------------------------------------------------

INFERENCE = "l40s-pcie-inference"
INF_LABELS = {"gpu.skaffon.io/accelerator": "l40s", "gpu.skaffon.io/topology": "pcie",
              "gpu.skaffon.io/workload": "inference"}


def sharded_settings():
    values = settings()
    values["queues_kai_placement"] = {POOL: "binpack", INFERENCE: "spread"}
    values["queues_kai_fraction_pools"] = None
    values["queues_pools"][INFERENCE] = {"labels": INF_LABELS, "taints": []}
    values["queues_departments"] = [{"name": "research", "gpu": {"quota": 4}}, {"name": "serving", "gpu": {"quota": 4}}]
    values["tenants_list"] = [
        {"name": "team-a", "queue": {"parent": "research", "pool": POOL, "gpu": {"quota": 2}}},
        {"name": "team-b", "queue": {"parent": "serving", "pool": INFERENCE, "gpu": {"quota": 2}}},
    ]
    return values


def test_pools_of_different_strategies_get_a_shard_each(tmp_path_factory):
    training = {"name": "gpu-h100-1", "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 4, "memory_mib": 81559},
                "host_driver": "550.54.15", "cpu": "64", "memory": "512Gi",
                "labels": {"gpu.skaffon.io/accelerator": "h100", "gpu.skaffon.io/topology": "nvlink",
                           "gpu.skaffon.io/workload": "training"},
                "taints": [{"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}]}
    inference = {"name": "gpu-l40s-1", "gpus": {"model": "NVIDIA-L40S", "count": 4, "memory_mib": 46068},
                 "host_driver": "550.54.15", "cpu": "32", "memory": "256Gi", "labels": INF_LABELS}
    sim = start_cluster(tmp_path_factory, "kai-shards", gpus=4, nodes=[training, inference])
    try:
        kubectl(sim, "patch", "node", "gpu-l40s-1", "--subresource=status", "--type=merge", "-p",
                json.dumps({"status": {"allocatable": {"nvidia.com/gpu": "4"}, "capacity": {"nvidia.com/gpu": "4"}}}))
        inv = inventory(tmp_path_factory.mktemp("inv"), sharded_settings())
        first = play(sim, inv, queues_helm_binary=os.path.join(BIN, "helm4"))
        assert first.rc == 0, first
        assert kget(sim, "configs.kai.scheduler", "kai-config")["spec"]["global"]["nodePoolLabelKey"] == \
            "gpu.skaffon.io/workload"
        shards = dict((s["metadata"]["name"], s["spec"].get("placementStrategy"))
                      for s in kget(sim, "schedulingshards")["items"])
        assert shards == {"default": {"gpu": "binpack", "cpu": "binpack"},
                          "training": {"gpu": "binpack", "cpu": "binpack"},
                          "inference": {"gpu": "spread", "cpu": "spread"}}
        assert kget(sim, "queue", "team-b")["metadata"]["labels"]["gpu.skaffon.io/workload"] == "inference"
        assert kget(sim, "queue", "serving")["metadata"]["labels"]["gpu.skaffon.io/workload"] == "inference"
        wait_for(lambda: kget(sim, "deployment", "kai-scheduler-inference", "-n", "kai-scheduler"), 60,
                 "the operator's scheduler for the inference shard")
        again = play(sim, inv, queues_helm_binary=os.path.join(BIN, "helm4"))
        assert again.rc == 0 and again.changed() == 0, again.data
        # binpack on the training pool: two halves on one GPU; spread on the inference pool: one GPU each
        for ns, labels in (("team-a", {"gpu.skaffon.io/workload": "training"}), ("team-b", INF_LABELS)):
            for name in ("h1", "h2"):
                pod = fraction_pod(name, ns, "0.5")
                pod["metadata"]["labels"].update(labels)
                apply(sim, pod)

        def groups(ns):
            pods = [kget(sim, "pod", n, "-n", ns) for n in ("h1", "h2")]
            if not all(p and p["spec"].get("nodeName") for p in pods):
                return None
            return [(p["spec"]["nodeName"], p["metadata"]["labels"]["runai-gpu-group"]) for p in pods]
        a = wait_for(lambda: groups("team-a"), 60, "team-a's halves bound")
        b = wait_for(lambda: groups("team-b"), 60, "team-b's halves bound")
        assert a[0] == a[1] and a[0][0] == "gpu-h100-1"
        assert b[0][0] == b[1][0] == "gpu-l40s-1" and b[0][1] != b[1][1]
    finally:
        sim.stop()
