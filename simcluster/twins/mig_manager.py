"""MIG manager twin: nvidia.com/mig.config -> nvidia.com/mig.config.state, like reconfigure.sh.

Per node with a ready nvidia-mig-manager pod, when the desired label changes:
  config read from: ClusterPolicy spec.migManager.config.name if set, else the
  <node>-mig-config ConfigMap the mig-manager generates for the node's GPUs (26.3+:
  only configs that fit the hardware), else default-mig-parted-config;
  unknown config name                  -> state failed at once (no pending)
  layout already applied               -> state success at once
  otherwise                            -> state pending, GPU clients paused
      (deploy.{device-plugin,gpu-feature-discovery,dcgm,dcgm-exporter}=paused-for-mig-change),
      wait until no GPU pod runs on the node (fault mig_pending_forever: wait forever),
      apply after timings.mig_reconfigure: profile unsupported by the GPU model -> failed,
      else success; paused labels return to their previous value.
The layout (per GPU: None = MIG disabled, {profile: count}) feeds the device plugin twin.
"""

import functools
import time

import yaml

from ..errors import ApiError
from .gpu_models import model_info
from .util import gpu_requests, owner_ref, patch_labels, pod_active

MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
DEPLOY = "nvidia.com/gpu.deploy."
PAUSED = "paused-for-mig-change"
PAUSE_KEYS = ["device-plugin", "gpu-feature-discovery", "dcgm", "dcgm-exporter"]
DS_NAME = "nvidia-mig-manager"
NODE_CONFIG_SUFFIX = "-mig-config"


class MigError(Exception):
    pass


@functools.lru_cache(maxsize=32)
def _load(text):
    # the default config is 600 lines: parse each distinct text once (libyaml when present)
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.lru_cache(maxsize=8)
def mig_parted_file_data(path):
    """ConfigMap data of the cluster's mig-parted config file (a ConfigMap manifest like
    default-mig-parted-config.yaml, or a bare mig-parted config)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for doc in yaml.load_all(text, Loader=loader):
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            return dict(doc.get("data") or {})
    return {"config.yaml": text}


def parse_configs(text):
    """mig-parted config text -> its `mig-configs` mapping (shared: do not mutate)."""
    try:
        doc = _load(text) or {}
    except yaml.YAMLError as err:
        raise MigError("invalid mig-parted config: %s" % str(err).splitlines()[0])
    if not isinstance(doc, dict) or not isinstance(doc.get("mig-configs"), dict):
        raise MigError("invalid mig-parted config: no `mig-configs` mapping")
    return doc["mig-configs"]


def plan(configs, name, count, product, memory_mib=None, mig_capable=True):
    """Layout for `count` GPUs of `product` under config `name` (MigError if impossible)."""
    if name not in configs:
        raise MigError('config "%s" not found in the mig-parted config' % name)
    info = model_info(product, memory_mib)
    layout = [None] * count
    matched = [False] * count
    for entry in configs[name] or []:
        filt = entry.get("device-filter")
        if filt:
            filt = [filt] if isinstance(filt, str) else filt
            if info["pci"].upper() not in [str(f).upper() for f in filt]:
                continue
        devices = entry.get("devices", "all")
        if devices == "all":
            idx = range(count)
        else:
            idx = [d for d in devices if isinstance(d, int) and 0 <= d < count]
        for i in idx:
            matched[i] = True
            if not entry.get("mig-enabled"):
                layout[i] = None
                continue
            if not mig_capable or not info["mig"]:
                raise MigError("GPU %d (%s) is not MIG capable" % (i, product))
            devs = {str(k): int(v) for k, v in (entry.get("mig-devices") or {}).items()}
            for prof in devs:
                if prof not in info["mig"]:
                    raise MigError("error applying MIG configuration: unsupported MIG profile "
                                   "%s for GPU %d (%s)" % (prof, i, product))
            slices = sum(info["mig"][p][0] * n for p, n in devs.items())
            mem = sum(info["mig"][p][1] * n for p, n in devs.items())
            if slices > info["slices"] or mem > info["memory_mib"]:
                raise MigError("error applying MIG configuration: profiles %s do not fit on "
                               "GPU %d (%s)" % (devs, i, product))
            layout[i] = devs
    if not any(matched):
        raise MigError('no entry of config "%s" applies to device %s (%s)'
                       % (name, info["pci"], product))
    return layout


class MigManager:
    def __init__(self, ctx):
        self.ctx = ctx
        self.layouts = {}
        self.applied = {}
        self.seen = {}       # node -> desired label value handled last
        self.work = {}       # node -> in-flight reconfiguration
        self._node_texts = {}  # generated <node>-mig-config text per kind of node
        for node, facts in ctx.facts.items():
            gpus = facts.get("gpus")
            if not gpus:
                continue
            self.layouts[node] = [None] * gpus["count"]
            self.applied[node] = "all-disabled"
            initial = facts.get("mig_config") or "all-disabled"
            if initial != "all-disabled" and gpus["mig_capable"]:
                try:
                    configs = parse_configs(self._file_text())
                    self.layouts[node] = plan(configs, initial, gpus["count"], gpus["model"],
                                              gpus["memory_mib"])
                    self.applied[node] = initial
                except (MigError, OSError, KeyError) as err:
                    raise ValueError("nodes[%s].mig_config: %s" % (node, err))

    def _file_text(self):
        return mig_parted_file_data(self.ctx.spec.get("mig_parted_config"))["config.yaml"]

    def layout(self, node):
        return self.layouts.get(node)

    # -- helpers -----------------------------------------------------------------------
    def config_name(self, node):
        """Which ConfigMap the node's mig-manager reads: a custom one (ClusterPolicy
        spec.migManager.config.name), else the one it generated for the node's hardware
        (<node>-mig-config, GPU Operator >= 26.3), else default-mig-parted-config."""
        op = self.ctx.operator
        custom = ((op.spec().get("migManager") or {}).get("config") or {}).get("name")
        if custom:
            return custom
        if self.ctx.get_cached("configmaps", node + NODE_CONFIG_SUFFIX, op.namespace) is not None:
            return node + NODE_CONFIG_SUFFIX
        return "default-mig-parted-config"

    def _generate_node_config(self, node, gpus):
        """<node>-mig-config: the configs of the static default that fit this node's GPUs."""
        op = self.ctx.operator
        name = node + NODE_CONFIG_SUFFIX
        if self.ctx.get_cached("configmaps", name, op.namespace) is not None:
            return
        text = self._node_config_text(gpus)
        if text is None:
            return
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": name, "namespace": op.namespace,
                           "labels": {"app.kubernetes.io/managed-by": "nvidia-mig-manager"}},
              "data": {"config.yaml": text}}
        if op.policy is not None:
            cm["metadata"]["ownerReferences"] = [owner_ref(op.policy, "ClusterPolicy", "nvidia.com/v1")]
        try:
            self.ctx.store.create("configmaps", cm)
        except ApiError:
            pass

    def _node_config_text(self, gpus):
        """The generated config.yaml for one kind of node (cached: same GPUs, same text)."""
        path = self.ctx.spec.get("mig_parted_config")
        key = (path, gpus["model"], gpus["memory_mib"], gpus["count"])
        if key not in self._node_texts:
            self._node_texts[key] = self._render_node_config(path, gpus)
        return self._node_texts[key]

    def _render_node_config(self, path, gpus):
        try:
            configs = parse_configs(mig_parted_file_data(path)["config.yaml"])
        except (OSError, KeyError, TypeError, MigError):
            return None
        info = model_info(gpus["model"], gpus["memory_mib"])
        fit = {}
        for cname, entries in configs.items():
            try:
                plan(configs, cname, gpus["count"], gpus["model"], gpus["memory_mib"])
            except MigError:
                continue
            kept = []
            for e in entries or []:
                filt = e.get("device-filter")
                filt = [filt] if isinstance(filt, str) else filt
                if filt and info["pci"].upper() not in [str(f).upper() for f in filt]:
                    continue
                kept.append({k: v for k, v in e.items() if k != "device-filter"})
            fit[cname] = kept
        return yaml.safe_dump({"version": "v1", "mig-configs": fit}, sort_keys=False)

    def _configs(self, node):
        op = self.ctx.operator
        name = self.config_name(node)
        cm = self.ctx.store.get("configmaps", op.namespace, name)
        if cm is None:
            raise MigError('ConfigMap "%s" not found in namespace %s' % (name, op.namespace))
        text = (cm.get("data") or {}).get("config.yaml")
        if text is None:
            raise MigError('ConfigMap "%s" has no key config.yaml' % name)
        return parse_configs(text)

    def _pod(self, node):
        return self.ctx.operator.pods.get((DS_NAME, node))

    def _log(self, node, line):
        pod = self._pod(node)
        if pod is None:
            return
        logs = getattr(self.ctx.store, "pod_logs", None)
        if logs is None:
            return
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"], "nvidia-mig-manager")
        logs[key] = logs.get(key, "") + line + "\n"

    def _node(self, node):
        return self.ctx.store.get("nodes", None, node)

    def _event(self, node, reason, message, type_="Normal"):
        obj = self._node(node)
        if obj is not None:
            self.ctx.event_once(obj, reason, message, type_, key="%s-%s" % (message, time.monotonic()))

    def _gpu_pods(self, node):
        out = []
        for pod in self.ctx.pods_on(node):
            if pod_active(pod) and gpu_requests(pod["spec"]):
                out.append("%s/%s" % (pod["metadata"]["namespace"], pod["metadata"]["name"]))
        return out

    # -- the pass ------------------------------------------------------------------------
    def reconcile(self):
        op = self.ctx.operator
        if op.policy is None:
            return
        for node, facts in self.ctx.facts.items():
            gpus = facts.get("gpus")
            if not gpus or not gpus["mig_capable"]:
                continue
            if node in self.work:
                self._progress(node, facts)
                continue
            if (DS_NAME, node) not in op.ready_pods:
                continue
            if not ((op.spec().get("migManager") or {}).get("config") or {}).get("name"):
                self._generate_node_config(node, gpus)
            labels = op.node_labels.get(node, {})
            desired = labels.get(MIG_CONFIG)
            if not desired or self.seen.get(node) == desired:
                continue
            self.seen[node] = desired
            self._begin(node, facts, desired, labels)

    def _begin(self, node, facts, desired, labels):
        gpus = facts["gpus"]
        self._log(node, 'Updating to MIG config: %s' % desired)
        try:
            configs = self._configs(node)
            if desired not in configs:
                raise MigError('Selected mig-config "%s" does not exist in the config file; '
                               "unable to validate the selected MIG configuration" % desired)
        except MigError as err:
            return self._fail(node, str(err), restore={})
        try:
            layout = plan(configs, desired, gpus["count"], gpus["model"], gpus["memory_mib"])
        except MigError:
            layout = "invalid"       # found out while applying, after pending
        if layout == self.layouts.get(node):
            self.applied[node] = desired
            self._log(node, "Selected MIG configuration currently applied")
            patch_labels(self.ctx.store, "nodes", None, node, {MIG_STATE: "success"})
            return
        pause = {DEPLOY + k: labels[DEPLOY + k] for k in PAUSE_KEYS
                 if labels.get(DEPLOY + k) == "true"}
        change = {MIG_STATE: "pending"}
        change.update({k: PAUSED for k in pause})
        patch_labels(self.ctx.store, "nodes", None, node, change)
        self._log(node, "Shutting down all GPU clients on the current node by disabling their "
                        "component-specific nodeSelector labels")
        self.work[node] = {"desired": desired, "restore": pause, "ready_at": None}
        self._event(node, "MigConfigPending", "Applying MIG config %s" % desired)

    def _progress(self, node, facts):
        work = self.work[node]
        if node in (self.ctx.faults.get("mig_pending_forever") or []):
            return
        busy = self._gpu_pods(node)
        operands = [ds for (ds, n) in self.ctx.operator.pods if n == node
                    and ds in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery",
                               "nvidia-dcgm", "nvidia-dcgm-exporter")]
        if busy or operands:
            work["ready_at"] = None
            if busy and not work.get("logged_busy"):
                work["logged_busy"] = True
                self._log(node, "Waiting for GPU pods to terminate: %s" % ", ".join(busy))
            return
        now = time.monotonic()
        if work["ready_at"] is None:
            work["ready_at"] = now + self.ctx.timings["mig_reconfigure"]
            self.ctx.runtime.after(self.ctx.timings["mig_reconfigure"] + 0.001)
            return
        if now < work["ready_at"]:
            self.ctx.runtime.after(work["ready_at"] - now + 0.001)
            return
        gpus = facts["gpus"]
        del self.work[node]
        if node in (self.ctx.faults.get("mig_apply_fails") or []):
            # what nvidia-mig-parted says when the GPUs refuse the layout
            return self._fail(node, "error setting MIGConfig: error attempting multiple config "
                                    "orderings: all orderings failed", restore=work["restore"])
        try:
            layout = plan(self._configs(node), work["desired"], gpus["count"], gpus["model"],
                          gpus["memory_mib"])
        except MigError as err:
            return self._fail(node, str(err), restore=work["restore"])
        self.layouts[node] = layout
        self.applied[node] = work["desired"]
        self._log(node, "Applying the selected MIG config to the node\nMIG configuration applied "
                        "successfully\nRestarting all GPU clients previously shutdown by reenabling "
                        "their component-specific nodeSelector labels")
        change = dict(work["restore"])
        change[MIG_STATE] = "success"
        patch_labels(self.ctx.store, "nodes", None, node, change)
        self._event(node, "MigConfigApplied", "MIG config %s applied" % work["desired"])

    def _fail(self, node, message, restore):
        self._log(node, "Error: %s" % message)
        change = dict(restore)
        change[MIG_STATE] = "failed"
        patch_labels(self.ctx.store, "nodes", None, node, change)
        self._event(node, "MigConfigFailed", message, "Warning")
