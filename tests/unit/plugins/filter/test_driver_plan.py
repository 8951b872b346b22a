"""driver_plan: all/none/mixed fleets, broken, nouveau, headers, drift, override."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.driver_plan import FilterModule, driver_plan
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream

DRIVER = upstream.LABEL_DEPLOY_DRIVER
TOOLKIT = upstream.LABEL_DEPLOY_TOOLKIT


def facts(driver="none", version=None, toolkit="none", nouveau=False, headers=True, gpu=True,
          default_runtime=False, nvidia_runtime=None, reason_code=None, reason=None):
    """gpu_node facts as gpu_node_facts returns them (only the fields the plan reads)."""
    return {
        "gpu_host": gpu,
        "gpu_count": 8 if gpu else 0,
        "driver": {"state": driver, "version": version, "reason_code": reason_code, "reason": reason},
        "toolkit": {"state": toolkit, "version": "1.17.4" if toolkit == "host" else None},
        "container_runtime": {"nvidia_runtime": default_runtime if nvidia_runtime is None else nvidia_runtime,
                              "nvidia_default": default_runtime},
        "nouveau_loaded": nouveau,
        "kernel": {"release": "6.8.0-45-generic", "headers_installed": headers,
                   "headers_package": "linux-headers-6.8.0-45-generic"},
    }


def hostvars(**hosts):
    """Wrap like Ansible hostvars: host -> {'ansible_facts': {'gpu_node': ...}}."""
    return dict((name, {"ansible_facts": {"gpu_node": value}}) for name, value in hosts.items())


def codes(plan, severity=None):
    return [i["code"] for i in plan["issues"] if severity is None or i["severity"] == severity]


def test_filter_is_registered():
    assert FilterModule().filters()["driver_plan"] is driver_plan


def test_all_nodes_with_host_driver_and_toolkit_disable_both():
    plan = driver_plan(hostvars(
        a=facts("host", "550.90.07", "host", default_runtime=True),
        b=facts("host", "550.90.07", "host", default_runtime=True)))
    assert plan["driver_enabled"] is False and plan["toolkit_enabled"] is False
    # labelled anyway: harmless here, and a node without driver may join later
    assert plan["node_labels"] == {"a": {DRIVER: "false", TOOLKIT: "false"},
                                   "b": {DRIVER: "false", TOOLKIT: "false"}}
    assert plan["errors"] == [] and plan["warnings"] == []
    assert plan["driver_source"] == "facts" and plan["overrides"] == []
    assert plan["nodes"]["a"]["operator_installs_driver"] is False


def test_no_node_with_a_driver_enables_both_without_labels():
    plan = driver_plan(hostvars(a=facts(), b=facts()))
    assert plan["driver_enabled"] is True and plan["toolkit_enabled"] is True
    assert plan["node_labels"] == {"a": {}, "b": {}}
    assert plan["errors"] == []
    assert all(n["operator_installs_driver"] for n in plan["nodes"].values())


def test_mixed_fleet_labels_only_the_preinstalled_nodes():
    plan = driver_plan(hostvars(
        dgx=facts("host", "550.90.07", "host", default_runtime=True),
        plain=facts()))
    assert plan["driver_enabled"] is True and plan["toolkit_enabled"] is True
    assert plan["node_labels"] == {"dgx": {DRIVER: "false", TOOLKIT: "false"}, "plain": {}}
    assert DRIVER == "nvidia.com/gpu.deploy.driver"
    assert TOOLKIT == "nvidia.com/gpu.deploy.container-toolkit"
    assert plan["nodes"]["dgx"]["operator_installs_driver"] is False
    assert plan["nodes"]["plain"]["operator_installs_driver"] is True


def test_driver_on_all_but_toolkit_on_some():
    plan = driver_plan(hostvars(a=facts("host", "550.1", "host", default_runtime=True), b=facts("host", "550.1")))
    assert plan["driver_enabled"] is False and plan["toolkit_enabled"] is True
    assert plan["node_labels"] == {"a": {DRIVER: "false", TOOLKIT: "false"}, "b": {DRIVER: "false"}}
    assert plan["nodes"]["b"]["operator_installs_toolkit"] is True
    assert plan["nodes"]["a"]["operator_installs_toolkit"] is False


def test_broken_driver_is_an_error_naming_node_reason_and_fix():
    plan = driver_plan(hostvars(
        ok=facts("host", "550.90.07"),
        bad=facts("broken", "550.144", reason_code="driver_library_mismatch",
                  reason="NVML library 550.144 does not match the loaded kernel module")))
    assert codes(plan, "error") == ["driver_broken"]
    message = plan["errors"][0]
    assert "bad" in message and "NVML library 550.144" in message and "reboot" in message
    assert plan["blocking_errors"] == [message]
    assert plan["issues"][0]["nodes"] == ["bad"]


def test_nouveau_only_matters_where_the_operator_installs_the_driver():
    plan = driver_plan(hostvars(
        dgx=facts("host", "550.1", nouveau=True),      # cannot really happen, but must not count
        fresh=facts(nouveau=True)))
    assert codes(plan, "error") == ["nouveau_loaded"]
    issue = plan["issues"][0]
    assert issue["nodes"] == ["fresh"]
    assert "blacklist nouveau" in issue["message"] and "reboot" in issue["message"]
    assert plan["blocking_errors"] == []               # the role repairs it


def test_missing_headers_error_and_precompiled_escape():
    plan = driver_plan(hostvars(a=facts(headers=False), b=facts("host", "550.1", headers=False)))
    assert codes(plan, "error") == ["kernel_headers_missing"]
    assert plan["issues"][0]["nodes"] == ["a"]
    assert "linux-headers-6.8.0-45-generic" in plan["errors"][0]
    assert "usePrecompiled" in plan["errors"][0]
    assert driver_plan(hostvars(a=facts(headers=False)), driver_precompiled=True)["errors"] == []


def test_driver_version_drift_is_a_warning_listing_versions():
    plan = driver_plan(hostvars(
        a=facts("host", "550.90.07"), b=facts("host", "550.90.07"), c=facts("host", "570.86.15")))
    assert plan["driver_enabled"] is False
    assert codes(plan) == ["driver_version_drift"]
    assert plan["driver_versions"] == {"550.90.07": ["a", "b"], "570.86.15": ["c"]}
    assert "550.90.07 on a, b" in plan["warnings"][0] and "570.86.15 on c" in plan["warnings"][0]
    assert plan["errors"] == []


def test_override_wins_and_is_reported():
    plan = driver_plan(hostvars(a=facts("host", "550.1"), b=facts("host", "550.1")), driver_enabled=True)
    assert plan["driver_enabled"] is True and plan["driver_source"] == "override"
    assert plan["overrides"] == [{"setting": "driver.enabled", "value": True, "auto": False}]
    assert any("override" in w for w in plan["warnings"])
    # host driver nodes keep their driver under an operator-managed driver
    assert plan["node_labels"]["a"] == {DRIVER: "false"}


def test_override_off_on_nodes_without_driver_warns_them():
    plan = driver_plan(hostvars(a=facts("host", "550.1"), b=facts()), driver_enabled=False)
    assert plan["driver_enabled"] is False
    assert "nodes_without_driver" in codes(plan, "warning")
    assert plan["nodes"]["b"]["operator_installs_driver"] is False
    assert plan["node_labels"] == {"a": {DRIVER: "false"}, "b": {}}


def test_override_same_as_facts_is_reported_without_warning():
    plan = driver_plan(hostvars(a=facts()), driver_enabled=True, toolkit_enabled=True)
    assert [o["setting"] for o in plan["overrides"]] == ["driver.enabled", "toolkit.enabled"]
    assert plan["warnings"] == []


def test_toolkit_disabled_needs_nvidia_default_runtime():
    plan = driver_plan(hostvars(a=facts("host", "550.1", "host", default_runtime=False, nvidia_runtime=True)))
    assert plan["toolkit_enabled"] is False
    assert codes(plan, "error") == ["runtime_not_default"]
    assert "--set-as-default" in plan["errors"][0]
    assert plan["blocking_errors"] == plan["errors"]


def test_non_gpu_hosts_and_missing_facts():
    plan = driver_plan({"cpu": {"ansible_facts": {"gpu_node": facts(gpu=False)}},
                        "gpu": {"gpu_node": facts()},
                        "new": {"ansible_host": "10.0.0.9"}})
    assert plan["ignored_nodes"] == ["cpu"]
    assert list(plan["nodes"]) == ["gpu"]
    assert "facts_missing" in codes(plan, "error")
    assert "new" in plan["blocking_errors"][0]


def test_only_and_node_name_from_hostvars():
    hv = hostvars(a=facts("host", "1"), b=facts())
    hv["a"]["node_prereqs_node_name"] = "a.cluster.example"
    plan = driver_plan(hv, only=["a"])
    assert list(plan["nodes"]) == ["a.cluster.example"]
    assert plan["driver_enabled"] is False
    # a --limit run over the host-driver node alone plans the same label as the full fleet
    assert plan["node_labels"]["a.cluster.example"] == driver_plan(hv)["node_labels"]["a.cluster.example"]
    with pytest.raises(AnsibleFilterError, match="not in the input"):
        driver_plan(hv, only=["zzz"])


def test_list_input_and_bad_input():
    plan = driver_plan([dict(facts(), node="n1")])
    assert list(plan["nodes"]) == ["n1"]
    with pytest.raises(AnsibleFilterError, match="mapping"):
        driver_plan("nope")
    with pytest.raises(AnsibleFilterError, match="driver_enabled"):
        driver_plan({}, driver_enabled="maybe")
    # Ansible's boolean spellings (one parser for the collection, core/validation.py)
    assert driver_plan({}, driver_enabled="no")["driver_enabled"] is False


def test_empty_input_warns():
    plan = driver_plan({})
    assert plan["driver_enabled"] is True
    assert codes(plan) == ["no_gpu_nodes"]
