# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""driver_plan: who installs the NVIDIA driver and toolkit, cluster-wide.

Pure function over the gpu_node facts of every GPU host (see gpu_node_facts),
behind the filter skaffon.gpu_platform.driver_plan. A driver or toolkit already working on
a node is kept there (the per-node deploy labels switch the operator's copy off on it); the
GPU Operator installs them on the nodes that lack them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import to_bool
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import (
    LABEL_DEPLOY_DRIVER,
    LABEL_DEPLOY_TOOLKIT,
)

FACTS_KEY = "gpu_node"


class DriverPlanError(DomainError):
    """A wrong input of the plan (the filter raises it as AnsibleFilterError)."""


# Issue codes the node_prereqs role itself repairs (it may run while they hold).
HOST_FIXABLE = ("nouveau_loaded", "kernel_headers_missing")

_FIX_BROKEN = {
    "driver_not_loaded": "rebuild/reinstall the driver for the running kernel (DKMS) or reboot into "
                         "the kernel it was built for",
    "driver_library_mismatch": "reboot so the kernel module matches the upgraded user-space driver, "
                               "or reinstall one consistent driver version",
    "userspace_missing": "reinstall the driver package (nvidia-smi and NVML are missing)",
    "gpu_lost": "hardware: reboot the node to recover the GPU; if it happens again, check the GPU "
                "(Xid errors in dmesg, power, cooling, seating) with the hardware vendor",
    "gpu_unreachable": "hardware: reboot the node; if the GPU stays unreachable, check it (Xid errors in "
                       "dmesg) with the hardware vendor",
    "gpu_xid": "hardware: read the Xid in dmesg (NVIDIA Xid catalog), reboot the node; a repeating Xid "
               "(for example 79, fallen off the bus) needs the hardware vendor",
    "nvml_container_cgroup": "runtime/cgroup: recreate the container (it regains the devices); to stop it "
                             "recurring use CDI or nvidia-ctk's /dev/char symlinks (NVIDIA/nvidia-container-toolkit#48)",
}
_FIX_BROKEN_DEFAULT = "repair the host driver so nvidia-smi answers"


def _facts_of(value):
    """Accept a hostvars entry, an ansible_facts dict or the gpu_node dict."""
    if not isinstance(value, Mapping):
        return None
    if FACTS_KEY in value and isinstance(value[FACTS_KEY], Mapping):
        return value[FACTS_KEY]
    facts = value.get("ansible_facts")
    if isinstance(facts, Mapping) and isinstance(facts.get(FACTS_KEY), Mapping):
        return facts[FACTS_KEY]
    if "driver" in value and "gpu_host" in value:
        return value
    return None


def _node_name(host, value):
    if isinstance(value, Mapping) and value.get("node_prereqs_node_name"):
        return str(value["node_prereqs_node_name"])
    return str(host)


def _bool_or_none(name, value):
    if value is None or to_bool(value) is not None:
        return None if value is None else to_bool(value)
    raise DriverPlanError("driver_plan: %s must be true, false or null (auto), got %r" % (name, value))


def _issue(issues, code, nodes, message):
    issues.append({"severity": "error", "code": code, "nodes": sorted(nodes), "message": message})


def _warn(issues, code, nodes, message):
    issues.append({"severity": "warning", "code": code, "nodes": sorted(nodes), "message": message})


def _setting(name, override, auto, overrides, warnings):
    """The final value of a chart setting: the override when given (recorded, warned when it differs)."""
    if override is None:
        return auto
    overrides.append({"setting": name, "value": override, "auto": auto})
    if override != auto:
        warnings.append("%s=%s set explicitly (override); the facts alone give %s"
                        % (name, str(override).lower(), str(auto).lower()))
    return override


def driver_plan(hosts, driver_enabled=None, toolkit_enabled=None, driver_precompiled=False,
                only=None, group=None):
    """Plan driver.enabled / toolkit.enabled and per-node deploy labels.

    hosts: mapping host -> hostvars/facts (hostvars works) or a list of
    gpu_node facts dicts carrying a `node` key. `only` limits a mapping to
    those hosts (e.g. groups['gpu_nodes']). driver_enabled/toolkit_enabled:
    explicit overrides (null = decide from the facts). group: the inventory group the hosts
    come from, named when none of them reports a GPU.
    """
    driver_enabled = _bool_or_none("driver_enabled", driver_enabled)
    toolkit_enabled = _bool_or_none("toolkit_enabled", toolkit_enabled)

    entries = []
    if isinstance(hosts, Mapping):
        names = list(only) if only is not None else list(hosts.keys())
        for host in names:
            if host not in hosts:
                raise DriverPlanError("driver_plan: host %r from `only` is not in the input" % host)
            entries.append((host, hosts[host]))
    elif isinstance(hosts, (list, tuple)):
        for item in hosts:
            if not isinstance(item, Mapping) or not item.get("node"):
                raise DriverPlanError("driver_plan: list items must be gpu_node facts with a `node` key")
            entries.append((item["node"], item))
    else:
        raise DriverPlanError("driver_plan: expected a mapping of host -> facts (hostvars) or a list, got %s"
                              % type(hosts).__name__)

    issues = []
    nodes = {}
    missing, ignored, ignored_why = [], [], {}
    for host, value in entries:
        facts = _facts_of(value)
        node = _node_name(host, value)
        if facts is None:
            missing.append(node)
            continue
        if not facts.get("gpu_host"):
            ignored.append(node)
            why = (facts.get("driver") or {}).get("reason")
            if (facts.get("driver") or {}).get("software_without_gpu") and why:
                ignored_why[node] = why
            continue
        driver = facts.get("driver") or {}
        toolkit = facts.get("toolkit") or {}
        runtime = facts.get("container_runtime") or {}
        kernel = facts.get("kernel") or {}
        nodes[node] = {
            "driver": driver.get("state", "none"),
            "driver_version": driver.get("version"),
            "driver_reason": driver.get("reason"),
            "driver_reason_code": driver.get("reason_code"),
            "toolkit": toolkit.get("state", "none"),
            "toolkit_version": toolkit.get("version"),
            "nvidia_runtime": bool(runtime.get("nvidia_runtime")),
            "nvidia_default_runtime": bool(runtime.get("nvidia_default")),
            "nouveau_loaded": bool(facts.get("nouveau_loaded")),
            "headers_installed": bool(kernel.get("headers_installed")),
            "headers_package": kernel.get("headers_package"),
            "kernel_release": kernel.get("release"),
            "gpu_count": facts.get("gpu_count", 0),
        }

    if missing:
        _issue(issues, "facts_missing", missing,
               "no gpu_node facts for %s: run skaffon.gpu_platform.gpu_node_facts on them first"
               % ", ".join(sorted(missing)))

    host_driver = sorted(n for n, v in nodes.items() if v["driver"] == "host")
    broken = sorted(n for n, v in nodes.items() if v["driver"] == "broken")
    host_toolkit = sorted(n for n, v in nodes.items() if v["toolkit"] == "host")
    overrides = []
    warnings_only = []

    # Driver: all host -> false; none -> true; mixed -> true + labels. The same for the toolkit.
    final_driver = _setting("driver.enabled", driver_enabled, not (nodes and len(host_driver) == len(nodes)),
                            overrides, warnings_only)
    final_toolkit = _setting("toolkit.enabled", toolkit_enabled, not (nodes and len(host_toolkit) == len(nodes)),
                             overrides, warnings_only)

    # Host-driver/toolkit nodes are labelled whatever the fleet looks like: the
    # label is required when the fleet is mixed and harmless when the operator
    # deploys no driver at all, so a --limit run or a node joining later never
    # leaves a preinstalled node without it.
    node_labels = dict((n, {}) for n in sorted(nodes))
    for name, node in nodes.items():
        node["operator_installs_driver"] = final_driver and node["driver"] != "host"
        node["operator_installs_toolkit"] = final_toolkit and node["toolkit"] != "host"
        if node["driver"] == "host":
            node_labels[name][LABEL_DEPLOY_DRIVER] = "false"
        if node["toolkit"] == "host":
            node_labels[name][LABEL_DEPLOY_TOOLKIT] = "false"

    for code in sorted(set(nodes[n]["driver_reason_code"] for n in broken), key=str):
        group = [n for n in broken if nodes[n]["driver_reason_code"] == code]
        reasons = "; ".join("%s: %s" % (n, nodes[n]["driver_reason"]) for n in group)
        _issue(issues, "driver_broken", group,
               "broken host driver on %s (%s). Fix: %s, or remove the host driver packages so the GPU "
               "Operator installs its own." % (", ".join(group), reasons, _FIX_BROKEN.get(code, _FIX_BROKEN_DEFAULT)))

    operator_nodes = sorted(n for n, v in nodes.items() if v["operator_installs_driver"])
    nouveau = [n for n in operator_nodes if nodes[n]["nouveau_loaded"]]
    if nouveau:
        _issue(issues, "nouveau_loaded", nouveau,
               "nouveau is loaded on %s where the GPU Operator must install the driver. Fix: blacklist "
               "nouveau, rebuild the initramfs and reboot (role skaffon.gpu_platform.node_prereqs does "
               "the first two)." % ", ".join(nouveau))
    if not driver_precompiled:
        no_headers = [n for n in operator_nodes if not nodes[n]["headers_installed"] and nodes[n]["driver"] != "operator"]
        if no_headers:
            detail = ", ".join("%s (%s)" % (n, nodes[n]["headers_package"] or "headers for " +
                                            str(nodes[n]["kernel_release"])) for n in no_headers)
            _issue(issues, "kernel_headers_missing", no_headers,
                   "kernel headers for the running kernel are missing on %s where the GPU Operator must "
                   "build the driver. Fix: install them (role skaffon.gpu_platform.node_prereqs), or use "
                   "precompiled driver images (driver.usePrecompiled) and pass driver_precompiled=true."
                   % detail)
    if not final_driver:
        without = sorted(n for n, v in nodes.items() if v["driver"] != "host")
        if without:
            _warn(issues, "nodes_without_driver", without,
                  "driver.enabled=false but %s have no working host driver: their GPUs will not be served"
                  % ", ".join(without))
    if not final_toolkit:
        no_default = sorted(n for n in host_toolkit if not nodes[n]["nvidia_default_runtime"])
        if no_default:
            _issue(issues, "runtime_not_default", no_default,
                   "toolkit.enabled=false needs nvidia as the default container runtime, not set on %s. "
                   "Fix: nvidia-ctk runtime configure --runtime=containerd --set-as-default (or "
                   "--runtime=crio) and restart the runtime." % ", ".join(no_default))
        without = sorted(n for n, v in nodes.items() if v["toolkit"] != "host")
        if without:
            _warn(issues, "nodes_without_toolkit", without,
                  "toolkit.enabled=false but %s have no host container toolkit" % ", ".join(without))
    else:
        unconfigured = sorted(n for n in host_toolkit if not nodes[n]["nvidia_runtime"])
        if unconfigured:
            _warn(issues, "host_toolkit_unconfigured", unconfigured,
                  "host toolkit on %s is kept (labelled %s=false) but no nvidia runtime is configured in "
                  "containerd/CRI-O: run nvidia-ctk runtime configure" % (", ".join(unconfigured), LABEL_DEPLOY_TOOLKIT))

    versions = {}
    for name in host_driver:
        versions.setdefault(nodes[name]["driver_version"] or "unknown", []).append(name)
    if len(versions) > 1:
        listing = "; ".join("%s on %s" % (v, ", ".join(versions[v])) for v in sorted(versions))
        _warn(issues, "driver_version_drift", host_driver, "host driver versions differ: %s" % listing)

    if not nodes and not missing and ignored:
        # Hosts named as GPU nodes that all report none: planning nothing would let the install
        # carry on with no labels and a readiness wait that checks no node.
        _issue(issues, "no_gpu_nodes", ignored,
               "none of the %d host(s) of %s reports an NVIDIA GPU (%s), so there is nothing to plan "
               "and the GPU Operator would serve no GPU. Likely causes: the facts were read from the "
               "wrong root (gpu_node_facts_root / node_prereqs_facts_root point at a directory that is "
               "not the host's /), the group holds hosts that are not the GPU servers, or a typo in the "
               "group (gpu_operator_gpu_hosts). Fix the root or the group so it lists the GPU servers."
               % (len(ignored), ("group %s" % group) if group else "the input", ", ".join(sorted(ignored))))
    elif not nodes and not missing:
        _warn(issues, "no_gpu_nodes", [], "no GPU node in the input: nothing to plan")
    if ignored and nodes:
        _warn(issues, "not_gpu_hosts", ignored, "no NVIDIA GPU found on %s; left out of the plan%s" % (
            ", ".join(ignored), "".join(" (%s: %s)" % (n, ignored_why[n]) for n in sorted(ignored_why))))

    warnings = warnings_only + [i["message"] for i in issues if i["severity"] == "warning"]
    return {
        "driver_enabled": final_driver,
        "toolkit_enabled": final_toolkit,
        "driver_source": "override" if driver_enabled is not None else "facts",
        "toolkit_source": "override" if toolkit_enabled is not None else "facts",
        "overrides": overrides,
        "node_labels": node_labels,
        "nodes": nodes,
        "driver_versions": dict((v, sorted(n)) for v, n in versions.items()),
        "warnings": warnings,
        "errors": [i["message"] for i in issues if i["severity"] == "error"],
        "issues": issues,
        "blocking_errors": [i["message"] for i in issues
                            if i["severity"] == "error" and i["code"] not in HOST_FIXABLE],
        "ignored_nodes": sorted(ignored),
    }
