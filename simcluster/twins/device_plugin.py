"""Device plugin + GPU Feature Discovery twin: what a GPU node advertises.

The device plugin reads its configuration when its pod STARTS (the trap of
FACTS.md: editing the ConfigMap changes nothing until the DaemonSet pods are
restarted). The config-manager sidecar does follow the node label
`nvidia.com/device-plugin.config`, so a label change re-reads the config.
Node resources (allocatable/capacity) come from the running plugin pod's
snapshot and the MIG layout; GFD labels from the GFD pod on the node.

MPS (`sharing.mps`, the same ReplicatedResources format as `sharing.timeSlicing`,
NVIDIA/k8s-device-plugin api/config/v1/sharing.go): the plugin exits on a node whose
GPUs run MIG (internal/plugin/mps.go) or under the mixed MIG strategy the operator
passes as MIG_STRATEGY (cmd/nvidia-device-plugin/main.go validateFlags); otherwise it
serves nothing until the operator's MPS control daemon runs on the node
(internal/plugin/server.go waitForDaemon, retried every 30 s). That daemon's
DaemonSet selects nodes GFD labels nvidia.com/mps.capable=true
(gpu-operator assets/state-mps-control-daemon/0400_daemonset.yaml), which GFD writes
for an MPS config without MIG devices (internal/lm/nvml.go newSharingLabeler).
"""

import time

import yaml

from .gpu_models import model_info, profile_labels, resource_suffix
from .util import clone, gpu_requests, patch_labels, write_status

DS_NAME = "nvidia-device-plugin-daemonset"
GFD_DS = "gpu-feature-discovery"
MPS_DS = "nvidia-device-plugin-mps-control-daemon"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU = "nvidia.com/gpu"

_TOP = {"version", "flags", "resources", "sharing", "imex"}
_FLAGS = {"migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot", "nvidiaDevRoot",
          "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI", "deviceDiscoveryStrategy", "plugin",
          "gfd", "deviceListStrategy", "deviceIDStrategy", "containerDriverRoot"}
_SHARING = {"timeSlicing", "mps"}
_TS = {"renameByDefault", "failRequestsGreaterThanOne", "resources"}
_RES = {"name", "rename", "devices", "replicas"}

# CUDA version that ships with a driver branch (labels nvidia.com/cuda.runtime-version.*)
_CUDA = {"535": "12.2", "550": "12.4", "555": "12.5", "560": "12.6", "565": "12.7",
         "570": "12.8", "575": "12.9", "580": "13.0", "590": "13.1", "595": "13.2"}


class ConfigError(Exception):
    pass


def _unknown(where, allowed):
    extra = sorted(set(where) - allowed)
    if extra:
        raise ConfigError('json: unknown field "%s"' % extra[0])


def parse_config(text):
    """A device-plugin config document -> {"strategy", "sharing": {...}} or ConfigError."""
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError("yaml: %s" % str(err).splitlines()[0])
    if not isinstance(doc, dict):
        raise ConfigError("json: cannot unmarshal string into Go value of type v1.Config")
    _unknown(doc, _TOP)
    if doc.get("version") != "v1":
        raise ConfigError("unknown version: %s" % doc.get("version"))
    flags = doc.get("flags") or {}
    if not isinstance(flags, dict):
        raise ConfigError("json: cannot unmarshal into Go struct field Config.flags")
    _unknown(flags, _FLAGS)
    strategy = flags.get("migStrategy")
    if strategy is not None and strategy not in ("none", "single", "mixed"):
        raise ConfigError("invalid --mig-strategy option: %s" % strategy)
    sharing = doc.get("sharing") or {}
    _unknown(sharing, _SHARING)
    # Sharing.ReplicatedResources: sharing.mps when set, else sharing.timeSlicing
    mode = "mps" if sharing.get("mps") is not None else "time-slicing"
    ts = sharing.get("mps") if mode == "mps" else (sharing.get("timeSlicing") or {})
    if not isinstance(ts, dict):
        raise ConfigError("json: cannot unmarshal into Go struct field Sharing.%s" % (
            "mps" if mode == "mps" else "timeSlicing"))
    _unknown(ts, _TS)
    if mode == "mps" and not ts.get("resources"):
        raise ConfigError("no resources specified")
    resources = []
    for r in ts.get("resources") or []:
        if not isinstance(r, dict):
            raise ConfigError("json: cannot unmarshal into Go struct field TimeSlicing.resources")
        _unknown(r, _RES)
        name = r.get("name", "")
        if name != GPU and not str(name).startswith("nvidia.com/mig-"):
            raise ConfigError("incorrect format for resource name '%s'" % name)
        replicas = r.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise ConfigError("invalid number of replicas for resource '%s': %r" % (name, replicas))
        resources.append({"name": name, "replicas": replicas, "rename": r.get("rename")})
    for key in ("renameByDefault", "failRequestsGreaterThanOne"):
        if key in ts and not isinstance(ts[key], bool):
            raise ConfigError("json: cannot unmarshal into Go struct field TimeSlicing.%s of type bool" % key)
    # failRequestsGreaterThanOne defaults to true for MPS (api/config/v1/config.go)
    replicated = any(r["replicas"] > 1 for r in resources)
    return {"strategy": strategy, "resources": resources,
            "sharing": mode if replicated else None,
            "rename": bool(ts.get("renameByDefault", False)),
            "fail_gt1": bool(ts.get("failRequestsGreaterThanOne", mode == "mps"))}


def crash_log(message):
    return ("I1129 00:00:00.000000       1 main.go:235] Starting NVIDIA Device Plugin\n"
            "E1129 00:00:00.000000       1 main.go:176] error starting plugins: %s\n" % message)


def error_log(message):
    return ("I1129 00:00:00.000000       1 main.go:235] Starting NVIDIA Device Plugin\n"
            "E1129 00:00:00.000000       1 main.go:176] error starting plugins: unable to load "
            "config: unable to finalize config: unable to parse config file: error parsing config "
            "file: unmarshal error: error unmarshaling JSON: while decoding JSON: %s\n" % message)


class DevicePlugin:
    def __init__(self, ctx):
        self.ctx = ctx
        self.snapshots = {}   # plugin pod uid -> {"config", "label", "key", "error"}

    # -- what a starting plugin pod reads ------------------------------------------------
    def _read(self, node):
        op = self.ctx.operator
        cfg = ((op.spec().get("devicePlugin") or {}).get("config") or {})
        labels = op.node_labels.get(node, {})
        label = labels.get(CONFIG_LABEL)
        snap = {"label": label, "config": None, "error": None, "key": None, "missing_cm": False}
        if not cfg.get("name"):
            return snap
        cm = self.ctx.store.get("configmaps", op.namespace, cfg["name"])
        if cm is None:
            snap["missing_cm"] = True
            return snap
        data = cm.get("data") or {}
        # The operator runs config-manager with FALLBACK_STRATEGIES=empty: no label and no
        # default -> empty config (whole GPUs), even when the map holds a single config (the
        # standalone device-plugin chart's "single" fallback does not apply here).
        key = label or cfg.get("default") or None
        snap["key"] = key
        if key is None:
            return snap
        if key not in data:
            snap["error"] = 'unable to select config: config "%s" not found in ConfigMap %s' % (
                key, cfg["name"])
            return snap
        try:
            snap["config"] = parse_config(data[key])
        except ConfigError as err:
            snap["error"] = str(err)
        return snap

    def pod_hook(self, pod, elapsed):
        op = self.ctx.operator
        if op.policy is None:
            return None
        if pod["metadata"].get("namespace") != op.namespace:
            return self._admit_shared(pod)
        if not any(r.get("kind") == "DaemonSet" and r.get("name") == DS_NAME
                   for r in pod["metadata"].get("ownerReferences") or []):
            return None
        t = self.ctx.timings
        start = t["pod_start"] + t["operand_start"]
        if elapsed < start:
            return {"kind": "creating", "retry": start - elapsed + 0.001}
        node = pod["spec"]["nodeName"]
        if not op.toolkit_ready(node):
            return {"kind": "init_wait", "done": 0}
        uid = pod["metadata"]["uid"]
        snap = self.snapshots.get(uid)
        if snap is None:
            snap = self.snapshots[uid] = self._read(node)
            snap["started"] = time.monotonic()
        if snap["missing_cm"]:
            cfg = (op.spec().get("devicePlugin") or {}).get("config") or {}
            self.ctx.event_once(pod, "FailedMount", 'MountVolume.SetUp failed for volume "config" : '
                                'configmap "%s" not found' % cfg.get("name"), "Warning")
            del self.snapshots[uid]          # retried until the ConfigMap appears
            return {"kind": "creating", "retry": 0.5}
        if node in (self.ctx.faults.get("device_plugin_crashloop") or []):
            return {"kind": "crash", "container": "nvidia-device-plugin",
                    "logs": {"nvidia-device-plugin": "E1129 00:00:00.000000       1 main.go:176] "
                             "error starting plugins: failed to initialize NVML: Unknown Error\n"}}
        if snap["error"]:
            return {"kind": "crash", "container": "nvidia-device-plugin",
                    "logs": {"nvidia-device-plugin": error_log(snap["error"])}}
        refused = self.mps_refusal(node, snap)
        if refused:
            return {"kind": "crash", "container": "nvidia-device-plugin",
                    "logs": {"nvidia-device-plugin": crash_log(refused)}}
        res = self.resources(node, snap)
        lines = ["I1129 00:00:00.000000       1 main.go:235] Starting NVIDIA Device Plugin"]
        if snap["key"]:
            lines.append('I1129 00:00:00.000000       1 main.go:238] Using config "%s"' % snap["key"])
        if self.is_mps(snap) and not self.mps_daemon_ready(node):
            lines += ["E1129 00:00:00.000000       1 main.go:408] Failed to start plugin: error waiting for MPS "
                      "daemon: error checking MPS daemon health: failed to send command to MPS daemon: exit status 1",
                      "I1129 00:00:00.000000       1 main.go:302] Failed to start one or more plugins. "
                      "Retrying in 30s..."]
            return {"kind": "run", "retry": 0.5, "logs": {"nvidia-device-plugin": "\n".join(lines) + "\n"}}
        for name, n in sorted(res.items()):
            if n:
                lines.append("I1129 00:00:00.000000       1 server.go:176] Registered device plugin for "
                             "'%s' with Kubelet (%d devices)" % (name, n))
        return {"kind": "run", "logs": {"nvidia-device-plugin": "\n".join(lines) + "\n"}}

    def _admit_shared(self, pod):
        """failRequestsGreaterThanOne: the plugin's Allocate refuses >1 shared replica."""
        node = pod["spec"].get("nodeName")
        _p, snap = self._running_snapshot(node)
        cfg = (snap or {}).get("config")
        if not cfg or not cfg["fail_gt1"]:
            return None
        for r in cfg["resources"]:
            if r["replicas"] <= 1:
                continue
            name = r.get("rename") or (r["name"] + ".shared" if cfg["rename"] else r["name"])
            want = gpu_requests(pod["spec"]).get(name, 0)
            if want > 1:
                return {"kind": "rejected", "reason": "UnexpectedAdmissionError",
                        "message": "Allocate failed due to rpc error: code = Unknown desc = request "
                                   "for '%s': %d too large: maximum request size for shared "
                                   "resources is 1, which is unexpected" % (name, int(want))}
        return None

    # -- MPS -------------------------------------------------------------------------------
    @staticmethod
    def is_mps(snap):
        return ((snap or {}).get("config") or {}).get("sharing") == "mps"

    def mps_daemon_ready(self, node):
        return (MPS_DS, node) in self.ctx.operator.ready_pods

    def _mig_enabled(self, node):
        layout = self.ctx.mig.layout(node)
        return bool(layout and any(layout))

    def mps_refusal(self, node, snap):
        """The real plugin's error for an MPS config it cannot serve, or None."""
        if not self.is_mps(snap):
            return None
        # MIG_STRATEGY from the ClusterPolicy (applyMIGConfiguration) wins over the config's flags
        env_strategy = (self.ctx.operator.spec().get("mig") or {}).get("strategy")
        if (env_strategy or snap["config"].get("strategy")) == "mixed":
            return "unable to validate flags: using --mig-strategy=mixed is not supported with MPS"
        if self._mig_enabled(node) and self.strategy(snap) != "none":
            return "error getting plugins: failed to create plugin: sharing using MPS is not supported for MIG devices"
        return None

    # -- node view ------------------------------------------------------------------------
    def strategy(self, snap=None):
        cfg = (snap or {}).get("config") or {}
        return cfg.get("strategy") or ((self.ctx.operator.spec().get("mig") or {})
                                       .get("strategy") or "single")

    def resources(self, node, snap):
        """{resource: count} the plugin advertises on this node."""
        facts = self.ctx.facts.get(node) or {}
        gpus = facts.get("gpus")
        if not gpus:
            return {}
        layout = self.ctx.mig.layout(node)
        strategy = self.strategy(snap)
        base = {}
        mig_gpus = [g for g in layout if g] if layout else []
        if not mig_gpus or strategy == "none":
            base[GPU] = gpus["count"]
        elif strategy == "single":
            kinds = {p for g in mig_gpus for p, n in g.items() if n}
            plain = len(layout) - len(mig_gpus)
            base[GPU] = 0 if (len(kinds) > 1 or plain) else sum(sum(g.values()) for g in mig_gpus)
        else:
            base[GPU] = len(layout) - len(mig_gpus)
            for g in mig_gpus:
                for p, n in g.items():
                    key = "nvidia.com/mig-" + resource_suffix(p)
                    base[key] = base.get(key, 0) + n
        cfg = (snap or {}).get("config")
        if cfg:
            for r in cfg["resources"]:
                if base.get(r["name"]) and r["replicas"] > 1:
                    renamed = r.get("rename") or (r["name"] + ".shared" if cfg["rename"] else None)
                    total = base[r["name"]] * r["replicas"]
                    if renamed:
                        base[r["name"]] = 0
                        base[renamed] = total
                    else:
                        base[r["name"]] = total
        return base

    def _running_snapshot(self, node):
        op = self.ctx.operator
        pod = op.pods.get((DS_NAME, node))
        if pod is None or (DS_NAME, node) not in op.ready_pods:
            return None, None
        return pod, self.snapshots.get(pod["metadata"]["uid"])

    def reconcile(self):
        op = self.ctx.operator
        if op.policy is None:
            if op.gpu_cluster is not None:
                # DRA stack: no device plugin runs, GPUs are ResourceSlice devices; a plugin
                # that ran before leaves its extended resources at allocatable 0
                for node, facts in self.ctx.facts.items():
                    if facts.get("gpus"):
                        self._node_resources(node, None, False)
            return
        live = {p["metadata"]["uid"] for p in op.pods.values()}
        for uid in list(self.snapshots):
            if uid not in live:
                del self.snapshots[uid]
        for node, facts in self.ctx.facts.items():
            if not facts.get("gpus"):
                continue
            pod, snap = self._running_snapshot(node)
            if snap is not None and snap.get("label") != op.node_labels.get(node, {}).get(CONFIG_LABEL):
                # config-manager sidecar: a label change re-reads the (mounted) config
                fresh = self._read(node)
                fresh["started"] = snap.get("started")
                self.snapshots[pod["metadata"]["uid"]] = snap = fresh
                self.ctx.runtime.kick()
            self._node_resources(node, snap if pod is not None else None, pod is not None)
            if (GFD_DS, node) in op.ready_pods:
                self._gfd_labels(node, snap)

    def _node_resources(self, node, snap, running):
        store = self.ctx.store
        cur = self.ctx.get_cached("nodes", node)
        if cur is None:
            return
        status = clone(cur.get("status") or {})
        cap = status.setdefault("capacity", {})
        alloc = status.setdefault("allocatable", {})
        gpu_keys = [k for k in set(cap) | set(alloc) if k.startswith(("nvidia.com/gpu", "nvidia.com/mig-"))]
        serving = not (self.is_mps(snap) and (self.mps_refusal(node, snap) or not self.mps_daemon_ready(node)))
        if running and snap is not None and not snap.get("error") and serving:
            res = self.resources(node, snap)
            for k in gpu_keys:
                if k not in res:
                    res[k] = 0
            for k, n in res.items():
                cap[k] = str(n)
                alloc[k] = str(n)
        else:
            for k in gpu_keys:       # plugin gone: kubelet keeps capacity, allocatable drops to 0
                alloc[k] = "0"
        write_status(store, "nodes", cur, status)

    def _gfd_labels(self, node, snap):
        facts = self.ctx.facts[node]
        gpus = facts["gpus"]
        op = self.ctx.operator
        info = model_info(gpus["model"], gpus["memory_mib"])
        driver = facts.get("host_driver") or str((op.spec().get("driver") or {}).get("version", "595.91.07"))
        parts = (driver.split(".") + ["0", "0"])[:3]
        cuda = _CUDA.get(parts[0], "12.4")
        labels = {
            "nvidia.com/cuda.driver-version.full": driver,
            "nvidia.com/cuda.driver-version.major": parts[0],
            "nvidia.com/cuda.driver-version.minor": parts[1],
            "nvidia.com/cuda.driver-version.revision": parts[2],
            "nvidia.com/cuda.driver.major": parts[0], "nvidia.com/cuda.driver.minor": parts[1],
            "nvidia.com/cuda.driver.rev": parts[2],
            "nvidia.com/cuda.runtime-version.full": cuda,
            "nvidia.com/cuda.runtime-version.major": cuda.split(".")[0],
            "nvidia.com/cuda.runtime-version.minor": cuda.split(".")[1],
            "nvidia.com/cuda.runtime.major": cuda.split(".")[0],
            "nvidia.com/cuda.runtime.minor": cuda.split(".")[1],
            "nvidia.com/gfd.timestamp": str(int(time.time())),
            "nvidia.com/gpu.compute.major": str(info["compute"][0]),
            "nvidia.com/gpu.compute.minor": str(info["compute"][1]),
            "nvidia.com/gpu.family": info["family"],
            "nvidia.com/gpu.machine": facts["machine"],
            "nvidia.com/gpu.count": str(gpus["count"]),
            "nvidia.com/gpu.memory": str(gpus["memory_mib"]),
            "nvidia.com/gpu.product": gpus["model"],
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/mig.capable": "true" if gpus["mig_capable"] else "false",
            "nvidia.com/mig.strategy": self.strategy(snap),
            "nvidia.com/mps.capable": "false",
        }
        if not facts.get("host_driver") and (op.spec().get("driver") or {}).get("enabled", True):
            labels["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
        layout = self.ctx.mig.layout(node)
        mig_gpus = [g for g in layout if g] if layout else []
        strategy = self.strategy(snap)
        have = op.node_labels.get(node, {})
        # forget per-profile labels of a previous layout
        for k in have:
            if k.startswith("nvidia.com/mig-") or k.startswith("nvidia.com/gpu.engines.") or \
                    k.startswith("nvidia.com/gpu.slices.") or k == "nvidia.com/gpu.multiprocessors":
                labels[k] = None
        if mig_gpus and strategy == "single":
            kinds = sorted({p for g in mig_gpus for p, n in g.items() if n})
            if len(kinds) == 1:
                p = kinds[0]
                labels.update(profile_labels("nvidia.com/gpu", gpus["model"], p, info))
                labels["nvidia.com/gpu.count"] = str(sum(g.get(p, 0) for g in mig_gpus))
        elif mig_gpus and strategy == "mixed":
            labels["nvidia.com/gpu.replicas"] = "0" if len(mig_gpus) == len(layout) else "1"
            counts = {}
            for g in mig_gpus:
                for p, n in g.items():
                    counts[p] = counts.get(p, 0) + n
            for p, n in counts.items():
                prefix = "nvidia.com/mig-" + resource_suffix(p)
                labels.update(profile_labels(prefix, gpus["model"], p, info))
                labels[prefix + ".count"] = str(n)
                labels[prefix + ".replicas"] = "1"
                labels[prefix + ".sharing-strategy"] = "none"
        cfg = (snap or {}).get("config")
        if self.is_mps(snap):
            if mig_gpus:
                # newSharingLabeler fails ("MPS sharing is not supported for mig devices"): GFD writes nothing
                return
            labels["nvidia.com/mps.capable"] = "true"
        if cfg:
            mode = cfg.get("sharing") or "time-slicing"
            for r in cfg["resources"]:
                if r["replicas"] <= 1:
                    continue
                renamed = bool(r.get("rename")) or cfg["rename"]
                if r["name"] == GPU and not (mig_gpus and strategy == "mixed"):
                    labels["nvidia.com/gpu.replicas"] = str(r["replicas"])
                    labels["nvidia.com/gpu.sharing-strategy"] = mode
                    if not renamed:
                        labels["nvidia.com/gpu.product"] += "-SHARED"
                elif r["name"].startswith("nvidia.com/mig-"):
                    prefix = r["name"]
                    if prefix + ".count" in labels:
                        labels[prefix + ".replicas"] = str(r["replicas"])
                        labels[prefix + ".sharing-strategy"] = mode
                        if not renamed:
                            labels[prefix + ".product"] += "-SHARED"
        # gfd.timestamp changes every pass: only rewrite it when something else changed
        cmp = {k: v for k, v in labels.items() if k != "nvidia.com/gfd.timestamp"}
        if all(have.get(k) == v or (v is None and k not in have) for k, v in cmp.items()):
            return
        patch_labels(self.ctx.store, "nodes", None, node, labels)
