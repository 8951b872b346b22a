"""DCGM exporter twin: `/_sim/dcgm/<node>/metrics` serves what the node's nvidia-dcgm-exporter
pod would (Prometheus text format), computed from the store at scrape time.

- Served only while the operator's exporter pod on that node runs (label app=nvidia-dcgm-exporter,
  or app=nvidia-dcgm-exporter-dra of the GPUCluster stack; Running and ready); otherwise 503, which a
  scraping Prometheus records as up == 0.
- Fields: the CSV of the ConfigMap the ClusterPolicy (or the GPUCluster) names
  (spec.dcgmExporter.config.name, key dcgm-metrics.csv), else the exporter's default list.
- Labels as dcgm-exporter 4.x writes them: gpu, UUID, pci_bus_id, device, modelName, the host
  label (`Hostname`, `hostname` from exporter 4.8.3 on, dcgm-exporter#655), DCGM_FI_DRIVER_VERSION
  when listed as a label field, pod/namespace/container of the pod holding the GPU (kubelet
  pod-resources mapping), and GPU_I_PROFILE/GPU_I_ID for each MIG instance.
- Utilisation follows the Running pods that hold the GPU: a pod's annotation
  `simcluster.skaffon.io/gpu-util` (percent, default 80) and `.../gpu-memory-mib` (default 60 %
  of the memory); a free GPU is at 0 %.
- `dcgmi test --host <address> --inject` (a pod of a DCGM image) writes a field into a host engine
  only when a standalone one answers at that address: a Running, Ready pod labelled app=nvidia-dcgm
  (the operator's DaemonSet with ClusterPolicy spec.dcgm.enabled; app=nvidia-dcgm-dra with the GPUCluster's) reached by its pod IP, by the node
  IP when it runs with hostNetwork, or through the Service nvidia-dcgm (internalTrafficPolicy Local:
  the client's own node), and only if NetworkPolicies let the connection through. The value lands on
  that pod's node. Otherwise dcgmi prints its connection error and exits non-zero, as against the
  exporter's embedded host engine (chart default), which no other process can reach.
- Faults (cluster file `faults:` or POST /_sim/dcgm/faults at run time, same keys):
  gpu_xid [{node, gpu, xid, lost?}] (lost: the GPU no longer reports, fallen off the bus),
  gpu_overheat [{node, gpu, temp}], gpu_ecc_dbe [{node, gpu, count}], dcgm_exporter_down [node].
"""

import hashlib
import json
import os
import re
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CSV = os.path.join(os.path.dirname(HERE), "..", "shared", "upstream", "dcgm-exporter",
                           "default-counters.csv")
APP = "nvidia-dcgm-exporter"
# the GPUCluster stack's operands (gpucluster manifests state-dcgm-exporter, state-dcgm): same programs,
# other names
DRA_APP = "nvidia-dcgm-exporter-dra"
DRA_HOSTENGINE_APP = "nvidia-dcgm-dra"
UTIL_ANNOTATION = "simcluster.skaffon.io/gpu-util"
MEMORY_ANNOTATION = "simcluster.skaffon.io/gpu-memory-mib"
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-")
FAULT_KEYS = ("gpu_xid", "gpu_overheat", "gpu_ecc_dbe", "dcgm_exporter_down")
XID_FIELD = 230   # DCGM_FI_DEV_XID_ERRORS (dcgm_fields.h), the field `dcgmi test --inject -f` names
HOSTENGINE_APP = "nvidia-dcgm"    # assets/state-dcgm/0400_dcgm.yml: label app= of the nv-hostengine pods
HOSTENGINE_PORT = 5555            # nv-hostengine's default TCP port; dcgmi's default when --host has none
# dcgmi/Command.cpp Connect() and DoExecuteConnectionFailure(); errorString(DCGM_ST_CONNECTION_NOT_VALID)
CONNECT_ERROR = ("Error: unable to establish a connection to the specified host: %s\n"
                 "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")
CONNECT_EXIT = 256 - 21           # main() returns DCGM_ST_CONNECTION_NOT_VALID (-21): exit status 235
LOOPBACK = ("localhost", "127.0.0.1", "::1")
# the exporter's default list when ../shared is absent (same fields as default-counters.csv)
FALLBACK_FIELDS = [(f, t, f) for f, t in [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge"), ("DCGM_FI_DEV_MEM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge"), ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"), ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"), ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"), ("DCGM_FI_DEV_ENC_UTIL", "gauge"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge"), ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
    ("DCGM_FI_DEV_FB_FREE", "gauge"), ("DCGM_FI_DEV_FB_USED", "gauge"),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge"), ("DCGM_FI_DRIVER_VERSION", "label"),
]]
TDP_WATTS = {"H100": 700, "H200": 700, "A100": 400, "L40S": 350, "L4": 72, "A10": 150}


class FaultError(ValueError):
    pass


def validate_faults(faults, nodes):
    """The DCGM faults of a cluster file or a POST body; raises FaultError naming the key."""
    for key in FAULT_KEYS:
        value = faults.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            raise FaultError("faults.%s: must be a list" % key)
        for item in value:
            node = item if key == "dcgm_exporter_down" else (item or {}).get("node") \
                if isinstance(item, dict) else None
            if node not in nodes:
                raise FaultError("faults.%s: %r: node must be one of the cluster's nodes %s"
                                 % (key, item, sorted(nodes)))
            if key != "dcgm_exporter_down" and not isinstance(item.get("gpu"), int):
                raise FaultError("faults.%s: %r: gpu must be the GPU index (an integer)" % (key, item))
    return faults


def parse_csv(text):
    fields = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2:
            fields.append((parts[0], parts[1], ",".join(parts[2:]).strip() or parts[0]))
    return fields


def _default_fields():
    try:
        with open(DEFAULT_CSV, encoding="utf-8") as fh:
            return parse_csv(fh.read())
    except OSError:
        return list(FALLBACK_FIELDS)


def _label_escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _exporter_version(image):
    """'nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless' -> (4, 8, 3)."""
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""
    parts = tag.split("-")
    try:
        return tuple(int(x) for x in parts[1].split("."))
    except (IndexError, ValueError):
        return (0,)


class Exporter:
    def __init__(self, store, spec, twins=None):
        self.store = store
        self.spec = spec
        self.twins = twins
        self.nodes = dict((n["name"], n) for n in spec.get("nodes") or [])
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.faults = dict((k, v) for k, v in (spec.get("faults") or {}).items() if k in FAULT_KEYS)

    # -- dcgmi test --inject: a pod on a GPU node writes a field into the host engine ----------
    def dcgmi_hook(self, pod, elapsed):
        """Kubelet hook: `dcgmi test --inject --gpuid G -f 230 -v XID` (DCGM_FI_DEV_XID_ERRORS) in a
        DCGM image sets that GPU's last Xid, as on a real node (value 0 clears it)."""
        containers = pod["spec"].get("containers") or []
        for container in containers:
            words = " ".join(list(container.get("command") or []) + list(container.get("args") or []))
            if "dcgm" not in (container.get("image") or "") or "dcgmi test" not in words or "--inject" not in words:
                continue
            args = words.split()
            try:
                gpu = int(args[args.index("--gpuid") + 1]) if "--gpuid" in args else 0
                field = int(args[args.index("-f") + 1])
                value = int(args[args.index("-v") + 1])
            except (ValueError, IndexError):
                return {"kind": "complete", "exit": 1, "delay": 0.1,
                        "logs": {container["name"]: "Error: invalid arguments: %s\n" % words}}
            host = args[args.index("--host") + 1] if "--host" in args[:-1] else "localhost"
            host = self._expand(pod, container, host)
            engine = self._hostengine(pod, host)
            if engine is None:
                return {"kind": "complete", "exit": CONNECT_EXIT, "delay": 0.1,
                        "logs": {container["name"]: CONNECT_ERROR % host}}
            node = engine["spec"].get("nodeName")
            if field != XID_FIELD or node not in self.nodes or not self.nodes[node].get("gpus"):
                return {"kind": "complete", "exit": 1, "delay": 0.1,
                        "logs": {container["name"]: "Error: the simulated host engine of %s injects only field "
                                                    "%d (DCGM_FI_DEV_XID_ERRORS) on GPU nodes\n" % (node, XID_FIELD)}}
            with self.lock:
                kept = [x for x in self.faults.get("gpu_xid") or [] if (x.get("node"), x.get("gpu")) != (node, gpu)]
                self.faults["gpu_xid"] = kept + ([{"node": node, "gpu": gpu, "xid": value}] if value else [])
            return {"kind": "complete", "exit": 0, "delay": 0.1,
                    "logs": {container["name"]: "Successfully injected field info.\n"}}
        return None

    def _kubelet(self):
        return getattr(getattr(self.twins, "ctx", None), "kubelet", None)

    def _client_ip(self, pod):
        st = pod.get("status") or {}
        kubelet = self._kubelet()
        if pod["spec"].get("hostNetwork"):
            return st.get("hostIP") or (kubelet._node_ip(pod["spec"].get("nodeName")) if kubelet else None)
        return st.get("podIP") or (kubelet._pod_ip(pod) if kubelet and pod["metadata"].get("uid") else None)

    def _expand(self, pod, container, word):
        """The shell's $VAR / ${VAR} expansion with the container's env (value or the fieldRefs
        status.hostIP, status.podIP, spec.nodeName), as `sh -c` would see it in the pod."""
        env = {}
        kubelet = self._kubelet()
        node = pod["spec"].get("nodeName")
        for e in container.get("env") or []:
            ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            if ref == "status.hostIP":
                env[e["name"]] = (pod.get("status") or {}).get("hostIP") or (kubelet._node_ip(node) if kubelet else "")
            elif ref == "status.podIP":
                env[e["name"]] = self._client_ip(pod) or ""
            elif ref == "spec.nodeName":
                env[e["name"]] = node or ""
            elif "value" in e:
                env[e["name"]] = str(e["value"])
        word = word.strip("'\"")
        return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), ""), word)

    def _hostengine(self, client_pod, host):
        """The Ready standalone host engine pod a dcgmi client in client_pod reaches at `host`
        ("addr[:port]"), or None (refused, no such host, or dropped by a NetworkPolicy)."""
        from .netpol import Network, Peer, _listens, _ready
        address, sep, port_text = host.rpartition(":")
        if not sep or not port_text.isdigit():
            address, port_text = host, str(HOSTENGINE_PORT)
        address, port = address.strip("[]"), int(port_text)
        if address.startswith("unix") or not address:
            return None               # no host engine socket is mounted into the client pod
        pods = self._list("pods")
        client_pod = dict(client_pod, status=dict(client_pod.get("status") or {}, podIP=self._client_ip(client_pod)))
        net = Network(pods, self._list("services"), self._list("namespaces"),
                      self._list("networkpolicies.networking.k8s.io"))
        client = net.peer_of_pod(client_pod)
        node = client_pod["spec"].get("nodeName")

        def engine(pod):
            labels = pod["metadata"].get("labels") or {}
            return (labels.get("app") in (HOSTENGINE_APP, DRA_HOSTENGINE_APP) and (pod.get("status") or {}).get("phase") == "Running"
                    and _ready(pod) and (pod.get("status") or {}).get("podIP"))

        if address in LOOPBACK:
            if not client_pod["spec"].get("hostNetwork"):
                return None           # the client's own network namespace: nothing listens there
            targets = [(p, port) for p in pods if engine(p) and p["spec"].get("hostNetwork")
                       and p["spec"].get("nodeName") == node]
        else:
            ip, error = net.resolve(client, address)
            if error:
                return None
            svc = net.service_by_ip(ip)
            if svc is not None:
                targets = net.endpoints(svc, port, "TCP") or []
                if (svc.get("spec") or {}).get("internalTrafficPolicy") == "Local":
                    targets = [(p, t) for p, t in targets if p["spec"].get("nodeName") == node]
            else:
                targets = [(p, port) for p in pods if engine(p) and p["status"]["podIP"] == ip]
        for pod, target in targets:
            if not engine(pod) or not _listens(pod, target, "TCP"):
                continue
            dst = Peer(pod["status"]["podIP"]) if pod["spec"].get("hostNetwork") else net.peer_of_pod(pod)
            if net.allowed(client, dst, target, "TCP"):
                return pod
        return None

    # -- HTTP -----------------------------------------------------------------------------
    def handle(self, method, parts, body=b""):
        """(status, body bytes, content type) for /_sim/dcgm/..."""
        if parts == ["faults"] and method == "GET":
            return 200, json.dumps(self.faults).encode(), "application/json"
        if parts == ["faults"] and method == "POST":
            try:
                given = json.loads(body or b"{}")
                unknown = set(given) - set(FAULT_KEYS)
                if unknown:
                    raise FaultError("unknown fault(s) %s; known: %s" % (sorted(unknown), ", ".join(FAULT_KEYS)))
                validate_faults(given, self.nodes)
            except (ValueError, AttributeError) as exc:
                return 400, json.dumps({"error": str(exc)}).encode(), "application/json"
            with self.lock:
                self.faults.update(given)
            return 200, json.dumps(self.faults).encode(), "application/json"
        if len(parts) == 2 and parts[1] == "metrics" and method == "GET":
            node = parts[0]
            if node not in self.nodes or not self.nodes[node].get("gpus"):
                return 404, b"no GPU node %s\n" % node.encode(), "text/plain; charset=utf-8"
            text = self.metrics(node)
            if text is None:
                return 503, b"dcgm-exporter not running on this node\n", "text/plain; charset=utf-8"
            return 200, text.encode(), "text/plain; version=0.0.4; charset=utf-8"
        return 404, b"not found\n", "text/plain; charset=utf-8"

    # -- state ----------------------------------------------------------------------------
    def _list(self, resource):
        try:
            return self.store.list(resource, None)
        except Exception:  # noqa: BLE001 - unknown resource (CRD missing) means none
            return []

    def _exporter_pod(self, node):
        for pod in self._list("pods"):
            labels = pod["metadata"].get("labels") or {}
            if labels.get("app") not in (APP, DRA_APP) or pod["spec"].get("nodeName") != node:
                continue
            st = pod.get("status") or {}
            if st.get("phase") == "Running" and all(c.get("ready") for c in st.get("containerStatuses") or [{}]):
                return pod
        return None

    def _policy(self):
        pols = self._list("clusterpolicies.nvidia.com")
        return pols[0] if pols else None

    def _gpu_cluster(self):
        found = self._list("gpuclusters.nvidia.com")
        return found[0] if found else None

    def _fields(self, policy, namespace):
        name = (((policy or {}).get("spec") or {}).get("dcgmExporter") or {}).get("config", {}).get("name")
        if name:
            cm = self.store.get("configmaps", namespace, name)
            if cm is not None and (cm.get("data") or {}).get("dcgm-metrics.csv"):
                return parse_csv(cm["data"]["dcgm-metrics.csv"])
        return _default_fields()

    def _fault(self, key, node, gpu):
        for item in self.faults.get(key) or []:
            if item.get("node") == node and item.get("gpu") == gpu:
                return item
        return None

    def _holders(self, node):
        """[(pod, container, resource, count)] of Running pods on the node holding GPU resources,
        oldest first (the device plugin hands out devices in that order here)."""
        out = []
        pods = [p for p in self._list("pods") if p["spec"].get("nodeName") == node
                and (p.get("status") or {}).get("phase") == "Running"]
        pods.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
        for pod in pods:
            for c in pod["spec"].get("containers") or []:
                limits = (c.get("resources") or {}).get("limits") or {}
                for res, qty in sorted(limits.items()):
                    if res.startswith(GPU_RESOURCES):
                        try:
                            n = int(str(qty))
                        except ValueError:
                            continue
                        if n > 0:
                            out.append((pod, c["name"], res, n))
        return out

    def _devices(self, node):
        """[(gpu index, MIG (profile, instance id) or None)] the exporter reports."""
        gpus = self.nodes[node]["gpus"]
        layout = None
        if self.twins is not None:
            try:
                layout = self.twins.ctx.mig.layout(node)
            except AttributeError:
                layout = None
        out = []
        for i in range(gpus["count"]):
            mig = layout[i] if layout and i < len(layout) else None
            if mig:
                gi = 1
                for profile, n in sorted(mig.items()):
                    for _ in range(n):
                        out.append((i, (profile, gi)))
                        gi += 1
            else:
                out.append((i, None))
        return out

    def _assign(self, node, devices):
        """device -> [(pod, container)]: whole GPUs and MIG slices one pod each, shared
        (time-sliced) replicas several pods per GPU."""
        free_whole = [d for d in devices if d[1] is None]
        free_mig = [d for d in devices if d[1] is not None]
        out = dict((d, []) for d in devices)
        shared = []
        for pod, container, res, n in self._holders(node):
            if res == "nvidia.com/gpu.shared":
                shared.extend([(pod, container)] * n)
                continue
            for _ in range(n):
                pool = free_whole if res == "nvidia.com/gpu" and free_whole else free_mig
                if res.startswith("nvidia.com/mig-"):
                    want = res[len("nvidia.com/mig-"):]
                    pool = [d for d in free_mig if d[1][0].replace("+", ".") == want]
                if not pool:
                    break
                dev = pool[0]
                (free_whole if dev in free_whole else free_mig).remove(dev)
                out[dev].append((pod, container))
        whole = [d for d in devices if d[1] is None]
        for k, holder in enumerate(shared):      # replicas round-robin over the GPUs
            if whole:
                out[whole[k % len(whole)]].append(holder)
        return out

    def _strays(self, node, devices):
        """device -> pod using it without an allocation (NVIDIA_VISIBLE_DEVICES honoured by the
        runtime). The exporter learns pods from the kubelet's pod-resources API, which knows only
        the device plugin's allocations: the GPU is busy, its series carry no pod."""
        from .twins import nvidia_runtime
        facts, policy = self.nodes[node], self._policy()
        out = {}
        whole = [d for d in devices if d[1] is None]
        for pod in self._list("pods"):
            if pod["spec"].get("nodeName") != node or (pod.get("status") or {}).get("phase") != "Running":
                continue
            if any(o.get("kind") == "DaemonSet" for o in pod["metadata"].get("ownerReferences") or []):
                continue  # operands (device plugin, exporter) touch every GPU without using it
            for c in pod["spec"].get("containers") or []:
                seen, want, _why = nvidia_runtime.visible(facts, policy, pod, c,
                                                          nvidia_runtime.cuda_image_env(c.get("image")))
                for dev in whole[:seen] if seen > want else ():
                    out.setdefault(dev, pod)
        return out

    # -- the text ---------------------------------------------------------------------------
    def metrics(self, node):
        exporter = self._exporter_pod(node)
        with self.lock:
            down = node in (self.faults.get("dcgm_exporter_down") or [])
        if exporter is None or down:
            return None
        policy = self._policy()
        namespace = exporter["metadata"]["namespace"]
        # the GPUCluster names the exporter's metrics ConfigMap as the ClusterPolicy does
        fields = self._fields(policy or self._gpu_cluster(), namespace)
        image = (exporter["spec"]["containers"][0].get("image") or "") if exporter["spec"].get("containers") else ""
        host_label = "hostname" if _exporter_version(image) >= (4, 8, 3) else "Hostname"
        facts = self.nodes[node]
        gpus = facts["gpus"]
        model = gpus["model"].replace("-", " ")
        tdp = next((w for k, w in TDP_WATTS.items() if k in gpus["model"]), 300)
        driver = facts.get("host_driver") or ((policy or {}).get("spec", {}).get("driver") or {}).get(
            "version") or "580.95.05"
        label_fields = [f for f, t, _h in fields if t == "label"]
        devices = self._devices(node)
        holders = self._assign(node, devices)
        strays = self._strays(node, devices)
        elapsed = time.monotonic() - self.started
        series = dict((f, []) for f, t, _h in fields if t != "label")
        with self.lock:
            for dev in devices:
                index, mig = dev
                xid = self._fault("gpu_xid", node, index)
                if xid and xid.get("lost"):
                    continue
                base = {"gpu": str(index), "UUID": _uuid(node, index),
                        "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 0x10 * index),
                        "device": "nvidia%d" % index, "modelName": model, host_label: node}
                for f in label_fields:
                    if f == "DCGM_FI_DRIVER_VERSION":
                        base[f] = driver
                if mig:
                    base["GPU_I_PROFILE"], base["GPU_I_ID"] = mig[0], str(mig[1])
                held = holders.get(dev) or [None]
                for holder in held:
                    labels = dict(base)
                    if holder:
                        pod, container = holder
                        labels.update(pod=pod["metadata"]["name"], namespace=pod["metadata"]["namespace"],
                                      container=container)
                    else:
                        labels.update(pod="", namespace="", container="")
                    user = holder or ((strays[dev], "") if dev in strays else None)
                    values = self._values(node, index, user, gpus, tdp, elapsed, xid, len(held))
                    for f in series:
                        if f in values:
                            series[f].append((labels, values[f]))
        lines = []
        for name, t, text in fields:
            if t == "label" or not series.get(name):
                continue
            lines.append("# HELP %s %s" % (name, text))
            lines.append("# TYPE %s %s" % (name, t))
            for labels, value in series[name]:
                lines.append("%s{%s} %s" % (name, ",".join('%s="%s"' % (k, _label_escape(v))
                                                          for k, v in labels.items()), _num(value)))
        return "\n".join(lines) + "\n"

    def _values(self, node, index, holder, gpus, tdp, elapsed, xid, sharers):
        util = 0.0
        mem_used = 0.0
        total = float(gpus["memory_mib"])
        if holder:
            ann = holder[0]["metadata"].get("annotations") or {}
            try:
                util = float(ann.get(UTIL_ANNOTATION, 80))
            except ValueError:
                util = 80.0
            try:
                mem_used = float(ann.get(MEMORY_ANNOTATION, total * 0.6 / sharers))
            except ValueError:
                mem_used = total * 0.6 / sharers
        hot = self._fault("gpu_overheat", node, index)
        ecc = self._fault("gpu_ecc_dbe", node, index)
        temp = float(hot.get("temp", 95)) if hot else 34.0 + util * 0.4
        power = 0.1 * tdp + util / 100.0 * 0.85 * tdp
        reserved = 512.0
        return {
            "DCGM_FI_DEV_GPU_UTIL": util, "DCGM_FI_DEV_MEM_COPY_UTIL": util * 0.5,
            "DCGM_FI_DEV_ENC_UTIL": 0, "DCGM_FI_DEV_DEC_UTIL": 0,
            "DCGM_FI_DEV_SM_CLOCK": 1980 if util else 345, "DCGM_FI_DEV_MEM_CLOCK": 2619,
            "DCGM_FI_DEV_GPU_TEMP": temp, "DCGM_FI_DEV_MEMORY_TEMP": temp + 6,
            "DCGM_FI_DEV_POWER_USAGE": power,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": int(power * elapsed * 1000),
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
            "DCGM_FI_DEV_XID_ERRORS": int(xid["xid"]) if xid else 0,
            "DCGM_FI_DEV_FB_TOTAL": total, "DCGM_FI_DEV_FB_USED": mem_used,
            "DCGM_FI_DEV_FB_RESERVED": reserved, "DCGM_FI_DEV_FB_FREE": max(total - mem_used - reserved, 0),
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": 0,
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": int(ecc.get("count", 1)) if ecc else 0,
            "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": int(ecc.get("count", 1)) if ecc else 0,
            "DCGM_FI_DEV_RETIRED_SBE": 0, "DCGM_FI_DEV_RETIRED_DBE": 0, "DCGM_FI_DEV_RETIRED_PENDING": 0,
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 0,
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": 0,
            "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": 0,
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 0, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 0,
            "DCGM_FI_DEV_POWER_VIOLATION": 0,
            "DCGM_FI_DEV_THERMAL_VIOLATION": int(elapsed * 0.5e9) if hot else 0,
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0x40 if hot else 0,
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0, "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": util / 100.0, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": util / 200.0,
            "DCGM_FI_PROF_DRAM_ACTIVE": util / 150.0, "DCGM_FI_PROF_PCIE_TX_BYTES": util * 1e7,
            "DCGM_FI_PROF_PCIE_RX_BYTES": util * 2e7,
        }


def _uuid(node, index):
    h = hashlib.sha1(("%s/%d" % (node, index)).encode()).hexdigest()
    return "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def _num(value):
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)
