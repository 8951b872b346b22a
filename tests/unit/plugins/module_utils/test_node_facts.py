"""Parsers of node_facts on the real captured outputs plus edge cases."""
import os

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node import facts as nf
from kit.paths import NVIDIA_SMI as FIXTURES

NAME_BUS_MIG = ("name", "pci.bus_id", "mig.mode.current", "mig.mode.pending")


def fixture(name):
    path = os.path.join(FIXTURES, name)
    if not os.path.exists(path):
        pytest.skip("real nvidia-smi fixtures not found at %s (../shared next to the repo)" % FIXTURES)
    with open(path) as handle:
        return handle.read()


needs_shared = pytest.mark.needs_shared


# --- nvidia-smi --query-gpu, real captures ----------------------------------------

@needs_shared
def test_h100_mig_query_csv_with_header_and_units():
    rows = nf.parse_query_gpu(fixture("h100-80gb-hbm3_mig-enabled__590.48.01__query-gpu.csv"))
    assert len(rows) == 1
    gpu = nf.normalize_gpu(rows[0])
    assert gpu == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:00:09.0",
        "pci_device_id": "0x233010de",
        "memory_mib": 81559,
        "mig_capable": True,
        "mig_mode_current": "enabled",
        "mig_mode_pending": "enabled",
        "driver_version": "590.48.01",
        "source": "nvidia-smi",
    }
    # 212 columns survive the header-unit stripping and placeholders become None
    assert len(rows[0]) == 212
    assert rows[0]["hostname"] is None
    assert rows[0]["retired_pages.double_bit.count"] is None


@needs_shared
def test_l40s_query_csv_is_not_mig_capable():
    rows = nf.parse_query_gpu(fixture("l40s_no-mig__595.80__query-gpu.csv"))
    gpu = nf.normalize_gpu(rows[0])
    assert gpu["name"] == "NVIDIA L40S"
    assert gpu["memory_mib"] == 46068
    assert gpu["driver_version"] == "595.80"
    assert gpu["mig_capable"] is False
    assert gpu["mig_mode_current"] is None and gpu["mig_mode_pending"] is None
    assert len(rows[0]) == 202


@needs_shared
def test_a100_noheader_csv_by_position():
    rows = nf.parse_query_gpu(
        fixture("a100-pcie-40gb_mig-enabled__query-gpu_name-busid-migmode_noheader.csv"), fields=NAME_BUS_MIG)
    gpu = nf.normalize_gpu(rows[0])
    assert gpu["name"] == "NVIDIA A100-PCIE-40GB"
    assert gpu["pci_bus_id"] == "00000000:04:00.0"
    assert gpu["mig_capable"] is True
    assert (gpu["mig_mode_current"], gpu["mig_mode_pending"]) == ("enabled", "enabled")


@needs_shared
def test_a2_noheader_csv_bracketed_na_means_not_mig_capable():
    rows = nf.parse_query_gpu(
        fixture("a2_no-mig__query-gpu_name-busid-migmode_noheader.csv"), fields=NAME_BUS_MIG)
    assert rows == [{"name": "NVIDIA A2", "pci.bus_id": "00000000:08:00.0",
                     "mig.mode.current": None, "mig.mode.pending": None}]
    assert nf.normalize_gpu(rows[0])["mig_capable"] is False


# --- edge cases --------------------------------------------------------------------------

def test_noheader_nounits_multi_gpu_with_spaces_and_placeholders():
    text = ("0, NVIDIA H100 80GB HBM3 , GPU-aaa, 00000000:18:00.0, 0x233010DE, 81559, Disabled, Enabled, 550.90.07\n"
            "1,NVIDIA A10,GPU-bbb,00000000:3B:00.0,0x223610DE,[Not Supported],[N/A],N/A,550.90.07\n"
            "\n")
    gpus = [nf.normalize_gpu(r, i) for i, r in enumerate(nf.parse_query_gpu(text))]
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[0]["name"] == "NVIDIA H100 80GB HBM3"
    assert gpus[0]["mig_capable"] is True
    assert (gpus[0]["mig_mode_current"], gpus[0]["mig_mode_pending"]) == ("disabled", "enabled")
    assert gpus[1]["memory_mib"] is None
    assert gpus[1]["mig_capable"] is False


def test_header_in_other_order_is_matched_by_name():
    text = "name, memory.total [MiB], index\nNVIDIA L4, 23034 MiB, 3\n"
    gpu = nf.normalize_gpu(nf.parse_query_gpu(text)[0])
    assert (gpu["index"], gpu["memory_mib"], gpu["name"]) == (3, 23034, "NVIDIA L4")


def test_row_with_wrong_field_count_is_an_error():
    with pytest.raises(ValueError, match="expected 9"):
        nf.parse_query_gpu("0, NVIDIA A2\n")


def test_empty_output_is_no_gpu():
    assert nf.parse_query_gpu("") == []
    assert nf.parse_query_gpu(None) == []


@pytest.mark.parametrize("raw,expected", [
    (" 81559 MiB", 81559), ("81559", 81559), ("[N/A]", None), ("N/A", None),
    ("[Not Supported]", None), ("  ", None), ("12.5 W", 12), ("garbage", None),
])
def test_to_int(raw, expected):
    assert nf.to_int(raw) == expected


# --- nvidia-smi errors ----------------------------------------------------------------

@needs_shared
def test_driver_not_loaded_error_is_classified():
    code, reason, nvml = nf.classify_smi_error(9, fixture("nvidia-smi__error_driver-not-loaded.txt"))
    assert code == "driver_not_loaded"
    assert "couldn't communicate with the NVIDIA driver" in reason
    assert nvml is None


@needs_shared
def test_nvml_mismatch_error_is_classified_with_library_version():
    code, reason, nvml = nf.classify_smi_error(
        18, fixture("nvidia-smi__error_nvml-driver-library-mismatch_550.144.txt"))
    assert code == "driver_library_mismatch"
    assert nvml == "550.144"
    assert "550.144" in reason


def test_unknown_error_keeps_rc_and_first_line():
    code, reason = nf.classify_smi_error(255, "Segmentation fault\nx")[:2]
    assert code == "nvidia_smi_failed"
    assert reason == "nvidia-smi exited with rc=255: Segmentation fault"
    assert nf.classify_smi_error(6, "No devices were found")[0] == "no_devices"
    assert nf.classify_smi_error(124, "")[0] == "nvidia_smi_timeout"


# --- /proc/driver/nvidia/version, lsmod, nvidia-ctk ------------------------------------

@needs_shared
def test_proc_version_open_kernel_module():
    parsed = nf.parse_proc_version(
        fixture("proc-driver-nvidia-version__open-kernel-module_565.57.01_ubuntu24.04.txt"))
    assert parsed == {"version": "565.57.01", "flavor": "open", "arch": "x86_64",
                      "gcc": "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)"}


def test_proc_version_proprietary_format():
    text = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    parsed = nf.parse_proc_version(text)
    assert (parsed["version"], parsed["flavor"], parsed["arch"]) == ("550.54.15", "proprietary", "x86_64")
    assert nf.parse_proc_version("") is None
    assert nf.parse_proc_version("something else") is None


@needs_shared
def test_lsmod_fixture():
    modules = nf.parse_lsmod(fixture("lsmod-grep-nvidia__modules-loaded.txt"))
    assert set(modules) == {"nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia", "drm_ttm_helper", "video"}
    assert modules["nvidia"] == ["nvidia_uvm", "nvidia_modeset"]
    assert "nouveau" not in modules


def test_lsmod_header_and_proc_modules_format():
    text = ("Module                  Size  Used by\n"
            "nouveau              2433024  1\n"
            "nvidia_uvm 1531904 0 - Live 0x0000000000000000 (POE)\n"
            "nvidia 56594432 2 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n")
    modules = nf.parse_lsmod(text)
    assert set(modules) == {"nouveau", "nvidia_uvm", "nvidia"}
    assert modules["nvidia"] == ["nvidia_uvm", "nvidia_modeset"]
    assert modules["nvidia_uvm"] == []


@needs_shared
def test_nvidia_ctk_version_fixture():
    assert nf.parse_tool_version(fixture("nvidia-ctk--version__1.12.0.txt")) == (
        "1.12.0", "62bd015475656ef795cb0d59cc4030a6bd4a9526")


def test_container_runtime_version_format():
    text = "NVIDIA Container Runtime version 1.17.4\ncommit: 9b69590c\nspec: 1.2.0\n\nrunc version 1.1.12\n"
    assert nf.parse_tool_version(text) == ("1.17.4", "9b69590c")
    assert nf.parse_tool_version("") == (None, None)


# --- runtime configs ------------------------------------------------------------------------

CONTAINERD_V2_NVIDIA_DEFAULT = """
version = 2
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"   # set by nvidia-ctk
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
          BinaryName = "/usr/bin/nvidia-container-runtime"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
"""

CONTAINERD_V3_RUNC = """
version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = 'runc'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
"""

CONTAINERD_OPERATOR_DROPIN = """
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
"""


def test_containerd_v2_nvidia_default():
    summary = nf.inspect_containerd([CONTAINERD_V2_NVIDIA_DEFAULT])
    assert summary["runtimes"] == ["nvidia", "runc"]
    assert summary["nvidia_runtime"] and summary["nvidia_default"]
    assert summary["default_runtime"] == "nvidia"
    assert summary["operator_managed"] is False


def test_containerd_v3_runc_only_then_operator_dropin():
    plain = nf.inspect_containerd([CONTAINERD_V3_RUNC])
    assert plain["nvidia_runtime"] is False and plain["default_runtime"] == "runc"
    merged = nf.inspect_containerd([CONTAINERD_V3_RUNC, CONTAINERD_OPERATOR_DROPIN])
    assert merged["nvidia_runtimes"] == ["nvidia"]
    assert merged["nvidia_default"] is False
    assert merged["operator_managed"] is True


def test_containerd_default_is_runc_when_unset():
    assert nf.inspect_containerd(["version = 2\n"])["default_runtime"] == "runc"


def test_crio_dropin_nvidia_default():
    main = '[crio.runtime]\ndefault_runtime = "crun"\n[crio.runtime.runtimes.crun]\n'
    dropin = ('[crio.runtime]\ndefault_runtime = "nvidia"\n'
              '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n')
    assert nf.inspect_crio([main])["nvidia_runtime"] is False
    summary = nf.inspect_crio([main, dropin])
    assert summary["nvidia_default"] is True and summary["runtimes"] == ["crun", "nvidia"]


def test_toml_arrays_and_bools():
    flat = nf.parse_toml_flat('imports = ["/etc/containerd/conf.d/*.toml", \'/x.toml\']\n[a."b.c"]\nk = true\n')
    assert flat[("imports",)] == ["/etc/containerd/conf.d/*.toml", "/x.toml"]
    assert flat[("a", "b.c", "k")] is True


# --- os-release ------------------------------------------------------------------------

@pytest.mark.parametrize("text,family,supported", [
    ('ID=ubuntu\nVERSION_ID="22.04"\nID_LIKE=debian\n', "debian", True),
    ('ID=ubuntu\nVERSION_ID="24.04"\n', "debian", True),
    ('ID=ubuntu\nVERSION_ID="20.04"\n', "debian", False),
    ('ID=debian\nVERSION_ID="12"\n', "debian", True),
    ('ID=debian\nVERSION_ID="11"\n', "debian", False),
    ('ID="rhel"\nVERSION_ID="9.4"\nID_LIKE="fedora"\n', "redhat", True),
    ('ID="rocky"\nVERSION_ID="9.5"\nID_LIKE="rhel centos fedora"\n', "redhat", True),
    ('ID="rocky"\nVERSION_ID="8.10"\n', "redhat", False),
    ('ID=fedora\nVERSION_ID=44\n', "redhat", False),
    ('ID=arch\n', "arch", False),
    ("", "unknown", False),
])
def test_os_release(text, family, supported):
    parsed = nf.parse_os_release(text)
    assert parsed["family"] == family
    assert parsed["supported"] is supported


def test_headers_package_names():
    assert nf.headers_package("debian", "6.8.0-45-generic") == "linux-headers-6.8.0-45-generic"
    assert nf.headers_package("redhat", "5.14.0-427.el9.x86_64") == "kernel-devel-5.14.0-427.el9.x86_64"
    assert nf.headers_package("arch", "6.9") is None
