"""Integration: playbooks/mig.yml (roles/mig) rolls a pool out in batches on the simulated cluster."""
import os

import pytest

from kit.mig import labels, mig_module
from kit.paths import REPO
from kit.playbook import run_playbook

PLAYBOOK = os.path.join(REPO, "playbooks", "mig.yml")


# Hosts listed first in the order the batches should take them (one node of each pool per
# batch); the pool groups then only assign pools and profiles.
INVENTORY = """\
all:
  children:
    gpu_nodes:
      hosts: {gpu-h100-1: {}, gpu-h100-4: {}, gpu-h100-2: {}, gpu-h100-5: {}, cpu-1: {}}
      children:
        pool_h100_training:
          vars: {mig_profile: all-3g.40gb}
          hosts: {gpu-h100-1: {}, gpu-h100-2: {}}
        pool_h100_inference:
          vars: {mig_profile: all-1g.10gb, mig_drain: true}
          hosts: {gpu-h100-4: {}, gpu-h100-5: {}}
        pool_cpu:
          hosts: {cpu-1: {}}
"""

pytestmark, cluster = mig_module("mig-rollout.yaml", "single")



@pytest.fixture()
def inventory(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text(INVENTORY)
    return str(path)


def _nodes(cluster):
    return ["gpu-h100-1", "gpu-h100-2", "gpu-h100-4", "gpu-h100-5"]


def test_batch_taking_a_whole_pool_is_refused_before_any_change(cluster, inventory):
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inventory, extra_vars={"mig_batch_size": 3})
    assert res.rc != 0
    msg = " ".join(res.failure_messages())
    # batch 1 = gpu-h100-1, gpu-h100-4, gpu-h100-2: all of pool_h100_training
    assert "batch 1 holds all 2 node(s) of pool pool_h100_training (gpu-h100-1, gpu-h100-2)" in msg, msg
    assert "mig_batch_size=3" in msg
    assert {labels(cluster, n)["nvidia.com/mig.config"] for n in _nodes(cluster)} == {"all-disabled"}


def test_check_mode_rollout_changes_nothing(cluster, inventory):
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inventory, extra_vars={"mig_batch_size": 2},
                       check=True, diff=True)
    assert res.rc == 0, res
    assert res.changed("gpu-h100-1") >= 1
    assert {labels(cluster, n)["nvidia.com/mig.config"] for n in _nodes(cluster)} == {"all-disabled"}


def test_rollout_in_batches_and_summary(cluster, inventory):
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inventory, extra_vars={"mig_batch_size": 2})
    assert res.rc == 0, res
    got = {n: labels(cluster, n) for n in _nodes(cluster)}
    assert {n: l["nvidia.com/mig.config"] for n, l in got.items()} == {
        "gpu-h100-1": "all-3g.40gb", "gpu-h100-2": "all-3g.40gb",
        "gpu-h100-4": "all-1g.10gb", "gpu-h100-5": "all-1g.10gb"}
    assert "nvidia.com/mig.config" not in labels(cluster, "cpu-1")
    summary = res.task_results("Show GPU and MIG resources per node", host="gpu-h100-1")[0]["msg"]
    offers = {item["node"]: item["allocatable"] for item in summary}
    assert offers["gpu-h100-1"] == {"nvidia.com/gpu": 4} and offers["gpu-h100-5"] == {"nvidia.com/gpu": 14}
    assert set(offers) == set(_nodes(cluster))
    # the first run: the read finds every node pending (nothing touched), each gets its own call
    pending = [e["node"] for n in _nodes(cluster) + ["cpu-1"] for r in res.task_results("Verify the nodes already at their profile", n)
               for item in r.get("results", []) for e in item.get("nodes", []) if e.get("pending")]
    assert sorted(pending) == sorted(_nodes(cluster)), res
    assert [n for n in _nodes(cluster) for r in res.task_results("Apply the MIG profile and wait for mig-manager", n)
            if not r.get("skipped")] == _nodes(cluster), res
    rerun = run_playbook(PLAYBOOK, cluster.env, inventory=inventory, extra_vars={"mig_batch_size": 2})
    assert rerun.rc == 0 and sum(rerun.changed(n) for n in _nodes(cluster)) == 0, rerun
    # nodes at their profile: one verifying call per profile, no batch, no task per host
    reads = [r for n in _nodes(cluster) + ["cpu-1"] for r in rerun.task_results("Verify the nodes already at their profile", n)]
    assert len(reads) == 1 and len(reads[0]["results"]) == 2, rerun
    verified = [e["node"] for item in reads[0]["results"] for e in item.get("nodes", []) if not e.get("pending")]
    assert sorted(verified) == sorted(_nodes(cluster)), rerun
    for task in ("Check the whole rollout before any change", "Apply the MIG profile and wait for mig-manager"):
        assert [r for n in _nodes(cluster) + ["cpu-1"] for r in rerun.task_results(task, n)] == [], (task, rerun)
    summary = rerun.task_results("Show GPU and MIG resources per node", host="gpu-h100-1")[0]["msg"]
    assert dict((item["node"], (item["allocatable"], item["changed"])) for item in summary) == dict(
        (n, (offers[n], False)) for n in _nodes(cluster))
