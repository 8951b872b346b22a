"""Inventory directories shaped like inventories/example/ for the pool, MIG, time-slicing and
bad-input tests (no tests here).

hosts.yml: localhost and the GPU hosts in node-pool groups under gpu_nodes;
group_vars/all.yml: cluster access and operator settings; group_vars/<pool>.yml: the
pool naming, taints and MIG profile, copied from inventories/example/ where it has them;
host_vars/<host>.yml: the local root node_prereqs' read-only detection reads (an H100
answering with a real nvidia-smi capture, an L40S seen in sysfs only, no driver).
"""
import json
import os
import stat

import yaml

from kit import paths
from kit.paths import BIN, REPO
from kit.roots import put as _put

FIXTURES = paths.NVIDIA_SMI
CHART = paths.gpu_operator_chart("v26.7.0")
CRDS = [paths.CLUSTERPOLICY_CRD, paths.NVIDIADRIVER_CRD]
EXAMPLE = os.path.join(REPO, "inventories", "example")
H100_SMI = "h100-80gb-hbm3_mig-enabled__590.48.01__query-gpu.csv"
H100_DRIVER = "590.48.01"


def example_pool(name):
    with open(os.path.join(EXAMPLE, "group_vars", name + ".yml")) as handle:
        return yaml.safe_load(handle)


def cluster_file(path, extra_nodes=()):
    """The example fleet as a simulated cluster: gpu-h100-1/2 (host driver), gpu-l40s-1 (none), cpu-1."""
    h100 = {"model": "NVIDIA-H100-80GB-HBM3", "count": 2, "memory_mib": 81559, "mig_capable": True}
    nodes = [
        {"name": "gpu-h100-1", "gpus": h100, "host_driver": H100_DRIVER},
        {"name": "gpu-h100-2", "gpus": h100, "host_driver": H100_DRIVER},
        {"name": "gpu-l40s-1", "gpus": {"model": "NVIDIA-L40S", "count": 4, "memory_mib": 46068,
                                        "mig_capable": False}, "host_driver": None},
        {"name": "cpu-1"},
    ] + list(extra_nodes)
    with open(path, "w") as handle:
        yaml.safe_dump({"crds": CRDS, "nodes": nodes}, handle)
    return path


def h100_root(base):
    root = os.path.join(base, "roots", "h100")
    _put(root, "/etc/os-release", 'ID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n')
    smi = _put(root, "/opt/bin/nvidia-smi", "#!/bin/sh\ncat '%s'\n" % os.path.join(FIXTURES, H100_SMI),
               stat.S_IRWXU)
    return {"node_prereqs_facts_root": root, "node_prereqs_nvidia_smi_path": smi}


def l40s_root(base):
    root = os.path.join(base, "roots", "l40s")
    _put(root, "/etc/os-release", 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12"\n')
    for name, value in (("vendor", "0x10de"), ("device", "0x26b9"), ("class", "0x030200")):
        _put(root, "/sys/bus/pci/devices/0000:01:00.0/" + name, value + "\n")
    return {"node_prereqs_facts_root": root, "node_prereqs_kernel_release": "6.1.0-1-amd64"}


def operator_settings(sim, **extra):
    """group_vars/all.yml: what an air-gapped site sets for the operator (the real chart archive)."""
    values = {
        "gpu_operator_chart_version": "v26.7.0",
        "gpu_operator_chart_source": "archive",
        "gpu_operator_chart_ref": CHART,
        "gpu_operator_helm_binary": os.path.join(BIN, "helm3"),
        # once for the site: every role's <role>_kubeconfig defaults to it
        "gpu_platform_kubeconfig": sim.kubeconfig,
        "gpu_operator_wait_timeout": 60,
        "gpu_operator_wait_stable_for": 2,
    }
    values.update(extra)
    return values


def write_inventory(base, sim, all_vars=None, pools=None, host_vars=None, pool_vars=None):
    """The example inventory's pools (hosts, group_vars) with simulator access; returns its directory.

    pools: {group: [hosts]} (default: the example's two pools); pool_vars: {group: vars} merged
    over the example's group_vars of that pool; host_vars: {host: vars} merged over the
    detection roots."""
    base = str(base)
    inv = os.path.join(base, "inventory")
    for sub in ("group_vars", "host_vars"):
        os.makedirs(os.path.join(inv, sub), exist_ok=True)
    pools = pools or {"pool_h100_nvlink_training": ["gpu-h100-1", "gpu-h100-2"],
                      "pool_l40s_inference": ["gpu-l40s-1"]}
    hosts = {"all": {"hosts": {"localhost": {"ansible_connection": "local"}},
                     "children": {"gpu_nodes": {"children": dict(
                         (pool, {"hosts": dict((h, None) for h in members)}) for pool, members in pools.items())}}}}
    _dump(os.path.join(inv, "hosts.yml"), hosts)
    settings = operator_settings(sim)
    settings.update(all_vars or {})
    _dump(os.path.join(inv, "group_vars", "all.yml"), settings)
    gpu = {"ansible_connection": "local", "ansible_become": False, "node_prereqs_prepare_host": False,
           "node_prereqs_label_prefix": "gpu.skaffon.io/",
           # precompiled driver images: the L40S root has no kernel headers to install
           "node_prereqs_driver_precompiled": True}
    _dump(os.path.join(inv, "group_vars", "gpu_nodes.yml"), gpu)
    for pool, members in pools.items():
        try:
            data = example_pool(pool)
        except OSError:
            data = {}
        data.update((pool_vars or {}).get(pool, {}))
        _dump(os.path.join(inv, "group_vars", pool + ".yml"), data)
        for host in members:
            hv = h100_root(base) if "h100" in host else l40s_root(base) if "l40s" in host else {}
            hv.update((host_vars or {}).get(host, {}))
            _dump(os.path.join(inv, "host_vars", host + ".yml"), hv)
    return inv


def _dump(path, data):
    with open(path, "w") as handle:
        handle.write("---\n" + yaml.safe_dump(json.loads(json.dumps(data)), default_flow_style=False))


def writes(stats):
    """Writes that reached the API in a /_sim/stats snapshot: {resource: n} of
    create/update/patch/delete requests. Where the simulator counts dryRun=All requests
    apart (stats["dry_run"]), by_resource holds only real writes; older simulators count
    dry runs with them, so check-mode assertions need the newer one."""
    out = {}
    for resource, verbs in (stats.get("by_resource") or {}).items():
        n = sum(count for verb, count in verbs.items() if verb in WRITE_VERBS)
        if n:
            out[resource] = n
    return out


WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def env_without_kubeconfig(sim):
    """The simulator's environment as a plain dict (no harness inventory either): the playbooks
    reach the cluster through this inventory's gpu_platform_kubeconfig (module_defaults) alone."""
    return dict(sim.env)
