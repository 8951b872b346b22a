# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sharing configs for the NVIDIA device plugin (time-slicing or MPS): validate, render, place.

Each named config becomes one key of a ConfigMap in the operator namespace,
selected cluster-wide by ClusterPolicy devicePlugin.config.default or per node
by the label nvidia.com/device-plugin.config. A config shares GPUs by
`sharing.timeSlicing` or by `sharing.mps` (the same ReplicatedResources format,
k8s-device-plugin api/config/v1/sharing.go); one rendering and one trust rule
for both. Replicas share a GPU without fault isolation (MPS: one MPS server per
GPU for all clients; time-slicing: no memory isolation either), so pools marked
for tenants of different trust are refused unless explicitly overridden.

What the device plugin refuses for MPS, read in NVIDIA/k8s-device-plugin (1b826ac):
  * MIG devices: internal/plugin/mps.go getMPSOptions "sharing using MPS is not supported
    for MIG devices" (a MIG-enabled GPU under mig strategy single);
  * the mixed MIG strategy: cmd/nvidia-device-plugin/main.go validateFlags "using
    --mig-strategy=mixed is not supported with MPS" -- the GPU Operator sets MIG_STRATEGY
    from ClusterPolicy mig.strategy on every device plugin (controllers/object_controls.go
    applyMIGConfiguration), and the environment wins over the config file's flags;
  * more replicas than an MPS server takes clients: cmd/mps-control-daemon/mps/device.go
    maxClients, 48 (compute capability >= 7.5 in its isAtLeastVolta), else 16;
  * replicas < 2: api/config/v1/replicas.go "number of replicas must be >= 2".
failRequestsGreaterThanOne defaults to true for MPS (api/config/v1/config.go).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
from collections.abc import Mapping

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.plain import plain
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import (
    GPU_RESOURCE,
    GPU_SHARED_RESOURCE,
    LABEL_GPU_COUNT,
    LABEL_GPU_REPLICAS,
    LABEL_DEVICE_PLUGIN_CONFIG,
    LABEL_GPU_PRESENT,
    LABEL_GPU_SHARING_STRATEGY,
    LABEL_MIG_CONFIG,
    MIG_CONFIG_ALL_DISABLED,
    MIG_STRATEGIES,
)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import is_label_value, with_suggestions

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    HAS_YAML = False

SHARING_ONLY_KEYS = ("renameByDefault", "failRequestsGreaterThanOne")
STRUCTURED_KEYS = ("replicas", "resources", "rename_by_default", "fail_requests_greater_than_one",
                   "mig_strategy", "strategy")
TIME_SLICING = "time-slicing"
MPS = "mps"
STRATEGIES = (TIME_SLICING, MPS)
# sharing.<key> of the device plugin config per strategy (api/config/v1/sharing.go)
SHARING_KEY = {TIME_SLICING: "timeSlicing", MPS: "mps"}
# cmd/mps-control-daemon/mps/device.go maxClients (Volta and newer; 16 before)
MPS_MAX_CLIENTS = 48


class TimeSlicingError(DomainError):
    """Bad time-slicing input; the message names the field and the fix."""


def _structured_to_config(name, spec):
    unknown = sorted(set(spec) - set(STRUCTURED_KEYS))
    if unknown:
        raise TimeSlicingError("time-slicing config %s: unknown keys %s (known: %s)"
                               % (name, ", ".join(unknown), ", ".join(STRUCTURED_KEYS)))
    if "resources" in spec:
        resources = spec["resources"]
    elif "replicas" in spec:
        resources = [{"name": GPU_RESOURCE, "replicas": spec["replicas"]}]
    else:
        raise TimeSlicingError("time-slicing config %s needs replicas (or resources)" % name)
    strategy = spec.get("strategy") or TIME_SLICING
    if strategy not in STRATEGIES:
        raise TimeSlicingError("time-slicing config %s: strategy must be %s, got %r"
                               % (name, " or ".join(STRATEGIES), strategy))
    if spec.get("replicas") == 1 and "resources" not in spec:
        # Whole GPUs: a config without sharing (a safe default next to per-node sharing).
        config = {"version": "v1"}
        if spec.get("mig_strategy") is not None:
            config["flags"] = {"migStrategy": spec["mig_strategy"]}
        return config
    sharing = {"resources": resources}
    if "rename_by_default" in spec:
        sharing["renameByDefault"] = bool(spec["rename_by_default"])
    if "fail_requests_greater_than_one" in spec:
        sharing["failRequestsGreaterThanOne"] = bool(spec["fail_requests_greater_than_one"])
    config = {"version": "v1", "sharing": {SHARING_KEY[strategy]: sharing}}
    if spec.get("mig_strategy") is not None:
        config["flags"] = {"migStrategy": spec["mig_strategy"]}
    return config


def _validate_config(name, config):
    where = "time-slicing config %s" % name
    if not isinstance(config, dict) or config.get("version") != "v1":
        raise TimeSlicingError("%s: must be a device plugin config with version: v1" % where)
    flags = config.get("flags") or {}
    misplaced = [k for k in SHARING_ONLY_KEYS if k in flags]
    if misplaced:
        raise TimeSlicingError(
            "%s: %s under flags is ignored by the device plugin (k8s-device-plugin#1433); move it to "
            "sharing.timeSlicing.%s" % (where, ", ".join(misplaced), misplaced[0]))
    if flags.get("migStrategy") is not None and flags["migStrategy"] not in MIG_STRATEGIES:
        raise TimeSlicingError("%s: flags.migStrategy must be one of %s" % (where, ", ".join(MIG_STRATEGIES)))
    if "sharing" not in config:
        return  # whole GPUs, no sharing
    sharing = config.get("sharing") or {}
    present = [k for k in ("timeSlicing", "mps") if k in sharing]
    if len(present) > 1:
        raise TimeSlicingError(
            "%s: sharing sets both timeSlicing and mps; the device plugin uses mps and ignores timeSlicing "
            "(api/config/v1/sharing.go SharingStrategy): keep one of them" % where)
    if not present:
        raise TimeSlicingError("%s: sharing.timeSlicing (or sharing.mps) is missing" % where)
    key = present[0]
    ts = sharing[key]
    if not isinstance(ts, dict):
        raise TimeSlicingError("%s: sharing.%s must be a mapping with resources" % (where, key))
    resources = ts.get("resources")
    if not isinstance(resources, list) or not resources:
        raise TimeSlicingError("%s: sharing.%s.resources must list {name, replicas}" % (where, key))
    for i, res in enumerate(resources):
        if not isinstance(res, dict) or not str(res.get("name", "")).startswith("nvidia.com/"):
            raise TimeSlicingError("%s: resources[%d].name must be an nvidia.com/ resource such as %s"
                                   % (where, i, GPU_RESOURCE))
        replicas = res.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2:
            raise TimeSlicingError("%s: resources[%d].replicas must be an integer >= 2 (for whole GPUs use a "
                                   "config with replicas: 1 and no resources), got %r" % (where, i, replicas))
        if key == "mps" and res["name"] != GPU_RESOURCE:
            raise TimeSlicingError(
                "%s: sharing.mps.resources[%d].name is %s: MPS shares whole GPUs only (%s); the device plugin "
                "refuses MPS on MIG devices (\"sharing using MPS is not supported for MIG devices\"). Use "
                "time-slicing for MIG slices" % (where, i, res["name"], GPU_RESOURCE))
        if key == "mps" and replicas > MPS_MAX_CLIENTS:
            raise TimeSlicingError(
                "%s: sharing.mps.resources[%d].replicas is %d: an MPS server takes at most %d clients per GPU "
                "(16 before Volta); the MPS control daemon refuses more (\"maximum allowed replicas exceeded\")"
                % (where, i, replicas, MPS_MAX_CLIENTS))
    for flag in SHARING_ONLY_KEYS:
        if flag in ts and not isinstance(ts[flag], bool):
            raise TimeSlicingError("%s: sharing.%s.%s must be true or false" % (where, key, flag))
    if key == "mps" and flags.get("migStrategy") == "mixed":
        raise TimeSlicingError(
            "%s: flags.migStrategy mixed with sharing.mps: the device plugin refuses it (\"using "
            "--mig-strategy=mixed is not supported with MPS\"); drop flags.migStrategy" % where)


def strategy_of(config):
    """time-slicing, mps or None (whole GPUs) for a validated config."""
    sharing = config.get("sharing") or {}
    if "mps" in sharing:
        return MPS
    return TIME_SLICING if "timeSlicing" in sharing else None


def expected_replicas(config):
    """(advertised resource, replicas) for whole GPUs, or None when nothing or only MIG devices are shared."""
    strategy = strategy_of(config)
    if strategy is None:
        return None
    ts = config["sharing"][SHARING_KEY[strategy]]
    for res in ts["resources"]:
        if res["name"] == GPU_RESOURCE:
            advertised = GPU_SHARED_RESOURCE if ts.get("renameByDefault") else GPU_RESOURCE
            return {"resource": advertised, "replicas": res["replicas"], "strategy": strategy}
    return None


def render(spec):
    """Validate and render `gpu_operator_time_slicing` into ConfigMap data and expectations."""
    if not HAS_YAML:
        raise TimeSlicingError("PyYAML is required")
    if not isinstance(spec, dict):
        raise TimeSlicingError("gpu_operator_time_slicing must be a dict with configmap, default, configs, nodes")
    spec = plain(spec)
    configs = spec.get("configs") or {}
    if not isinstance(configs, dict) or not configs:
        raise TimeSlicingError("gpu_operator_time_slicing.configs must name at least one config")
    name = spec.get("configmap") or "time-slicing-config"
    data, parsed = {}, {}
    for key in sorted(configs):
        # a config name is a ConfigMap key and the value of the device plugin's config label
        if not is_label_value(str(key), allow_empty=False):
            raise TimeSlicingError("time-slicing config name %r must be a valid label value "
                                   "(<= 63 of [A-Za-z0-9-_.], alphanumeric at both ends)" % (key,))
        value = configs[key]
        if isinstance(value, str):
            try:
                config = yaml.safe_load(value)
            except yaml.YAMLError as exc:
                raise TimeSlicingError("time-slicing config %s is not valid YAML: %s" % (key, exc))
        elif isinstance(value, dict):
            config = _structured_to_config(key, value)
        else:
            raise TimeSlicingError("time-slicing config %s must be a dict or a YAML string" % key)
        _validate_config(key, config)
        parsed[key] = config
        data[key] = value if isinstance(value, str) else yaml.safe_dump(config, default_flow_style=False, sort_keys=False)
    default = spec.get("default") or ""
    if default and default not in configs:
        raise TimeSlicingError("gpu_operator_time_slicing.default %r is not one of the configs: %s"
                               % (default, ", ".join(sorted(configs))))
    nodes = spec.get("nodes") or {}
    for node, key in nodes.items():
        if key not in configs:
            raise TimeSlicingError("gpu_operator_time_slicing.nodes.%s selects %r, not one of the configs: %s"
                                   % (node, key, ", ".join(sorted(configs))))
    checksum = hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    return {
        "configmap": name,
        "default": default,
        # Nodes without a label get the default, or else an empty config (whole GPUs): the
        # GPU Operator runs config-manager with FALLBACK_STRATEGIES=empty.
        "effective_default": default,
        "data": data,
        "nodes": dict(nodes),
        "node_labels": dict((n, {LABEL_DEVICE_PLUGIN_CONFIG: k}) for n, k in nodes.items()),
        "expected": dict((k, expected_replicas(c)) for k, c in parsed.items()),
        # configs that share by MPS: the chart values then carry devicePlugin.mps.root
        "mps_configs": sorted(k for k, c in parsed.items() if strategy_of(c) == MPS),
        "checksum": checksum,
    }


# The Node labels the rules here read (with the trust label the caller names).
VIEW_LABELS = (LABEL_GPU_PRESENT, LABEL_DEVICE_PLUGIN_CONFIG, LABEL_MIG_CONFIG, LABEL_GPU_COUNT, LABEL_GPU_REPLICAS,
               LABEL_GPU_SHARING_STRATEGY)


def node_view(nodes, trust_label=None):
    """The part of each Node the rules here read: name, the labels of VIEW_LABELS (and trust_label),
    status.capacity. A Node list from the API is large (status, images, managedFields, a hundred
    labels); this view is what a caller converts or copies (at 1000 nodes, 0.3 s instead of 3.6 s for
    Ansible to make every Node plain data)."""
    keys = VIEW_LABELS + ((trust_label,) if trust_label else ())
    out = []
    for node in nodes or ():
        if not isinstance(node, Mapping):
            raise TimeSlicingError("nodes must be the resources of a Node list (kubernetes.core.k8s_info), got an "
                                   "item %r" % (node,))
        meta = node.get("metadata") or {}
        status = node.get("status") or {}
        labels = meta.get("labels") or {}
        picked = dict((key, labels.get(key)) for key in keys if labels.get(key) is not None)
        out.append({"metadata": {"name": meta.get("name"), "labels": picked},
                    "status": {"capacity": dict(status.get("capacity") or {})}})
    return out


def placement(rendered, cluster_nodes, gpu_nodes=()):
    """Which config each GPU node ends up with: {node: key}; nodes without any are left out.

    The role owns the nvidia.com/device-plugin.config label while it manages
    time-slicing (nodes outside `nodes` lose it), so a node gets its entry of
    `nodes` or else the effective default. GPU nodes are those labelled
    nvidia.com/gpu.present=true or named in gpu_nodes (the driver plan knows
    them before the operator has labelled anything)."""
    result = {}
    gpu_nodes = set(gpu_nodes or ())
    for node in cluster_nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        name = meta.get("name")
        if name in rendered["nodes"]:
            result[name] = rendered["nodes"][name]
        elif rendered["effective_default"] and (labels.get(LABEL_GPU_PRESENT) == "true" or name in gpu_nodes):
            result[name] = rendered["effective_default"]
    return result


def stale_labels(rendered, cluster_nodes):
    """Nodes carrying nvidia.com/device-plugin.config although `nodes` does not select them."""
    return sorted(n["metadata"]["name"] for n in cluster_nodes
                  if LABEL_DEVICE_PLUGIN_CONFIG in ((n.get("metadata") or {}).get("labels") or {})
                  and n["metadata"]["name"] not in rendered["nodes"])


def check_nodes_exist(rendered, cluster_nodes):
    """Refuse `nodes` entries naming no node of the cluster: the role owns the selection label,
    so a typo would silently take the label (and the config) off the node that was meant."""
    known = sorted((n.get("metadata") or {}).get("name") for n in cluster_nodes)
    names = set(known)
    unknown = sorted(n for n in rendered["nodes"] if n not in names)
    if unknown:
        raise TimeSlicingError(
            "gpu_operator_time_slicing.nodes names %s, not a node of the cluster; known nodes: %s. Use the "
            "Kubernetes node names (kubectl get nodes). Nothing was changed."
            % (with_suggestions(unknown, known), ", ".join(known)))


def _mode_name(rendered, key):
    want = rendered["expected"].get(key) or {}
    return "MPS" if want.get("strategy") == MPS else "time-slicing"


def check_mps(rendered, placed, cluster_nodes, mig_strategy=None):
    """Refuse MPS where the device plugin refuses it: a node whose GPUs run MIG (label
    nvidia.com/mig.config other than all-disabled), or any MPS node while the operator passes the
    mixed MIG strategy to every device plugin (MIG_STRATEGY wins over the config's flags)."""
    mps_nodes = sorted(n for n, k in placed.items() if (rendered["expected"].get(k) or {}).get("strategy") == MPS)
    if not mps_nodes:
        return
    if mig_strategy == "mixed":
        raise TimeSlicingError(
            "MPS refused on %s: gpu_operator_mig_strategy is mixed, and the GPU Operator passes it to every device "
            "plugin as MIG_STRATEGY, which the plugin refuses with MPS (\"using --mig-strategy=mixed is not "
            "supported with MPS\"). Use time-slicing for these nodes, or the single (or none) MIG strategy"
            % ", ".join(mps_nodes))
    labels = dict(((n.get("metadata") or {}).get("name"), (n.get("metadata") or {}).get("labels") or {})
                  for n in cluster_nodes)
    mig_nodes = ["%s (%s=%s, config %s)" % (n, LABEL_MIG_CONFIG, labels[n][LABEL_MIG_CONFIG], placed[n])
                 for n in mps_nodes
                 if labels.get(n, {}).get(LABEL_MIG_CONFIG) not in (None, "", MIG_CONFIG_ALL_DISABLED)]
    if mig_nodes:
        raise TimeSlicingError(
            "MPS refused on %s: the device plugin does not share MIG devices by MPS (\"sharing using MPS is not "
            "supported for MIG devices\"). Select a time-slicing config or whole GPUs for these nodes, or set "
            "their MIG layout to %s (mig_profile) first" % (", ".join(mig_nodes), MIG_CONFIG_ALL_DISABLED))


def check_trust(rendered, cluster_nodes, trust_label, mixed_values, allow_mixed_trust=False, gpu_nodes=(),
                mig_strategy=None):
    """Refuse unknown nodes, MPS where the device plugin refuses it, and sharing (time-slicing or
    MPS) where tenants of different trust share GPUs."""
    check_nodes_exist(rendered, cluster_nodes)
    placed = placement(rendered, cluster_nodes, gpu_nodes)
    check_mps(rendered, placed, cluster_nodes, mig_strategy)
    offenders = []
    for node in cluster_nodes:
        meta = node.get("metadata") or {}
        value = (meta.get("labels") or {}).get(trust_label)
        if rendered["expected"].get(placed.get(meta.get("name"))) and value in mixed_values:
            mode = _mode_name(rendered, placed[meta["name"]])
            offenders.append("%s (%s=%s, config %s%s)" % (meta["name"], trust_label, value, placed[meta["name"]],
                                                          ", MPS" if mode == "MPS" else ""))
    if offenders and not allow_mixed_trust:
        modes = sorted(set("MPS" if o.endswith(", MPS)") else "time-slicing" for o in offenders))
        raise TimeSlicingError(
            "%s refused on %s: replicas of a shared GPU share memory and faults (time-slicing: no memory "
            "isolation; MPS: a fatal GPU exception of one client reaches every client of that GPU, MPS docs "
            "\"Error Containment\"), so tenants "
            "of different trust must not share it. Use MIG or whole GPUs for that pool (no default, or a default "
            "config with replicas: 1), move the config to a single-trust pool, or set gpu_operator_time_slicing_allow_mixed_trust=true "
            "to accept the risk."
            % (" and ".join(reversed(modes)), ", ".join(sorted(offenders))))
    return {"placement": placed, "mixed_trust_nodes": sorted(offenders),
            "stale_label_nodes": stale_labels(rendered, cluster_nodes)}


def pending(rendered, cluster_nodes, gpu_nodes=()):
    """Nodes not (yet) advertising what their config promises, as readable lines.

    A node is done when nvidia.com/gpu.replicas matches and, when the node says
    how many GPUs it has (nvidia.com/gpu.count), its capacity of the advertised
    resource equals GPUs x replicas."""
    placed = placement(rendered, cluster_nodes, gpu_nodes)
    lines = []
    for node in cluster_nodes:
        meta = node.get("metadata") or {}
        key = placed.get(meta.get("name"))
        want = rendered["expected"].get(key) if key else None
        if not want:
            continue
        labels = meta.get("labels") or {}
        count = int(labels.get(LABEL_GPU_COUNT, 0) or 0)
        capacity = int(((node.get("status") or {}).get("capacity") or {}).get(want["resource"], 0) or 0)
        replicas = labels.get(LABEL_GPU_REPLICAS)
        # GFD labels nvidia.com/gpu.sharing-strategy=mps for an MPS config (internal/lm/resource.go)
        strategy = labels.get(LABEL_GPU_SHARING_STRATEGY)
        wrong_strategy = want.get("strategy") == MPS and strategy != MPS
        if replicas != str(want["replicas"]) or (count and capacity != count * want["replicas"]) or wrong_strategy:
            lines.append("%s (config %s: want %s replicas of %s%s; has %s=%s%s, capacity %s for %s GPUs)" % (
                meta["name"], key, want["replicas"], want["resource"],
                " shared by MPS" if want.get("strategy") == MPS else "", LABEL_GPU_REPLICAS, replicas,
                ", %s=%s" % (LABEL_GPU_SHARING_STRATEGY, strategy) if want.get("strategy") == MPS else "",
                capacity, count))
    return lines
