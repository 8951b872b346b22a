"""Issue 11 defect 2: playbooks/mig.yml checks every batch before the first change.

The checks used to run `run_once` per `serial` batch with the first host's values of that
batch, so batch 2 (another pool, other values) could fail after batch 1 had relabelled a
node. Settings come from an inventory directory; `-e mig_batch_size=1` is what a person types.
"""
import os

import pytest

from kit.mig import labels, mig_module
from kit.paths import REPO
from kit.playbook import run_playbook
from kit.pool_inventory import env_without_kubeconfig, write_inventory, writes

PLAYBOOK = os.path.join(REPO, "playbooks", "mig.yml")
NODES = ("gpu-h100-1", "gpu-h100-2", "gpu-h100-3", "gpu-h100-5")

pytestmark, cluster = mig_module("mig-batches.yaml", "single", failing=["gpu-h100-6"])


def inventory(tmp_path, cluster, host_vars=None):
    # batch order: gpu-h100-1 (one-node training pool, allowed whole), gpu-h100-2 (no MIG),
    # gpu-h100-3 and gpu-h100-5 (inference pool)
    return write_inventory(tmp_path, cluster, pools={
        "pool_h100_training": ["gpu-h100-1"],
        "pool_h100_plain": ["gpu-h100-2"],
        "pool_h100_inference": ["gpu-h100-3", "gpu-h100-5"],
    }, pool_vars={
        "pool_h100_training": {"mig_profile": "all-1g.10gb", "mig_allow_whole_pool": True},
        "pool_h100_plain": {"mig_profile": None},
        "pool_h100_inference": {"mig_profile": "all-3g.40gb"},
    }, host_vars=host_vars)


def profiles(cluster):
    return dict((n, labels(cluster, n).get("nvidia.com/mig.config")) for n in NODES)


def test_bad_input_of_a_later_batch_stops_the_rollout_before_batch_1(cluster, tmp_path):
    before = profiles(cluster)
    inv = inventory(tmp_path, cluster, host_vars={"gpu-h100-5": {"mig_timeout": "soon"}})
    cluster.reset_stats()
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inv, extra_vars={"mig_batch_size": 1})
    assert res.rc != 0
    msg = " ".join(res.failure_messages())
    assert "mig_timeout of gpu-h100-5 must be a number of seconds >= 1, got 'soon'" in msg, msg
    assert profiles(cluster) == before
    assert writes(cluster.stats()) == {}, cluster.stats()


def test_pool_settings_of_batch_1_hold_in_every_batch(cluster, tmp_path):
    """On main, batch 2 (gpu-h100-2, mig_allow_whole_pool false) re-ran the whole-pool check
    with its own value and failed after batch 1 had switched gpu-h100-1 to MIG."""
    inv = inventory(tmp_path, cluster)
    # cluster access from mig_kubeconfig alone (module_defaults), not the environment
    res = run_playbook(PLAYBOOK, env_without_kubeconfig(cluster), inventory=inv, extra_vars={"mig_batch_size": 1})
    assert res.rc == 0, res
    assert profiles(cluster) == {"gpu-h100-1": "all-1g.10gb", "gpu-h100-2": "all-disabled",
                                 "gpu-h100-3": "all-3g.40gb", "gpu-h100-5": "all-3g.40gb"}


# The inference pool gets a profile none of its nodes has yet (whatever ran before): both are to
# change, so a batch of 4 would take the whole pool at once (nodes already at their profile keep
# serving and are no part of a batch).
ANOTHER_PROFILE = {"gpu-h100-3": {"mig_profile": "all-2g.20gb"}, "gpu-h100-5": {"mig_profile": "all-2g.20gb"}}


@pytest.mark.parametrize("batch_size,expected", [
    (0, "mig_batch_size must be a whole number of nodes >= 1 (the play's serial), got 0"),
    (4, "batch 1 holds all 2 node(s) of pool pool_h100_inference (gpu-h100-3, gpu-h100-5)"),
])
def test_bad_batch_size_is_refused_before_any_change(cluster, tmp_path, batch_size, expected):
    before = profiles(cluster)
    cluster.reset_stats()
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inventory(tmp_path, cluster, host_vars=ANOTHER_PROFILE),
                       extra_vars={"mig_batch_size": batch_size})
    assert res.rc != 0
    msg = " ".join(res.failure_messages())
    assert expected in msg, msg
    assert profiles(cluster) == before and writes(cluster.stats()) == {}


def test_failed_node_reports_what_earlier_batches_changed(cluster, tmp_path):
    inv = write_inventory(tmp_path, cluster, pools={"pool_x": ["gpu-h100-3"], "pool_y": ["gpu-h100-6"]},
                          pool_vars={"pool_x": {"mig_profile": "all-2g.20gb", "mig_allow_whole_pool": True},
                                     "pool_y": {"mig_profile": "all-1g.10gb", "mig_allow_whole_pool": True,
                                                "mig_timeout": 30}})
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inv, extra_vars={"mig_batch_size": 1})
    assert res.rc != 0
    msg = " ".join(res.failure_messages())
    assert "MIG rollout stopped at gpu-h100-6 (profile all-1g.10gb)" in msg, msg
    assert "Changed before: gpu-h100-3." in msg and "resumes" not in msg, msg
    assert "A re-run with the same profile stops at once" in msg and "restart the mig-manager pod on gpu-h100-6" in msg, msg
    assert labels(cluster, "gpu-h100-3")["nvidia.com/mig.config"] == "all-2g.20gb"
