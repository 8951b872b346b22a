# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only GPU node detection: pure parsers plus one gather() entry point.

Every parser takes text and returns plain data, so unit tests feed them the
real captured outputs. gather() only reads files under a root and runs
commands through an injected callable; the gpu_node_facts module wires it to
AnsibleModule.run_command. Nothing here writes to the host.

Kept to the stdlib and Python 3.6+ on purpose: it runs on the managed node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import (
    NVIDIA_RUNTIME_NAME,
    OPERATOR_DRIVER_ROOT,
    OPERATOR_TOOLKIT_DIR,
)

FACTS_KEY = "gpu_node"
SCHEMA_VERSION = 1

NVIDIA_PCI_VENDOR = "0x10de"
# PCI base class 0x03 = display controller (VGA 0x0300, 3D 0x0302). NVSwitch
# bridges (0x0680) and HDMI audio functions (0x0403) are not GPUs.
PCI_CLASS_DISPLAY_PREFIX = "0x03"
PCI_CLASS_BRIDGE_OTHER = "0x0680"

# Fields asked from nvidia-smi; parse_query_gpu maps by header name, so an
# output with more fields (or another order) still parses.
QUERY_FIELDS = (
    "index", "name", "uuid", "pci.bus_id", "pci.device_id", "memory.total",
    "mig.mode.current", "mig.mode.pending", "driver_version",
)
# Fields a driver may lack: mig.mode.* before MIG (< 450); driver_version is deprecated
# for kmd_version from driver 610 (removed with CUDA 14). Asked only when offered.
REQUIRED_FIELDS = QUERY_FIELDS[:6]
MIG_FIELDS = ("mig.mode.current", "mig.mode.pending")
DRIVER_FIELDS = ("kmd_version", "driver_version")   # preferred first
INVALID_FIELD_RE = re.compile(r'Field\s+["\u201c]([^"\u201d]+)["\u201d]\s+is not a valid field to query')
MAX_FIELD_RETRIES = 4

# nvidia-smi placeholders for "no value"; compared case-insensitively.
NA_VALUES = ("n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]",
             "[insufficient permissions]", "[gpu is lost]", "")

DRIVER_HOST = "host"          # working driver installed on the host
DRIVER_OPERATOR = "operator"  # driver container of the GPU Operator
DRIVER_BROKEN = "broken"      # installed but not usable
DRIVER_NONE = "none"

TOOLKIT_HOST = "host"
TOOLKIT_OPERATOR = "operator"
TOOLKIT_NONE = "none"

BIN_DIRS = ("/usr/bin", "/usr/sbin", "/usr/local/bin", "/bin", "/sbin", "/usr/local/nvidia/bin")

SUPPORTED_OS = {
    "ubuntu": ("22.04", "24.04"),
    "debian": ("12",),
    "rhel": ("9",),
    "rocky": ("9",),
}


# --- small helpers -----------------------------------------------------------

def clean_value(value):
    """Strip spaces and map nvidia-smi placeholders to None."""
    if value is None:
        return None
    value = value.strip()
    if value.lower() in NA_VALUES:
        return None
    return value


def strip_unit(value):
    """'81559 MiB' -> '81559'; leaves values without a trailing unit alone."""
    if value is None:
        return None
    match = re.match(r"^\s*(-?\d+(?:\.\d+)?)\s*[A-Za-z%]+\s*$", value)
    return match.group(1) if match else value.strip()


def to_int(value):
    value = strip_unit(clean_value(value))
    if value is None:
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


def _header_name(cell):
    # 'memory.total [MiB]' -> 'memory.total'
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", cell.strip())


def _split_csv_line(line):
    # nvidia-smi never quotes; values themselves hold no commas for the
    # fields we read (names like 'NVIDIA H100 80GB HBM3' have none).
    return line.split(",")


# --- nvidia-smi --------------------------------------------------------------

def parse_query_gpu(text, fields=QUERY_FIELDS):
    """Parse `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.

    With a header row the columns are matched by name (units in the header
    like 'memory.total [MiB]' are dropped); without one, by position in
    `fields`. Returns one dict per GPU keyed by query field, values stripped,
    units removed, placeholders (`N/A`, `[N/A]`, `[Not Supported]`) as None.
    """
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return []
    first = [_header_name(c) for c in _split_csv_line(lines[0])]
    known = set(fields) | set(QUERY_FIELDS) | {"timestamp", "count", "serial"}
    if any(name in known for name in first) and all(re.match(r"^[A-Za-z_][\w.]*$", n) for n in first):
        header, rows = first, lines[1:]
    else:
        header, rows = list(fields), lines
    gpus = []
    for line in rows:
        cells = _split_csv_line(line)
        if len(cells) != len(header):
            raise ValueError("nvidia-smi CSV row has %d fields, expected %d: %r"
                             % (len(cells), len(header), line))
        gpus.append(dict((name, clean_value(cell)) for name, cell in zip(header, cells)))
    return gpus


def _mig_mode(value):
    value = clean_value(value)
    return value.lower() if value else None


def _driver_version(row):
    for field in DRIVER_FIELDS:
        value = clean_value(row.get(field))
        if value and not value.lower().startswith("deprecated"):
            return value
    return None


def parse_help_query_gpu(text):
    """`nvidia-smi --help-query-gpu` -> (fields offered, fields marked deprecated).

    Entries are a line of quoted names (`"name" or "gpu_name"`) followed by
    description lines; a description that says "deprecated" marks the entry.
    """
    offered, deprecated = set(), set()
    current = []
    for line in (text or "").splitlines():
        names = re.findall(r'"([^"]+)"', line)
        if names and re.match(r'^\s*"[^"]+"(\s+or\s+"[^"]+")*\s*$', line):
            current = names
            offered.update(names)
        elif current and "deprecated" in line.lower():
            deprecated.update(current)
    return offered, deprecated


def query_fields(offered=None, deprecated=()):
    """The fields to ask this driver for (all of QUERY_FIELDS when it did not say)."""
    if not offered:
        return list(QUERY_FIELDS)
    fields = list(REQUIRED_FIELDS) + [f for f in MIG_FIELDS if f in offered]
    drivers = [f for f in DRIVER_FIELDS if f in offered]
    current = [f for f in drivers if f not in deprecated]
    fields += (current or drivers)[:1]
    return fields


def normalize_gpu(row, position=0):
    """One parsed query row -> the fact layout of a GPU."""
    current = _mig_mode(row.get("mig.mode.current"))
    pending = _mig_mode(row.get("mig.mode.pending"))
    index = to_int(row.get("index"))
    device_id = clean_value(row.get("pci.device_id"))
    return {
        "index": position if index is None else index,
        "name": clean_value(row.get("name")),
        "uuid": clean_value(row.get("uuid")),
        "pci_bus_id": clean_value(row.get("pci.bus_id")),
        "pci_device_id": device_id.lower() if device_id else None,
        "memory_mib": to_int(row.get("memory.total")),
        # MIG-capable GPUs report Enabled/Disabled; others a placeholder.
        "mig_capable": current in ("enabled", "disabled"),
        "mig_mode_current": current,
        "mig_mode_pending": pending,
        "driver_version": _driver_version(row),
        "source": "nvidia-smi",
    }


XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)[, ]*(.*)")


def last_xid(kernel_log):
    """The last `NVRM: Xid (PCI:...): N, ...` line of a kernel log, or None."""
    found = None
    for line in (kernel_log or "").splitlines():
        match = XID_RE.search(line)
        if match:
            found = "Xid %s on %s%s" % (match.group(2), match.group(1),
                                        (": " + match.group(3).strip()) if match.group(3).strip() else "")
    return found


def classify_smi_error(rc, output, in_container=False, kernel_module=None, kernel_log=None):
    """Explain a failed nvidia-smi run: (code, reason, nvml_version).

    Codes: driver_not_loaded, driver_library_mismatch, no_devices, gpu_lost / gpu_unreachable /
    gpu_xid (hardware: reboot, then the GPU's health), nvml_container_cgroup (the container lost
    its device access: runtime/cgroup), nvidia_smi_timeout, nvidia_smi_failed.
    """
    text = (output or "").strip()
    match = re.search(r"NVML library version:\s*(\S+)", text)
    nvml = match.group(1) if match else None
    lowered = text.lower()
    first = text.splitlines()[0] if text else "no output"
    xid = last_xid(kernel_log)
    if rc == 124 and not text:  # killed by timeout(1): a hung GPU or driver
        return ("nvidia_smi_timeout", "nvidia-smi did not answer in time (hung GPU or driver?)%s"
                % ("; kernel log: %s" % xid if xid else ""), nvml)
    if "couldn't communicate with the nvidia driver" in lowered:
        return ("driver_not_loaded",
                "nvidia-smi cannot reach the kernel driver (module not loaded or not built for "
                "the running kernel): %s" % first, nvml)
    if "driver/library version mismatch" in lowered:
        loaded = " %s" % kernel_module if kernel_module else ""
        if nvml:
            reason = "NVML library %s does not match the loaded kernel module%s" % (nvml, loaded)
        else:
            reason = "the NVML library (user-space driver) does not match the loaded kernel module%s" % loaded
        return ("driver_library_mismatch", reason + " (driver upgraded without reboot?)", nvml)
    if "gpu is lost" in lowered:
        return ("gpu_lost", "hardware: %s%s" % (first, "; kernel log: %s" % xid if xid else ""), nvml)
    if "unable to determine the device handle" in lowered:
        return ("gpu_unreachable", "hardware: %s%s" % (first, "; kernel log: %s" % xid if xid else ""), nvml)
    if xid:
        return ("gpu_xid", "hardware: nvidia-smi failed (%s) and the kernel log has %s" % (first, xid), nvml)
    if "failed to initialize nvml: unknown error" in lowered and in_container:
        return ("nvml_container_cgroup",
                "runtime/cgroup: %s inside a container - the container lost its access to the GPU device "
                "nodes (systemd reloaded its cgroup devices; NVIDIA/nvidia-container-toolkit#48)" % first, nvml)
    if "no devices were found" in lowered:
        return ("no_devices", "nvidia-smi found no GPU: No devices were found", nvml)
    return ("nvidia_smi_failed", "nvidia-smi exited with rc=%s: %s" % (rc, first), nvml)


# --- kernel module -------------------------------------------------------------

_PROC_VERSION_RE = re.compile(
    r"^NVRM version:\s+NVIDIA UNIX\s+"
    r"(?:(?P<open>Open) Kernel Module for (?P<arch1>\S+)|(?P<arch2>\S+) Kernel Module)"
    r"\s+(?P<version>\d+(?:\.\d+)+)")


def parse_proc_version(text):
    """/proc/driver/nvidia/version, open and proprietary formats.

    Open:        NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build ...
    Proprietary: NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ...
    Returns None when no NVRM line is found.
    """
    result = None
    gcc = None
    for line in (text or "").splitlines():
        match = _PROC_VERSION_RE.match(line.strip())
        if match:
            result = {
                "version": match.group("version"),
                "flavor": "open" if match.group("open") else "proprietary",
                "arch": match.group("arch1") or match.group("arch2"),
            }
        elif line.strip().startswith("GCC version:"):
            gcc = line.split(":", 1)[1].strip()
    if result is not None:
        result["gcc"] = gcc
    return result


def parse_lsmod(text):
    """`lsmod` output or /proc/modules -> {module: [users]}."""
    modules = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[0] == "Module":
            continue
        users = []
        if len(parts) >= 4 and parts[3] not in ("-", "Live", "Loading", "Unloading"):
            users = [u for u in parts[3].strip(",").split(",") if u]
        modules[parts[0]] = users
    return modules


# --- container toolkit and runtimes ----------------------------------------------

def parse_tool_version(text):
    """`nvidia-ctk --version` / `nvidia-container-runtime --version` -> (version, commit)."""
    version = commit = None
    for line in (text or "").splitlines():
        if version is None:
            match = re.search(r"\bversion\s+v?(\d+\.\d+\.\d+\S*)", line)
            if match:
                version = match.group(1)
        match = re.match(r"^\s*commit:\s*(\S+)", line)
        if match and commit is None:
            commit = match.group(1)
    return version, commit


def _split_toml_key(key):
    parts = []
    for match in re.finditer(r'"([^"]*)"|\'([^\']*)\'|([^.\s]+)', key):
        parts.append(next(g for g in match.groups() if g is not None))
    return tuple(parts)


def _toml_scalar(raw):
    raw = raw.strip()
    if raw[:1] in ('"', "'"):
        end = raw.find(raw[0], 1)
        return raw[1:end] if end > 0 else raw[1:]
    raw = raw.split("#", 1)[0].strip()
    if raw in ("true", "false"):
        return raw == "true"
    if raw.startswith("["):
        return [a or b for a, b in re.findall(r'"([^"]*)"|\'([^\']*)\'', raw)]
    return raw


def parse_toml_flat(text):
    """Tiny TOML reader: {(table..., key): scalar}. Enough for runtime configs.

    Managed nodes may run Python < 3.11 (no tomllib); containerd and CRI-O
    configs only need tables, dotted/quoted keys, strings, bools, arrays.
    """
    flat = {}
    table = ()
    for line in (text or "").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        header = re.match(r"^\[\[?\s*(.+?)\s*\]\]?\s*(#.*)?$", stripped)
        if header:
            table = _split_toml_key(header.group(1))
            flat.setdefault(table, {})  # an empty table still declares a runtime
            continue
        kv = re.match(r'^((?:"[^"]*"|\'[^\']*\'|[\w.-]+)(?:\s*\.\s*(?:"[^"]*"|\'[^\']*\'|[\w-]+))*)\s*=\s*(.*)$',
                      stripped)
        if kv:
            flat[table + _split_toml_key(kv.group(1))] = _toml_scalar(kv.group(2))
    return flat


def inspect_containerd(texts):
    """containerd config(s) -> runtimes, nvidia runtime, default runtime.

    Works for config version 1/2 (`plugins."io.containerd.grpc.v1.cri".containerd`)
    and 3 (`plugins."io.containerd.cri.v1.runtime".containerd`): any table path
    ending in `containerd.runtimes.<name>` is a runtime.
    """
    flat = {}
    for text in texts:
        flat.update(parse_toml_flat(text))
    runtimes = {}
    default = None
    v1_default = {"binary": None}   # config v1: [..containerd.default_runtime] table
    shim_v1 = None                  # config v1: [plugins.linux] / io.containerd.runtime.v1.linux runtime
    for path, value in flat.items():
        entry = None
        if "runtimes" in path:
            pos = len(path) - 1 - path[::-1].index("runtimes")
            if pos >= 1 and path[pos - 1] == "containerd" and pos + 1 < len(path):
                entry = runtimes.setdefault(path[pos + 1], {"binary": None})
        elif "default_runtime" in path and path[path.index("default_runtime") - 1] == "containerd":
            entry = v1_default
        if entry is not None and isinstance(value, str) and value:
            # BinaryName (runc.v2 shim) wins over the v1 shim's Runtime and the old runtime_engine
            if path[-1] == "BinaryName" or (path[-1] in ("Runtime", "runtime_engine") and not entry.get("from_bin")):
                entry["binary"] = value
                entry["from_bin"] = entry.get("from_bin") or path[-1] == "BinaryName"
        if path[-1] == "default_runtime_name" and len(path) >= 2 and path[-2] == "containerd":
            default = value
        if path[-1] == "runtime" and len(path) == 3 and path[1] in ("linux", "io.containerd.runtime.v1.linux"):
            shim_v1 = value
    if default is None and v1_default["binary"]:
        runtimes["default_runtime"] = v1_default
        default = "default_runtime"
    elif default is None and shim_v1:
        runtimes["runtime.v1.linux"] = {"binary": shim_v1}
        default = "runtime.v1.linux"
    for entry in runtimes.values():
        entry.pop("from_bin", None)
    return _runtime_summary(runtimes, default or "runc")


def inspect_crio(texts):
    """CRI-O crio.conf (+ crio.conf.d drop-ins) -> same summary as containerd."""
    flat = {}
    for text in texts:
        flat.update(parse_toml_flat(text))
    runtimes = {}
    default = None
    for path, value in flat.items():
        if len(path) >= 4 and path[:3] == ("crio", "runtime", "runtimes"):
            entry = runtimes.setdefault(path[3], {"binary": None})
            if path[-1] == "runtime_path":
                entry["binary"] = value
        if path == ("crio", "runtime", "default_runtime") and isinstance(value, str):
            default = value
    return _runtime_summary(runtimes, default or "crun")


def _runtime_summary(runtimes, default):
    nvidia = sorted(name for name, entry in runtimes.items()
                    if NVIDIA_RUNTIME_NAME in name or NVIDIA_RUNTIME_NAME in (entry.get("binary") or ""))
    binaries = [runtimes[name]["binary"] for name in nvidia if runtimes[name]["binary"]]
    return {
        "runtimes": sorted(runtimes),
        "nvidia_runtimes": nvidia,
        "nvidia_runtime": bool(nvidia),
        "default_runtime": default,
        "nvidia_default": default in nvidia,
        # Runtime binary under the operator's toolkit dir = operator-managed.
        "operator_managed": any(b.startswith(OPERATOR_TOOLKIT_DIR) for b in binaries),
    }


# --- os, kernel, PCI ---------------------------------------------------------------

def parse_os_release(text):
    values = {}
    for line in (text or "").splitlines():
        match = re.match(r'^\s*([A-Z_]+)=(.*)$', line)
        if match:
            values[match.group(1)] = match.group(2).strip().strip('"').strip("'")
    os_id = values.get("ID", "").lower()
    like = values.get("ID_LIKE", "").lower().split()
    if os_id in ("debian", "ubuntu") or "debian" in like:
        family = "debian"
    elif os_id in ("rhel", "rocky", "almalinux", "centos", "fedora") or "rhel" in like or "fedora" in like:
        family = "redhat"
    else:
        family = os_id or "unknown"
    version = values.get("VERSION_ID", "")
    return {
        "id": os_id,
        "version_id": version,
        "major": version.split(".")[0] if version else "",
        "family": family,
        "pretty_name": values.get("PRETTY_NAME", ""),
        "supported": is_supported_os(os_id, version),
    }


def is_supported_os(os_id, version):
    wanted = SUPPORTED_OS.get(os_id)
    if not wanted:
        return False
    if os_id in ("rhel", "rocky"):
        return version.split(".")[0] in wanted
    return version in wanted


def headers_package(os_family, kernel_release):
    """Package name that provides build headers for kernel_release."""
    if os_family == "debian":
        return "linux-headers-%s" % kernel_release
    if os_family == "redhat":
        return "kernel-devel-%s" % kernel_release
    return None


def headers_paths(kernel_release):
    return ["/lib/modules/%s/build" % kernel_release,
            "/usr/src/linux-headers-%s" % kernel_release,
            "/usr/src/kernels/%s" % kernel_release]


# --- gathering ------------------------------------------------------------------------

class HostReader(object):
    """File access relative to a root (/ normally, a fake tree in tests)."""

    def __init__(self, root="/"):
        self.root = root or "/"

    def path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def read(self, path):
        try:
            with open(self.path(path)) as handle:
                return handle.read()
        except (IOError, OSError):
            return None

    def exists(self, path):
        return os.path.exists(self.path(path))

    def resolve_exists(self, path):
        """exists() that follows absolute symlinks inside the root."""
        full = self.path(path)
        if os.path.exists(full):
            return True
        if os.path.islink(full):
            target = os.readlink(full)
            if target.startswith("/"):
                return os.path.exists(self.path(target))
        return False

    def glob(self, pattern):
        return sorted(glob.glob(self.path(pattern)))

    def which(self, name):
        for directory in BIN_DIRS:
            candidate = self.path(os.path.join(directory, name))
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        return None


def read_pci_gpus(reader):
    """NVIDIA display controllers (and NVSwitches) from sysfs."""
    gpus, switches = [], []
    for dev in reader.glob("/sys/bus/pci/devices/*"):
        try:
            with open(os.path.join(dev, "vendor")) as handle:
                vendor = handle.read().strip().lower()
            with open(os.path.join(dev, "class")) as handle:
                pci_class = handle.read().strip().lower()
            with open(os.path.join(dev, "device")) as handle:
                device = handle.read().strip().lower()
        except (IOError, OSError):
            continue
        if vendor != NVIDIA_PCI_VENDOR:
            continue
        entry = {"address": os.path.basename(dev), "device_id": device, "class": pci_class}
        if pci_class.startswith(PCI_CLASS_DISPLAY_PREFIX):
            gpus.append(entry)
        elif pci_class.startswith(PCI_CLASS_BRIDGE_OTHER):
            switches.append(entry)
    return gpus, switches


def _run_tool(run, path, args):
    rc, out, err = run([path] + list(args))
    return rc, (out or "") + (("\n" + err) if err and rc != 0 else "")


def _query_gpus(run, smi_path):
    """Ask for the fields this driver offers (--help-query-gpu); drop a field it refuses
    (`Field "x" is not a valid field to query.`, rc 2) and ask again. (rc, output, fields)."""
    rc, text = _run_tool(run, smi_path, ["--help-query-gpu"])
    fields = query_fields(*parse_help_query_gpu(text)) if rc == 0 else list(QUERY_FIELDS)
    for _attempt in range(MAX_FIELD_RETRIES + 1):
        rc, out = _run_tool(run, smi_path, ["--query-gpu=" + ",".join(fields), "--format=csv"])
        refused = INVALID_FIELD_RE.search(out or "") if rc != 0 else None
        if not refused or refused.group(1) not in fields or refused.group(1) in REQUIRED_FIELDS:
            return rc, out, fields
        fields = [f for f in fields if f != refused.group(1)]
    return rc, out, fields


def in_container(reader):
    """True inside a container (docker, podman, a Kubernetes pod)."""
    if reader.exists("/.dockerenv") or reader.exists("/run/.containerenv"):
        return True
    cgroup = reader.read("/proc/1/cgroup") or ""
    return any(word in cgroup for word in ("kubepods", "docker", "containerd", "libpod"))


def _kernel_log(reader, run):
    """The kernel log (dmesg) when readable: it names Xid errors nvidia-smi does not print."""
    dmesg = reader.which("dmesg")
    if not dmesg:
        return None
    rc, out, _err = run([dmesg])
    return out if rc == 0 else None


def gather(reader, run, kernel_release, nvidia_smi=None, nvidia_ctk=None,
           nvidia_container_runtime=None):
    """Collect every GPU-node fact. `run(argv) -> (rc, stdout, stderr)`.

    Binaries default to a lookup under the reader's root.
    """
    facts = {"schema": SCHEMA_VERSION}
    facts["os"] = parse_os_release(reader.read("/etc/os-release") or reader.read("/usr/lib/os-release"))

    # Kernel modules and the driver's own version file.
    modules = parse_lsmod(reader.read("/proc/modules"))
    proc = parse_proc_version(reader.read("/proc/driver/nvidia/version"))
    # The operator's driver container mounts its rootfs at /run/nvidia/driver.
    operator_driver = reader.exists(OPERATOR_DRIVER_ROOT + "/usr/bin/nvidia-smi")

    smi_path = nvidia_smi or reader.which("nvidia-smi")
    gpus, smi_error, fields = [], None, []
    if smi_path:
        rc, out, fields = _query_gpus(run, smi_path)
        if rc == 0:
            try:
                gpus = [normalize_gpu(row, i) for i, row in enumerate(parse_query_gpu(out, fields))]
            except ValueError as exc:
                smi_error = ("unparsable_output", str(exc), None)
            if not gpus and smi_error is None:
                smi_error = ("no_devices", "nvidia-smi listed no GPU", None)
        else:
            smi_error = classify_smi_error(rc, out, in_container=in_container(reader),
                                           kernel_module=(proc or {}).get("version"),
                                           kernel_log=_kernel_log(reader, run))

    pci_gpus, switches = read_pci_gpus(reader)
    pci_total = len(reader.glob("/sys/bus/pci/devices/*"))
    driver = {
        "state": DRIVER_NONE,
        "version": None,
        "nvidia_smi": smi_path,
        "module_loaded": "nvidia" in modules or proc is not None,
        "kernel_module": proc,
        "reason_code": None,
        "reason": None,
        "nvml_version": None,
    }
    if gpus:
        driver["state"] = DRIVER_HOST
        driver["version"] = gpus[0]["driver_version"] or (proc or {}).get("version")
    elif smi_error is not None:
        driver["state"] = DRIVER_BROKEN
        driver["reason_code"], driver["reason"], driver["nvml_version"] = smi_error
        driver["version"] = (proc or {}).get("version") or smi_error[2]
    elif operator_driver:
        driver["state"] = DRIVER_OPERATOR
        driver["version"] = (proc or {}).get("version")
    elif driver["module_loaded"]:
        driver["state"] = DRIVER_BROKEN
        driver["reason_code"] = "userspace_missing"
        driver["reason"] = ("the nvidia kernel module is loaded but nvidia-smi is not installed "
                            "and no GPU Operator driver container is present")
        driver["version"] = (proc or {}).get("version")
    if not gpus and not pci_gpus and pci_total and driver["state"] == DRIVER_BROKEN \
            and driver["reason_code"] in ("no_devices", "driver_not_loaded", "userspace_missing", "nvidia_smi_failed"):
        # NVIDIA software on a host without an NVIDIA GPU (a CPU node built from a GPU image,
        # a VM whose GPU was detached): not a broken GPU host, not part of the plan.
        driver["state"] = DRIVER_NONE
        driver["reason_code"] = "no_nvidia_pci_device"
        driver["reason"] = ("NVIDIA driver software is installed but the host has no NVIDIA PCI device "
                            "(%d PCI devices, none of vendor %s; nvidia-smi: %s)"
                            % (pci_total, NVIDIA_PCI_VENDOR, smi_error[1]))
        driver["software_without_gpu"] = True
    driver["present"] = driver["state"] in (DRIVER_HOST, DRIVER_BROKEN)
    driver["working"] = driver["state"] == DRIVER_HOST
    driver["query_fields"] = fields
    facts["driver"] = driver

    if not gpus:
        gpus = [{"index": i, "name": None, "uuid": None, "pci_bus_id": p["address"],
                 "pci_device_id": p["device_id"], "memory_mib": None, "mig_capable": None,
                 "mig_mode_current": None, "mig_mode_pending": None, "driver_version": None,
                 "source": "pci"} for i, p in enumerate(pci_gpus)]
    facts["gpus"] = gpus
    facts["gpu_count"] = len(gpus)
    facts["pci_gpu_count"] = len(pci_gpus)
    facts["nvswitch_count"] = len(switches)
    facts["gpu_host"] = bool(gpus) or driver["state"] in (DRIVER_HOST, DRIVER_BROKEN, DRIVER_OPERATOR)
    facts["nouveau_loaded"] = "nouveau" in modules
    facts["nvidia_modules"] = sorted(m for m in modules if m.startswith("nvidia"))

    facts["toolkit"] = _gather_toolkit(reader, run, nvidia_ctk, nvidia_container_runtime)
    facts["container_runtime"] = _gather_runtimes(reader)
    if facts["container_runtime"]["operator_managed"] and facts["toolkit"]["state"] == TOOLKIT_NONE:
        facts["toolkit"]["state"] = TOOLKIT_OPERATOR

    kernel = {"release": kernel_release}
    found = [p for p in headers_paths(kernel_release) if reader.resolve_exists(p)]
    kernel["headers_installed"] = bool(found)
    kernel["headers_path"] = found[0] if found else None
    kernel["headers_package"] = headers_package(facts["os"]["family"], kernel_release)
    facts["kernel"] = kernel
    return facts


def _gather_toolkit(reader, run, nvidia_ctk, nvidia_container_runtime):
    toolkit = {"state": TOOLKIT_NONE, "version": None, "commit": None,
               "nvidia_ctk": nvidia_ctk or reader.which("nvidia-ctk"),
               "nvidia_container_runtime": nvidia_container_runtime or reader.which("nvidia-container-runtime"),
               "config_present": reader.exists("/etc/nvidia-container-runtime/config.toml"),
               "operator_dir_present": reader.exists(OPERATOR_TOOLKIT_DIR)}
    for tool in ("nvidia_ctk", "nvidia_container_runtime"):
        if toolkit[tool] and toolkit["version"] is None:
            rc, out = _run_tool(run, toolkit[tool], ["--version"])
            if rc == 0:
                toolkit["version"], toolkit["commit"] = parse_tool_version(out)
    if toolkit["nvidia_ctk"] or toolkit["nvidia_container_runtime"]:
        toolkit["state"] = TOOLKIT_HOST
    elif toolkit["operator_dir_present"]:
        toolkit["state"] = TOOLKIT_OPERATOR
    return toolkit


def _gather_runtimes(reader):
    result = {"containerd": None, "crio": None, "nvidia_runtime": False,
              "nvidia_default": False, "operator_managed": False}
    main = reader.read("/etc/containerd/config.toml")
    if main is not None:
        texts = [main]
        imports = parse_toml_flat(main).get(("imports",)) or []
        if isinstance(imports, str):
            imports = [imports]
        seen = set()
        for pattern in list(imports) + ["/etc/containerd/conf.d/*.toml"]:
            for path in reader.glob(pattern):
                if path not in seen:
                    seen.add(path)
                    with open(path) as handle:
                        texts.append(handle.read())
        result["containerd"] = inspect_containerd(texts)
    crio_texts = [t for t in [reader.read("/etc/crio/crio.conf")] if t is not None]
    for path in reader.glob("/etc/crio/crio.conf.d/*"):
        with open(path) as handle:
            crio_texts.append(handle.read())
    if crio_texts:
        result["crio"] = inspect_crio(crio_texts)
    for name in ("containerd", "crio"):
        summary = result[name]
        if summary:
            result["nvidia_runtime"] = result["nvidia_runtime"] or summary["nvidia_runtime"]
            result["nvidia_default"] = result["nvidia_default"] or summary["nvidia_default"]
            result["operator_managed"] = result["operator_managed"] or summary["operator_managed"]
    return result
