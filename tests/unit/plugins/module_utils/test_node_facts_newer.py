"""Node detection on outputs ../shared/fixtures does not have (issue 10): driver 610, older drivers,
containerd v1 configs, NVIDIA software without an NVIDIA GPU, failure classes.

Fixtures: tests/unit/fixtures/node_detection (real outputs, SOURCES.md says where from).
"""
import os

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node import driver_plan as dp
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node import facts as nf

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "node_detection"))
KR = "6.8.0-45-generic"
H100_ROW = "0, NVIDIA H100 80GB HBM3, GPU-6f0c0a36-4a4b-83a5-0b1e-3f8b1a9d2f10, 00000000:18:00.0, 0x233010DE, 81559 MiB"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def write(root, path, text):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)
    return full


def pci_device(root, address, vendor, device, pci_class):
    for name, value in (("vendor", vendor), ("device", device), ("class", pci_class)):
        write(root, "/sys/bus/pci/devices/%s/%s" % (address, name), value + "\n")


HELP_470 = fixture("help-query-gpu__470.182.03__excerpt.txt")
# driver 610 (constructed, see SOURCES.md): the real 470 listing plus what 610 adds/deprecates
HELP_610 = HELP_470.replace(
    '"driver_version"\nThe version of the installed NVIDIA display driver. This is an alphanumeric string.\n',
    '"driver_version"\nThe version of the installed NVIDIA display driver. This is an alphanumeric string. '
    'Deprecated; will be removed in CUDA 14.0. Use kmd_version instead.\n\n"kmd_version"\n'
    'The version of the installed NVIDIA kernel mode driver.\n') + '\n"mig.mode.current"\nThe current MIG mode.\n' \
    '\n"mig.mode.pending"\nThe MIG mode the GPU will switch to after the next reboot.\n'


def test_help_listing_parses_names_aliases_and_deprecations():
    offered, deprecated = nf.parse_help_query_gpu(HELP_470)
    assert {"driver_version", "name", "gpu_name", "pci.bus_id", "gpu_bus_id", "pci.device_id"} <= offered
    assert deprecated == set() and "mig.mode.current" not in offered
    offered, deprecated = nf.parse_help_query_gpu(HELP_610)
    assert deprecated == {"driver_version"} and "kmd_version" in offered


def test_fields_asked_follow_what_the_driver_offers():
    # an older driver without mig.mode.*: not asked (asking would fail the whole query)
    assert nf.query_fields(*nf.parse_help_query_gpu(HELP_470 + '\n"memory.total"\nTotal memory.\n"index"\nx\n')) == \
        list(nf.REQUIRED_FIELDS) + ["driver_version"]
    # driver 610: kmd_version instead of the deprecated driver_version
    assert nf.query_fields(*nf.parse_help_query_gpu(HELP_610))[-3:] == [
        "mig.mode.current", "mig.mode.pending", "kmd_version"]
    assert nf.query_fields(None) == list(nf.QUERY_FIELDS)       # no listing: ask the classic set


def test_gather_drops_a_refused_field_and_the_node_still_reads_as_working(tmp_path):
    """No --help-query-gpu answer; the driver refuses driver_version (as 610+CUDA 14 will)."""
    write(tmp_path, "/etc/os-release", 'ID=ubuntu\nVERSION_ID="24.04"\n')
    smi = write(tmp_path, "/usr/bin/nvidia-smi", "")
    os.chmod(smi, 0o755)
    pci_device(tmp_path, "0000:18:00.0", "0x10de", "0x2330", "0x030200")
    refused = fixture("query-gpu__invalid-field__rc2.txt").replace("device_minor", "driver_version")
    asked = []

    def run(argv):
        if argv[1] == "--help-query-gpu":
            return 2, "", "unknown option"
        fields = argv[1].split("=", 1)[1].split(",")
        asked.append(fields)
        if "driver_version" in fields:
            return 2, refused, ""
        header = ", ".join(fields)
        return 0, header + "\n" + H100_ROW + ", Disabled, Disabled\n", ""
    facts = nf.gather(nf.HostReader(str(tmp_path)), run, KR)
    assert asked[0] == list(nf.QUERY_FIELDS) and "driver_version" not in asked[1]
    assert facts["driver"]["state"] == "host" and facts["gpu_count"] == 1
    assert facts["gpus"][0]["mig_capable"] is True and facts["driver"]["query_fields"] == asked[1]


def test_gather_on_driver_610_asks_kmd_version(tmp_path):
    write(tmp_path, "/etc/os-release", 'ID=ubuntu\nVERSION_ID="24.04"\n')
    smi = write(tmp_path, "/usr/bin/nvidia-smi", "")
    os.chmod(smi, 0o755)
    help_610 = HELP_610 + '\n"index"\nx\n\n"memory.total"\nx\n'

    def run(argv):
        if argv[1] == "--help-query-gpu":
            return 0, help_610, ""
        fields = argv[1].split("=", 1)[1].split(",")
        return 0, ", ".join(fields) + "\n" + H100_ROW + ", Enabled, Enabled, 610.57.04\n", ""
    facts = nf.gather(nf.HostReader(str(tmp_path)), run, KR)
    assert facts["driver"]["query_fields"][-1] == "kmd_version"
    assert facts["driver"]["version"] == "610.57.04" and facts["gpus"][0]["mig_mode_current"] == "enabled"


@pytest.mark.parametrize("name,code,needle", [
    ("nvidia-smi__gpu-is-lost.txt", "gpu_lost", "hardware: Unable to determine the device handle for GPU "
                                                "0000:02:00.0: GPU is lost"),
    ("nvidia-smi__device-handle-unknown-error.txt", "gpu_unreachable", "hardware: Unable to determine the device "
                                                                       "handle for GPU 0000:0B:00.0: Unknown Error"),
    ("nvidia-smi__mismatch__no-nvml-line.txt", "driver_library_mismatch",
     "the NVML library (user-space driver) does not match the loaded kernel module 550.54.15"),
    ("nvidia-smi__mismatch__nvml-line_570.124.txt", "driver_library_mismatch",
     "NVML library 570.124 does not match the loaded kernel module 550.54.15"),
])
def test_failure_classes(name, code, needle):
    got = nf.classify_smi_error(15, fixture(name), kernel_module="550.54.15")
    assert got[0] == code and got[1].startswith(needle), got
    assert "NVML library ?" not in got[1]


def test_nvml_unknown_error_is_a_runtime_cgroup_case_only_in_a_container():
    text = fixture("nvidia-smi__nvml-unknown-error__in-container.txt")
    code, reason = nf.classify_smi_error(255, text, in_container=True)[:2]
    assert code == "nvml_container_cgroup" and reason.startswith("runtime/cgroup: Failed to initialize NVML")
    assert nf.classify_smi_error(255, text)[0] == "nvidia_smi_failed"


def test_xid_in_the_kernel_log_makes_it_a_hardware_case():
    code, reason = nf.classify_smi_error(255, "Segmentation fault", kernel_log=fixture("dmesg__xid-79.txt"))[:2]
    assert code == "gpu_xid"
    assert reason.endswith("the kernel log has Xid 79 on 0000:44:00: GPU has fallen off the bus")
    code, reason = nf.classify_smi_error(15, fixture("nvidia-smi__gpu-is-lost.txt"),
                                         kernel_log=fixture("dmesg__xid-79.txt"))[:2]
    assert code == "gpu_lost" and "kernel log: Xid 79" in reason


def test_gather_in_a_container_reads_dmesg_only_when_nvidia_smi_fails(tmp_path):
    write(tmp_path, "/.dockerenv", "")
    for tool in ("/usr/bin/nvidia-smi", "/usr/bin/dmesg"):
        os.chmod(write(tmp_path, tool, ""), 0o755)
    pci_device(tmp_path, "0000:18:00.0", "0x10de", "0x2330", "0x030200")

    def run(argv):
        if argv[0].endswith("dmesg"):
            return 0, "[    1.0] usb 1-1: new device\n", ""
        return 255, fixture("nvidia-smi__nvml-unknown-error__in-container.txt"), ""
    facts = nf.gather(nf.HostReader(str(tmp_path)), run, KR)
    assert facts["driver"]["state"] == "broken" and facts["driver"]["reason_code"] == "nvml_container_cgroup"


def test_nvidia_software_without_an_nvidia_pci_device_is_not_a_gpu_host(tmp_path):
    os.chmod(write(tmp_path, "/usr/bin/nvidia-smi", ""), 0o755)
    pci_device(tmp_path, "0000:00:02.0", "0x8086", "0x46a6", "0x030000")     # Intel iGPU only
    facts = nf.gather(nf.HostReader(str(tmp_path)), lambda argv: (6, fixture(
        "nvidia-smi__no-devices-were-found.txt"), ""), KR)
    assert facts["gpu_host"] is False and facts["driver"]["state"] == "none"
    assert facts["driver"]["reason_code"] == "no_nvidia_pci_device"
    assert "none of vendor 0x10de; nvidia-smi: nvidia-smi found no GPU" in facts["driver"]["reason"]
    # the plan names the host and is not blocked by it
    gpu = {"gpu_host": True, "gpu_count": 8, "driver": {"state": "host", "version": "550.54.15"},
           "toolkit": {"state": "host"}, "container_runtime": {"nvidia_runtime": True, "nvidia_default": True},
           "kernel": {"headers_installed": True}}
    plan = dp.driver_plan({"gpu-1": {"ansible_facts": {"gpu_node": gpu}},
                           "cpu-1": {"ansible_facts": {"gpu_node": facts}}})
    assert plan["blocking_errors"] == [] and plan["ignored_nodes"] == ["cpu-1"]
    assert any(w.startswith("no NVIDIA GPU found on cpu-1; left out of the plan (cpu-1: NVIDIA driver software "
                            "is installed but the host has no NVIDIA PCI device") for w in plan["warnings"])


def test_broken_gpu_host_keeps_blocking_with_the_fix():
    broken = {"gpu_host": True, "gpu_count": 1,
              "driver": {"state": "broken", "reason_code": "gpu_lost", "reason": "hardware: GPU is lost"},
              "toolkit": {"state": "none"}, "container_runtime": {}, "kernel": {"headers_installed": True}}
    plan = dp.driver_plan({"gpu-1": {"ansible_facts": {"gpu_node": broken}}})
    assert plan["blocking_errors"] and "reboot the node to recover the GPU" in plan["blocking_errors"][0]


@pytest.mark.parametrize("name,runtimes,default,nvidia_default,operator", [
    ("containerd-v1__nvidia-ctk-installer.toml", ["nvidia", "nvidia-cdi", "nvidia-legacy", "runc"], "runc",
     False, False),
    ("containerd-v1__default-runtime-table__gce.toml", ["default_runtime"], "default_runtime", False, False),
    ("containerd-v1__default-runtime-nvidia-shim-v1.toml", ["default_runtime", "runc"], "default_runtime", True, True),
])
def test_containerd_v1_runtime_option_and_default_runtime_table(name, runtimes, default, nvidia_default, operator):
    got = nf.inspect_containerd([fixture(name)])
    assert got["runtimes"] == runtimes and got["default_runtime"] == default
    assert got["nvidia_default"] is nvidia_default and got["operator_managed"] is operator


def test_containerd_v1_shim_option_runtime_is_the_binary():
    """A runtime not named nvidia is found by its v1 `Runtime` binary (no BinaryName)."""
    text = fixture("containerd-v1__nvidia-ctk-installer.toml").replace(
        '            BinaryName = "/usr/bin/nvidia-container-runtime"\n', "").replace(
        "runtimes.nvidia]", "runtimes.gpu]").replace("runtimes.nvidia.options]", "runtimes.gpu.options]")
    got = nf.inspect_containerd([text])
    assert "gpu" in got["runtimes"] and "gpu" in got["nvidia_runtimes"]
