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


def test_pool_label_key_follows_the_prefix_the_hosts_are_labelled_with():
    key = F["pool_label_key"]
    assert F["pool_label_prefix"](None) == PREFIX and F["pool_label_prefix"]("site.example/") == "site.example/"
    assert key("trust") == PREFIX + "trust"                                           # no hosts: the default
    assert key("trust", {}, [], "site.example/") == "site.example/trust"              # the caller's site prefix
    hv = {"a": {"node_prereqs_label_prefix": "example.org/"}, "b": {"gpu_platform_label_prefix": "example.org/"},
          "c": {"gpu_platform_label_prefix": "site.example/", "node_prereqs_label_prefix": "example.org/"}}
    assert key("trust", hv, ["a", "b", "c"]) == "example.org/trust"
    assert key("accelerator", {"d": {}}, ["d"], "site.example/") == "site.example/accelerator"
    with pytest.raises(AnsibleFilterError, match=r"gpu_operator_time_slicing_trust_label: the GPU hosts are labelled "
                       r"under different node_prereqs_label_prefix values \(example.org/ on a; gpu.skaffon.io/ on d\)"):
        key("trust", {"a": hv["a"], "d": {}}, ["a", "d"], variable="gpu_operator_time_slicing_trust_label")
    with pytest.raises(AnsibleFilterError, match="'pool' is not a node-pool key"):
        key("pool")
    with pytest.raises(AnsibleFilterError, match="must end with '/'"):
        key("trust", {"a": {"node_prereqs_label_prefix": "example.org"}}, ["a"])


def test_node_label_values_reads_keys_with_dots_and_slashes():
    nodes = [{"metadata": {"name": "a", "labels": {PREFIX + "accelerator": "h100"}}}, {"metadata": {"name": "b"}}]
    assert F["node_label_values"](nodes, PREFIX + "accelerator", "-") == {"a": "h100", "b": "-"}


def _node(name, **labels):
    return {"metadata": {"name": name, "labels": labels}}


def test_labels_to_change_keeps_only_what_the_nodes_lack():
    key = "nvidia.com/gpu.deploy.driver"
    nodes = [_node("gpu-a", **{key: "false"}), _node("gpu-b", other="x"), _node("gpu-c", **{key: "false"})]
    wanted = {"gpu-a": {key: "false"},                  # carries it: left out
              "gpu-b": {key: "false", "other": "x"},    # one of two differs: only that one
              "gpu-c": {key: None},                      # must be absent, is there: kept
              "gpu-d": {key: "false"}}                   # not read: kept whole, the module names it
    assert F["node_labels_to_change"](wanted, nodes) == {
        "gpu-b": {key: "false"}, "gpu-c": {key: None}, "gpu-d": {key: "false"}}
    assert F["node_labels_to_change"]({"gpu-a": {key: "false"}, "gpu-b": {"gone": None}}, nodes) == {}
    assert F["node_labels_to_change"]({}, nodes) == {}
