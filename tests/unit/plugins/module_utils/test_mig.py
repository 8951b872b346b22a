"""Pure MIG logic against the real mig-parted configs, lgip outputs and GFD label sets."""
import csv
import json
import os
import re

import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig import profiles as mig
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream

from kit.paths import GPU_OPERATOR as OPERATOR, NVIDIA_SMI as SMI

pytestmark = [pytest.mark.needs_shared]

H100 = "NVIDIA-H100-80GB-HBM3"


def _read(*parts):
    with open(os.path.join(*parts)) as handle:
        return handle.read()


@pytest.fixture(scope="module")
def default_config():
    return mig.MigPartedConfig(_read(OPERATOR, "default-mig-parted-config.yaml"),
                               source="gpu-operator/default-mig-parted-config")


def _labels(name):
    return json.loads(_read(OPERATOR, "examples", name))


# --- parsing the real files ---------------------------------------------------

def test_default_config_parses_from_the_configmap(default_config):
    assert default_config.version == "v1"
    assert {"all-disabled", "all-enabled", "all-1g.10gb", "all-balanced"} <= set(default_config.names())


def test_custom_configmap_and_helm_values_parse():
    custom = mig.MigPartedConfig(_read(OPERATOR, "examples", "custom-mig-config.yaml"))
    assert custom.names() == ["all-disabled", "five-1g-one-2g"]
    values = mig.MigPartedConfig(yaml.safe_load(_read(OPERATOR, "examples", "mig-cm-values.yaml")))
    assert values.names() == ["all-disabled", "custom-mig"]


def test_not_a_config_is_refused_with_the_expected_shape():
    with pytest.raises(mig.MigError, match="mig-configs"):
        mig.MigPartedConfig({"kind": "ConfigMap", "data": {"other": "x"}})


# --- model table vs real outputs ------------------------------------------------

def _parse_lgip(text):
    """{profile: {max, multiprocessors, engines.*}} from `nvidia-smi mig -lgip` (GPU 0 only)."""
    rows = {}
    lines = text.splitlines()
    head = re.compile(r"^\|\s+0\s+MIG\s+(\S+)\s+\d+\s+\d+/(\d+)\s+[\d.]+\s+\w+\s+(\d+)\s+(\d+)\s+(\d+)\s+\|")
    tail = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+\|$")
    for index, line in enumerate(lines):
        match = head.match(line)
        if match:
            ce, jpeg, ofa = tail.match(lines[index + 1].rstrip()).groups()
            rows[match.group(1)] = {"max": int(match.group(2)), "multiprocessors": int(match.group(3)),
                                    "engines.decoder": int(match.group(4)), "engines.encoder": int(match.group(5)),
                                    "engines.copy": int(ce), "engines.jpeg": int(jpeg), "engines.ofa": int(ofa)}
    return rows


@pytest.mark.parametrize("fixture, model", [
    ("a100-pcie-40gb__nvidia-smi-mig-lgip.txt", "A100-40GB"),
    ("h100-sxm5-80gb_x4__nvidia-smi-mig-lgip.txt", "H100-80GB"),
    ("h100-nvl-94gb_all-instances-used__nvidia-smi-mig-lgip.txt", "H100-94GB"),
])
def test_model_profiles_equal_real_lgip(fixture, model):
    real = _parse_lgip(_read(SMI, fixture))
    assert real, "lgip parser found no row in %s" % fixture
    assert mig.GPU_MODELS[model]["profiles"] == real


def test_model_table_agrees_with_derived_csv():
    with open(os.path.join(SMI, "mig-profiles-per-gpu__derived.csv")) as handle:
        rows = list(csv.DictReader(handle))
    assert rows
    for row in rows:
        ids = row["pci_device_ids"].split()
        name, model = mig.model_for_device_id(ids[0])
        assert name is not None, row["gpu_model"]
        assert set(mig.normalize_device_id(i) for i in ids) == set(model["device_ids"])
        info = model["profiles"][row["profile"]]
        assert info["max"] == int(row["max_instances"])
        if row["sm_count"]:
            assert info["multiprocessors"] == int(row["sm_count"])


def test_every_model_device_id_is_a_device_filter_of_the_real_config():
    text = _read(OPERATOR, "default-mig-parted-config.yaml")
    in_config = set(mig.normalize_device_id(i) for i in re.findall(r"0x[0-9A-Fa-f]{8}", text))
    for name, model in mig.GPU_MODELS.items():
        assert set(model["device_ids"]) <= in_config, name
        assert set(model["products"].values()) <= set(model["device_ids"]), name


def test_product_names_from_real_outputs_resolve():
    # nvidia-smi names in the fixtures, spaces -> "-" as GFD does
    assert mig.resolve_gpu(H100)[2] == "0x233010DE"
    assert mig.resolve_gpu("NVIDIA-A100-SXM4-40GB")[2] == "0x20B010DE"
    assert mig.resolve_gpu("NVIDIA-A100-PCIE-40GB")[0] == "A100-40GB"
    assert mig.resolve_gpu(H100 + "-MIG-1g.10gb")[0] == "H100-80GB"
    assert mig.resolve_gpu(None, device_id="2330")[2] == "0x233010DE"


def test_unknown_product_names_the_fix():
    with pytest.raises(mig.MigError, match="device_id"):
        mig.resolve_gpu("NVIDIA-L40S")


# --- profile validation ------------------------------------------------------------

def test_unknown_profile_lists_the_valid_ones_for_that_gpu(default_config):
    with pytest.raises(mig.MigError) as err:
        mig.check_profile(default_config, "all-1g.10gbx", H100, 8, node="gpu-h100-1")
    msg = str(err.value)
    assert "'all-1g.10gbx'" in msg and "gpu-h100-1" in msg
    valid = msg.split("Valid profiles for")[1]
    for name in ("all-disabled", "all-1g.10gb", "all-3g.40gb", "all-7g.80gb", "all-balanced"):
        assert name in valid.split(": ", 1)[1].split(", ")
    # A100-40GB / H200 only profiles are not offered for an H100
    assert "all-1g.5gb" not in valid.split(", ") and "all-1g.18gb" not in valid


def test_profile_of_another_gpu_model_is_refused(default_config):
    with pytest.raises(mig.MigError, match="1g.5gb does not exist on this GPU model") as err:
        mig.check_profile(default_config, "all-1g.5gb", H100, 8)
    assert "all-1g.10gb" in str(err.value)


def test_device_filter_picks_the_entry_of_the_model(default_config):
    h100 = mig.check_profile(default_config, "all-1g.10gb", H100, 2)
    a100 = mig.check_profile(default_config, "all-1g.10gb", "NVIDIA-A100-SXM4-40GB", 2)
    assert h100 == [{"mig_enabled": True, "devices": {"1g.10gb": 7}}] * 2
    assert a100 == [{"mig_enabled": True, "devices": {"1g.10gb": 4}}] * 2


def test_filter_for_one_device_id_excludes_the_sibling(default_config):
    # all-1g.35gb has an entry for 0x233510DE (H200) only, not for H200 NVL
    assert "all-1g.35gb" in default_config.valid_names(*mig.resolve_gpu("NVIDIA-H200")[1:], gpu_count=1)
    assert "all-1g.35gb" not in default_config.valid_names(*mig.resolve_gpu("NVIDIA-H200-NVL")[1:], gpu_count=1)


def test_per_device_index_config_from_helm_values():
    config = mig.MigPartedConfig(yaml.safe_load(_read(OPERATOR, "examples", "mig-cm-values.yaml")))
    layout = mig.check_profile(config, "custom-mig", "NVIDIA-A100-SXM4-80GB", 4)
    assert [item["devices"] for item in layout] == [
        {}, {"1g.10gb": 2}, {"2g.20gb": 2, "3g.40gb": 1}, {"3g.40gb": 1, "4g.40gb": 1}]
    offer = mig.expected_offer(layout, "NVIDIA-A100-SXM4-80GB", "mixed")
    assert offer["allocatable"] == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2,
                                    "nvidia.com/mig-2g.20gb": 2, "nvidia.com/mig-3g.40gb": 2,
                                    "nvidia.com/mig-4g.40gb": 1}


def test_too_many_slices_is_refused():
    config = mig.MigPartedConfig({"version": "v1", "mig-configs": {
        "greedy": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2, "2g.20gb": 1}}]}})
    with pytest.raises(mig.MigError, match="8 compute slices requested per GPU, the GPU has 7"):
        mig.check_profile(config, "greedy", H100, 1)


# --- expected offer vs the real GFD label sets --------------------------------------

def test_mixed_expectation_equals_the_real_mixed_label_set(default_config):
    real = _labels("mig-mixed-node-labels.json")
    assert real[upstream.LABEL_MIG_CONFIG] == "all-balanced"
    layout = mig.check_profile(default_config, "all-balanced", real[upstream.LABEL_GPU_PRODUCT],
                               int(real[upstream.LABEL_GPU_COUNT]))
    offer = mig.expected_offer(layout, real[upstream.LABEL_GPU_PRODUCT], real[upstream.LABEL_MIG_STRATEGY],
                               mig.GPU_MODELS["H100-80GB"])
    for key, value in offer["labels"].items():
        assert real[key] == value, key
    real_mig = set(k for k in real if k.startswith(upstream.MIG_RESOURCE_PREFIX))
    predicted = set(k for k in offer["labels"] if k.startswith(upstream.MIG_RESOURCE_PREFIX))
    # memory MiB is driver dependent and deliberately not predicted
    assert real_mig - predicted == set(k for k in real_mig if k.endswith(".memory"))
    assert offer["allocatable"] == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 2,
                                    "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-3g.40gb": 1}


def test_single_expectation_equals_the_real_single_label_set(default_config):
    real = _labels("mig-node-labels.json")
    assert real[upstream.LABEL_MIG_STRATEGY] == "single"
    layout = mig.check_profile(default_config, real[upstream.LABEL_MIG_CONFIG], real[upstream.LABEL_GPU_PRODUCT],
                               int(real[upstream.LABEL_GPU_COUNT]))
    offer = mig.expected_offer(layout, real[upstream.LABEL_GPU_PRODUCT], "single", mig.GPU_MODELS["H100-80GB"])
    for key, value in offer["labels"].items():
        assert real[key] == value, key
    assert not [k for k in real if k.startswith(upstream.MIG_RESOURCE_PREFIX)]
    assert offer["allocatable"] == {"nvidia.com/gpu": 1}


def test_single_with_mig_suffixes_the_product_and_counts_devices(default_config):
    layout = mig.check_profile(default_config, "all-1g.10gb", H100, 8)
    offer = mig.expected_offer(layout, H100, "single", mig.GPU_MODELS["H100-80GB"])
    assert offer["allocatable"] == {"nvidia.com/gpu": 56}
    assert offer["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert offer["labels"]["nvidia.com/gpu.count"] == "56"


def test_single_refuses_a_mixed_layout(default_config):
    layout = mig.check_profile(default_config, "all-balanced", H100, 8)
    with pytest.raises(mig.MigError, match="spec.mig.strategy to mixed"):
        mig.expected_offer(layout, H100, "single")


def test_me_profile_resource_name_has_no_plus(default_config):
    layout = mig.check_profile(default_config, "all-1g.10gb.me", H100, 2)
    offer = mig.expected_offer(layout, H100, "mixed")
    assert offer["allocatable"]["nvidia.com/mig-1g.10gb.me"] == 2


def test_strategy_none_is_refused(default_config):
    layout = mig.check_profile(default_config, "all-1g.10gb", H100, 1)
    with pytest.raises(mig.MigError, match="single or mixed"):
        mig.expected_offer(layout, H100, "none")


# --- reading a node back --------------------------------------------------------------

def _node(labels, allocatable):
    return {"metadata": {"name": "n", "labels": labels}, "status": {"allocatable": allocatable}}


def test_offer_differences_finds_a_wrong_count(default_config):
    layout = mig.check_profile(default_config, "all-1g.10gb", H100, 1)
    expected = mig.expected_offer(layout, H100, "mixed")
    good = _node(dict(expected["labels"]), {"nvidia.com/mig-1g.10gb": "7", "cpu": "8"})
    assert mig.offer_differences(expected, good) == []
    bad = _node(dict(expected["labels"]), {"nvidia.com/mig-1g.10gb": "6", "nvidia.com/mig-2g.20gb": "1"})
    diffs = mig.offer_differences(expected, bad)
    assert "allocatable nvidia.com/mig-1g.10gb is 6, expected 7" in diffs
    assert "allocatable nvidia.com/mig-2g.20gb is 1, expected none" in diffs


def test_physical_count_in_single_mig_mode(default_config):
    labels = {upstream.LABEL_GPU_COUNT: "56", upstream.LABEL_GPU_PRODUCT: H100 + "-MIG-1g.10gb",
              upstream.LABEL_MIG_CONFIG: "all-1g.10gb"}
    assert mig.physical_gpu_count(labels, default_config) == 8
    assert mig.physical_gpu_count({upstream.LABEL_GPU_COUNT: "8", upstream.LABEL_GPU_PRODUCT: H100},
                                  default_config) == 8
