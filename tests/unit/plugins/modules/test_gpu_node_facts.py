"""gpu_node_facts against fake host roots with stand-in binaries.

The stand-ins print the real captured outputs from ../shared/fixtures/nvidia-smi.
"""
import json
import os
import stat

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node import facts as nf
from ansible_collections.skaffon.gpu_platform.plugins.modules import gpu_node_facts
from kit.paths import NVIDIA_SMI as FIXTURES
KR = "6.8.0-45-generic"

pytestmark = pytest.mark.needs_shared


@pytest.fixture(autouse=True)
def _need_fixtures():
    if not os.path.isdir(FIXTURES):
        pytest.skip("real nvidia-smi fixtures not found at %s (../shared next to the repo)" % FIXTURES)


def write(root, path, text, mode=None):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)
    if mode:
        os.chmod(full, mode)
    return full


def stand_in(root, path, fixture, rc=0):
    """Executable that prints a captured output and exits with rc."""
    body = "#!/bin/sh\ncat '%s'\nexit %d\n" % (os.path.join(FIXTURES, fixture), rc)
    return write(root, path, body, stat.S_IRWXU)


def os_release(root, os_id="ubuntu", version="22.04"):
    write(root, "/etc/os-release", 'ID=%s\nVERSION_ID="%s"\nPRETTY_NAME="%s %s"\n' % (os_id, version, os_id, version))


def pci_device(root, address, vendor, device, pci_class):
    for name, value in (("vendor", vendor), ("device", device), ("class", pci_class)):
        write(root, "/sys/bus/pci/devices/%s/%s" % (address, name), value + "\n")


def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gpu_node_facts.main()
    return json.loads(capsys.readouterr().out)


def test_host_driver_h100_with_toolkit_and_headers(tmp_path, capsys):
    os_release(tmp_path)
    smi = stand_in(tmp_path, "/usr/bin/nvidia-smi", "h100-80gb-hbm3_mig-enabled__590.48.01__query-gpu.csv")
    stand_in(tmp_path, "/usr/bin/nvidia-ctk", "nvidia-ctk--version__1.12.0.txt")
    write(tmp_path, "/proc/modules", open(os.path.join(FIXTURES, "lsmod-grep-nvidia__modules-loaded.txt")).read())
    write(tmp_path, "/proc/driver/nvidia/version", open(os.path.join(
        FIXTURES, "proc-driver-nvidia-version__open-kernel-module_565.57.01_ubuntu24.04.txt")).read())
    write(tmp_path, "/usr/src/linux-headers-%s/Makefile" % KR, "")
    os.makedirs(str(tmp_path / "lib" / "modules" / KR))
    os.symlink("/usr/src/linux-headers-%s" % KR, str(tmp_path / "lib" / "modules" / KR / "build"))
    write(tmp_path, "/etc/containerd/config.toml",
          'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "nvidia"\n'
          '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
          'BinaryName = "/usr/bin/nvidia-container-runtime"\n')

    result = run_module(capsys, root=str(tmp_path), kernel_release=KR)
    assert result["changed"] is False
    facts = result["ansible_facts"]["gpu_node"]
    assert facts["gpu_host"] is True and facts["gpu_count"] == 1
    assert facts["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert facts["gpus"][0]["mig_capable"] is True
    driver = facts["driver"]
    assert driver["state"] == "host" and driver["working"] and driver["present"]
    assert driver["version"] == "590.48.01"          # nvidia-smi wins over /proc
    assert driver["kernel_module"]["flavor"] == "open"
    assert driver["nvidia_smi"] == smi
    assert facts["toolkit"]["state"] == "host" and facts["toolkit"]["version"] == "1.12.0"
    assert facts["container_runtime"]["nvidia_default"] is True
    assert facts["kernel"] == {"release": KR, "headers_installed": True,
                               "headers_path": "/lib/modules/%s/build" % KR,
                               "headers_package": "linux-headers-%s" % KR}
    assert facts["os"]["supported"] is True
    assert facts["nouveau_loaded"] is False


@pytest.mark.parametrize("fixture,rc,code", [
    ("nvidia-smi__error_driver-not-loaded.txt", 9, "driver_not_loaded"),
    ("nvidia-smi__error_nvml-driver-library-mismatch_550.144.txt", 18, "driver_library_mismatch"),
])
def test_broken_driver_is_broken_not_absent(tmp_path, capsys, fixture, rc, code):
    os_release(tmp_path, "debian", "12")
    smi = stand_in(tmp_path, "/opt/fake/nvidia-smi", fixture, rc=rc)
    pci_device(tmp_path, "0000:18:00.0", "0x10de", "0x2330", "0x030200")
    facts = run_module(capsys, root=str(tmp_path), nvidia_smi_path=smi, kernel_release=KR)["ansible_facts"]["gpu_node"]
    driver = facts["driver"]
    assert driver["state"] == "broken"
    assert driver["present"] is True and driver["working"] is False
    assert driver["reason_code"] == code and driver["reason"]
    assert facts["gpu_host"] is True
    assert facts["gpus"][0]["source"] == "pci"
    if code == "driver_library_mismatch":
        assert driver["nvml_version"] == "550.144" and driver["version"] == "550.144"


def test_no_driver_pci_fallback_and_nouveau(tmp_path):
    os_release(tmp_path, "rocky", "9.4")
    pci_device(tmp_path, "0000:18:00.0", "0x10de", "0x2330", "0x030200")   # H100 3D controller
    pci_device(tmp_path, "0000:18:00.1", "0x10de", "0x22e8", "0x040300")   # HDMI audio: no GPU
    pci_device(tmp_path, "0000:05:00.0", "0x10de", "0x22a3", "0x068000")   # NVSwitch
    pci_device(tmp_path, "0000:00:02.0", "0x8086", "0x46a6", "0x030000")   # Intel iGPU
    write(tmp_path, "/proc/modules", "nouveau 2433024 1 - Live 0x0\ndrm 622592 3 nouveau, Live 0x0\n")
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, "", ""

    facts = nf.gather(nf.HostReader(str(tmp_path)), run, "5.14.0-427.el9.x86_64")
    assert calls == []                       # nothing to run: no binaries under root
    assert facts["driver"]["state"] == "none" and facts["driver"]["present"] is False
    assert facts["gpu_host"] is True
    assert facts["gpu_count"] == 1 and facts["pci_gpu_count"] == 1 and facts["nvswitch_count"] == 1
    assert facts["gpus"][0]["pci_bus_id"] == "0000:18:00.0" and facts["gpus"][0]["pci_device_id"] == "0x2330"
    assert facts["nouveau_loaded"] is True
    assert facts["kernel"]["headers_installed"] is False
    assert facts["kernel"]["headers_package"] == "kernel-devel-5.14.0-427.el9.x86_64"
    assert facts["os"]["family"] == "redhat" and facts["os"]["supported"] is True


def test_operator_managed_driver_and_toolkit(tmp_path):
    os_release(tmp_path)
    write(tmp_path, "/run/nvidia/driver/usr/bin/nvidia-smi", "")
    write(tmp_path, "/proc/modules", "nvidia 56594432 2 - Live 0x0\n")
    write(tmp_path, "/etc/containerd/config.toml", 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    write(tmp_path, "/etc/containerd/conf.d/99-nvidia.toml",
          '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
          'BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n')
    facts = nf.gather(nf.HostReader(str(tmp_path)), lambda argv: (0, "", ""), KR)
    assert facts["driver"]["state"] == "operator"
    assert facts["driver"]["present"] is False     # not a host driver: the operator keeps it
    assert facts["toolkit"]["state"] == "operator"
    assert facts["container_runtime"]["containerd"]["nvidia_runtimes"] == ["nvidia"]


def test_module_without_gpu_and_bad_paths(tmp_path, capsys):
    os_release(tmp_path, "arch", "rolling")
    facts = run_module(capsys, root=str(tmp_path), kernel_release=KR)["ansible_facts"]["gpu_node"]
    assert facts["gpu_host"] is False and facts["driver"]["state"] == "none"
    assert facts["os"]["supported"] is False
    failed = run_module(capsys, root=str(tmp_path / "nope"))
    assert failed["failed"] and "root=" in failed["msg"]
    failed = run_module(capsys, root=str(tmp_path), nvidia_smi_path=str(tmp_path / "missing"))
    assert failed["failed"] and "nvidia_smi_path" in failed["msg"]


def test_module_check_mode_is_read_only(tmp_path, capsys):
    os_release(tmp_path)
    before = sorted(os.listdir(str(tmp_path)))
    result = run_module(capsys, root=str(tmp_path), _ansible_check_mode=True)
    assert result["changed"] is False and "gpu_node" in result["ansible_facts"]
    assert sorted(os.listdir(str(tmp_path))) == before


def test_hung_nvidia_smi_is_killed_and_reported(tmp_path, capsys):
    os_release(tmp_path)
    smi = write(tmp_path, "/usr/bin/nvidia-smi", "#!/bin/sh\nexec sleep 20\n", stat.S_IRWXU)
    facts = run_module(capsys, root=str(tmp_path), command_timeout=1)["ansible_facts"]["gpu_node"]
    assert facts["driver"]["nvidia_smi"] == smi
    assert facts["driver"]["state"] == "broken"
    assert facts["driver"]["reason_code"] == "nvidia_smi_timeout"
