"""Nodes from the cluster file, and Node Feature Discovery's labels.

Node objects are written once at start (as a kubelet registering would); GPU
facts (model, count, host driver) stay in memory for the other twins, exactly
like the hardware a real operator can only discover through its pods.
"""

import functools
import json
import os

from ..errors import ApiError
from .util import parse_quantity, patch_labels

NFD_PREFIX = "feature.node.kubernetes.io/"
# the NFD subchart's binaries (container `command`), how the twin recognises its pods
NFD_MASTER = "nfd-master"
NFD_WORKER = "nfd-worker"


def _examples_dir():
    from ..clusterfile import SHARED
    return os.path.join(SHARED, "upstream", "gpu-operator", "examples")


@functools.lru_cache(maxsize=4)
def _example_labels(mixed):
    name = "mig-mixed-node-labels.json" if mixed else "mig-node-labels.json"
    try:
        with open(os.path.join(_examples_dir(), name), encoding="utf-8") as fh:
            return json.load(fh)
    except OSError:
        return {}


def example_labels(mixed=False):
    """The real label set of a MIG node from NVIDIA's docs ({} when ../shared is absent)."""
    return dict(_example_labels(bool(mixed)))


# Used only when ../shared is absent: a small subset of real NFD labels.
_FALLBACK_NFD = {
    "cpu-cpuid.AVX2": "true", "cpu-cpuid.AVX": "true", "cpu-hardware_multithreading": "true",
    "cpu-model.vendor_id": "AMD", "cpu-model.family": "25", "cpu-model.id": "1",
    "kernel-config.NO_HZ": "true", "pci-10de.present": "true", "pci-10de.sriov.capable": "true",
    "pci-8086.present": "true", "storage-nonrotationaldisk": "true",
    "system-os_release.ID": "ubuntu", "system-os_release.VERSION_ID": "22.04",
    "system-os_release.VERSION_ID.major": "22", "system-os_release.VERSION_ID.minor": "04",
}


def nfd_labels(facts):
    """NFD labels for one node, adapted from the real example to its kernel/OS/PCI devices."""
    base = {k: v for k, v in example_labels().items() if k.startswith(NFD_PREFIX)}
    if not base:
        base = {NFD_PREFIX + k: v for k, v in _FALLBACK_NFD.items()}
    kernel = facts["kernel"]
    parts = (kernel.split("-")[0].split(".") + ["0", "0", "0"])[:3]
    base.update({NFD_PREFIX + "kernel-version.full": kernel,
                 NFD_PREFIX + "kernel-version.major": parts[0],
                 NFD_PREFIX + "kernel-version.minor": parts[1],
                 NFD_PREFIX + "kernel-version.revision": parts[2]})
    osid, _, ver = _os_release(facts["os_image"])
    vparts = (ver.split(".") + ["0"])[:2]
    base.update({NFD_PREFIX + "system-os_release.ID": osid,
                 NFD_PREFIX + "system-os_release.VERSION_ID": ver,
                 NFD_PREFIX + "system-os_release.VERSION_ID.major": vparts[0],
                 NFD_PREFIX + "system-os_release.VERSION_ID.minor": vparts[1]})
    if not facts.get("gpus"):
        base = {k: v for k, v in base.items() if "pci-10de" not in k}
    return base


def _os_release(image):
    words = image.split()
    osid = words[0].lower() if words else "linux"
    ver = next((w for w in words[1:] if w[:1].isdigit()), "1.0")
    ver = ".".join(ver.split(".")[:2])
    return osid, "", ver


def node_object(facts, index):
    """The Node a kubelet would register for these facts."""
    labels = {"kubernetes.io/hostname": facts["name"], "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
              "beta.kubernetes.io/arch": "amd64"}
    if facts["role"] == "control-plane":
        labels["node-role.kubernetes.io/control-plane"] = ""
        labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
    labels.update(facts["labels"])
    annotations = {"node.alpha.kubernetes.io/ttl": "0",
                   "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
    annotations.update(facts.get("annotations") or {})
    spec = {"podCIDR": "10.244.%d.0/24" % index, "podCIDRs": ["10.244.%d.0/24" % index]}
    if facts["taints"]:
        spec["taints"] = [dict(t) for t in facts["taints"]]
    if facts["unschedulable"]:
        spec["unschedulable"] = True
        spec.setdefault("taints", []).append(
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": facts["name"], "labels": labels, "annotations": annotations},
            "spec": spec}


def node_status(facts, index, kubernetes_version):
    mem_ki = int(parse_quantity(facts["memory"]) // 1024)
    eph = int(parse_quantity(facts["ephemeral_storage"]))
    capacity = {"cpu": facts["cpu"], "memory": "%dKi" % mem_ki, "pods": str(facts["pods"]),
                "ephemeral-storage": "%dKi" % (eph // 1024), "hugepages-1Gi": "0",
                "hugepages-2Mi": "0"}
    allocatable = dict(capacity)
    # kubelet reserves a little memory (eviction threshold 100Mi by default)
    allocatable["memory"] = "%dKi" % max(0, mem_ki - 102400)
    allocatable["ephemeral-storage"] = str(int(eph * 0.9))
    cond = [("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status")]
    from .util import now_iso
    now = now_iso()
    return {
        "capacity": capacity, "allocatable": allocatable,
        "conditions": [{"type": t, "status": s, "reason": r, "message": m,
                        "lastHeartbeatTime": now, "lastTransitionTime": now} for t, s, r, m in cond],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.%d" % (10 + index)},
                      {"type": "Hostname", "address": facts["name"]}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"machineID": "%032x" % (index + 1), "systemUUID": "sim-%04d" % index,
                     "bootID": "boot-%04d" % index, "kernelVersion": facts["kernel"],
                     "osImage": facts["os_image"], "containerRuntimeVersion": facts["container_runtime"],
                     "kubeletVersion": kubernetes_version, "kubeProxyVersion": kubernetes_version,
                     "operatingSystem": "linux", "architecture": "amd64"},
    }


class Nodes:
    """Registers the nodes; later passes only keep NFD labels where they belong."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.facts = {n["name"]: n for n in ctx.spec["nodes"]}
        self._labelled = set()      # nodes NFD labelled since the last prune
        self._pruned = set()        # uids of prune Job pods already acted on

    def register(self):
        store = self.ctx.store
        for i, facts in enumerate(self.ctx.spec["nodes"]):
            obj = node_object(facts, i + 1)
            try:
                created = store.create("nodes", obj, admit=False)
            except ApiError as err:
                if err.code != 409:
                    raise
                created = store.get("nodes", None, facts["name"])
            created["status"] = node_status(facts, i + 1, self.ctx.spec["kubernetes_version"])
            created["metadata"].pop("resourceVersion", None)
            store.update_status("nodes", created)
        if self.ctx.spec["nfd"] == "preinstalled" and not self.ctx.faults.get("nfd_labels_missing"):
            self.label_nfd()

    def nfd_running(self):
        """NFD can label: preinstalled, or (mode operator) an nfd-master pod runs."""
        mode = self.ctx.spec["nfd"]
        if self.ctx.faults.get("nfd_labels_missing") or mode == "absent":
            return False
        if mode == "preinstalled":
            return True
        # mode "operator": the chart's NFD subchart (nfd-master Deployment + nfd-worker DaemonSet)
        return bool(self.ctx.running_pods(NFD_MASTER))

    def label_nfd(self, names=None):
        for name, facts in self.facts.items():
            if names is None or name in names:
                patch_labels(self.ctx.store, "nodes", None, name, nfd_labels(facts))

    def reconcile(self):
        if self.ctx.spec["nfd"] == "preinstalled":
            return                  # labelled once at register()
        self._prune()
        if not self.nfd_running():
            return
        # nfd-worker reports the features of ITS node; nfd-master labels that node. A node the
        # worker DaemonSet does not reach (untolerated taint, selector) gets no NFD labels.
        workers = {p["spec"].get("nodeName") for p in self.ctx.running_pods(NFD_WORKER)}
        todo = sorted(n for n in workers if n in self.facts and n not in self._labelled)
        if todo:
            self.label_nfd(todo)
            self._labelled.update(todo)

    def _prune(self):
        """The subchart's post-delete Job runs `nfd-master -prune`: every NFD label goes."""
        for pod in self.ctx.list("pods"):
            uid = pod["metadata"].get("uid")
            if uid in self._pruned or (pod.get("status") or {}).get("phase") != "Succeeded":
                continue
            c = next((c for c in pod["spec"].get("containers") or []
                      if (c.get("command") or [""])[0].rsplit("/", 1)[-1] == NFD_MASTER), None)
            if c is None or "-prune" not in (c.get("args") or []):
                continue
            self._pruned.add(uid)
            for node in self.ctx.list("nodes"):
                have = node["metadata"].get("labels") or {}
                gone = {k: None for k in have if k.startswith(NFD_PREFIX)}
                if gone:
                    patch_labels(self.ctx.store, "nodes", None, node["metadata"]["name"], gone)
            self._labelled.clear()
