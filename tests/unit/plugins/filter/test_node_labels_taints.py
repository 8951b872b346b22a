"""node_labels_taints: the role's labels and taints on one Node (replaces the Jinja program of node_object.yml)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.node_labels_taints import FilterModule, node_labels_taints

P = "gpu.skaffon.io/"


def node(labels=None, taints=None):
    return {"metadata": {"name": "gpu-1", "labels": labels or {}}, "spec": {"taints": taints or []}}


def test_owned_labels_are_replaced_others_kept_plan_labels_added():
    current = node(labels={P + "accelerator": "a100", P + "old": "x", "kubernetes.io/hostname": "gpu-1"})
    out = node_labels_taints(current, P, {"accelerator": "h100", "pool": "training", "count": 8},
                             [], {"nvidia.com/gpu.deploy.driver": "false"})
    assert out["labels"] == {P + "accelerator": "h100", P + "pool": "training", P + "count": "8",
                             P + "old": None, "nvidia.com/gpu.deploy.driver": "false"}
    assert "kubernetes.io/hostname" not in out["labels"]   # not ours: untouched by the merge patch


def test_taints_owned_ones_follow_the_pool_foreign_ones_stay_in_place():
    current = node(taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
                           {"key": P + "workload", "value": "inference", "effect": "NoSchedule"},
                           {"key": P + "gone", "value": "", "effect": "NoSchedule"}])
    out = node_labels_taints(current, P, {}, [{"key": "workload", "value": "training", "effect": "NoSchedule"},
                                              {"key": "nvidia.com/gpu", "value": None, "effect": "NoSchedule"}])
    assert out["taints"] == [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
                             {"key": P + "workload", "value": "training", "effect": "NoSchedule"},
                             {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}]


def test_second_run_is_a_no_op_patch():
    pool, taints = {"pool": "training"}, [{"key": "workload", "value": "training", "effect": "NoSchedule"}]
    first = node_labels_taints(node(), P, pool, taints)
    applied = node(labels=dict((k, v) for k, v in first["labels"].items() if v is not None), taints=first["taints"])
    assert node_labels_taints(applied, P, pool, taints) == {"labels": {P + "pool": "training"},
                                                            "taints": first["taints"]}


@pytest.mark.parametrize("args,needle", [
    (("gpu.skaffon.io", {}, []), "must be a DNS subdomain followed by '/'"),
    ((P, {}, [{"key": "a", "effect": "NoRun"}]), "needs key and effect NoSchedule|PreferNoSchedule|NoExecute"),
    ((P, {}, {"key": "a"}), "pool taints must be a list"),
    ((P, ["a"], []), "pool labels must be a mapping"),
])
def test_bad_inputs_name_the_problem(args, needle):
    with pytest.raises(AnsibleFilterError, match=needle.replace("|", r"\|")):
        node_labels_taints(node(), *args)


def test_registered():
    assert FilterModule().filters()["node_labels_taints"] is node_labels_taints
