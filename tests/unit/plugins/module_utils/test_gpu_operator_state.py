"""gpu_operator_info's read: the Nodes, the operator Namespace and both stacks' custom resources,
one call each; a kind the server does not serve reads as none."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import ValidationError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.state import read
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube


def _obj(kind, name, namespace=None):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": kind, "metadata": meta}


def test_reads_each_kind_once():
    kube = FakeKube([_obj("Node", "gpu-a"), _obj("Node", "cpu-1"), _obj("Namespace", "gpu-operator"),
                     _obj("Namespace", "default"), _obj("ClusterPolicy", "cluster-policy")])
    state = read(kube, "gpu-operator")
    assert [n["metadata"]["name"] for n in state["nodes"]] == ["cpu-1", "gpu-a"]
    assert state["namespace"]["metadata"]["name"] == "gpu-operator"
    assert [p["metadata"]["name"] for p in state["cluster_policies"]] == ["cluster-policy"]
    assert state["gpu_clusters"] == []
    reads = [(c.verb, c.kind) for c in kube.calls if c.verb != "SERVED"]
    assert sorted(reads) == [("GET", "Namespace"), ("LIST", "ClusterPolicy"), ("LIST", "GPUCluster"),
                             ("LIST", "Node")]
    assert kube.writes() == []


def test_an_unserved_kind_and_a_missing_namespace_read_as_none():
    kube = FakeKube([_obj("Node", "gpu-a"), _obj("GPUCluster", "gpu-cluster")], served={"Node", "Namespace"})
    state = read(kube, "gpu-operator")
    assert state["namespace"] is None
    assert state["cluster_policies"] == [] and state["gpu_clusters"] == []
    assert not [c for c in kube.calls if c.verb == "LIST" and c.kind in ("ClusterPolicy", "GPUCluster")]


def test_a_bad_namespace_is_refused_before_any_call():
    kube = FakeKube()
    with pytest.raises(ValidationError, match="operator_namespace = 'GPU_Operator'"):
        read(kube, "GPU_Operator")
    assert kube.calls == []


def test_with_time_slicing_the_configmap_and_the_device_plugin_daemonset_are_read_too():
    kube = FakeKube([_obj("Node", "gpu-a"), _obj("Namespace", "gpu-operator"),
                     _obj("ConfigMap", "time-slicing-config", "gpu-operator"),
                     _obj("ConfigMap", "time-slicing-config", "default"),
                     _obj("DaemonSet", "nvidia-device-plugin-daemonset", "gpu-operator")])
    state = read(kube, "gpu-operator", "time-slicing-config")
    assert state["time_slicing_configmap"]["metadata"] == {"name": "time-slicing-config", "namespace": "gpu-operator"}
    assert state["device_plugin_daemonset"]["metadata"]["name"] == "nvidia-device-plugin-daemonset"
    gets = sorted((c.kind, c.name, c.namespace) for c in kube.calls if c.verb == "GET")
    assert gets == [("ConfigMap", "time-slicing-config", "gpu-operator"),
                    ("DaemonSet", "nvidia-device-plugin-daemonset", "gpu-operator"),
                    ("Namespace", "gpu-operator", None)]
    # without time-slicing neither is read
    assert "time_slicing_configmap" not in read(FakeKube([_obj("Namespace", "gpu-operator")]), "gpu-operator")


def test_before_the_first_install_nothing_is_read_in_the_missing_namespace():
    kube = FakeKube([_obj("Node", "gpu-a")])
    state = read(kube, "gpu-operator", "time-slicing-config")
    assert state["time_slicing_configmap"] is None and state["device_plugin_daemonset"] is None
    assert [c.kind for c in kube.calls if c.verb == "GET"] == ["Namespace"]


def test_a_bad_configmap_name_is_refused_before_any_call():
    kube = FakeKube()
    with pytest.raises(ValidationError, match="time_slicing_configmap = 'Time_Slicing': not a DNS-1123 subdomain"):
        read(kube, "gpu-operator", "Time_Slicing")
    assert kube.calls == []
