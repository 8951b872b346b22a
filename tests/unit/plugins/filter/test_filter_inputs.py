"""The filters hand the domain code plain data (plugin_utils/filter_errors.plain).

ansible-core 2.19 passes a filter lazy containers (Mapping/list subclasses) whose deep copy also
copies the templar with every variable of the play: on a site's inventory one render of the
monitoring objects took 3 s instead of 0.2 s. `Lazy` stands in for them and counts its deep copies;
the domain code deep-copies its inputs (defaults merged over them), so a filter that passes its
arguments through unchanged copies a Lazy."""
import copy

from collections.abc import Mapping

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.gpu_operator_values import FilterModule as OperatorValues
from ansible_collections.skaffon.gpu_platform.plugins.filter.monitoring import FilterModule as Monitoring
from ansible_collections.skaffon.gpu_platform.plugins.filter.time_slicing_config import FilterModule as TimeSlicing
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import plain

PLAN = {"driver_enabled": False, "toolkit_enabled": True, "node_labels": {}, "warnings": [], "errors": []}


class Lazy(dict):
    """A dict subclass as ansible-core's lazy dict is."""
    copies = 0

    def __deepcopy__(self, memo):
        Lazy.copies += 1
        return Lazy(copy.deepcopy(dict(self), memo))


class HostVars(Mapping):
    """Not a dict, as ansible's hostvars: left as it is (reads only the hosts a filter asks for)."""
    def __init__(self, hosts):
        self.hosts, self.read = hosts, []

    def __getitem__(self, host):
        self.read.append(host)
        return self.hosts[host]

    def __iter__(self):
        return iter(self.hosts)

    def __len__(self):
        return len(self.hosts)


@pytest.fixture(autouse=True)
def no_copies_yet():
    Lazy.copies = 0


def test_plain_turns_every_container_into_its_plain_type():
    value = plain(Lazy({"a": Lazy({"b": [Lazy({"c": 1}), (2, Lazy({"d": "x"}))]})}))
    assert value == {"a": {"b": [{"c": 1}, (2, {"d": "x"})]}}
    # the exact types: a Lazy is a dict too
    assert value.__class__ is dict and value["a"]["b"][0].__class__ is dict
    assert value["a"]["b"][1].__class__ is tuple and value["a"]["b"][1][1].__class__ is dict and Lazy.copies == 0
    hostvars = HostVars({"gpu-1": {"x": 1}, "gpu-2": {"x": 2}})
    assert plain([hostvars])[0] is hostvars and hostvars.read == []


def test_monitoring_filters_copy_no_lazy_input():
    filters = Monitoring().filters()
    settings = Lazy({"namespace": "monitoring", "rule_labels": Lazy({"release": "kps"}),
                     "service_monitor": Lazy({"enabled": True, "labels": Lazy({"release": "kps"})})})
    objects = filters["monitoring_objects"](settings)
    filters["monitoring_dcgm_values"](settings)
    filters["monitoring_required_crds"](settings)
    assert Lazy.copies == 0
    assert objects == filters["monitoring_objects"](plain(settings))
    assert objects[0]["metadata"]["labels"]["release"] == "kps"


def test_operator_values_copy_no_lazy_input_and_still_refuse_bad_input():
    values = OperatorValues().filters()["gpu_operator_values"]
    user = Lazy({"mig": Lazy({"strategy": "single"}), "toolkit": Lazy({"env": [Lazy({"name": "A", "value": "1"})]})})
    assert values(PLAN, user_values=user)["mig"] == {"strategy": "single"}
    assert values(PLAN, user_values=user, check_only=True) == []
    assert Lazy.copies == 0
    bad = Lazy({"driver": Lazy({"nvidiaDriverCRD": Lazy({"enabled": True})})})
    assert "gpu-operator#1795" in values(PLAN, user_values=bad, check_only=True)[0]
    with pytest.raises(AnsibleFilterError, match="gpu-operator#1795"):
        values(PLAN, user_values=bad)


def test_time_slicing_config_copies_no_lazy_input():
    config = TimeSlicing().filters()["time_slicing_config"]
    spec = Lazy({"configs": Lazy({"shared-4": Lazy({"replicas": 4})}), "default": "shared-4"})
    plain_spec = {"configs": {"shared-4": {"replicas": 4}}, "default": "shared-4"}
    assert config(spec) == config(plain_spec)
    assert config(spec, check_only=True) == []
    assert Lazy.copies == 0


class Guarded(dict):
    """A Node part whose other fields must not be read (managedFields, images: most of a Node's size)."""
    def __init__(self, data, allowed):
        super().__init__(data)
        self.allowed = allowed

    def _check(self, key):
        if self.allowed is not None and key not in self.allowed:
            raise AssertionError("read %r" % key)

    def __getitem__(self, key):
        self._check(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._check(key)
        return super().get(key, default)

    def __iter__(self):
        raise AssertionError("iterated over a whole Node part")

    def items(self):
        raise AssertionError("iterated over a whole Node part")


def _guarded_node(name, labels, capacity):
    # labels: read one by one (a Node has a hundred; the rules read a few), never copied whole
    labels = Guarded(dict(labels, **{"feature.node.kubernetes.io/cpu-cpuid.AVX": "true"}), None)
    meta = Guarded({"name": name, "labels": labels, "managedFields": [{"manager": "kubelet"}]}, ("name", "labels"))
    status = Guarded({"capacity": capacity, "images": [{"names": ["x"]}]}, ("capacity",))
    return Guarded({"metadata": meta, "status": status, "spec": {}}, ("metadata", "status"))


def test_time_slicing_filters_read_only_name_some_labels_and_capacity_of_each_node():
    filters = TimeSlicing().filters()
    spec = {"configs": {"shared-4": {"replicas": 4}}, "nodes": {"n1": "shared-4"}}
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "4"}
    nodes = [_guarded_node("n1", labels, {"nvidia.com/gpu": "8"}), _guarded_node("n2", {}, {})]
    rendered = filters["time_slicing_config"](spec, nodes=nodes)
    assert rendered["placement"] == {"n1": "shared-4"}
    assert filters["time_slicing_config"](spec, nodes=nodes, check_only=True) == []
    assert filters["time_slicing_pending"](rendered, nodes) == []
    with pytest.raises(AnsibleFilterError, match="time_slicing_pending: nodes must be the resources of a Node list"):
        filters["time_slicing_pending"](rendered, ["n1"])
    assert filters["time_slicing_config"](spec, nodes=["n1"], check_only=True)[0].startswith(
        "nodes must be the resources of a Node list")
