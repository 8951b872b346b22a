"""node/pools.py is the one definition of a host's pool: every caller sees the same labels and taints."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.node_pools import FilterModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.inputs import checks_input
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gitops import node_patches
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node import pools
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues.objects import (
    flavor_objects, pools_from_hostvars)

F = FilterModule().filters()
PREFIX = "gpu.skaffon.io/"
# a taint with `value: null` (YAML `value:`) has no value, as in Kubernetes; never the string "None"
HOSTVARS = {"gpu-h100-1": {"node_prereqs_pool": {"accelerator": "h100", "workload": "training"},
                           "node_prereqs_pool_taints": [{"key": "dedicated", "value": None, "effect": "NoSchedule"},
                                                        {"key": "workload", "value": "training",
                                                         "effect": "NoExecute"}]}}
NO_VALUE = {"key": PREFIX + "dedicated", "value": "", "effect": "NoSchedule"}
WITH_VALUE = {"key": PREFIX + "workload", "value": "training", "effect": "NoExecute"}


def test_host_pool_null_value_is_no_value():
    pool = pools.host_pool(HOSTVARS["gpu-h100-1"], "gpu-h100-1")
    assert pool["taints"] == [NO_VALUE, WITH_VALUE]
    assert pool["labels"] == {PREFIX + "accelerator": "h100", PREFIX + "workload": "training"}
    assert pools.toleration(NO_VALUE) == {"key": PREFIX + "dedicated", "operator": "Exists", "effect": "NoSchedule"}


def test_null_value_through_the_filter():
    assert F["node_pool_taints"](HOSTVARS["gpu-h100-1"]["node_prereqs_pool_taints"], PREFIX) == [NO_VALUE, WITH_VALUE]
    assert F["gpu_pool_taints"](HOSTVARS, ["gpu-h100-1"]) == [NO_VALUE, WITH_VALUE]


def test_null_value_through_queues():
    found = pools_from_hostvars(HOSTVARS, ["gpu-h100-1"])
    assert found["h100-training"]["taints"] == [NO_VALUE, WITH_VALUE]
    flavor = flavor_objects(found)[0]
    assert flavor["spec"]["tolerations"] == [
        {"key": PREFIX + "dedicated", "operator": "Exists", "effect": "NoSchedule"},
        {"key": PREFIX + "workload", "operator": "Equal", "value": "training", "effect": "NoExecute"}]
    assert "None" not in str(flavor)


def test_null_value_through_acceptance():
    tolerations = checks_input(HOSTVARS, ["gpu-h100-1"])["tolerations"]
    assert {"key": PREFIX + "dedicated", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert "None" not in str(tolerations)


def test_null_value_through_gitops():
    assert node_patches(HOSTVARS, ["gpu-h100-1"])["gpu-h100-1"]["taints"] == [NO_VALUE, WITH_VALUE]


def test_bad_taints_are_refused_by_every_caller_with_the_same_message():
    hostvars = {"gpu-1": {"node_prereqs_pool": {"accelerator": "h100"},
                          "node_prereqs_pool_taints": [{"key": "workload", "effect": "NoShedule"}]}}
    with pytest.raises(pools.PoolError, match="effect must be one of NoSchedule") as raised:
        pools_from_hostvars(hostvars, ["gpu-1"])
    message = raised.value.msg
    with pytest.raises(pools.PoolError) as acceptance:
        checks_input(hostvars, ["gpu-1"])
    with pytest.raises(AnsibleFilterError) as flt:
        F["gpu_pool_taints"](hostvars, ["gpu-1"])
    assert acceptance.value.msg == message and str(flt.value) == message


def test_pool_label_key_refuses_unknown_key_through_the_filter():
    with pytest.raises(AnsibleFilterError, match="is not a node-pool key"):
        F["pool_label_key"]("colour")


def test_host_inputs_names_host_variable_value_and_fix():
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.pools import host_inputs
    ok = host_inputs("h1", {"accelerator": "h100"}, [{"key": "workload", "value": None, "effect": "NoSchedule"}],
                     "gpu.example.com/", "h1")
    assert ok == {"errors": [], "node_pool": {"host": "h1", "prefix": "gpu.example.com/", "pool": {"accelerator": "h100"},
                                              "taints": [{"key": "gpu.example.com/workload", "value": "",
                                                          "effect": "NoSchedule"}]}}
    assert host_inputs("h1", {"accelerator": "h100"}, [], "gpu.example.com/", "h1", False)["node_pool"] is None
    bad = host_inputs("h2", "h100", {"key": "x"}, "gpu.example.com/", "H2_node")
    assert bad["node_pool"] is None and len(bad["errors"]) == 3, bad
    assert bad["errors"][0].startswith('node_prereqs_pool on h2 must map only accelerator, topology') and \
        'got "h100" (a string, not a mapping)' in bad["errors"][0]
    assert "node_prereqs_pool_taints of h2 must be a list" in bad["errors"][1]
    assert bad["errors"][2] == ("node_prereqs_node_name of h2 is 'H2_node', not a Kubernetes node name (lower-case DNS "
                                "subdomain): set it to the name `kubectl get nodes` shows.")


def test_hosts_inputs_read_the_inventory_of_each_host_with_the_defaults():
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.pools import hosts_inputs
    hostvars = {"a": {"node_prereqs_pool": {"accelerator": "h100"}, "node_prereqs_node_name": "node-a",
                      "node_prereqs_label_prefix": "a.example.com/"},
                "b": {"node_prereqs_pool": {"colour": "red"}},
                "c": {"node_prereqs_pool": {"accelerator": "l40s"}, "node_prereqs_label_nodes": "no"},
                "d": {}}
    got = hosts_inputs(hostvars, ["a", "b", "c", "d"], label_nodes=True, default_prefix="site.example.com/")
    assert sorted(got["pools"]) == ["d", "node-a"]
    assert got["pools"]["node-a"]["prefix"] == "a.example.com/" and got["pools"]["d"]["prefix"] == "site.example.com/"
    assert got["pools"]["d"]["pool"] == {} and got["pools"]["d"]["taints"] == []
    assert len(got["errors"]) == 1 and got["errors"][0].startswith("node_prereqs_pool on b must map only")
    assert hosts_inputs(hostvars, ["d"], label_nodes=False)["pools"] == {}
