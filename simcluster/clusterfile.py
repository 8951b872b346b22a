"""Cluster file: what the simulated cluster is made of (nodes, faults, timings).

load(path) returns a validated, normalised dict; mistakes raise ClusterFileError
naming the field and the fix. The format is documented in
docs/simcluster-clusterfile.md; examples live in tests/clusters/.
"""

import os
import re

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
DEFAULT_MIG_PARTED = os.path.join(SHARED, "upstream", "gpu-operator", "default-mig-parted-config.yaml")

DEFAULT_TIMINGS = {
    "pod_start": 0.1,         # bound pod -> containers running
    "operand_start": 0.2,     # GPU operator operand pods (device plugin, GFD, ...) -> ready
    "driver_install": 0.3,    # operator-managed driver pod -> ready
    "mig_reconfigure": 0.3,   # mig-manager pending -> success/failed
    "image_pull_backoff": 0.2,  # ErrImagePull -> ImagePullBackOff
    "job_run": 0.1,           # run-to-completion pods: Running -> Succeeded
    "crash_backoff": 0.2,     # container error -> CrashLoopBackOff
    "mpi_launch_timeout": 0.5,  # nccl-tests launcher: how long mpirun waits for its workers
    "load_tick": 0.05,        # load.py twin: wall seconds per simulated second of its run
    "train_step": 0.05,       # acceptance programs: wall seconds per simulated second (one training step)
    "dra_wipe_delay": 0.3,    # kubelet: a DRA driver's slices go this long after its plugin stops (real: 30 s)
}
FAULTS = {
    "operator_validator_crashloop": list,   # node names: validator pod in Init:CrashLoopBackOff
    "nfd_labels_missing": bool,             # NFD never labels nodes -> NFDLabelsMissing
    "mig_pending_forever": list,            # node names: mig.config.state stays pending
    "mig_apply_fails": list,                # node names: mig-parted fails to apply -> failed
    "device_plugin_crashloop": list,        # node names: device plugin pod CrashLoopBackOff
    "image_pull_fail": list,                # image references that never pull
    "api_errors": list,                     # API requests answered with an error (api_faults.py)
    "gpu_xid": list,                        # [{node, gpu, xid, lost?}]: DCGM exporter (simcluster/dcgm.py)
    "gpu_overheat": list,                   # [{node, gpu, temp}]
    "gpu_ecc_dbe": list,                    # [{node, gpu, count}]
    "dcgm_exporter_down": list,             # node names: the exporter endpoint answers 503
    "nccl_degraded_link": list,             # node names or {node, fraction}: its fabric link is slower
    "nccl_wrong_results": list,             # node names: all-reduce results through it are wrong
}
STRUCTURED_FAULTS = ("image_pull_fail", "gpu_xid", "gpu_overheat", "gpu_ecc_dbe")  # not node-name lists
DEGRADED_FRACTION = 0.25    # nccl_degraded_link without a fraction: a link at a quarter of its rate
NFD_MODES = ("operator", "preinstalled", "absent")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NODE_KEYS = {"name", "gpus", "host_driver", "host_toolkit", "host_toolkit_config", "labels", "taints", "cpu", "memory",
             "pods", "ephemeral_storage", "unschedulable", "role", "mig_config", "machine",
             "container_runtime", "default_runtime", "kernel", "os_image", "annotations", "fabric"}
GPU_KEYS = {"model", "count", "memory_mib", "mig_capable", "nvlink_bus_bandwidth_gbps"}
FABRIC_KEYS = {"name", "bus_bandwidth_gbps"}
TOP_KEYS = {"crds", "nodes", "faults", "timings", "registries", "nfd", "mig_parted_config",
            "name", "description", "kubernetes_version", "audit", "storage_classes", "workload"}
STORAGE_CLASS_KEYS = {"name", "default", "provisioner", "reclaim_policy", "volume_binding_mode",
                      "allow_volume_expansion", "parameters"}
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
RECLAIM_POLICIES = ("Delete", "Retain")
WORKLOAD_KEYS = {"data_sources", "download_mbps", "training", "serving"}
TRAINING_DEFAULTS = {"samples_per_second_per_gpu": {"default": 100.0}, "checkpoint_bytes": 1073741824,
                     "checkpoint_write_mbps": 2000.0, "restore_mbps": 4000.0}
SERVING_DEFAULTS = {"latency_ms": {"p50": 40.0, "p90": 70.0, "p99": 120.0}, "rps_per_replica": 50.0}
DOWNLOAD_MBPS = 500.0


class ClusterFileError(ValueError):
    pass


def _err(path, msg):
    raise ClusterFileError("%s: %s" % (path, msg))


def load(path):
    """Read and validate a cluster file; relative paths resolve against its folder."""
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    return validate(data, os.path.dirname(os.path.abspath(path)), source=path)


def validate(data, base_dir=".", source="cluster file"):
    if not isinstance(data, dict):
        _err(source, "top level must be a mapping with at least `nodes:`")
    unknown = set(data) - TOP_KEYS
    if unknown:
        _err(source, "unknown key(s) %s; allowed: %s" % (sorted(unknown), sorted(TOP_KEYS)))
    spec = {"name": data.get("name") or os.path.splitext(os.path.basename(str(source)))[0],
            "description": data.get("description") or ""}
    crds = data.get("crds") or []
    if not isinstance(crds, list):
        _err("crds", "must be a list of file paths")
    spec["crds"] = [os.path.normpath(os.path.join(base_dir, p)) for p in crds]
    mpc = data.get("mig_parted_config")
    spec["mig_parted_config"] = (os.path.normpath(os.path.join(base_dir, mpc)) if mpc
                                 else DEFAULT_MIG_PARTED)
    nfd = data.get("nfd", "operator")
    if nfd not in NFD_MODES:
        _err("nfd", "must be one of %s, got %r" % (", ".join(NFD_MODES), nfd))
    spec["nfd"] = nfd
    regs = data.get("registries")
    if regs is not None and (not isinstance(regs, list) or not all(isinstance(r, str) for r in regs)):
        _err("registries", "must be a list of registry hosts (e.g. [registry.local:5000])")
    spec["registries"] = regs
    spec["kubernetes_version"] = str(data.get("kubernetes_version") or "v1.35.0")
    audit = data.get("audit")
    if audit is not None:
        if not isinstance(audit, dict) or not isinstance(audit.get("policy"), str) or set(audit) - {"policy", "log"}:
            _err("audit", "must be {policy: FILE (an audit.k8s.io/v1 Policy), log: PATH (optional, JSON lines)}")
        if audit.get("log") is not None and not isinstance(audit["log"], str):
            _err("audit.log", "must be a file path")
        spec["audit"] = {"policy": os.path.normpath(os.path.join(base_dir, audit["policy"])),
                         "log": os.path.normpath(os.path.join(base_dir, audit["log"])) if audit.get("log") else None}

    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        _err("nodes", "must be a non-empty list of nodes (each needs at least `name:`)")
    seen = set()
    spec["nodes"] = []
    for i, node in enumerate(nodes):
        spec["nodes"].append(_node(node, "nodes[%d]" % i, seen))

    faults = data.get("faults") or {}
    if not isinstance(faults, dict):
        _err("faults", "must be a mapping")
    out_faults = {}
    for key, value in faults.items():
        if key not in FAULTS:
            _err("faults.%s" % key, "unknown fault; known: %s" % ", ".join(sorted(FAULTS)))
        if not isinstance(value, FAULTS[key]):
            _err("faults.%s" % key, "must be a %s" % FAULTS[key].__name__)
        if key == "api_errors":
            from .api_faults import validate as validate_api_errors  # local, like gpu_models
            try:
                value = validate_api_errors(value)
            except ValueError as exc:
                raise ClusterFileError(str(exc))
        elif key == "nccl_degraded_link":
            value = _degraded_links(value, seen)
        elif FAULTS[key] is list and key not in STRUCTURED_FAULTS:
            for name in value:
                if name not in seen:
                    _err("faults.%s" % key, "node %r is not in nodes" % name)
        out_faults[key] = value
    if any(k in out_faults for k in STRUCTURED_FAULTS[1:]):
        from .dcgm import FaultError, validate_faults  # local: keeps load() importable alone
        try:
            validate_faults(out_faults, seen)
        except FaultError as exc:
            _err("faults", str(exc))
    spec["faults"] = out_faults

    timings = dict(DEFAULT_TIMINGS)
    for key, value in (data.get("timings") or {}).items():
        if key not in DEFAULT_TIMINGS:
            _err("timings.%s" % key, "unknown timing; known: %s" % ", ".join(sorted(DEFAULT_TIMINGS)))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            _err("timings.%s" % key, "must be a number of seconds >= 0, got %r" % (value,))
        timings[key] = float(value)
    spec["timings"] = timings
    spec["storage_classes"] = _storage_classes(data.get("storage_classes"))
    spec["workload"] = _workload(data.get("workload"))
    return spec


def _storage_classes(value):
    """StorageClasses created at start (a CSI driver's install creates them on a real cluster)."""
    if value is None:
        return []
    if not isinstance(value, list):
        _err("storage_classes", "must be a list of {name, provisioner, default: true|false}")
    out, seen = [], set()
    for i, sc in enumerate(value):
        where = "storage_classes[%d]" % i
        if isinstance(sc, str):
            sc = {"name": sc}
        if not isinstance(sc, dict):
            _err(where, "must be a mapping {name, provisioner, default}, got %r" % (sc,))
        unknown = set(sc) - STORAGE_CLASS_KEYS
        if unknown:
            _err(where, "unknown key(s) %s; allowed: %s" % (sorted(unknown), sorted(STORAGE_CLASS_KEYS)))
        name = sc.get("name")
        if not isinstance(name, str) or not _DNS1123.match(name) or len(name) > 253:
            _err(where + ".name", "must be a DNS-1123 subdomain (a StorageClass name), got %r" % (name,))
        if name in seen:
            _err(where + ".name", "duplicate StorageClass %r" % name)
        seen.add(name)
        provisioner = sc.get("provisioner", "simcluster.skaffon.io/hostpath")
        if not isinstance(provisioner, str) or not provisioner:
            _err(where + ".provisioner", "must be the CSI driver name (e.g. nfs.csi.k8s.io), got %r" % (provisioner,))
        default = sc.get("default", False)
        if not isinstance(default, bool):
            _err(where + ".default", "must be true or false, got %r" % (default,))
        mode = sc.get("volume_binding_mode", "Immediate")
        if mode not in BINDING_MODES:
            _err(where + ".volume_binding_mode", "must be one of %s, got %r" % (", ".join(BINDING_MODES), mode))
        policy = sc.get("reclaim_policy", "Delete")
        if policy not in RECLAIM_POLICIES:
            _err(where + ".reclaim_policy", "must be one of %s, got %r" % (", ".join(RECLAIM_POLICIES), policy))
        expand = sc.get("allow_volume_expansion", False)
        if not isinstance(expand, bool):
            _err(where + ".allow_volume_expansion", "must be true or false, got %r" % (expand,))
        params = sc.get("parameters") or {}
        if not isinstance(params, dict):
            _err(where + ".parameters", "must be a mapping of strings")
        out.append({"name": name, "provisioner": provisioner, "default": default,
                    "volume_binding_mode": mode, "reclaim_policy": policy,
                    "allow_volume_expansion": expand,
                    "parameters": {str(k): str(v) for k, v in params.items()}})
    return out


def _rate(value, where, unit="MB/s"):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        _err(where, "must be a number of %s > 0, got %r" % (unit, value))
    return float(value)


def _count_bytes(value, where):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _err(where, "must be a whole number of bytes >= 0, got %r" % (value,))
    return value


def _workload(value):
    """What the acceptance programs (stage.py, train.py, load.py) find in the simulated cluster."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        _err("workload", "must be a mapping with data_sources, download_mbps, training, serving")
    unknown = set(value) - WORKLOAD_KEYS
    if unknown:
        _err("workload", "unknown key(s) %s; allowed: %s" % (sorted(unknown), sorted(WORKLOAD_KEYS)))
    sources = value.get("data_sources") or {}
    if not isinstance(sources, dict):
        _err("workload.data_sources", "must map a URL to {bytes: N}")
    out_sources = {}
    for url, entry in sources.items():
        where = "workload.data_sources[%r]" % (url,)
        if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url):
            _err(where, "the key must be an http(s) URL, got %r" % (url,))
        if isinstance(entry, int) and not isinstance(entry, bool):
            entry = {"bytes": entry}
        if not isinstance(entry, dict) or set(entry) - {"bytes"} or "bytes" not in entry:
            _err(where, "must be {bytes: N} (the file's size), got %r" % (entry,))
        out_sources[url] = {"bytes": _count_bytes(entry["bytes"], where + ".bytes")}
    out = {"data_sources": out_sources,
           "download_mbps": _rate(value.get("download_mbps", DOWNLOAD_MBPS), "workload.download_mbps")}

    training = value.get("training") or {}
    if not isinstance(training, dict):
        _err("workload.training", "must be a mapping with keys %s" % sorted(TRAINING_DEFAULTS))
    unknown = set(training) - set(TRAINING_DEFAULTS)
    if unknown:
        _err("workload.training", "unknown key(s) %s; allowed: %s" % (sorted(unknown), sorted(TRAINING_DEFAULTS)))
    rates = training.get("samples_per_second_per_gpu", TRAINING_DEFAULTS["samples_per_second_per_gpu"])
    if isinstance(rates, (int, float)) and not isinstance(rates, bool):
        rates = {"default": rates}
    if not isinstance(rates, dict) or not rates:
        _err("workload.training.samples_per_second_per_gpu",
             "must map a GPU model (nvidia.com/gpu.product) or `default` to samples/s, got %r" % (rates,))
    out_rates = {}
    for model, rate in rates.items():
        out_rates[str(model)] = _rate(rate, "workload.training.samples_per_second_per_gpu.%s" % model, "samples/s")
    out_rates.setdefault("default", TRAINING_DEFAULTS["samples_per_second_per_gpu"]["default"])
    out["training"] = {
        "samples_per_second_per_gpu": out_rates,
        "checkpoint_bytes": _count_bytes(training.get("checkpoint_bytes", TRAINING_DEFAULTS["checkpoint_bytes"]),
                                         "workload.training.checkpoint_bytes"),
        "checkpoint_write_mbps": _rate(training.get("checkpoint_write_mbps",
                                                    TRAINING_DEFAULTS["checkpoint_write_mbps"]),
                                       "workload.training.checkpoint_write_mbps"),
        "restore_mbps": _rate(training.get("restore_mbps", TRAINING_DEFAULTS["restore_mbps"]),
                              "workload.training.restore_mbps")}

    serving = value.get("serving") or {}
    if not isinstance(serving, dict):
        _err("workload.serving", "must be a mapping with keys %s" % sorted(SERVING_DEFAULTS))
    unknown = set(serving) - set(SERVING_DEFAULTS)
    if unknown:
        _err("workload.serving", "unknown key(s) %s; allowed: %s" % (sorted(unknown), sorted(SERVING_DEFAULTS)))
    latency = serving.get("latency_ms", SERVING_DEFAULTS["latency_ms"])
    if not isinstance(latency, dict) or set(latency) - {"p50", "p90", "p99"}:
        _err("workload.serving.latency_ms", "must be {p50: ms, p90: ms, p99: ms}, got %r" % (latency,))
    lat = dict(SERVING_DEFAULTS["latency_ms"])
    for key, ms in latency.items():
        lat[key] = _rate(ms, "workload.serving.latency_ms.%s" % key, "milliseconds")
    if not lat["p50"] <= lat["p90"] <= lat["p99"]:
        _err("workload.serving.latency_ms", "must satisfy p50 <= p90 <= p99, got %r" % (lat,))
    out["serving"] = {"latency_ms": lat,
                      "rps_per_replica": _rate(serving.get("rps_per_replica", SERVING_DEFAULTS["rps_per_replica"]),
                                               "workload.serving.rps_per_replica", "requests/s")}
    return out


def _node(node, where, seen):
    if isinstance(node, str):
        node = {"name": node}
    if not isinstance(node, dict):
        _err(where, "must be a mapping with `name:`")
    unknown = set(node) - NODE_KEYS
    if unknown:
        _err(where, "unknown key(s) %s; allowed: %s" % (sorted(unknown), sorted(NODE_KEYS)))
    name = node.get("name")
    if not isinstance(name, str) or not _DNS1123.match(name) or len(name) > 253:
        _err(where + ".name", "must be a DNS-1123 subdomain (lowercase letters, digits, '-', '.'), "
             "got %r" % (name,))
    if name in seen:
        _err(where + ".name", "duplicate node name %r" % name)
    seen.add(name)
    out = {"name": name,
           "cpu": str(node.get("cpu", "32")), "memory": str(node.get("memory", "256Gi")),
           "pods": int(node.get("pods", 110)),
           "ephemeral_storage": str(node.get("ephemeral_storage", "500Gi")),
           "unschedulable": bool(node.get("unschedulable", False)),
           "role": node.get("role", "worker"),
           "machine": node.get("machine", "SimCluster-Server"),
           "container_runtime": node.get("container_runtime", "containerd://2.0.4"),
           "default_runtime": node.get("default_runtime"),
           "kernel": node.get("kernel", "5.15.0-102-generic"),
           "os_image": node.get("os_image", "Ubuntu 22.04.4 LTS"),
           "annotations": dict(node.get("annotations") or {})}
    if out["role"] not in ("worker", "control-plane"):
        _err(where + ".role", "must be worker or control-plane")
    gpus = node.get("gpus")
    if gpus:
        if not isinstance(gpus, dict) or set(gpus) - GPU_KEYS:
            _err(where + ".gpus", "must be a mapping with keys %s" % sorted(GPU_KEYS))
        if not gpus.get("model"):
            _err(where + ".gpus.model", "required, the nvidia.com/gpu.product value "
                 "(e.g. NVIDIA-H100-80GB-HBM3)")
        count = gpus.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            _err(where + ".gpus.count", "must be an integer >= 1")
        from .twins.gpu_models import model_info  # local: keeps load() importable alone
        info = model_info(gpus["model"], gpus.get("memory_mib"))
        out["gpus"] = {"model": gpus["model"], "count": count,
                       "memory_mib": int(gpus.get("memory_mib") or info["memory_mib"]),
                       "mig_capable": bool(gpus.get("mig_capable", bool(info["mig"])))}
        if gpus.get("nvlink_bus_bandwidth_gbps") is not None:
            out["gpus"]["nvlink_bus_bandwidth_gbps"] = _bandwidth(gpus["nvlink_bus_bandwidth_gbps"],
                                                                  where + ".gpus.nvlink_bus_bandwidth_gbps")
        if out["gpus"]["mig_capable"] and not info["mig"]:
            _err(where + ".gpus.mig_capable", "model %s has no MIG profiles in "
                 "simcluster/twins/gpu_models.py; add them or set mig_capable: false" % gpus["model"])
    else:
        out["gpus"] = None
    drv = node.get("host_driver")
    if drv is not None and not re.match(r"^\d+\.\d+(\.\d+)?$", str(drv)):
        _err(where + ".host_driver", "must be a driver version like \"550.54.15\" or null")
    out["host_driver"] = str(drv) if drv is not None else None
    out["host_toolkit"] = bool(node.get("host_toolkit", False))
    if out["host_toolkit"] and not out["host_driver"]:
        _err(where + ".host_toolkit", "a host toolkit needs a host driver (host_driver: null)")
    if out["default_runtime"] is None:
        out["default_runtime"] = "nvidia" if out["host_toolkit"] else "runc"
    # top-level keys of the host's /etc/nvidia-container-runtime/config.toml the twins read
    tk = node.get("host_toolkit_config") or {}
    known = ("accept-nvidia-visible-devices-envvar-when-unprivileged",
             "accept-nvidia-visible-devices-as-volume-mounts")
    if not isinstance(tk, dict) or set(tk) - set(known) or not all(isinstance(v, bool) for v in tk.values()):
        _err(where + ".host_toolkit_config", "must map %s to true or false" % " / ".join(known))
    if tk and not out["host_toolkit"]:
        _err(where + ".host_toolkit_config", "describes a host toolkit's config.toml: needs host_toolkit: true")
    out["host_toolkit_config"] = dict(tk)
    labels = node.get("labels") or {}
    if not isinstance(labels, dict):
        _err(where + ".labels", "must be a mapping")
    out["labels"] = {str(k): "" if v is None else str(v) for k, v in labels.items()}
    taints = node.get("taints") or []
    if not isinstance(taints, list):
        _err(where + ".taints", "must be a list of {key, value, effect}")
    for j, t in enumerate(taints):
        if not isinstance(t, dict) or not t.get("key") or t.get("effect") not in (
                "NoSchedule", "PreferNoSchedule", "NoExecute"):
            _err("%s.taints[%d]" % (where, j), "needs key and effect NoSchedule|PreferNoSchedule|NoExecute")
    out["taints"] = [{k: str(v) for k, v in t.items() if k in ("key", "value", "effect")}
                     for t in taints]
    out["mig_config"] = node.get("mig_config", "all-disabled")
    out["fabric"] = _fabric(node.get("fabric"), where + ".fabric")
    return out


def _bandwidth(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        _err(where, "must be a number of GB/s > 0 (the all_reduce_perf bus bandwidth), got %r" % (value,))
    return float(value)


def _fabric(fabric, where):
    """The node's inter-node fabric as all_reduce_perf sees it: its busbw limit in GB/s."""
    if fabric is None:
        return None
    if not isinstance(fabric, dict) or set(fabric) - FABRIC_KEYS or "bus_bandwidth_gbps" not in fabric:
        _err(where, "must be a mapping {name: ib-ndr, bus_bandwidth_gbps: 180} (name optional), got %r"
             % (fabric,))
    name = fabric.get("name", "fabric")
    if not isinstance(name, str) or not name:
        _err(where + ".name", "must be a non-empty string (e.g. ib-ndr, roce-400g)")
    return {"name": name, "bus_bandwidth_gbps": _bandwidth(fabric["bus_bandwidth_gbps"], where + ".bus_bandwidth_gbps")}


def _degraded_links(value, nodes):
    """nccl_degraded_link: [node] or [{node, fraction}] -> [{node, fraction of its fabric bandwidth}]."""
    out = []
    for i, entry in enumerate(value):
        where = "faults.nccl_degraded_link[%d]" % i
        if isinstance(entry, str):
            entry = {"node": entry}
        if not isinstance(entry, dict) or set(entry) - {"node", "fraction"} or "node" not in entry:
            _err(where, "must be a node name or {node: NAME, fraction: 0.25}, got %r" % (entry,))
        if entry["node"] not in nodes:
            _err(where, "node %r is not in nodes" % (entry["node"],))
        fraction = entry.get("fraction", DEGRADED_FRACTION)
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
            _err(where + ".fraction", "must be a number between 0 and 1 (exclusive), got %r" % (fraction,))
        out.append({"node": entry["node"], "fraction": float(fraction)})
    return out
