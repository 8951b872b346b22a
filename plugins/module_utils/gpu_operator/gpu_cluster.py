# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness of the GPU Operator's DRA stack: the GPUCluster and the ResourceSlices per node.

The GPUCluster reports like the ClusterPolicy (gpucluster_controller.go v26.7.0: status.state
ready/notReady, Ready=True reason Reconciled only when every state synced; Error=True with
PrerequisiteNotMet while a ClusterPolicy exists, ReconcileFailed, OperandNotReady), so the wait is
cluster_policy's with another Stack. What a ready GPUCluster does not say is whether a node's GPUs
can be claimed: that needs the DRA driver's kubelet plugin to run there and publish the node's
pool. So a served node is one whose ResourceSlices (driver gpu.nvidia.com, newest generation of the
pool, all of its slices present) list GPU or MIG devices with the attributes claims select on, and,
when the caller knows it, as many physical GPUs as the host reports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import (
    DRA_ATTR_PARENT_UUID,
    DRA_ATTR_PRODUCT,
    DRA_ATTR_PROFILE,
    DRA_ATTR_TYPE,
    DRA_ATTR_UUID,
    DEVICE_CLASS_GPU,
    DRA_DRIVER_NAME,
    DRA_KUBELET_PLUGIN_DAEMONSET,
    DRA_MIN_KUBERNETES,
    DRA_TYPE_GPU,
    DRA_TYPE_MIG,
    GC_STATE_READY,
    GPUCLUSTER_API_VERSION,
    GPUCLUSTER_CRD,
    GPUCLUSTER_KIND,
    LABEL_DEPLOY_DRA_DRIVER,
    LABEL_GPU_PRESENT,
    LABEL_NFD_NVIDIA_PCI,
    RESOURCE_API_VERSION,
    RESOURCE_SLICE_KIND,
)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.cluster_policy import (
    ClusterPolicyWaiter,
    Stack,
    pod_healthy,
    pod_state,
    untolerated,
)

GPU_CLUSTER = Stack(GPUCLUSTER_API_VERSION, GPUCLUSTER_KIND, GPUCLUSTER_CRD, GC_STATE_READY,
                    "gpuCluster.deployCR=false")

# What claims select on (docs/templates, the DeviceClasses' CEL): every device carries these.
GPU_ATTRS = (DRA_ATTR_TYPE, DRA_ATTR_UUID, DRA_ATTR_PRODUCT)
MIG_ATTRS = GPU_ATTRS[:1] + (DRA_ATTR_PROFILE, DRA_ATTR_PARENT_UUID, DRA_ATTR_PRODUCT)


def attribute(device, name, driver=DRA_DRIVER_NAME):
    """The value of a device attribute, unqualified or qualified by the driver's domain (both
    spellings mean the same in resource.k8s.io/v1), whatever its type field."""
    attrs = device.get("attributes") or {}
    value = attrs.get(name, attrs.get("%s/%s" % (driver, name)))
    if not isinstance(value, dict):
        return None
    for key in ("string", "int", "bool", "version"):
        if key in value:
            return value[key]
    return None


def _newest(slices):
    """The slices of each pool's newest generation ({pool: [slices]}) and the pools still incomplete
    (the allocator ignores older generations and waits for resourceSliceCount slices)."""
    pools = {}
    for item in slices:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        pools.setdefault(pool.get("name"), []).append(item)
    newest, incomplete = {}, {}
    for name, items in pools.items():
        generation = max(((i["spec"].get("pool") or {}).get("generation") or 0) for i in items)
        current = [i for i in items if ((i["spec"].get("pool") or {}).get("generation") or 0) == generation]
        want = max(((i["spec"].get("pool") or {}).get("resourceSliceCount") or 1) for i in current)
        newest[name] = current
        if len(current) < want:
            incomplete[name] = (len(current), want, generation)
    return newest, incomplete


def published(slices, driver=DRA_DRIVER_NAME):
    """What the driver publishes per node: {node: {gpus, mig: {profile: n}, devices, physical_gpus,
    problems}} from ResourceSlice dicts (other drivers' slices are ignored)."""
    mine = [s for s in slices or () if (s.get("spec") or {}).get("driver") == driver]
    newest, incomplete = _newest(mine)
    report = {}
    for pool, items in sorted(newest.items(), key=lambda kv: str(kv[0])):
        for item in items:
            node = (item.get("spec") or {}).get("nodeName") or pool
            entry = report.setdefault(node, {"gpus": 0, "mig": {}, "devices": [], "physical_gpus": 0,
                                             "problems": [], "_uuids": set()})
            if pool in incomplete and not any("incomplete" in p for p in entry["problems"]):
                have, want, generation = incomplete[pool]
                entry["problems"].append("pool %s generation %s is incomplete: %d of %d ResourceSlices published"
                                         % (pool, generation, have, want))
            for device in (item.get("spec") or {}).get("devices") or ():
                name = device.get("name")
                entry["devices"].append(name)
                kind = attribute(device, DRA_ATTR_TYPE, driver)
                if kind == DRA_TYPE_GPU:
                    wanted, uuid_attr = GPU_ATTRS, DRA_ATTR_UUID
                    entry["gpus"] += 1
                elif kind == DRA_TYPE_MIG:
                    wanted, uuid_attr = MIG_ATTRS, DRA_ATTR_PARENT_UUID
                    profile = attribute(device, DRA_ATTR_PROFILE, driver) or "<no profile>"
                    entry["mig"][profile] = entry["mig"].get(profile, 0) + 1
                else:
                    continue   # vfio and later device types: not claimable as GPUs here
                missing = [a for a in wanted if attribute(device, a, driver) in (None, "")]
                if missing:
                    entry["problems"].append("device %s (type %s) lacks the attribute%s %s" % (
                        name, kind, "" if len(missing) == 1 else "s", ", ".join(missing)))
                uuid = attribute(device, uuid_attr, driver)
                if uuid:
                    entry["_uuids"].add(uuid)
    for entry in report.values():
        entry["physical_gpus"] = len(entry.pop("_uuids"))
        entry["devices"].sort()
    return report


def node_problems(node, report, expect_gpus=None):
    """Why the node's published devices are not what a claim needs ([] when served)."""
    entry = report.get(node)
    if entry is None:
        return ["no ResourceSlice of driver %s for the node" % DRA_DRIVER_NAME]
    problems = list(entry["problems"])
    if not entry["gpus"] and not entry["mig"]:
        problems.append("its ResourceSlices list no GPU or MIG device")
    want = (expect_gpus or {}).get(node)
    if want and entry["physical_gpus"] != want:
        problems.append("publishes %d physical GPU%s (gpu devices and MIG parents), the host reports %d" % (
            entry["physical_gpus"], "" if entry["physical_gpus"] == 1 else "s", want))
    return problems


def why_no_slices(name, node, daemonsets, pods, report, expect_gpus=None, logs=None):
    """Reasons a node has no usable slices, the most likely first: the kubelet plugin's absence or
    failure explains the slices' absence."""
    if node is None:
        return ["node %s does not exist" % name]
    labels = (node.get("metadata") or {}).get("labels") or {}
    why = ["taint %s is not tolerated by %s: add a toleration to the chart value daemonsets.tolerations"
           % (taint, ", ".join(refused)) for taint, refused in untolerated(node, daemonsets)]
    if labels.get(LABEL_NFD_NVIDIA_PCI) != "true" and labels.get(LABEL_GPU_PRESENT) != "true":
        why.append("neither %s=true nor %s=true: NFD/GFD did not label it as a GPU node"
                   % (LABEL_NFD_NVIDIA_PCI, LABEL_GPU_PRESENT))
    elif labels.get(LABEL_DEPLOY_DRA_DRIVER) != "true":
        why.append("label %s=true is missing: the operator has not selected it for the DRA kubelet plugin"
                   % LABEL_DEPLOY_DRA_DRIVER)
    plugin = [p for p in pods if (p.get("spec") or {}).get("nodeName") == name
              and p["metadata"]["name"].startswith(DRA_KUBELET_PLUGIN_DAEMONSET)]
    if not plugin and name not in report:
        why.append("no %s pod runs on it" % DRA_KUBELET_PLUGIN_DAEMONSET)
    for pod in plugin:
        if not pod_healthy(pod):
            state, _container = pod_state(pod)
            line = (logs or {}).get(pod["metadata"]["name"])
            tail = (": last log line: %s" % line) if line else ""
            why.append("DRA kubelet plugin pod %s is %s%s" % (pod["metadata"]["name"], state, tail))
    return why + node_problems(name, report, expect_gpus)


def mig_only_hint(report, pods):
    """Why operand pods that claim whole GPUs stay Pending: nodes that publish MIG devices only (a
    MIG-enabled GPU is not announced whole), while the validator, DCGM and exporter claim
    gpu.nvidia.com devices on every GPU node. None when no node is MIG-only or nothing is pending."""
    mig_only = sorted(n for n, e in (report or {}).items() if e["mig"] and not e["gpus"])
    pending = [p for p in pods if not p.get("node") and p.get("unschedulable")]
    if not mig_only or not pending:
        return None
    return ("%s publish%s only MIG devices (every GPU runs MIG), but the GPUCluster's validator, DCGM and DCGM "
            "exporter claim a whole GPU (DeviceClass %s) on every GPU node: those pods stay Pending there and the "
            "GPUCluster notReady; leave one GPU of each such node whole (a per-GPU mig-parted config)" % (
                ", ".join(mig_only), "es" if len(mig_only) == 1 else "", DEVICE_CLASS_GPU))


class GPUClusterWaiter(ClusterPolicyWaiter):
    """Wait on the GPUCluster, then until every expected node publishes its GPUs as ResourceSlices
    (one LIST of ResourceSlices, then a watch from its resourceVersion)."""

    stack = GPU_CLUSTER
    node_problem = "has no claimable GPU"
    nodes_problem = "publish no claimable GPU"
    node_result_key = "nodes_without_slices"
    extra_params = ("expect_gpus",)

    def __init__(self, kube, name, accept_reasons=None, expect_gpus=None, **kw):
        ClusterPolicyWaiter.__init__(self, kube, name, accept_reasons or ("Reconciled",), **kw)
        self.expect_gpus = dict(expect_gpus or {})
        self.report = None

    def _missing(self):
        return [n for n in self.expect_nodes if node_problems(n, self.report, self.expect_gpus)]

    def wait_nodes(self, deadline):
        follow = self._watch(RESOURCE_API_VERSION, RESOURCE_SLICE_KIND)
        follow.sync()
        self.report = published(follow.objects.values())
        if self._missing():
            for _etype, _obj in follow.events(deadline):
                self.report = published(follow.objects.values())
                if not self._missing():
                    break
        self.node_reasons = dict((n, node_problems(n, self.report, self.expect_gpus)) for n in self._missing())
        return not self.node_reasons

    def node_reasons_for(self, daemonsets, pods, logs):
        slices = self._items(RESOURCE_API_VERSION, RESOURCE_SLICE_KIND)
        self.report = published(slices)
        known = dict((n["metadata"]["name"], n) for n in self._items("v1", "Node"))
        return dict((node, why_no_slices(node, known.get(node), daemonsets, pods, self.report,
                                         self.expect_gpus, logs))
                    for node in self.expect_nodes if node_problems(node, self.report, self.expect_gpus))

    def diagnostics(self, obj, summary):
        lines, operands = ClusterPolicyWaiter.diagnostics(self, obj, summary)
        if self.report is None:
            self.report = published(self._items(RESOURCE_API_VERSION, RESOURCE_SLICE_KIND))
        hint = mig_only_hint(self.report, operands.get("pods") or [])
        if hint:
            lines.append("hint: " + hint)
        return lines, operands

    def extra_result(self):
        if self.report is None:
            return {}
        return {"resource_slices": dict(
            (node, dict((k, v) for k, v in entry.items() if k != "problems"))
            for node, entry in sorted(self.report.items()) if not self.expect_nodes or node in self.expect_nodes)}


def prerequisites(module):
    """The API must serve resource.k8s.io/v1 before a GPUCluster can work (the chart refuses too)."""
    if module.kube.served(RESOURCE_API_VERSION, RESOURCE_SLICE_KIND):
        return
    raise DomainError("The cluster serves no %s %s: the GPUCluster stack needs Dynamic Resource Allocation, GA "
                      "from Kubernetes %d.%d; upgrade the cluster or use gpu_operator_allocation_api: device-plugin"
                      % (RESOURCE_API_VERSION, RESOURCE_SLICE_KIND, DRA_MIN_KUBERNETES[0], DRA_MIN_KUBERNETES[1]),
                      ready=False)
