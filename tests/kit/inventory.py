"""Inventory directories for the integration tests, shaped like inventories/example/.

hosts.yml: localhost (the control node) and the GPU hosts in node-pool groups under
gpu_nodes; group_vars/all.yml: cluster access and the operator settings;
group_vars/<pool>.yml per pool; host_vars/<host>.yml: the host root the read-only
detection reads (gpu_node_facts_root), laid out from real nvidia-smi captures by
scripts/demo.py's builders. Playbooks then get `-e` only for what a person types.
"""
import importlib.util
import os

import yaml

from kit.paths import REPO
KERNEL = "6.8.0-45-generic"


def _demo():
    spec = importlib.util.spec_from_file_location("gpu_platform_demo", os.path.join(REPO, "scripts", "demo.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def host_root(base, host, host_driver):
    """A GPU host's root: an H100 with a working driver, or an L40S without one."""
    demo = _demo()
    if not os.path.isdir(demo.FIXTURES):
        import pytest
        pytest.skip("real nvidia-smi captures not found at %s" % demo.FIXTURES)
    root = os.path.join(str(base), "hosts", host)
    if not os.path.isdir(root):
        (demo.h100_with_host_driver if host_driver else demo.l40s_without_driver)(root)
    return root


def write_inventory(base, pools, all_vars, with_roots=True, pool_vars=None):
    """pools: {pool group: {host: has_host_driver}}; returns the inventory directory."""
    inv = os.path.join(str(base), "inventory")
    os.makedirs(os.path.join(inv, "group_vars"), exist_ok=True)
    os.makedirs(os.path.join(inv, "host_vars"), exist_ok=True)
    hosts = {"all": {"hosts": {"localhost": {"ansible_connection": "local"}},
                     "children": {"gpu_nodes": {"children": dict(
                         (pool, {"hosts": dict((h, None) for h in members)}) for pool, members in pools.items())}}}}
    _dump(os.path.join(inv, "hosts.yml"), hosts)
    _dump(os.path.join(inv, "group_vars", "all.yml"), all_vars)
    # the GPU hosts are laid-out roots on this machine, read with a local connection
    _dump(os.path.join(inv, "group_vars", "gpu_nodes.yml"), {"ansible_connection": "local", "ansible_become": False})
    for pool, members in pools.items():
        _dump(os.path.join(inv, "group_vars", pool + ".yml"), (pool_vars or {}).get(pool, {"pool": pool}))
        for host, driver in members.items():
            hv = {}
            if with_roots:
                hv = {"gpu_node_facts_root": host_root(base, host, driver), "gpu_node_facts_kernel_release": KERNEL}
            _dump(os.path.join(inv, "host_vars", host + ".yml"), hv)
    return inv


def _dump(path, data):
    with open(path, "w") as fh:
        fh.write("---\n" + yaml.safe_dump(data, default_flow_style=False))
