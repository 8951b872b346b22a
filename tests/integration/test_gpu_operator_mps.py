"""MPS through the gpu_operator role on the simulated cluster (inventory settings, as a site keeps them).

One ConfigMap of named device plugin configs, selected per node by nvidia.com/device-plugin.config, as for
time-slicing; an MPS config carries sharing.mps. The device plugin twin serves MPS replicas only once the
operator's MPS control daemon runs on the node (nodeSelector nvidia.com/mps.capable=true, written by GFD).
Refused before anything is written: tenants of different trust, a node whose GPUs run MIG, the mixed MIG
strategy (the operator passes it to every device plugin, which refuses MPS with it).
"""

import json
import os

import pytest

from kit.paths import BIN
from kit.gpu_operator import NS, base_vars, gpu_node, kget, package_chart, plan_for, play, start_cluster

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
TRUST = "gpu.skaffon.io/trust"
NODES = [gpu_node("gpu-a", "550.54.15", **{TRUST: "single"}),
         gpu_node("gpu-b", "550.54.15", **{TRUST: "mixed"}),
         gpu_node("gpu-m", "550.54.15", **{TRUST: "single", "nvidia.com/mig.config": "all-1g.10gb"}),
         {"name": "cpu-1"}]
MPS = {"configs": {"mps-4": {"replicas": 4, "strategy": "mps", "fail_requests_greater_than_one": True}},
       "nodes": {"gpu-a": "mps-4"}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "mps", NODES)
    try:
        archive = package_chart(tmp_path_factory)
        plan = plan_for(NODES)
        res = play(sim, base_vars(sim, archive, plan))
        assert res.rc == 0, res
        yield sim, archive, plan
    finally:
        sim.stop()


def mps_vars(sim, archive, plan, sharing, **extra):
    return base_vars(sim, archive, plan, gpu_operator_time_slicing=sharing,
                     gpu_operator_time_slicing_verify_retries=20, **extra)


@pytest.mark.parametrize("nodes, extra, message", [
    ({"gpu-b": "mps-4"}, {},
     "MPS refused on gpu-b (gpu.skaffon.io/trust=mixed, config mps-4, MPS)"),
    ({"gpu-m": "mps-4"}, {},
     "MPS refused on gpu-m (nvidia.com/mig.config=all-1g.10gb, config mps-4)"),
    ({"gpu-a": "mps-4"}, {"gpu_operator_mig_strategy": "mixed"},
     "MPS refused on gpu-a: gpu_operator_mig_strategy is mixed"),
])
def test_mps_where_it_cannot_work_is_refused_before_anything_changes(cluster, nodes, extra, message):
    sim, archive, plan = cluster
    res = play(sim, mps_vars(sim, archive, plan, dict(MPS, nodes=nodes), **extra))
    assert res.rc != 0
    msgs = "\n".join(res.failure_messages())
    assert message in msgs, msgs
    assert kget(sim, "configmap", "time-slicing-config", "-n", NS) is None
    assert res.changed() == 0


@pytest.mark.parametrize("config, message", [
    ({"replicas": 1, "strategy": "mps", "resources": [{"name": "nvidia.com/gpu", "replicas": 1}]},
     "replicas must be an integer >= 2"),
    ({"replicas": 64, "strategy": "mps"}, "an MPS server takes at most 48 clients per GPU"),
])
def test_bad_mps_configs_are_refused_with_the_reason(cluster, config, message):
    sim, archive, plan = cluster
    res = play(sim, mps_vars(sim, archive, plan, {"configs": {"mps": config}, "nodes": {"gpu-a": "mps"}}))
    assert res.rc != 0
    assert any(message in m for m in res.failure_messages()), res.failure_messages()
    assert res.changed() == 0


def test_mps_pool_converges_advertises_replicas_and_reruns_unchanged(cluster):
    sim, archive, plan = cluster
    first = play(sim, mps_vars(sim, archive, plan, MPS))
    assert first.rc == 0, first
    a = kget(sim, "node", "gpu-a")
    labels = a["metadata"]["labels"]
    assert labels["nvidia.com/device-plugin.config"] == "mps-4"
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert labels["nvidia.com/mps.capable"] == "true"
    assert int(a["status"]["capacity"]["nvidia.com/gpu"]) == 8        # 2 GPUs x 4 MPS clients
    pods = kget(sim, "pods", "-n", NS, "-l", "app=nvidia-device-plugin-mps-control-daemon")["items"]
    assert [p["spec"]["nodeName"] for p in pods] == ["gpu-a"]
    b = kget(sim, "node", "gpu-b")       # not selected: whole GPUs
    assert b["metadata"]["labels"].get("nvidia.com/gpu.sharing-strategy") in (None, "none")
    assert int(b["status"]["capacity"]["nvidia.com/gpu"]) == 2
    cm = kget(sim, "configmap", "time-slicing-config", "-n", NS)
    assert "sharing:\n  mps:\n" in cm["data"]["mps-4"]
    values = json.loads(sim.run(os.path.join(BIN, "helm3"), "get", "values", "gpu-operator", "-n", NS,
                                "-o", "json").stdout)
    assert values["devicePlugin"]["mps"] == {"root": "/run/nvidia/mps"}
    assert values["devicePlugin"]["config"] == {"create": False, "name": "time-slicing-config", "default": ""}

    again = play(sim, mps_vars(sim, archive, plan, MPS))
    assert again.rc == 0 and again.changed() == 0, again
