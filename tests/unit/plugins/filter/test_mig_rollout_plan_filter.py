"""mig_rollout_plan: every batch's checks from every host's variables, before any change."""
from ansible_collections.skaffon.gpu_platform.plugins.filter.mig_rollout import mig_rollout_plan

DEFAULTS = {"mig_pool_group_prefix": "pool_", "mig_allow_whole_pool": False, "mig_drain": False,
            "mig_timeout": 600, "mig_verify_timeout": 120, "mig_eviction_timeout": 300}


def hv(**pools):
    out = {}
    for pool, hosts in pools.items():
        for host, extra in hosts.items():
            out[host] = dict({"group_names": [pool]}, **extra)
    return out


def test_pool_setting_of_one_batch_does_not_leak_into_another():
    hostvars = hv(pool_a={"a1": {"mig_profile": "all-1g.10gb", "mig_allow_whole_pool": True}},
                  pool_b={"b1": {}})
    plan = mig_rollout_plan(hostvars, ["a1", "b1"], 1, batch=["b1"], defaults=DEFAULTS)
    assert plan["errors"] == [] and plan["pools"] == {"a1": "pool_a"}


def test_whole_pool_batch_and_later_host_errors_all_reported():
    a2 = {"mig_profile": "all-1g.10gb", "mig_timeout": "soon"}
    hostvars = hv(pool_a={"a1": {"mig_profile": "all-1g.10gb"}, "a2": a2}, pool_b={"b1": {"mig_profile": 7}})
    errors = mig_rollout_plan(hostvars, ["a1", "a2", "b1"], 2, batch=["a1", "a2"], defaults=DEFAULTS)["errors"]
    assert "mig_timeout of a2 must be a number of seconds >= 1, got 'soon'" in errors
    assert any("mig_profile of b1 must be a mig-parted config name" in e for e in errors)
    assert any("batch 1 holds all 2 node(s) of pool pool_a (a1, a2)" in e for e in errors)


def test_batch_size_zero_and_serial_mismatch():
    assert "whole number" in mig_rollout_plan({}, ["a"], 0, defaults=DEFAULTS)["errors"][0]
    hostvars = hv(pool_a={"a1": {"mig_profile": "x"}, "a2": {"mig_profile": "x"}, "a3": {"mig_profile": "x"}})
    errors = mig_rollout_plan(hostvars, ["a1", "a2", "a3"], 1, batch=["a1", "a2"], defaults=DEFAULTS)["errors"]
    assert any("does not match the play's serial" in e for e in errors)


def test_batches_over_the_pending_hosts_count_pools_over_every_host():
    hostvars = hv(pool_a={"a1": {"mig_profile": "x"}, "a2": {"mig_profile": "x"}},
                  pool_b={"b1": {"mig_profile": "x"}, "b2": {"mig_profile": "x"}})
    hosts = ["a1", "b1", "a2", "b2"]
    # over every host, batch 1 (a1, b1) leaves each pool a node; over the pending a1, a2 it empties pool_a
    assert mig_rollout_plan(hostvars, hosts, 2, defaults=DEFAULTS)["errors"] == []
    errors = mig_rollout_plan(hostvars, hosts, 2, batch=["a1", "a2"], defaults=DEFAULTS, pending=["a2", "a1"])["errors"]
    assert len(errors) == 1 and "batch 1 holds all 2 node(s) of pool pool_a (a1, a2)" in errors[0], errors
    # a pending node whose pool keeps a node at its profile takes no pool's last GPU
    plan = mig_rollout_plan(hostvars, hosts, 2, batch=["a1", "b1"], defaults=DEFAULTS, pending=["b1", "a1"])
    assert plan["errors"] == [] and plan["batches"] == [["a1", "b1"]]
    # nothing pending: no batch, nothing to refuse
    assert mig_rollout_plan(hostvars, hosts, 1, defaults=DEFAULTS, pending=[])["batches"] == []


def test_node_names_follow_the_inventory():
    hostvars = hv(pool_a={"a1": {"mig_profile": "x", "mig_node_name": "node-a1"},
                          "a2": {"mig_profile": "x", "node_prereqs_node_name": "node-a2"},
                          "a3": {"mig_profile": "x"}, "a4": {}})
    plan = mig_rollout_plan(hostvars, ["a1", "a2", "a3", "a4"], 1, defaults=DEFAULTS)
    assert plan["nodes"] == {"a1": "node-a1", "a2": "node-a2", "a3": "a3"}


def test_the_read_sorts_verified_nodes_and_pending_hosts():
    from ansible_collections.skaffon.gpu_platform.plugins.filter.mig_rollout import mig_rollout_read
    hostvars = hv(pool_a={"a1": {"mig_profile": "x", "mig_node_name": "n1"}, "a2": {"mig_profile": "x"},
                          "a3": {"mig_profile": "y"}, "c1": {}})
    hosts = ["a1", "a2", "a3", "c1"]
    plan = mig_rollout_plan(hostvars, hosts, 1, defaults=DEFAULTS)
    offer = {"allocatable": {"nvidia.com/gpu": 4}}
    results = [{"nodes": [{"node": "n1", "offer": offer}, {"node": "a2", "pending": True}]},
               # a call that failed before it reached a3: no entry, a3 stays pending
               {"failed": True, "msg": "boom"}]
    read = mig_rollout_read(plan, results, hosts)
    assert read["pending"] == ["a2", "a3"]
    assert read["verified"] == [{"allocatable": {"nvidia.com/gpu": 4}, "node": "n1", "pool": "pool_a", "changed": False}]
