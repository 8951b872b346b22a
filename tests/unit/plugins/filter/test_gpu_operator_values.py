"""The filter wraps operator_values and turns bad input into AnsibleFilterError."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.gpu_operator_values import FilterModule

FILTERS = FilterModule().filters()
PLAN = {"driver_enabled": False, "toolkit_enabled": True, "node_labels": {}, "warnings": [], "errors": []}


def test_filter_returns_values():
    values = FILTERS["gpu_operator_values"](PLAN, user_values={"mig": {"strategy": "single"}},
                                            image_mirror="m.example:5000/x", image_mirror_layout=None)
    assert values["driver"]["enabled"] is False
    assert values["operator"]["repository"] == "m.example:5000/x/nvidia"


def test_filter_error_is_ansible_error():
    with pytest.raises(AnsibleFilterError, match="gpu-operator#1795"):
        FILTERS["gpu_operator_values"](PLAN, user_values={"driver": {"nvidiaDriverCRD": {"enabled": True}}})


def test_diff_filter():
    assert FILTERS["gpu_operator_values_diff"]({"a": 1}, {"a": 2}) == {"a": {"before": 1, "after": 2}}


def test_filter_passes_dcgm_hostengine_on():
    assert FILTERS["gpu_operator_values"](PLAN, dcgm_hostengine=True)["dcgm"] == {"enabled": True}
    assert FILTERS["gpu_operator_values"](PLAN, dcgm_hostengine="maybe", check_only=True) == [
        "gpu_operator_dcgm_hostengine must be true or false, got 'maybe'"]
