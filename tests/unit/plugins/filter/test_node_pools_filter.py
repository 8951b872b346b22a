"""node_pools filters: the pool rules node_prereqs writes and gpu_operator tolerates."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.node_pools import FilterModule

F = FilterModule().filters()
PREFIX = "gpu.skaffon.io/"


def test_taint_keys_get_the_prefix_and_values_default_empty():
    assert F["node_pool_taints"]([{"key": "workload", "value": "training", "effect": "NoSchedule"},
                                  {"key": "nvidia.com/gpu", "effect": "NoSchedule"}], PREFIX) == [
        {"key": PREFIX + "workload", "value": "training", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}]


@pytest.mark.parametrize("taints,prefix,expected", [
    ({"key": "workload", "effect": "NoSchedule"}, PREFIX, "must be a list of {key, value, effect}"),
    ([{"key": "workload", "effect": "NoShedule"}], PREFIX, "effect must be one of NoSchedule"),
    ([{"key": "a b", "effect": "NoSchedule"}], PREFIX, "name part 'a b'"),
    ([{"key": "workload", "effect": "NoSchedule", "operator": "Exists"}], PREFIX, "unknown fields operator"),
    ([], "gpu.skaffon.io", "must end with '/'"),
    ([], "Gpu.Skaffon.io/", "is not a label key prefix"),
])
def test_bad_taints_and_prefixes_name_the_variable(taints, prefix, expected):
    with pytest.raises(AnsibleFilterError, match=expected.replace("{", r"\{").replace("(", r"\(")):
        F["node_pool_taints"](taints, prefix, "gpu-h100-1")
    assert F["node_pool_taints"](taints, prefix, "gpu-h100-1", check_only=True)


def test_labels_drop_stale_prefixed_keep_foreign():
    current = {PREFIX + "old": "x", "team": "ml", PREFIX + "accelerator": "a100"}
    assert F["node_pool_labels"](current, {"accelerator": "h100"}, PREFIX, {"nvidia.com/gpu.deploy.driver": "false"}) == {
        PREFIX + "old": None, PREFIX + "accelerator": "h100", "nvidia.com/gpu.deploy.driver": "false"}


def test_taint_list_keeps_foreign_in_place_and_replaces_ours():
    current = [{"key": "example.com/m", "effect": "PreferNoSchedule"},
               {"key": PREFIX + "old", "value": "y", "effect": "NoSchedule"}]
    wanted = [{"key": PREFIX + "workload", "value": "training", "effect": "NoSchedule"}]
    assert F["node_taint_list"](current, wanted, PREFIX) == [current[0], wanted[0]]


def test_gpu_pool_taints_across_hosts_unique_with_each_hosts_prefix():
    hostvars = {
        "a": {"node_prereqs_pool_taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}]},
        "b": {"node_prereqs_pool_taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}]},
        "c": {"node_prereqs_label_prefix": "example.org/",
              "node_prereqs_pool_taints": [{"key": "pool", "value": "x", "effect": "NoExecute"}]},
        "d": {},
    }
    assert F["gpu_pool_taints"](hostvars, ["a", "b", "c", "d", "missing"]) == [
        {"key": PREFIX + "workload", "value": "training", "effect": "NoSchedule"},
        {"key": "example.org/pool", "value": "x", "effect": "NoExecute"}]
    assert F["gpu_node_names"]({"a": {"node_prereqs_node_name": "a.example"}}, ["a", "b"]) == ["a.example", "b"]
