"""GPU Operator twin: ClusterPolicy -> node labels, operand DaemonSets, status.

Acts only while a pod running the operator binary (container command
`gpu-operator`, as the chart's Deployment renders it) is Running and Ready, in
that pod's namespace, whatever labels its Deployment carries: like the real
operator, it is the running process that reconciles. Operand images come from
the ClusterPolicy, else from that pod's env (VALIDATOR_IMAGE, DRIVER_MANAGER_IMAGE, ...). Behaviour follows
shared/upstream/FACTS.md:
  * NFD labels missing on every node -> state ready, Ready=True reason NFDLabelsMissing;
  * no node with an NVIDIA PCI device -> state ready, reason NoGPUNodes;
  * operand DaemonSets with unavailable pods -> state notReady, Ready=False (reason Error)
    + Error=True reason OperandNotReady "ClusterPolicy is not ready; states not ready: [...]";
  * all ready -> state ready, Ready=True reason Reconciled + Error=False.
Node labels: nvidia.com/gpu.present and nvidia.com/gpu.deploy.<operand>=true unless the
label already has a non-empty value (so `false` sticks); deploy.operands=false turns
every operand off; a host driver under an operator-managed driver is detected by the
driver pod's k8s-driver-manager, which labels the node deploy.driver=pre-installed.
"""

import functools
import io
import json
import os
import tarfile

import yaml

from ..errors import ApiError
from . import gpu_cluster as gc_state
from .context import CLUSTER_POLICIES, GPU_CLUSTERS
from .util import clone, fnv32a, owner_ref, patch_labels, set_condition, write_status

DEPLOY = "nvidia.com/gpu.deploy."
LAST_APPLIED = "nvidia.com/last-applied-hash"
PRESENT = "nvidia.com/gpu.present"
MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_CONFIG = "nvidia.com/mig.config"
NFD_PREFIX = "feature.node.kubernetes.io/"
NFD_GPU_LABELS = ("feature.node.kubernetes.io/pci-10de.present",
                  "feature.node.kubernetes.io/pci-0302_10de.present",
                  "feature.node.kubernetes.io/pci-0300_10de.present")
VALIDATOR_INITS = ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]


def _op(state, ds, key, deploy, repo, image, version, init, containers, enabled=True, selector=None):
    return {"state": state, "ds": ds, "key": key, "deploy": deploy, "image": (repo, image, version),
            "init": init, "containers": containers, "default_enabled": enabled, "selector": selector or {}}


# Real state names, DaemonSet names, node-selector labels and default images (values.yaml).
OPERANDS = [
    _op("state-driver", "nvidia-driver-daemonset", "driver", "driver", "nvcr.io/nvidia", "driver",
        "595.91.07", ["k8s-driver-manager"], ["nvidia-driver-ctr"]),
    _op("state-container-toolkit", "nvidia-container-toolkit-daemonset", "toolkit",
        "container-toolkit", "nvcr.io/nvidia/k8s", "container-toolkit", "v1.20.0",
        ["driver-validation"], ["nvidia-container-toolkit-ctr"]),
    _op("state-operator-validation", "nvidia-operator-validator", "validator", "operator-validator",
        "nvcr.io/nvidia", "gpu-operator", None, VALIDATOR_INITS, ["nvidia-operator-validator"]),
    _op("state-device-plugin", "nvidia-device-plugin-daemonset", "devicePlugin", "device-plugin",
        "nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0", ["toolkit-validation"],
        ["nvidia-device-plugin"]),
    # assets/state-mps-control-daemon/0400_daemonset.yaml: enabled with the device plugin
    # (state_manager.go isStateEnabled), the device plugin's image, on nodes GFD labels
    # nvidia.com/mps.capable=true (an MPS config without MIG devices, internal/lm/nvml.go).
    _op("state-mps-control-daemon", "nvidia-device-plugin-mps-control-daemon", "devicePlugin", "device-plugin",
        "nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0", ["toolkit-validation", "mps-control-daemon-mounts"],
        ["mps-control-daemon-ctr"], selector={"nvidia.com/mps.capable": "true"}),
    _op("state-dcgm", "nvidia-dcgm", "dcgm", "dcgm", "nvcr.io/nvidia/cloud-native", "dcgm",
        "4.6.0-1-ubuntu24.04", ["toolkit-validation"], ["nvidia-dcgm-ctr"], enabled=False),
    _op("state-dcgm-exporter", "nvidia-dcgm-exporter", "dcgmExporter", "dcgm-exporter",
        "nvcr.io/nvidia/k8s", "dcgm-exporter", "4.6.0-4.8.3-distroless", ["toolkit-validation"],
        ["nvidia-dcgm-exporter"]),
    _op("gpu-feature-discovery", "gpu-feature-discovery", "gfd", "gpu-feature-discovery",
        "nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0", ["toolkit-validation"],
        ["gpu-feature-discovery"]),
    _op("state-mig-manager", "nvidia-mig-manager", "migManager", "mig-manager",
        "nvcr.io/nvidia/cloud-native", "k8s-mig-manager", "v0.15.0", ["toolkit-validation"],
        ["nvidia-mig-manager"]),
    _op("state-node-status-exporter", "nvidia-node-status-exporter", "nodeStatusExporter",
        "node-status-exporter", "nvcr.io/nvidia", "gpu-operator", None, [],
        ["nvidia-node-status-exporter"], enabled=False),
]
BY_DS = {o["ds"]: o for o in OPERANDS}
# DaemonSets of the GPUCluster (DRA) stack whose pods the twin follows
DRA_DS = {gc_state.KUBELET_PLUGIN, gc_state.VALIDATOR, gc_state.EXPORTER, gc_state.DCGM}
OPERAND_DS = set(BY_DS) | DRA_DS
# kind -> store resource of what the GPUCluster states render
RESOURCE_OF = {"DeviceClass": "deviceclasses.resource.k8s.io", "DaemonSet": "daemonsets.apps",
               "Deployment": "deployments.apps", "Service": "services",
               "ResourceClaimTemplate": "resourceclaimtemplates.resource.k8s.io",
               "ValidatingAdmissionPolicy": "validatingadmissionpolicies.admissionregistration.k8s.io",
               "ValidatingAdmissionPolicyBinding":
                   "validatingadmissionpolicybindings.admissionregistration.k8s.io"}
# env variable of the operator pod each component's image falls back to (gpuv1.ImagePath)
IMAGE_ENV = {"driver": "DRIVER_IMAGE", "toolkit": "CONTAINER_TOOLKIT_IMAGE",
             "validator": "VALIDATOR_IMAGE", "devicePlugin": "DEVICE_PLUGIN_IMAGE",
             "dcgm": "DCGM_IMAGE", "dcgmExporter": "DCGM_EXPORTER_IMAGE", "gfd": "GFD_IMAGE",
             "migManager": "MIG_MANAGER_IMAGE", "nodeStatusExporter": "VALIDATOR_IMAGE"}
# deploy labels the operator puts on every GPU node (mig-manager only on MIG-capable ones)
DEPLOY_KEYS = ["driver", "container-toolkit", "operator-validator", "device-plugin",
               "gpu-feature-discovery", "dcgm", "dcgm-exporter", "node-status-exporter", "mig-manager"]
# state-dcgm (assets/state-dcgm/0400_dcgm.yml, 0500_service.yaml): nv-hostengine listens on
# containerPort 5555 (no hostPort since the operator moved to a Service with internalTrafficPolicy
# Local); TransformDCGMExporter then sets DCGM_REMOTE_HOSTENGINE_INFO=nvidia-dcgm:5555 on the exporter.
DCGM_DS = "nvidia-dcgm"
DCGM_PORT = 5555
DCGM_REMOTE_ENV = "DCGM_REMOTE_HOSTENGINE_INFO"


def image_path(repository, image, version):
    """gpuv1.ImagePath: repo/image:version, @digest for sha256 versions, bare image otherwise."""
    if not repository and not version:
        return image
    ref = "%s/%s" % (repository, image) if repository else image
    if not version:
        return ref
    return "%s@%s" % (ref, version) if version.startswith("sha256:") else "%s:%s" % (ref, version)


# The operator image carries the CRDs of its release under /opt/gpu-operator (the chart's
# upgrade_crd hook Job runs `/usr/bin/manage-crds apply --filepath=/opt/gpu-operator/<file>`).
# No image is pulled here: the image's tag selects the released chart archive of the same
# version, whose crds/ (and the NFD subchart's crds/) are what that image holds.
CRD_RESOURCE = "customresourcedefinitions.apiextensions.k8s.io"
MANAGE_CRDS = "manage-crds"
CLEANUP_GPUCLUSTERS = "cleanup-gpuclusters"
IMAGE_CRD_DIR = "/opt/gpu-operator/"


def _charts_dir():
    from ..clusterfile import SHARED
    return os.path.join(SHARED, "upstream", "gpu-operator", "charts")


@functools.lru_cache(maxsize=8)
def image_crd_files(tag):
    """{basename: [CRD docs]} the operator image of this tag holds; {} if that release is unknown."""
    path = os.path.join(_charts_dir(), "gpu-operator-%s.tgz" % tag)
    if not os.path.exists(path):
        return {}
    files = {}
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.isfile() and len(parts) >= 2 and parts[-2] == "crds" and parts[-1].endswith(".yaml"):
                text = tar.extractfile(member).read().decode("utf-8")
                files[parts[-1]] = [d for d in yaml.safe_load_all(io.StringIO(text)) if d]
    return files


def is_gpu_node(node):
    labels = node["metadata"].get("labels") or {}
    return any(labels.get(k) == "true" for k in NFD_GPU_LABELS)


class GpuOperator:
    def __init__(self, ctx):
        self.ctx = ctx
        self.namespace = None
        self.policy = None
        self.gpu_cluster = None     # the GPUCluster reconciled (DRA stack), None in ClusterPolicy mode
        self.ready_pods = set()     # (ds name, node) of Ready operand pods, from the last pass
        self.pods = {}              # (ds name, node) -> pod
        self.node_labels = {}      # node -> labels, from the last pass
        self.operator_pod = None   # the running operator pod this pass reconciles as
        self._crd_runs = {}        # manage-crds pod uid -> (exit code, log)

    # -- gates the other twins and the kubelet hooks use -----------------------------------
    def spec(self):
        return (self.policy or {}).get("spec") or {}

    def enabled(self, op):
        if op["key"] == "validator":
            return True
        comp = self.spec().get(op["key"]) or {}
        return bool(comp.get("enabled", op["default_enabled"]))

    def driver_ready(self, node):
        facts = self.ctx.facts.get(node) or {}
        if facts.get("host_driver"):
            return True
        return ("nvidia-driver-daemonset", node) in self.ready_pods

    def toolkit_ready(self, node):
        facts = self.ctx.facts.get(node) or {}
        if not self.driver_ready(node):
            return False
        return facts.get("host_toolkit") or ("nvidia-container-toolkit-daemonset", node) in self.ready_pods

    def plugin_ready(self, node):
        labels = self.node_labels.get(node, {})
        if labels.get(DEPLOY + "device-plugin") != "true":
            return True          # nothing to validate
        return ("nvidia-device-plugin-daemonset", node) in self.ready_pods

    # -- the pass ----------------------------------------------------------------------------
    def reconcile(self):
        ctx = self.ctx
        self.operator_pod = ctx.operator_pod()
        policies = ctx.cluster_policies()
        clusters = ctx.gpu_clusters()
        if self.operator_pod is None or not (policies or clusters):
            self.policy = None
            self.gpu_cluster = None
            return
        # OPERATOR_NAMESPACE comes from the pod's own namespace (fieldRef metadata.namespace)
        self.namespace = self.operator_pod["metadata"]["namespace"]
        nodes = ctx.list("nodes")
        self.node_labels = {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {})
                             for n in nodes}
        if policies and clusters:
            # both controllers refuse to act and leave what is deployed as it is; the node
            # labelling controller errors out too
            self.policy, self.gpu_cluster = policies[0], clusters[0]
            self._cache_pods()
            if clusters[0]["metadata"].get("deletionTimestamp"):
                # the GPUCluster controller handles a deletion before checking prerequisites
                self._delete_gpu_cluster(clusters[0])
            return self._refuse_both(policies[0], clusters[0])
        if clusters:
            self.policy = None
            self.gpu_cluster = clusters[0]
            self._cache_pods()
            return self._reconcile_gpu_cluster(nodes)
        self.gpu_cluster = None
        self.policy = policies[0]        # extra ClusterPolicies are ignored (in memory only)
        self._cache_pods()
        self._runtime_classes()
        if self.spec().get("psa", {}).get("enabled"):
            self._label_namespace()
        has_nfd = any(k.startswith(NFD_PREFIX) for n in nodes
                      for k in (n["metadata"].get("labels") or {}))
        if not has_nfd:
            return self._status("ready", "NFDLabelsMissing", "No NFD labels found")
        gpu_nodes = [n for n in nodes if is_gpu_node(n)]
        if not gpu_nodes:
            return self._status("ready", "NoGPUNodes",
                                "No GPU node found, watching for new nodes to join the cluster.")
        for node in gpu_nodes:
            self._label_node(node)
        mig_nodes = [n for n in gpu_nodes if (self.ctx.facts.get(n["metadata"]["name"]) or {})
                     .get("gpus", {}).get("mig_capable")]
        not_ready = []
        for op in OPERANDS:
            wanted = self.enabled(op) and (op["key"] != "migManager" or mig_nodes)
            if not wanted:
                self._remove_ds(op)
                continue
            ds = self._apply_ds(op)
            if op["key"] == "migManager":
                self._mig_configmap()
            if op["key"] == "dcgm":
                self._dcgm_service()
            if not self._ds_ready(ds):
                not_ready.append(op["state"])
        self._detect_preinstalled()
        if not_ready:
            return self._status("notReady", "OperandNotReady",
                                "ClusterPolicy is not ready; states not ready: [%s]" % " ".join(not_ready),
                                error=True)
        return self._status("ready", "Reconciled", "ClusterPolicy is ready as all resources have "
                            "been successfully reconciled")

    def _cache_pods(self):
        self.ready_pods = set()
        self.pods = {}
        for pod in self.ctx.list("pods", self.namespace):
            ref = next((r for r in pod["metadata"].get("ownerReferences") or []
                        if r.get("kind") == "DaemonSet" and r.get("name") in OPERAND_DS), None)
            node = pod["spec"].get("nodeName")
            if ref is None or not node:
                continue
            self.pods[(ref["name"], node)] = pod
            if any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (pod.get("status") or {}).get("conditions") or []):
                self.ready_pods.add((ref["name"], node))

    def _label_namespace(self):
        labels = {"pod-security.kubernetes.io/%s" % m: "privileged" for m in ("enforce", "audit", "warn")}
        patch_labels(self.ctx.store, "namespaces", None, self.namespace, labels)

    def _label_node(self, node):
        name = node["metadata"]["name"]
        have = node["metadata"].get("labels") or {}
        want = {PRESENT: "true"}
        operands_off = have.get(DEPLOY + "operands") == "false"
        mig_capable = have.get(MIG_CAPABLE) == "true"
        for key in DEPLOY_KEYS:
            if key == "mig-manager" and not mig_capable:
                continue
            label = DEPLOY + key
            if operands_off:
                want[label] = "false"
            elif not have.get(label):
                want[label] = "true"
        for label in gc_state.DRA_ONLY_LABELS:
            # the DRA stack's labels go when the ClusterPolicy takes over; the kubelet plugin's
            # only once no pod on the node still holds a gpu.nvidia.com claim it must unprepare
            if label in have and not (label == gc_state.DRA_DRIVER_LABEL and self.node_has_gpu_claims(name)):
                want[label] = None
        if mig_capable and not have.get(MIG_CONFIG):
            default = ((self.spec().get("migManager") or {}).get("config") or {}).get("default")
            want[MIG_CONFIG] = default or "all-disabled"
        patch_labels(self.ctx.store, "nodes", None, name, want, current=node)

    def _detect_preinstalled(self):
        """k8s-driver-manager finds a host driver: label pre-installed, the pod then goes away."""
        for (ds, node), pod in self.pods.items():
            if ds != "nvidia-driver-daemonset":
                continue
            if not (self.ctx.facts.get(node) or {}).get("host_driver"):
                continue
            started = any("running" in (s.get("state") or {})
                          for s in (pod.get("status") or {}).get("initContainerStatuses") or [])
            if started and self.node_labels.get(node, {}).get(DEPLOY + "driver") == "true":
                patch_labels(self.ctx.store, "nodes", None, node, {DEPLOY + "driver": "pre-installed"})

    # -- GPUCluster (DRA stack) ----------------------------------------------------------------
    def node_has_gpu_claims(self, node):
        """A pod on the node (terminating ones included, finished ones not) holds a claim that
        gpu.nvidia.com allocated, or one that cannot be read (counted: overcounting only delays)."""
        for pod in self.ctx.pods_on(node):
            st = pod.get("status") or {}
            if st.get("phase") in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp"):
                continue
            names = {s.get("name"): s.get("resourceClaimName")
                     for s in st.get("resourceClaimStatuses") or []}
            for ref in pod["spec"].get("resourceClaims") or []:
                claim_name = ref.get("resourceClaimName") or names.get(ref.get("name"))
                if not claim_name:
                    continue
                claim = self.ctx.get_cached("resourceclaims.resource.k8s.io", claim_name,
                                            pod["metadata"].get("namespace"))
                if claim is None:
                    return True
                results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}) \
                    .get("results") or []
                if any(r.get("driver") == gc_state.DRIVER for r in results):
                    return True
        return False

    def _refuse_both(self, policy, cluster):
        """ClusterPolicy and GPUCluster together: each controller reports the other and stops."""
        msg = ('conflicting GPUCluster resource "%s" detected; ClusterPolicy and GPUCluster cannot '
               'co-exist' % cluster["metadata"]["name"])
        self._write_status(CLUSTER_POLICIES, policy, "notReady", "ReconcileFailed", msg, error=True)
        self.ctx.event_once(policy, "NotReady", "ClusterPolicy notReady: " + msg, "Warning")
        if cluster["metadata"].get("deletionTimestamp"):
            return
        msg = ('A ClusterPolicy CR "%s" exists; a ClusterPolicy CR and GPUCluster CR may not exist at '
               'the same time' % policy["metadata"]["name"])
        self._write_status(GPU_CLUSTERS, cluster, "notReady", "PrerequisiteNotMet", msg, error=True)

    def _reconcile_gpu_cluster(self, nodes):
        gc = self.gpu_cluster
        if gc["metadata"].get("deletionTimestamp"):
            return self._delete_gpu_cluster(gc)
        if gc_state.FINALIZER not in (gc["metadata"].get("finalizers") or []):
            fins = list(gc["metadata"].get("finalizers") or []) + [gc_state.FINALIZER]
            try:
                gc = self.gpu_cluster = self.ctx.store.merge_patch(
                    GPU_CLUSTERS, None, gc["metadata"]["name"], {"metadata": {"finalizers": fins}})
            except ApiError:
                return self.ctx.runtime.after(0.05)
        # the operand claim templates ask for adminAccess, which the scheduler allows only in a
        # namespace labelled for it; the label is never removed
        patch_labels(self.ctx.store, "namespaces", None, self.namespace, {gc_state.ADMIN_ACCESS_LABEL: "true"})
        for node in nodes:
            self._label_dra_node(node)
        registry = getattr(self.ctx.store, "registry", None)
        if registry is not None and registry.lookup("resource.k8s.io", "v1", "deviceclasses") is None:
            return self._write_status(
                GPU_CLUSTERS, gc, "notReady", "ReconcileFailed",
                "Error syncing state state-dra-driver: failed to create k8s objects from manifests: failed "
                "to get DRA resource apiVersion: the resource.k8s.io DeviceClass API is not served by the "
                "cluster; ensure Dynamic Resource Allocation is enabled on the API server and kubelet",
                error=True)
        not_ready, errors = [], []
        for state, objs, error in gc_state.render_states(gc.get("spec") or {}, self.namespace, self.operator_env):
            if error:
                errors.append("Error syncing state %s: %s" % (state, error))
                continue
            if not objs:
                self._remove_state(state)
                continue
            ready = True
            for obj in objs:
                if not self._apply_owned(obj, gc):
                    ready = False
            if not ready:
                not_ready.append(state)
        if errors:
            return self._write_status(GPU_CLUSTERS, gc, "notReady", "ReconcileFailed", errors[0], error=True)
        if not_ready:
            return self._write_status(GPU_CLUSTERS, gc, "notReady", "OperandNotReady",
                                      "Waiting for operand pods to be ready", error=True)
        return self._write_status(GPU_CLUSTERS, gc, "ready", "Reconciled",
                                  "All resources have been successfully reconciled")

    def _label_dra_node(self, node):
        """The node labelling controller with a GPUCluster: gpu.present from NFD, the DRA
        stack's deploy labels where absent or empty (a set value, e.g. paused by the driver
        manager, sticks), the device-plugin stack's own deploy labels swept away."""
        have = node["metadata"].get("labels") or {}
        if not is_gpu_node(node):
            if have.get(PRESENT) == "true":
                want = {PRESENT: "false"}
                want.update({k: None for k in have if k.startswith(DEPLOY)})
                patch_labels(self.ctx.store, "nodes", None, node["metadata"]["name"], want, current=node)
            return
        want = {PRESENT: "true"}
        for label in gc_state.DEVICE_PLUGIN_ONLY_LABELS:
            if label in have:
                want[label] = None
        for label in gc_state.STATE_LABELS:
            if not have.get(label):
                want[label] = "true"
        patch_labels(self.ctx.store, "nodes", None, node["metadata"]["name"], want, current=node)

    def _apply_owned(self, obj, owner):
        """Create or update one rendered object (hash annotation as for the operand DaemonSets);
        True when it exists and, for a DaemonSet or Deployment, is ready as the operator counts it."""
        store = self.ctx.store
        resource = RESOURCE_OF[obj["kind"]]
        obj = clone(obj)
        meta = obj["metadata"]
        ns = meta.get("namespace")
        digest = str(fnv32a(json.dumps(obj, sort_keys=True)))
        meta.setdefault("annotations", {})[LAST_APPLIED] = digest
        meta["ownerReferences"] = [owner_ref(owner, gc_state.KIND, gc_state.GROUP_VERSION)]
        cur = store.get(resource, ns, meta["name"])
        try:
            if cur is None:
                cur = store.create(resource, obj)
            elif (cur["metadata"].get("annotations") or {}).get(LAST_APPLIED) != digest:
                new = clone(cur)
                for key in ("spec", "data"):
                    if key in obj:
                        new[key] = obj[key]
                new["metadata"].setdefault("labels", {}).update(meta.get("labels") or {})
                new["metadata"].setdefault("annotations", {}).update(meta["annotations"])
                new["metadata"]["ownerReferences"] = meta["ownerReferences"]
                cur = store.update(resource, new)
        except ApiError as err:
            if err.code == 409:
                self.ctx.runtime.after(0.05)
                return False
            self.ctx.event_once(owner, "FailedCreate", err.message, "Warning")
            return False
        if obj["kind"] == "DaemonSet":
            return self._ds_ready_dra(cur)
        if obj["kind"] == "Deployment":
            st = cur.get("status") or {}
            want = cur["spec"].get("replicas", 1)
            return (st.get("observedGeneration", 0) >= cur["metadata"].get("generation", 1)
                    and st.get("updatedReplicas", 0) == want and st.get("availableReplicas", 0) == want)
        return True

    @staticmethod
    def _ds_ready_dra(ds):
        """stateSkel.isDaemonSetReady: zero desired once observed, else all available and updated."""
        st = ds.get("status") or {}
        if st.get("observedGeneration", 0) < ds["metadata"].get("generation", 1):
            return False
        desired = st.get("desiredNumberScheduled", 0)
        if desired == 0:
            return st.get("numberMisscheduled", 0) == 0 and st.get("currentNumberScheduled", 0) == 0
        return desired == st.get("numberAvailable", 0) == st.get("updatedNumberScheduled", 0)

    def _remove_state(self, state):
        """A state switched off (dcgm, dcgm-exporter): its workloads go."""
        names = {"state-dcgm": [("daemonsets.apps", gc_state.DCGM), ("services", gc_state.DCGM),
                                ("resourceclaimtemplates.resource.k8s.io", "nvidia-dcgm-admin")],
                 "state-dcgm-exporter": [("daemonsets.apps", gc_state.EXPORTER), ("services", gc_state.EXPORTER),
                                         ("resourceclaimtemplates.resource.k8s.io", "nvidia-dcgm-exporter-admin")]}
        for resource, name in names.get(state, []):
            if self.ctx.get_cached(resource, name, self.namespace) is None:
                continue
            try:
                self.ctx.store.delete(resource, self.namespace, name)
            except ApiError:
                pass

    def _delete_gpu_cluster(self, gc):
        """reconcileDelete: DaemonSets whose pods hold claims go first (foreground), the finalizer
        once they are gone, so the kubelet plugin outlives the pods it must unprepare."""
        if gc_state.FINALIZER not in (gc["metadata"].get("finalizers") or []):
            return
        draining = []
        uid = gc["metadata"].get("uid")
        for ds in self.ctx.list("daemonsets.apps", self.namespace):
            owned = any(r.get("uid") == uid and r.get("controller")
                        for r in ds["metadata"].get("ownerReferences") or [])
            if not owned or not ((ds["spec"].get("template") or {}).get("spec") or {}).get("resourceClaims"):
                continue
            draining.append(ds["metadata"]["name"])
            if not ds["metadata"].get("deletionTimestamp"):
                try:
                    self.ctx.store.delete("daemonsets.apps", self.namespace, ds["metadata"]["name"],
                                          propagation="Foreground")
                except TypeError:
                    self.ctx.store.delete("daemonsets.apps", self.namespace, ds["metadata"]["name"])
                except ApiError:
                    pass
        if draining:
            self.ctx.event_once(gc, "DrainingClaimConsumers", "Waiting for ResourceClaim-consuming "
                                "DaemonSet(s) to terminate: %s" % ", ".join(sorted(draining)))
            return self.ctx.runtime.after(0.2)
        fins = [f for f in gc["metadata"].get("finalizers") or [] if f != gc_state.FINALIZER]
        try:
            self.ctx.store.merge_patch(GPU_CLUSTERS, None, gc["metadata"]["name"],
                                       {"metadata": {"finalizers": fins or None}})
        except ApiError:
            pass

    # -- DaemonSets -------------------------------------------------------------------------
    def operator_env(self, name):
        """A literal env value of the running operator pod (VALIDATOR_IMAGE, DRIVER_MANAGER_IMAGE...)."""
        pod = self.operator_pod
        for c in ((pod or {}).get("spec") or {}).get("containers") or []:
            for e in c.get("env") or []:
                if e.get("name") == name and e.get("value"):
                    return e["value"]
        return None

    def _image_of(self, comp, default, env_name):
        """gpuv1.ImagePath: the ClusterPolicy's repository/image/version, else the operator
        pod's env (e.g. VALIDATOR_IMAGE), else the twin's default (values.yaml)."""
        if not any(comp.get(k) for k in ("repository", "image", "version")):
            from_env = self.operator_env(env_name)
            if from_env:
                return from_env
        repo, image, version = default
        version = comp.get("version") or version
        if version is None:      # validator & co. default to the operator's own version
            pod = self.operator_pod
            img = pod["spec"]["containers"][0].get("image", "") if pod else ""
            version = img.rsplit(":", 1)[-1] if ":" in img.rsplit("/", 1)[-1] else "v26.7.0"
        return image_path(comp.get("repository", repo), comp.get("image", image), version)

    def _image(self, op, key=None):
        key = key or op["key"]
        return self._image_of(self.spec().get(key) or {}, op["image"], IMAGE_ENV[key])

    def _template(self, op):
        spec = self.spec()
        comp = spec.get(op["key"]) or {}
        dsets = spec.get("daemonsets") or {}
        image = self._image(op)
        validator_image = self._image(BY_DS["nvidia-operator-validator"])
        priv = {"privileged": True}
        inits = []
        for name in op["init"]:
            if name == "k8s-driver-manager":
                img = self._image_of(comp.get("manager") or {},
                                     ("nvcr.io/nvidia/cloud-native", "k8s-driver-manager", "v0.12.0"),
                                     "DRIVER_MANAGER_IMAGE")
            else:
                img = validator_image
            inits.append({"name": name, "image": img, "securityContext": dict(priv),
                          "command": ["sh", "-c"], "args": ["nvidia-validator"]})
        env = [{"name": e.get("name"), "value": str(e.get("value", ""))} for e in comp.get("env") or []
               if isinstance(e, dict)]
        containers = []
        volumes = []
        for name in op["containers"]:
            c = {"name": name, "image": image, "securityContext": dict(priv)}
            if op["key"] == "driver":
                c["image"] = "%s-ubuntu22.04" % image if ":" in image.rsplit("/", 1)[-1] else image
            if op["key"] in ("devicePlugin", "gfd"):
                mig = (spec.get("mig") or {}).get("strategy", "single")
                env_dp = [{"name": "MIG_STRATEGY", "value": mig}]
                cfg = ((spec.get("devicePlugin") or {}).get("config") or {})
                if cfg.get("name"):
                    env_dp += [{"name": "CONFIG_FILE", "value": "/config/config.yaml"},
                               {"name": "DEFAULT_CONFIG", "value": cfg.get("default") or ""}]
                    volumes = [{"name": "config", "configMap": {"name": cfg["name"]}}]
                c["env"] = env_dp + env
            elif op["key"] == "dcgmExporter" and self.enabled(BY_DS[DCGM_DS]):
                c["env"] = [{"name": DCGM_REMOTE_ENV, "value": "%s:%d" % (DCGM_DS, DCGM_PORT)}] + \
                    [e for e in env if e["name"] != DCGM_REMOTE_ENV]
            elif env:
                c["env"] = env
            if op["key"] == "dcgm":
                probe = {"tcpSocket": {"port": DCGM_PORT}, "initialDelaySeconds": 15}
                c.update({"ports": [{"name": "dcgm", "containerPort": DCGM_PORT}],
                          "livenessProbe": dict(probe), "readinessProbe": clone(probe)})
            if comp.get("args"):
                c["args"] = [str(a) for a in comp["args"]]
            if comp.get("resources"):
                c["resources"] = clone(comp["resources"])
            containers.append(c)
        if volumes and op["key"] in ("devicePlugin", "gfd"):
            containers.append({"name": "config-manager", "image": image,
                               "command": ["config-manager"], "securityContext": dict(priv),
                               "env": [{"name": "DEFAULT_CONFIG",
                                        "value": ((spec.get("devicePlugin") or {}).get("config") or {})
                                        .get("default") or ""}]})
        labels = {"app": op["ds"], "app.kubernetes.io/managed-by": "gpu-operator",
                  "helm.sh/chart": "gpu-operator"}
        labels.update(dsets.get("labels") or {})
        pod_spec = {"serviceAccountName": ("nvidia-device-plugin" if op["ds"] == "nvidia-device-plugin-mps-control-daemon"
                                           else op["ds"].replace("-daemonset", "")),
                    "priorityClassName": dsets.get("priorityClassName", "system-node-critical"),
                    "nodeSelector": dict({DEPLOY + op["deploy"]: "true"}, **op["selector"]),
                    "tolerations": clone(dsets.get("tolerations") if "tolerations" in dsets else
                                                 [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                   "effect": "NoSchedule"}]),
                    "containers": containers}
        if inits:
            pod_spec["initContainers"] = inits
        if volumes:
            pod_spec["volumes"] = volumes
        if op["key"] == "driver":
            pod_spec["hostPID"] = True
        if op["key"] == "dcgm" and comp.get("hostNetwork") is True:
            pod_spec["hostNetwork"] = True
            pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
        secrets = comp.get("imagePullSecrets") or []
        if secrets:
            pod_spec["imagePullSecrets"] = [{"name": s} for s in secrets if isinstance(s, str)]
        meta = {"labels": labels}
        if dsets.get("annotations"):
            meta["annotations"] = dict(dsets["annotations"])
        return {"metadata": meta, "spec": pod_spec}

    def _apply_ds(self, op):
        """Create or update an operand DaemonSet. Like the real operator, changes are detected
        with a hash annotation of what we render (nvidia.com/last-applied-hash), not by
        comparing with the stored object, which the API server has defaulted."""
        store = self.ctx.store
        ns = self.namespace
        spec = {"selector": {"matchLabels": {"app": op["ds"]}}, "template": self._template(op)}
        strategy = (self.spec().get("daemonsets") or {}).get("updateStrategy", "RollingUpdate")
        spec["updateStrategy"] = {"type": "OnDelete" if op["key"] == "driver" else strategy}
        digest = str(fnv32a(json.dumps(spec, sort_keys=True)))
        cur = store.get("daemonsets.apps", ns, op["ds"])
        if cur is None:
            obj = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                   "metadata": {"name": op["ds"], "namespace": ns,
                                "labels": {"app": op["ds"], "app.kubernetes.io/managed-by": "gpu-operator"},
                                "annotations": {LAST_APPLIED: digest},
                                "ownerReferences": [owner_ref(self.policy, "ClusterPolicy", "nvidia.com/v1")]},
                   "spec": spec}
            try:
                return store.create("daemonsets.apps", obj)
            except ApiError as err:
                if err.code == 409:
                    return store.get("daemonsets.apps", ns, op["ds"])
                self.ctx.event_once(self.policy, "FailedCreate", err.message, "Warning")
                return None
        if (cur["metadata"].get("annotations") or {}).get(LAST_APPLIED) == digest:
            return cur
        # replace the fields we own; a `kubectl rollout restart` annotation survives
        ann = ((cur["spec"].get("template") or {}).get("metadata") or {}).get("annotations") or {}
        restarted = {k: v for k, v in ann.items() if k == "kubectl.kubernetes.io/restartedAt"}
        if restarted:
            spec["template"]["metadata"].setdefault("annotations", {}).update(restarted)
        new = clone(cur)
        new["spec"].update(spec)
        new["metadata"].setdefault("annotations", {})[LAST_APPLIED] = digest
        try:
            return store.update("daemonsets.apps", new)
        except ApiError:
            self.ctx.runtime.after(0.05)
        return cur

    def _remove_ds(self, op):
        try:
            self.ctx.store.delete("daemonsets.apps", self.namespace, op["ds"])
        except ApiError:
            pass
        if op["ds"] == DCGM_DS:
            try:
                self.ctx.store.delete("services", self.namespace, DCGM_DS)
            except ApiError:
                pass

    def _runtime_classes(self):
        """State pre-requisites (assets/pre-requisites/02*_runtime_class*.yaml): RuntimeClass nvidia, and
        nvidia-cdi / nvidia-legacy only with spec.cdi.enabled (CRD default true)."""
        store = self.ctx.store
        cdi = (self.spec().get("cdi") or {}).get("enabled", True) is not False
        for name in ("nvidia", "nvidia-cdi", "nvidia-legacy"):
            have = store.get("runtimeclasses.node.k8s.io", None, name)
            if name != "nvidia" and not cdi:
                if have is not None:
                    try:
                        store.delete("runtimeclasses.node.k8s.io", None, name)
                    except ApiError:
                        pass
                continue
            if have is None:
                try:
                    store.create("runtimeclasses.node.k8s.io", {
                        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": name,
                        "metadata": {"name": name, "labels": {"app.kubernetes.io/component": "gpu-operator"},
                                     "ownerReferences": [owner_ref(self.policy, "ClusterPolicy", "nvidia.com/v1")]}})
                except ApiError:
                    pass

    def _dcgm_service(self):
        """The Service the exporter reaches its node's host engine through (Local: same node only)."""
        store = self.ctx.store
        if store.get("services", self.namespace, DCGM_DS) is not None:
            return
        svc = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": DCGM_DS, "namespace": self.namespace, "labels": {"app": DCGM_DS},
                            "ownerReferences": [owner_ref(self.policy, "ClusterPolicy", "nvidia.com/v1")]},
               "spec": {"type": "ClusterIP", "internalTrafficPolicy": "Local", "selector": {"app": DCGM_DS},
                        "ports": [{"name": "dcgm", "port": DCGM_PORT, "protocol": "TCP"}]}}
        try:
            store.create("services", svc)
        except ApiError:
            pass

    def _ds_ready(self, ds):
        if ds is None:
            return False
        st = ds.get("status") or {}
        if st.get("observedGeneration") != ds["metadata"].get("generation", 1):
            return False
        return (st.get("numberUnavailable", 0) == 0
                and st.get("numberReady", 0) == st.get("desiredNumberScheduled", 0))

    def _mig_configmap(self):
        store = self.ctx.store
        if store.get("configmaps", self.namespace, "default-mig-parted-config") is not None:
            return
        path = self.ctx.spec.get("mig_parted_config")
        if not path or not os.path.exists(path):
            return
        from .mig_manager import mig_parted_file_data
        data = mig_parted_file_data(path)
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "default-mig-parted-config", "namespace": self.namespace,
                           "ownerReferences": [owner_ref(self.policy, "ClusterPolicy", "nvidia.com/v1")]},
              "data": data}
        try:
            store.create("configmaps", cm)
        except ApiError:
            pass

    # -- status -----------------------------------------------------------------------------
    def _write_status(self, resource, obj, state, reason, message, error=False):
        """state + namespace, then Ready/Error as the conditions updaters set them."""
        old = clone(obj.get("status") or {})
        conds = clone(old.get("conditions") or [])
        if error:
            set_condition(conds, "Ready", "False", "Error", "")
            set_condition(conds, "Error", "True", reason, message)
        else:
            set_condition(conds, "Ready", "True", reason, message)
            set_condition(conds, "Error", "False", "Ready", "")
        status = dict(old, state=state, namespace=self.namespace, conditions=conds)
        write_status(self.ctx.store, resource, obj, status)
        return status

    def _status(self, state, reason, message, error=False):
        cp = self.policy
        old = clone(cp.get("status") or {})
        conds = clone(old.get("conditions") or [])
        if error:
            set_condition(conds, "Ready", "False", "Error", "")
            set_condition(conds, "Error", "True", reason, message)
        else:
            set_condition(conds, "Ready", "True", reason, message)
            set_condition(conds, "Error", "False", "Ready", "")
        status = dict(old, state=state, namespace=self.namespace, conditions=conds)
        if (old.get("state") != state
                or next((c for c in old.get("conditions") or [] if c["type"] == ("Error" if error else "Ready")),
                        {}).get("reason") != reason):
            self.ctx.event_once(cp, "Reconciled" if state == "ready" else "NotReady",
                                "ClusterPolicy %s: %s" % (state, message),
                                "Normal" if state == "ready" else "Warning")
        write_status(self.ctx.store, CLUSTER_POLICIES, cp, status)

    # -- the chart's CRD upgrade hook (operator image, /usr/bin/manage-crds apply) ---------------
    def _manage_crds(self, pod):
        """Outcome of a manage-crds container: apply the CRDs its image carries, once per pod."""
        c = next(c for c in pod["spec"]["containers"]
                 if (c.get("command") or [""])[0].rsplit("/", 1)[-1] == MANAGE_CRDS)
        uid = pod["metadata"]["uid"]
        done = self._crd_runs.get(uid)
        if done is None:
            done = self._crd_runs[uid] = self._apply_image_crds(c)
        code, log = done
        return {"kind": "complete", "exit": code, "delay": self.ctx.timings["job_run"],
                "logs": {c["name"]: log}}

    def _apply_image_crds(self, container):
        image = container.get("image") or ""
        tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else "latest"
        files = image_crd_files(tag)
        args = container.get("args") or []
        if not args or args[0] != "apply":
            return 1, "Error: unknown command %r for \"manage-crds\"\n" % (args[:1] or [""])[0]
        log = []
        for arg in args[1:]:
            if not arg.startswith("--filepath="):
                continue
            path = arg[len("--filepath="):]
            name = path[len(IMAGE_CRD_DIR):] if path.startswith(IMAGE_CRD_DIR) else None
            if name not in files:
                log.append("Error: failed to read %s: open %s: no such file or directory" % (path, path))
                return 1, "\n".join(log) + "\n"
            for crd in files[name]:
                try:
                    self._apply_crd(crd)
                except ApiError as err:
                    log.append("Error: failed to apply CRD %s: %s" % (crd["metadata"]["name"], err.message))
                    return 1, "\n".join(log) + "\n"
                log.append("Applied CRD %s" % crd["metadata"]["name"])
        return 0, "\n".join(log) + "\n"

    def _apply_crd(self, crd):
        store = self.ctx.store
        cur = store.get(CRD_RESOURCE, None, crd["metadata"]["name"])
        if cur is None:
            store.create(CRD_RESOURCE, clone(crd))
            return
        new = clone(cur)
        new["spec"] = clone(crd["spec"])
        new["metadata"].setdefault("labels", {}).update(crd["metadata"].get("labels") or {})
        new["metadata"].setdefault("annotations", {}).update(crd["metadata"].get("annotations") or {})
        if new != cur:
            store.update(CRD_RESOURCE, new)

    # -- the chart's pre-delete hook for the GPUCluster (operator image, /usr/bin/cleanup-gpuclusters) --
    def _cleanup_gpuclusters(self, pod, elapsed):
        """Delete the chart's GPUCluster and wait until it is gone (the operator, still running
        during a pre-delete hook, drains and drops its finalizer), 5 minutes at most."""
        c = next(c for c in pod["spec"]["containers"]
                 if (c.get("command") or [""])[0].rsplit("/", 1)[-1] == CLEANUP_GPUCLUSTERS)
        argv = list(c.get("command") or [])[1:] + list(c.get("args") or [])
        name = argv[argv.index("--gpucluster-name") + 1] if "--gpucluster-name" in argv[:-1] else "gpu-cluster"
        store = self.ctx.store
        registry = getattr(store, "registry", None)
        if registry is not None and registry.get(GPU_CLUSTERS) is None:
            return {"kind": "complete", "exit": 0, "logs": {
                c["name"]: "level=info msg=\"GPUCluster CRD not installed, nothing to delete\"\n"}}
        cur = store.get(GPU_CLUSTERS, None, name)
        if cur is None:
            return {"kind": "complete", "exit": 0, "logs": {
                c["name"]: "level=info msg=\"GPUCluster %s deleted\"\n" % name}}
        if elapsed > 300:
            return {"kind": "complete", "exit": 1, "logs": {
                c["name"]: "level=error msg=\"timed out waiting for GPUCluster %s to be deleted: context "
                           "deadline exceeded\"\n" % name}}
        if not cur["metadata"].get("deletionTimestamp"):
            try:
                store.delete(GPU_CLUSTERS, None, name)
            except ApiError:
                pass
        return {"kind": "run", "ready": False, "retry": 0.2, "logs": {
            c["name"]: "level=info msg=\"Deleting GPUCluster %s\"\nlevel=info msg=\"Waiting for GPUCluster %s "
                       "to be deleted\"\n" % (name, name)}}

    # -- kubelet hook: how operand pods behave on a node -----------------------------------------
    def pod_hook(self, pod, elapsed):
        commands = [(c.get("command") or [""])[0].rsplit("/", 1)[-1] for c in pod["spec"].get("containers") or []]
        if MANAGE_CRDS in commands:
            return self._manage_crds(pod)
        if CLEANUP_GPUCLUSTERS in commands:
            return self._cleanup_gpuclusters(pod, elapsed)
        if (self.policy is None and self.gpu_cluster is None) or pod["metadata"].get("namespace") != self.namespace:
            return None
        ref = next((r for r in pod["metadata"].get("ownerReferences") or []
                    if r.get("kind") == "DaemonSet" and r.get("name") in OPERAND_DS), None)
        if ref is None:
            return None
        t = self.ctx.timings
        node = pod["spec"]["nodeName"]
        start = t["pod_start"] + t["operand_start"]
        if elapsed < start:
            return {"kind": "creating", "retry": start - elapsed + 0.001}
        ds = ref["name"]
        facts = self.ctx.facts.get(node) or {}
        if ds == gc_state.KUBELET_PLUGIN:
            # driver-validation (WITH_WAIT) waits for a driver: the host's or the driver container's
            if not self.driver_ready(node):
                return {"kind": "init_wait", "done": 0, "logs": {
                    "driver-validation": "time=\"now\" level=info msg=\"waiting for the NVIDIA driver to be "
                    "ready\"\n"}}
            return {"kind": "run", "logs": {"gpus": "Starting DRA kubelet plugin for driver gpu.nvidia.com "
                                                    "on node %s\n" % node}}
        if ds in DRA_DS:
            return {"kind": "run"}
        if ds == "nvidia-driver-daemonset":
            if facts.get("host_driver"):
                return {"kind": "init_wait", "done": 0, "logs": {
                    "k8s-driver-manager": "NVIDIA driver %s is already installed on the host; "
                    "labelling node nvidia.com/gpu.deploy.driver=pre-installed\n" % facts["host_driver"]}}
            if elapsed < start + t["driver_install"]:
                return {"kind": "run", "ready": False,
                        "retry": start + t["driver_install"] - elapsed + 0.001,
                        "logs": {"nvidia-driver-ctr": "Installing NVIDIA driver kernel modules...\n"}}
            return {"kind": "run", "logs": {"nvidia-driver-ctr": "Done, now waiting for signal\n"}}
        if ds == "nvidia-container-toolkit-daemonset":
            if not self.driver_ready(node):
                return {"kind": "init_wait", "done": 0}
            return {"kind": "run"}
        if ds == "nvidia-operator-validator":
            gates = [self.driver_ready(node), self.toolkit_ready(node), True, self.plugin_ready(node)]
            done = next((i for i, ok in enumerate(gates) if not ok), len(gates))
            if node in (self.ctx.faults.get("operator_validator_crashloop") or []):
                idx = min(done, 2)
                return {"kind": "init_crash", "index": idx, "logs": {VALIDATOR_INITS[idx]: (
                    "time=\"now\" level=info msg=\"Error: error validating %s: exit status 1\"\n"
                    % VALIDATOR_INITS[idx].replace("-validation", ""))}}
            if done < len(gates):
                return {"kind": "init_wait", "done": done}
            return {"kind": "run", "logs": {"nvidia-operator-validator":
                                            "all validations are successful\n"}}
        if ds == "nvidia-device-plugin-daemonset":
            return None     # the device plugin twin decides (it reads its config at start)
        if not self.toolkit_ready(node):
            return {"kind": "init_wait", "done": 0}
        return {"kind": "run"}
