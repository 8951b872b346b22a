"""operator_values against the REAL upstream GPU Operator values.yaml keys."""
import os
import re

import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator import values as ov
from kit.paths import GPU_OPERATOR

UPSTREAM_VALUES = os.path.join(GPU_OPERATOR, "values.yaml")
PUBLIC_REGISTRIES = ("nvcr.io", "registry.k8s.io", "ghcr.io", "docker.io", "quay.io", "gcr.io")
MIRROR = "mirror.example:5000/nvidia"

ALL_HOST = {"driver_enabled": False, "toolkit_enabled": False, "node_labels": {}, "warnings": [], "errors": []}
NONE_HOST = {"driver_enabled": True, "toolkit_enabled": True, "node_labels": {}, "warnings": [], "errors": []}


@pytest.fixture(scope="module")
def upstream():
    if not os.path.exists(UPSTREAM_VALUES):
        pytest.skip("upstream values.yaml not found at %s (../shared absent)" % UPSTREAM_VALUES)
    with open(UPSTREAM_VALUES) as f:
        return yaml.safe_load(f)


def _assert_keys_exist(values, upstream):
    """Every leaf path we set exists in upstream values.yaml (or is a known template-only key)."""
    missing = []
    for path, _value in ov.leaf_items(values):
        dotted = ".".join(path)
        if dotted in ov.TEMPLATE_ONLY_KEYS:
            continue
        node = upstream
        for key in path:
            if not isinstance(node, dict) or key not in node:
                missing.append(dotted)
                break
            node = node[key]
    assert not missing, "keys not in upstream values.yaml: %s" % missing


def _full(values, upstream):
    """What Helm renders from: chart defaults deep-merged with our values."""
    return ov.deep_merge(upstream, values)


def _repositories(tree, prefix=()):
    found = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key == "repository" and isinstance(value, str):
                found[".".join(prefix)] = value
            else:
                found.update(_repositories(value, prefix + (key,)))
    return found


pytestmark = pytest.mark.needs_shared


def test_repository_table_matches_every_upstream_repository(upstream):
    upstream_repos = _repositories(upstream)
    ours = dict((".".join(p), d) for p, d in ov.REPOSITORY_PATHS if p[0] != ov.NFD_SUBCHART)
    assert ours == upstream_repos, "REPOSITORY_PATHS out of date with upstream values.yaml"


def test_known_top_level_keys_cover_upstream(upstream):
    assert set(upstream) <= set(ov.KNOWN_TOP_LEVEL_KEYS)


def test_pull_secret_components_have_the_key_or_are_template_only(upstream):
    for component in ov.PULL_SECRET_COMPONENTS:
        key = "%s.imagePullSecrets" % component
        assert "imagePullSecrets" in upstream[component] or key in ov.TEMPLATE_ONLY_KEYS, key


@pytest.mark.parametrize("plan,driver,toolkit", [
    (ALL_HOST, False, False), (NONE_HOST, True, True), (dict(NONE_HOST, toolkit_enabled=False), True, False)])
def test_plan_drives_driver_and_toolkit(upstream, plan, driver, toolkit):
    values = ov.operator_values(plan, mig_strategy="mixed", service_monitor=False)
    _assert_keys_exist(values, upstream)
    assert values["driver"]["enabled"] is driver
    assert values["toolkit"]["enabled"] is toolkit
    assert values["mig"]["strategy"] == "mixed"
    assert values["dcgmExporter"]["serviceMonitor"]["enabled"] is False
    if not driver:
        assert values["driver"]["nvidiaDriverCRD"]["enabled"] is False


def test_user_values_deep_merge_and_win(upstream):
    user = {"driver": {"upgradePolicy": {"maxParallelUpgrades": 2}}, "toolkit": {"enabled": True},
            "psa": {"enabled": True}}
    values = ov.operator_values(ALL_HOST, user_values=user)
    _assert_keys_exist(values, upstream)
    assert values["driver"] == {"enabled": False, "nvidiaDriverCRD": {"enabled": False},
                                "upgradePolicy": {"maxParallelUpgrades": 2}}
    assert values["toolkit"]["enabled"] is True  # explicit override


def test_driver_crd_with_host_drivers_is_refused():
    with pytest.raises(ov.OperatorValuesError, match=r"gpu-operator#1795.*nvidiaDriverCRD.enabled=false"):
        ov.operator_values(ALL_HOST, user_values={"driver": {"nvidiaDriverCRD": {"enabled": True}}})


def test_driver_crd_with_operator_driver_is_fine():
    values = ov.operator_values(NONE_HOST, user_values={"driver": {"nvidiaDriverCRD": {"enabled": True}}})
    assert values["driver"]["nvidiaDriverCRD"]["enabled"] is True


def test_plan_errors_stop_everything():
    plan = dict(NONE_HOST, errors=["gpu-2: nouveau loaded, blacklist it"])
    with pytest.raises(ov.OperatorValuesError, match="nouveau loaded"):
        ov.operator_values(plan)


@pytest.mark.parametrize("bad", [None, {"driver_enabled": "yes", "toolkit_enabled": True}, {}])
def test_bad_plan_is_refused(bad):
    with pytest.raises(ov.OperatorValuesError, match="driver plan"):
        ov.operator_values(bad)


def test_misspelt_top_level_key_is_refused_with_hint():
    with pytest.raises(ov.OperatorValuesError, match="devicePlugins \\(did you mean devicePlugin\\?\\)"):
        ov.operator_values(NONE_HOST, user_values={"devicePlugins": {"enabled": False}})


def test_bad_mig_strategy():
    with pytest.raises(ov.OperatorValuesError, match="none, single, mixed"):
        ov.operator_values(NONE_HOST, mig_strategy="MIXED")


@pytest.mark.parametrize("layout", ["path", "flat"])
def test_mirror_rewrites_every_repository(upstream, layout):
    user = {"driver": {"repository": "nvcr.io/ea-nvidia"}}  # a user-set public repo is mirrored too
    values = ov.operator_values(NONE_HOST, user_values=user, image_mirror=MIRROR,
                                image_mirror_layout=layout, image_pull_secrets=["regcred", "other"])
    _assert_keys_exist(values, upstream)
    rendered = _full(values, upstream)
    repos = _repositories(rendered)
    assert len(repos) >= 22
    for where, repo in repos.items():
        if where == "vgpuManager":
            assert repo == ""  # private image, nothing public to rewrite
            continue
        assert repo.startswith(MIRROR), (where, repo)
    dumped = yaml.safe_dump(rendered)
    for registry in PUBLIC_REGISTRIES:
        assert registry not in dumped, registry
    nfd = rendered["node-feature-discovery"]
    if layout == "path":
        assert rendered["toolkit"]["repository"] == MIRROR + "/nvidia/k8s"
        assert rendered["driver"]["repository"] == MIRROR + "/ea-nvidia"
        assert nfd["image"]["repository"] == MIRROR + "/nfd/node-feature-discovery"
    else:
        assert rendered["toolkit"]["repository"] == MIRROR
        assert nfd["image"]["repository"] == MIRROR + "/node-feature-discovery"
    assert rendered["operator"]["imagePullSecrets"] == ["regcred", "other"]
    assert rendered["dcgmExporter"]["imagePullSecrets"] == ["regcred", "other"]
    assert nfd["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other"}]


def test_mirror_is_idempotent():
    once = ov.operator_values(NONE_HOST, image_mirror=MIRROR)
    twice = ov.apply_mirror(ov.deep_merge(once, {}), MIRROR)
    assert once == twice


@pytest.mark.parametrize("mirror", ["https://mirror.example", "mirror example"])
def test_bad_mirror(mirror):
    with pytest.raises(ov.OperatorValuesError, match="gpu_operator_image_mirror"):
        ov.operator_values(NONE_HOST, image_mirror=mirror)


@pytest.mark.parametrize("secrets", [[{"name": "regcred"}], "regcred", [""]])
def test_pull_secrets_must_be_names(secrets):
    with pytest.raises(ov.OperatorValuesError, match="list of Secret NAMES"):
        ov.operator_values(NONE_HOST, image_pull_secrets=secrets)


def test_device_plugin_config(upstream):
    values = ov.operator_values(NONE_HOST, device_plugin_config={"name": "time-slicing", "default": "any"})
    _assert_keys_exist(values, upstream)
    assert values["devicePlugin"]["config"] == {"create": False, "name": "time-slicing", "default": "any"}


def test_values_diff():
    diff = ov.values_diff({"driver": {"enabled": True}, "mig": {"strategy": "single"}},
                          {"driver": {"enabled": False}, "mig": {"strategy": "single"}, "psa": {"enabled": True}})
    assert diff == {"driver.enabled": {"before": True, "after": False},
                    "psa.enabled": {"before": None, "after": True}}
    assert ov.values_diff({"a": {"b": 1}}, {"a": {"b": 1}}) == {}


# --- issue 11: pool taints, bad inputs, secrets ------------------------------------------------

PLAN11 = {"driver_enabled": True, "toolkit_enabled": True, "node_labels": {}, "warnings": [], "errors": [],
          "nodes": {"gpu-a": {"operator_installs_driver": True, "operator_installs_toolkit": True}}}
TAINT = {"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}


def test_pool_taints_added_to_chart_default_tolerations_of_operands_and_nfd_worker():
    values = ov.operator_values(PLAN11, pool_taints=[TAINT, {"key": "nvidia.com/gpu", "value": "present",
                                                             "effect": "NoSchedule"}])
    assert values["daemonsets"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, dict(TAINT, operator="Equal")]
    nfd = values["node-feature-discovery"]["worker"]["tolerations"]
    assert nfd[-1] == dict(TAINT, operator="Equal") and len(nfd) == 3


def test_user_tolerations_kept_and_extended():
    user = {"daemonsets": {"tolerations": [{"operator": "Exists"}]}}
    assert ov.operator_values(PLAN11, user_values=user, pool_taints=[TAINT])["daemonsets"]["tolerations"] == [
        {"operator": "Exists"}]  # tolerates everything already


@pytest.mark.parametrize("user,expected", [
    ({"operator": {"imagePullSecrets": [{"name": "regcred"}]}}, "write the names only: [regcred]"),
    ({"driver": {"enabled": False}}, "driver plan has the GPU Operator install the driver on gpu-a"),
    ({"toolkit": {"enabled": "no"}}, "is the string 'no'"),
    ({"daemonsets": {"tolerations": {"key": "x"}}}, "must be a list of Kubernetes tolerations"),
])
def test_bad_user_values(user, expected):
    with pytest.raises(ov.OperatorValuesError, match=re.escape(expected)):
        ov.operator_values(PLAN11, user_values=user)


def test_values_not_a_mapping_and_service_monitor_string():
    with pytest.raises(ov.OperatorValuesError, match="gpu_operator_values must be a mapping"):
        ov.operator_values(PLAN11, user_values="driver.enabled=false")
    assert ov.operator_values(PLAN11, service_monitor="false")["dcgmExporter"]["serviceMonitor"]["enabled"] is False


def test_diff_masks_credentials_and_marked_paths():
    before = {"operator": {"env": [{"name": "HTTPS_PROXY_PASSWORD", "value": "old"}]}}
    after = {"operator": {"env": [{"name": "HTTPS_PROXY_PASSWORD", "value": "new"}],
                          "annotations": {"k": "v1-secret"}},
             "driver": {"repoConfig": {"url": "https://u:pw@h/x"}}}
    diff = ov.values_diff(before, after, secret_paths=("operator.annotations.k",))
    assert diff["operator.env"]["after"] == "******** (changed)"  # both sides mask to the same
    assert diff["operator.annotations.k"]["after"] == "********"
    assert diff["driver.repoConfig.url"]["after"] == "https://u:********@h/x"
    assert "old" not in str(diff) and "new" not in str(diff) and ":pw@" not in str(diff)
    assert set(ov.secret_strings(after, ("operator.annotations.k",))) == {"new", "v1-secret"}
    assert ov.scrub("error: new and https://u:pw@h", ["new"]) == "error: ******** and https://u:********@h"


def test_untolerated_nodes():
    cordoned = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    nodes = [{"metadata": {"name": "a"}, "spec": {"taints": [TAINT, cordoned]}},
             {"metadata": {"name": "b"}, "spec": {"taints": [{"key": "x", "effect": "PreferNoSchedule"}]}}]
    assert ov.untolerated_nodes(nodes, [], ["a", "b"]) == ["a (taint gpu.skaffon.io/workload=training:NoSchedule)"]
    assert ov.untolerated_nodes(nodes, [dict(TAINT, operator="Equal")], ["a", "b"]) == []


def test_dcgm_hostengine_sets_the_real_dcgm_enabled_key(upstream):
    # chart default: the exporter embeds nv-hostengine (nothing for dcgmi to connect to)
    assert upstream["dcgm"]["enabled"] is False
    values = ov.operator_values(ALL_HOST, dcgm_hostengine=True)
    assert values["dcgm"] == {"enabled": True}
    _assert_keys_exist(values, upstream)
    assert _full(values, upstream)["dcgm"]["enabled"] is True
    assert ov.operator_values(ALL_HOST, dcgm_hostengine="false")["dcgm"] == {"enabled": False}
    assert "dcgm" not in ov.operator_values(ALL_HOST)          # unset keeps the chart default
    # an explicit user value still wins
    assert ov.operator_values(ALL_HOST, {"dcgm": {"enabled": False}}, dcgm_hostengine=True)["dcgm"]["enabled"] is False
    with pytest.raises(ov.OperatorValuesError) as err:
        ov.operator_values(ALL_HOST, dcgm_hostengine="sometimes")
    assert "gpu_operator_dcgm_hostengine must be true or false, got 'sometimes'" in str(err.value)
