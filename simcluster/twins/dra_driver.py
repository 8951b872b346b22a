"""NVIDIA DRA driver for GPUs, kubelet plugin side: the ResourceSlices a node publishes.

What the real gpu-kubelet-plugin (k8s-dra-driver-gpu, the v0.5.0 line the GPU Operator
v26.7.0 deploys as image dra-driver-nvidia-gpu) announces, and when:
  * only while its kubelet-plugin pod (DaemonSet nvidia-dra-driver-kubelet-plugin) runs Ready on
    the node: the plugin enumerates the GPUs through NVML at start and publishes through the
    kubelet plugin helper; the kubelet wipes the driver's slices on the node when the plugin has
    been gone for its wiping delay (timings.dra_wipe_delay), so a restarted plugin finds and
    updates its slice;
  * one ResourceSlice per node without the DynamicMIG feature gate (alpha, off by default):
    driver gpu.nvidia.com, pool = node name (generation bumped on every change,
    resourceSliceCount 1), nodeName set, generateName "<index %05x>-gpu.nvidia.com-<node>-"
    and a controller ownerReference to the Node (resourceslice controller of
    k8s.io/dynamic-resource-allocation);
  * a GPU without MIG mode is one device "gpu-<minor>" (GpuInfo.GetDevice): attributes type=gpu,
    uuid, productName, brand, architecture, cudaComputeCapability/driverVersion/
    cudaDriverVersion (versions, semver-normalised), resource.kubernetes.io/pciBusID and
    pcieRoot; capacity memory (bytes, BinarySI);
  * a GPU in MIG mode is not announced itself (static MIG): each MIG device it carries is
    "gpu-<minor>-mig-<profile without dots>-<GI profile id>-<placement start>" with type=mig,
    parentUUID, profile, the parent's product/brand/architecture/versions/pciBusID and its own
    uuid; capacity multiprocessors, copyEngines, decoders, encoders, jpegEngines, ofaEngines,
    memory (bytes) and one memorySlice<i>=1 per memory slice of its placement.
The MIG layout is the node's (cluster file mig_config, or what the MIG manager twin applied);
a plugin pod snapshots it at start, like the real plugin reads NVML once.
UUIDs and PCI bus ids are the ones the DCGM twin reports for the same GPU index.
"""

import hashlib
import json
import time

from ..errors import ApiError
from .gpu_cluster import DRIVER, KUBELET_PLUGIN
from .gpu_models import model_info
from .util import clone

SLICES = "resourceslices.resource.k8s.io"
ARCH = {"hopper": "Hopper", "ampere": "Ampere", "ada-lovelace": "Ada Lovelace", "blackwell": "Blackwell",
        "turing": "Turing", "volta": "Volta"}
# CUDA driver API version a driver branch reports (cudaDriverGetVersion)
CUDA = {"535": "12.2", "550": "12.4", "555": "12.5", "560": "12.6", "565": "12.7", "570": "12.8",
        "575": "12.9", "580": "13.0", "590": "13.1", "595": "13.2"}
DEFAULT_DRIVER = "595.91.07"
# nvidia-smi mig -lgip profile ids (GpuInstanceProfileInfo.Id) by MIG profile shape
GI_PROFILE_ID = {(1, False, False): 19, (1, True, False): 20, (1, False, True): 15, (2, False, False): 14,
                 (3, False, False): 9, (4, False, False): 5, (7, False, False): 0}


def semver(text):
    """semver.MustParse(x).String(): missing minor/patch become 0."""
    parts = str(text).split(".")
    while len(parts) < 3:
        parts.append("0")
    return ".".join(str(int(p)) if p.isdigit() else p for p in parts[:3])


def binary_si(n):
    """resource.NewQuantity(n, BinarySI) as the API prints it: the largest exact binary suffix."""
    for suffix, size in (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30),
                         ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n and n % size == 0:
            return "%d%s" % (n // size, suffix)
    return str(n)


def gpu_uuid(node, index):
    h = hashlib.sha1(("%s/%d" % (node, index)).encode()).hexdigest()
    return "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def mig_uuid(node, index, name):
    h = hashlib.sha1(("%s/%d/%s" % (node, index, name)).encode()).hexdigest()
    return "MIG-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def pci_bus_id(index):
    return "0000:%02x:00.0" % (0x18 + 0x10 * index)


def _rfc1123(name):
    import re
    name = re.sub(r"[^a-z0-9-.]", "-", name.lower()).strip("-")
    return name[:-1] if name.endswith(".") else name


# possible GPU instance placements (start slices) on a 7-compute/8-memory-slice GPU (H100, A100,
# H200, B200) by (compute slices, memory slices), as NVML lists them
_STARTS_7 = {(1, 1): range(7), (1, 2): (0, 2, 4, 6), (2, 2): (0, 2, 4), (3, 4): (0, 4), (4, 4): (0,), (7, 8): (0,)}


def _placements(devs, info, memory_mib):
    """[(profile, start, size)]: one valid placement of the GPU's MIG devices on its memory
    slices, largest first at the lowest start that still lets the rest fit."""
    compute = info["slices"]
    mem_slices = 8 if compute == 7 else compute
    per_slice = memory_mib / float(mem_slices)
    wanted = []
    for profile, n in sorted(devs.items()):
        g, mem, _ = info["mig"][profile]
        size = {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}.get(g, g) if compute == 7 else g
        size = max(size, int(round(mem / per_slice)))
        starts = _STARTS_7.get((g, size)) if compute == 7 else None
        if starts is None:
            starts = range(0, mem_slices - size + 1, size)
        wanted += [(profile, size, tuple(starts))] * n
    wanted.sort(key=lambda w: (-w[1], w[0]))

    def place(i, used):
        if i == len(wanted):
            return []
        profile, size, starts = wanted[i]
        for start in starts:
            cells = set(range(start, start + size))
            if start + size > mem_slices or cells & used:
                continue
            rest = place(i + 1, used | cells)
            if rest is not None:
                return [(profile, start, size)] + rest
        return None

    return place(0, frozenset()) or []


def _intcap(n):
    return {"value": str(int(n))}


def node_devices(node, facts, layout, driver_version):
    """The devices list the plugin on this node announces (sorted by name within each GPU)."""
    gpus = facts.get("gpus") or {}
    product = gpus.get("model") or ""
    info = model_info(product, gpus.get("memory_mib"))
    memory_mib = gpus.get("memory_mib") or info["memory_mib"]
    driver = str(driver_version or DEFAULT_DRIVER)
    common = {"productName": {"string": product.replace("-", " ")},
              "brand": {"string": "Tesla" if product.startswith("Tesla") else "Nvidia"},
              "architecture": {"string": ARCH.get(info["family"], info["family"].title())},
              "cudaComputeCapability": {"version": semver("%d.%d" % info["compute"])},
              "driverVersion": {"version": semver(driver)},
              "cudaDriverVersion": {"version": semver(CUDA.get(driver.split(".")[0], "13.2"))}}
    devices = []
    for i in range(gpus.get("count") or 0):
        uuid = gpu_uuid(node, i)
        bus = {"resource.kubernetes.io/pciBusID": {"string": pci_bus_id(i)},
               "resource.kubernetes.io/pcieRoot": {"string": "pci0000:%02x" % (0x10 * (i // 2 + 1))}}
        mig = layout[i] if layout and i < len(layout) else None
        if not mig:
            attrs = {"type": {"string": "gpu"}, "uuid": {"string": uuid}}
            attrs.update(clone(common))
            attrs.update(bus)
            devices.append({"name": "gpu-%d" % i, "attributes": attrs,
                            "capacity": {"memory": {"value": binary_si(memory_mib << 20)}}})
            continue
        per_gpu = []
        for profile, start, size in _placements(mig, info, memory_mib):
            g, mem, sms = info["mig"][profile]
            media = "+me" in profile
            double = g == 1 and not media and mem > memory_mib / 7.0 * 1.5
            gi = GI_PROFILE_ID.get((g, media, double), g)
            name = "gpu-%d-mig-%s-%d-%d" % (i, _rfc1123(profile.replace(".", "")), gi, start)
            full = info["slices"]
            attrs = {"type": {"string": "mig"}, "parentUUID": {"string": uuid}, "profile": {"string": profile}}
            attrs.update(clone(common))
            attrs["resource.kubernetes.io/pciBusID"] = clone(bus["resource.kubernetes.io/pciBusID"])
            attrs["uuid"] = {"string": mig_uuid(node, i, name)}
            capacity = {"multiprocessors": _intcap(sms), "copyEngines": _intcap(g),
                        "decoders": _intcap(full if media else g), "encoders": _intcap(0),
                        "jpegEngines": _intcap(full if media else g),
                        "ofaEngines": _intcap(1 if (media or g == full) else 0),
                        "memory": {"value": binary_si(mem << 20)}}
            for s in range(start, start + size):
                capacity["memorySlice%d" % s] = {"value": "1"}
            per_gpu.append({"name": name, "attributes": attrs, "capacity": capacity})
        devices += sorted(per_gpu, key=lambda d: d["name"])
    return devices


class DraDriver:
    """Publishes and withdraws the gpu.nvidia.com ResourceSlice of each node."""

    watches = {"pods", "nodes", SLICES}

    def __init__(self, ctx):
        self.ctx = ctx
        self.snapshots = {}     # plugin pod uid -> devices (read once, at the pod's start)
        self.published = set()  # nodes whose slice this plugin published
        self.gone_since = {}    # node -> when its plugin stopped running Ready (monotonic)

    def _plugins(self):
        """node -> the kubelet-plugin pod running Ready there."""
        ready = {}
        for pod in self.ctx.list("pods"):
            if not any(r.get("kind") == "DaemonSet" and r.get("name") == KUBELET_PLUGIN
                       for r in pod["metadata"].get("ownerReferences") or []):
                continue
            node = pod["spec"].get("nodeName")
            st = pod.get("status") or {}
            if node and st.get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp") and any(
                    c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or []):
                ready[node] = pod
        return ready

    def driver_version(self, node):
        facts = self.ctx.facts.get(node) or {}
        return facts.get("host_driver") or DEFAULT_DRIVER

    def reconcile(self):
        ready = self._plugins()
        live = {p["metadata"]["uid"] for p in ready.values()}
        for uid in list(self.snapshots):
            if uid not in live:
                del self.snapshots[uid]
        try:
            slices = [s for s in self.ctx.list(SLICES) if (s.get("spec") or {}).get("driver") == DRIVER]
        except ApiError:
            return
        by_node = {}
        for s in slices:
            by_node.setdefault(s["spec"].get("nodeName"), []).append(s)
        for node, pod in ready.items():
            uid = pod["metadata"]["uid"]
            if uid not in self.snapshots:
                mig = getattr(self.ctx, "mig", None)
                layout = mig.layout(node) if mig is not None else None
                self.snapshots[uid] = node_devices(node, self.ctx.facts.get(node) or {}, layout,
                                                   self.driver_version(node))
            self._publish(node, self.snapshots[uid], by_node.get(node) or [])
        now = time.monotonic()
        delay = self.ctx.timings.get("dra_wipe_delay", 0.3)
        for node in list(self.gone_since):
            if node in ready:
                del self.gone_since[node]
        for node, have in by_node.items():
            if node in ready or node not in self.published:
                continue     # slices some other writer made are not the kubelet's to remove
            since = self.gone_since.setdefault(node, now)
            if now - since < delay:
                self.ctx.runtime.after(delay - (now - since) + 0.01)
                continue
            for s in have:
                self._delete(s)
            self.published.discard(node)
            del self.gone_since[node]

    def _publish(self, node, devices, have):
        store = self.ctx.store
        self.published.add(node)
        current = have[0] if have else None
        for extra in have[1:]:
            self._delete(extra)
        if current is not None and json.dumps(current["spec"].get("devices"), sort_keys=True) == \
                json.dumps(devices, sort_keys=True):
            return
        generation = ((current or {}).get("spec") or {}).get("pool", {}).get("generation", 0) + 1
        spec = {"driver": DRIVER, "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                "devices": clone(devices)}
        try:
            if current is None:
                owner = self.ctx.get_cached("nodes", node)
                meta = {"generateName": "%05x-%s-%s-" % (0, DRIVER, node)}
                if owner is not None:
                    meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                "uid": owner["metadata"]["uid"], "controller": True}]
                store.create(SLICES, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                      "metadata": meta, "spec": spec})
            else:
                new = clone(current)
                new["spec"] = spec
                store.update(SLICES, new)
        except ApiError as err:
            if err.code in (409, 404):
                self.ctx.runtime.after(0.05)
                return
            raise

    def _delete(self, s):
        try:
            self.ctx.store.delete(SLICES, None, s["metadata"]["name"])
        except ApiError:
            pass
