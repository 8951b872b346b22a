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
