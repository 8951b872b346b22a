"""gpu_access_by_request: the toolkit and device plugin settings that stop NVIDIA_VISIBLE_DEVICES granting GPUs."""
import os

import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator import values as ov
from kit.paths import GPU_OPERATOR

PLAN = {"driver_enabled": True, "toolkit_enabled": True, "node_labels": {}, "warnings": [], "errors": [], "nodes": {}}
HOST = dict(PLAN, toolkit_enabled=False, driver_enabled=False)
OFF = {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"}
MOUNTS = {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"}
VALUES = os.path.join(GPU_OPERATOR, "values.yaml")


def test_operator_toolkit_ignores_the_variable_and_cdi_keeps_the_plugin_as_the_operator_sets_it():
    values = ov.operator_values(PLAN, gpu_access_by_request=True)
    assert values["toolkit"]["env"] == [OFF, MOUNTS]
    assert "devicePlugin" not in values          # CDI (chart default): the operator sets cdi-annotations,cdi-cri


def test_without_cdi_the_plugin_passes_volume_mounts_and_user_env_entries_stay():
    values = ov.operator_values(PLAN, {"cdi": {"enabled": False},
                                       "toolkit": {"env": [{"name": "CONTAINERD_SOCKET", "value": "/x"}]}},
                                gpu_access_by_request="true")
    assert values["devicePlugin"]["env"] == [{"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}]
    assert values["toolkit"]["env"][0] == {"name": "CONTAINERD_SOCKET", "value": "/x"}


def test_off_or_unset_changes_nothing_and_a_host_toolkit_gets_no_toolkit_env():
    assert "env" not in ov.operator_values(PLAN, gpu_access_by_request=False)["toolkit"]
    assert "env" not in ov.operator_values(PLAN)["toolkit"]
    assert "env" not in ov.operator_values(HOST, gpu_access_by_request=True)["toolkit"]


@pytest.mark.parametrize("user, words", [
    ({"toolkit": {"env": [dict(OFF, value="true")]}},
     "gpu_operator_values.toolkit.env sets ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=true"),
    ({"cdi": {"enabled": False}, "devicePlugin": {"env": [{"name": "DEVICE_LIST_STRATEGY", "value": "envvar"}]}},
     "gpu_operator_values.devicePlugin.env sets DEVICE_LIST_STRATEGY=envvar"),
])
def test_contradicting_user_values_are_refused_with_the_fix(user, words):
    with pytest.raises(ov.OperatorValuesError) as exc:
        ov.operator_values(PLAN, user, gpu_access_by_request=True)
    assert words in str(exc.value) and "gpu_operator_gpu_access_by_request: false" in str(exc.value)


@pytest.mark.needs_shared
def test_the_keys_exist_in_the_chart_and_cdi_is_on_by_default():
    if not os.path.exists(VALUES):
        pytest.skip("upstream values.yaml not found at %s (../shared absent)" % VALUES)
    with open(VALUES) as fh:
        chart = yaml.safe_load(fh)
    assert chart["toolkit"]["env"] == [] and chart["devicePlugin"]["env"] == [] and chart["cdi"]["enabled"] is True
