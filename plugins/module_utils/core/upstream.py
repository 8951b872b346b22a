# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place that knows upstream names: labels, states, conditions, keys.

Every module, filter and role of the collection imports these names instead of
spelling them again. Sources: NVIDIA GPU Operator v26.7 (ClusterPolicy CRD,
values.yaml, mig-manager), k8s-device-plugin, KAI Scheduler, Kueue and
Kubernetes itself: a name the upstream renames is changed here once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# --- Kubernetes -------------------------------------------------------------
GPU_RESOURCE = "nvidia.com/gpu"
GPU_SHARED_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
# Only the requests.<name> form of an extended resource is enforced by quota.
QUOTA_ENFORCED_PREFIX = "requests."

PSA_LABEL_PREFIX = "pod-security.kubernetes.io/"
PSA_MODES = ("enforce", "audit", "warn")

# --- GPU Operator / ClusterPolicy -------------------------------------------
CLUSTER_POLICY_API_VERSION = "nvidia.com/v1"
CLUSTER_POLICY_KIND = "ClusterPolicy"
CLUSTER_POLICY_NAME = "cluster-policy"

CP_STATE_READY = "ready"
CP_STATE_IGNORED = "ignored"

COND_READY = "Ready"
COND_ERROR = "Error"
REASON_RECONCILED = "Reconciled"
REASON_NFD_LABELS_MISSING = "NFDLabelsMissing"
REASON_NO_GPU_NODES = "NoGPUNodes"
REASON_DRIVER_NOT_READY = "DriverNotReady"

DEVICE_PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"

# --- Node labels set or read by the operator ----------------------------------
LABEL_DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
LABEL_DEPLOY_DRIVER = "nvidia.com/gpu.deploy.driver"
LABEL_DEPLOY_TOOLKIT = "nvidia.com/gpu.deploy.container-toolkit"

LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
LABEL_GPU_COUNT = "nvidia.com/gpu.count"
LABEL_GPU_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_GPU_SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"
LABEL_DEVICE_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
PRODUCT_SUFFIX_SHARED = "-SHARED"
PRODUCT_SUFFIX_MIG = "-MIG-"

# --- MIG ---------------------------------------------------------------------
LABEL_MIG_CAPABLE = "nvidia.com/mig.capable"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
MIG_STATE_PENDING = "pending"
MIG_STATE_SUCCESS = "success"
MIG_STATE_FAILED = "failed"
MIG_STRATEGIES = ("none", "single", "mixed")
DEFAULT_MIG_CONFIGMAP = "default-mig-parted-config"
MIG_CONFIGMAP_KEY = "config.yaml"
PER_NODE_MIG_CONFIGMAP_SUFFIX = "-mig-config"

# --- Time-slicing ---------------------------------------------------------------
MPS_STRATEGY = "mps"   # nvidia.com/gpu.sharing-strategy for sharing.mps (k8s-device-plugin internal/lm/resource.go)
TIME_SLICING_STRATEGY = "time-slicing"

# --- Queues --------------------------------------------------------------------
KAI_QUEUE_API_VERSION = "scheduling.run.ai/v2"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_SCHEDULER_NAME = "kai-scheduler"
KAI_UNLIMITED = -1
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

# --- MIG manager / operator pods (mig helper) ------------------------------------
MIG_MANAGER_APP = "nvidia-mig-manager"               # label app= of the mig-manager DaemonSet pods
MIG_MANAGER_CONTAINER = "nvidia-mig-manager"
GPU_OPERATOR_COMPONENT_SELECTOR = "app.kubernetes.io/component=gpu-operator"

# --- GPU nodes: host paths of operator-managed components (nodes helper) --------
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"          # driver container rootfs, mounted on the host
OPERATOR_TOOLKIT_DIR = "/usr/local/nvidia/toolkit"   # toolkit container installs the runtime here
NVIDIA_RUNTIME_NAME = "nvidia"                       # containerd / CRI-O runtime handler name

# --- GPU Operator chart and Deployment (area: operator / gpu_operator role) ---
# The chart labels the operator Deployment app.kubernetes.io/component=gpu-operator
# (GPU_OPERATOR_COMPONENT_SELECTOR); only its pod template also has app=gpu-operator.
NFD_SUBCHART = "node-feature-discovery"  # values key of the NFD subchart

# --- Tenants: namespaces, quotas, NetworkPolicy, RBAC (roles/tenants) ----------------
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"      # recommended label (kubernetes.io docs)
LABEL_NAMESPACE_NAME = "kubernetes.io/metadata.name"   # set on every Namespace by the API server
PSA_VERSION_SUFFIX = "-version"                         # pod-security.kubernetes.io/<mode>-version
PSA_LATEST = "latest"
SYSTEM_NAMESPACE_PREFIX = "kube-"                       # kube-system, kube-public, kube-node-lease
SYSTEM_NAMESPACES = ("default",)
QUEUE_BACKEND_NAMESPACES = ("kai-scheduler", "kueue-system")   # the backends' chart namespaces
TENANT_CLUSTER_ROLES = ("admin", "edit", "view")        # user-facing ClusterRoles of every cluster
RBAC_API_GROUP = "rbac.authorization.k8s.io"
RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
NETWORKING_API_VERSION = "networking.k8s.io/v1"
# Cluster DNS: kubeadm's and most distributions' CoreDNS pods and Service.
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
DNS_PORT = 53
# Quota keys that are native resources (everything else with a '/' is an extended resource).
QUOTA_NATIVE_PREFIXES = ("count/", "hugepages-", "requests.hugepages-", "limits.hugepages-")
QUOTA_STORAGE_CLASS_MARKER = ".storageclass.storage.k8s.io/"
NAMESPACE_TERMINATING = "Terminating"                  # Namespace status.phase while deleted
NETPOL_INGRESS = "Ingress"                              # NetworkPolicy policyTypes
NETPOL_EGRESS = "Egress"
PROTOCOL_TCP = "TCP"                                    # the API's default protocol of a port
PROTOCOL_UDP = "UDP"
PROTOCOLS = (PROTOCOL_TCP, PROTOCOL_UDP, "SCTP")
LIMIT_TYPE_CONTAINER = "Container"                      # LimitRange limits[].type
SUBJECT_GROUP = "Group"                                 # RoleBinding subjects[].kind
SUBJECT_USER = "User"
SUBJECT_SERVICE_ACCOUNT = "ServiceAccount"
ROLE_REF_CLUSTER_ROLE = "ClusterRole"
ROLE_REF_ROLE = "Role"
# ResourceQuota on claims as Kubernetes 1.34 counts them (pkg/quota/v1/evaluator/core/resource_claims.go):
# every claim 1 x count/resourceclaims.resource.k8s.io and, per request, <class>.deviceclass.resource.k8s.io/devices
# = count (ExactCount) or AllocationResultsMaxSize (All, the worst case, whatever the node has). The
# requests.deviceclass.resource.kubernetes.io/<class> form counts only with the DRAExtendedResource gate (alpha).
QUOTA_CLAIM_COUNT = "count/resourceclaims.resource.k8s.io"
QUOTA_CLAIMS_PER_CLASS_SUFFIX = ".deviceclass.resource.k8s.io/devices"   # corev1.ResourceClaimsPerClass
ALLOCATION_RESULTS_MAX_SIZE = 32
ALLOCATION_MODE_EXACT = "ExactCount"
ALLOCATION_MODE_ALL = "All"


# --- Queue backends: more KAI Scheduler and Kueue names (roles/queues) ----------------
# (names added by the queues work go here)
KAI_DEFAULT_QUEUE = "default-queue"                 # chart-created leaf for pods without a queue label
KAI_DEFAULT_PARENT_QUEUE = "default-parent-queue"   # its parent (chart values defaultQueue.*)
QUEUES_NS_NAME_LABEL = "kubernetes.io/metadata.name"  # immutable namespace-name label
VAP_API_VERSION = "admissionregistration.k8s.io/v1"
QUEUE_POLICY_NAME = "skaffon-queue-owner"           # ValidatingAdmissionPolicy (+Binding) of roles/queues
KAI_IMAGE_REGISTRY = "ghcr.io/kai-scheduler/kai-scheduler"   # chart values global.registry (+ /<component>)
KUEUE_IMAGE_REPOSITORY = "registry.k8s.io/kueue/kueue"      # controllerManager.manager.image.repository
# KAI GPU fractions (v0.17.0 pkg/common/constants/constants.go) and its SchedulingShard CRD
KAI_GPU_FRACTION_ANNOTATION = "gpu-fraction"
KAI_GPU_MEMORY_ANNOTATION = "gpu-memory"
KAI_SHARD_API_VERSION = "kai.scheduler/v1"
KAI_CONFIG_NAME = "kai-config"         # the chart's Config (kai.scheduler/v1): global.nodePoolLabelKey
# what KAI's binder writes for a fractional pod (v0.17.0 pkg/common/constants, binder resourcereservation and
# gpusharing): the pod's GPU group label (one group = one shared GPU), the reservation pod's annotation with the
# UUID of the GPU it holds, the pod's annotation naming its GPU-sharing ConfigMaps (<prefix>-<container>-evar)
KAI_GPU_GROUP_LABEL = "runai-gpu-group"
KAI_RESERVATION_GPU_ANNOTATION = "run.ai/reserve_for_gpu_index"
KAI_SHARED_GPU_CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"


# --- Monitoring: DCGM exporter, Prometheus Operator (roles/monitoring) ---------------
# (names added by the monitoring work go here)
DCGM_EXPORTER_JOB = "nvidia-dcgm-exporter"            # job label: ServiceMonitor jobLabel app= of the Service
DCGM_EXPORTER_APP = "nvidia-dcgm-exporter"            # label app= of the exporter DaemonSet pods
DCGM_HOSTENGINE_APP = "nvidia-dcgm"                   # label app= of the standalone nv-hostengine pods (dcgm.enabled)
DCGM_HOSTENGINE_PORT = 5555                          # nv-hostengine TCP port (containerPort "dcgm", Service nvidia-dcgm)
# the GPUCluster stack's exporter and host engine (gpucluster manifests state-dcgm-exporter: DaemonSet, Service and
# ServiceMonitor nvidia-dcgm-exporter-dra with jobLabel app; state-dcgm: nvidia-dcgm-dra)
DCGM_EXPORTER_DRA_APP = "nvidia-dcgm-exporter-dra"    # label app= of its pods, and the job label of its targets
DCGM_HOSTENGINE_DRA_APP = "nvidia-dcgm-dra"
PROMETHEUS_RULE_API_VERSION = "monitoring.coreos.com/v1"
CRD_PROMETHEUS_RULES = "prometheusrules.monitoring.coreos.com"
CRD_SERVICE_MONITORS = "servicemonitors.monitoring.coreos.com"
KSM_GPU_RESOURCE_REGEX = "nvidia_com_(gpu|gpu_shared|mig_.+)"  # kube-state-metrics resource label
LABEL_PART_OF = "app.kubernetes.io/part-of"
PART_OF_VALUE = "skaffon-gpu-platform"
PROM_META_POD_NODE_NAME = "__meta_kubernetes_pod_node_name"  # Prometheus kubernetes_sd pod target label


# --- Platform design (filter platform_design) -----------------------------------------
# (names added by the design work go here)


# --- Module foundations: Kubernetes names the modules read (core) -----------------------
COND_POD_READY = "Ready"                              # Pod condition
RESTARTED_AT_ANNOTATION = "kubectl.kubernetes.io/restartedAt"   # pod template annotation of `kubectl rollout restart`
LABEL_APP = "app"                                     # the operand pods' app label
TAINT_EFFECTS_REPELLING = ("NoSchedule", "NoExecute")   # effects that keep DaemonSet pods away
WAITING_CRASH_LOOP = "CrashLoopBackOff"
WAITING_PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff")
POD_DONE_PHASES = ("Succeeded", "Failed")
POD_RUNNING = "Running"
LABEL_NFD_NVIDIA_PCI = "feature.node.kubernetes.io/pci-10de.present"  # NFD: an NVIDIA PCI device
OPERATOR_VALIDATOR_PREFIX = "nvidia-operator-validator"  # operand DaemonSet / pod name prefix
GPU_OPERATOR_CONTAINER = "gpu-operator"               # container of the operator Deployment (chart)
CLUSTER_POLICY_CRD = "clusterpolicies.nvidia.com"
GPU_LABEL_PREFIX = GPU_RESOURCE + "."                 # GFD labels nvidia.com/gpu.product, .count, ...

# --- Acceptance checks (roles/acceptance) -----------------------------------------------
MANAGED_BY = "skaffon.gpu_platform"                   # value of LABEL_MANAGED_BY on our objects
LABEL_ACCEPTANCE = "gpu.skaffon.io/acceptance-check"  # ours: marks test pods for cleanup
DNS_SERVICE = "kube-dns"                               # the cluster DNS Service in DNS_NAMESPACE (kubeadm, most distributions)
# Annotation on a batch Job (its top owner): PodGroup minMember, i.e. a gang; without it a Job is
# minMember 1 (KAI v0.17.0 pkg/podgrouper/.../job/job_grouper.go calcMinMember).
KAI_BATCH_MIN_MEMBER = "kai.scheduler/batch-min-member"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
MIG_CONFIG_ALL_DISABLED = "all-disabled"           # mig-parted config: whole GPUs
MIG_CONFIG_ALL_PREFIX = "all-"                     # mig-parted: all-<profile> = max instances per GPU

# --- GPU access only through a request (docs/security.md) --------------------------------
# The toolkit container's environment variables that set the NVIDIA Container Toolkit's
# accept-nvidia-visible-devices-* config.toml keys (cmd/nvidia-ctk-installer; defaults true and false).
TOOLKIT_ACCEPT_ENVVAR_ENV = "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED"
TOOLKIT_ACCEPT_MOUNTS_ENV = "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS"
# k8s-device-plugin: how it hands the allocated devices to the runtime (README DEVICE_LIST_STRATEGY).
DEVICE_LIST_STRATEGY_ENV = "DEVICE_LIST_STRATEGY"
DEVICE_LIST_VOLUME_MOUNTS = "volume-mounts"
DEVICE_LIST_ENVVAR = "envvar"
# The variables the runtime reads from a container's environment (CUDA images set both).
NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
NVIDIA_DRIVER_CAPABILITIES = "NVIDIA_DRIVER_CAPABILITIES"
# The RuntimeClass the GPU Operator creates for its nvidia runtime handler (toolkit CONTAINERD_RUNTIME_CLASS).
NVIDIA_RUNTIME_CLASS = "nvidia"


# --- Dynamic Resource Allocation: GPUCluster stack and NVIDIA's DRA driver -----------------
# GPU Operator v26.7.0: chart templates/gpucluster.yaml + validations.yaml, api/nvidia/v1alpha1/
# gpucluster_types.go, manifests/state-dra-driver; k8s-dra-driver-gpu cmd/gpu-kubelet-plugin.
GPUCLUSTER_API_VERSION = "nvidia.com/v1alpha1"
GPUCLUSTER_KIND = "GPUCluster"
GPUCLUSTER_NAME = "gpu-cluster"                       # a singleton: the CRD's CEL rule refuses other names
GPUCLUSTER_CRD = "gpuclusters.nvidia.com"
# status.state enum of the CRD (ready;notReady;disabled); conditions Ready/Error as ClusterPolicy.
GC_STATE_READY = "ready"
GC_STATE_NOT_READY = "notReady"
GC_STATE_DISABLED = "disabled"
# Condition reasons of controllers/gpucluster_controller.go (Ready=True only with REASON_RECONCILED).
REASON_PREREQUISITE_NOT_MET = "PrerequisiteNotMet"    # a ClusterPolicy exists: the two may not co-exist
REASON_RECONCILE_FAILED = "ReconcileFailed"
REASON_OPERAND_NOT_READY = "OperandNotReady"
# The operator labels its namespace so its claim templates may use adminAccess (never removed).
LABEL_DRA_ADMIN_ACCESS = "resource.kubernetes.io/admin-access"
# Chart values keys: exactly one of the two CRs may be deployed (validations.yaml fails otherwise).
CHART_CLUSTER_POLICY_KEY = "clusterPolicy"            # clusterPolicy.deployCR
CHART_GPU_CLUSTER_KEY = "gpuCluster"                  # gpuCluster.deployCR
CHART_DEPLOY_CR = "deployCR"
CHART_DRA_DRIVER_KEY = "draDriver"                    # repository/image/version, gpus, computeDomains
CHART_NVIDIA_DRIVER_CRD_KEY = "nvidiaDriverCRD"       # driver.nvidiaDriverCRD.enabled: required with a GPUCluster
DRA_DRIVER_IMAGE = "dra-driver-nvidia-gpu"            # chart default draDriver.image (nvcr.io/nvidia)
# Kubernetes: DRA is served GA as resource.k8s.io/v1 from 1.34.
RESOURCE_API_GROUP = "resource.k8s.io"
RESOURCE_API_VERSION = "resource.k8s.io/v1"
DRA_MIN_KUBERNETES = (1, 34)
DEVICE_CLASS_KIND = "DeviceClass"
RESOURCE_SLICE_KIND = "ResourceSlice"
RESOURCE_CLAIM_KIND = "ResourceClaim"
RESOURCE_CLAIM_TEMPLATE_KIND = "ResourceClaimTemplate"
# The driver, its pools (one per node, named after the node) and its DeviceClasses.
DRA_DRIVER_NAME = "gpu.nvidia.com"
DEVICE_CLASS_GPU = "gpu.nvidia.com"
DEVICE_CLASS_MIG = "mig.nvidia.com"
DEVICE_CLASS_VFIO = "vfio.gpu.nvidia.com"
DEVICE_CLASS_CD_DAEMON = "compute-domain-daemon.nvidia.com"          # only with computeDomains.enabled
DEVICE_CLASS_CD_CHANNEL = "compute-domain-default-channel.nvidia.com"
COMPUTE_DOMAIN_DRIVER_NAME = "compute-domain.nvidia.com"
# Device attributes the gpu kubelet plugin publishes (qualified by DRA_DRIVER_NAME in CEL:
# device.attributes['gpu.nvidia.com'].<name>).
DRA_ATTR_TYPE = "type"                                # "gpu" | "mig" | "vfio"
DRA_TYPE_GPU = "gpu"
DRA_TYPE_MIG = "mig"
DRA_ATTR_UUID = "uuid"
DRA_ATTR_PRODUCT = "productName"
DRA_ATTR_PROFILE = "profile"                          # MIG devices: e.g. "1g.10gb"
DRA_ATTR_PARENT_UUID = "parentUUID"
DRA_ATTR_ARCHITECTURE = "architecture"
DRA_ATTR_DRIVER_VERSION = "driverVersion"
DRA_CAPACITY_MEMORY = "memory"
# Operand workloads rendered by the GPUCluster controller and their node deploy label.
DRA_KUBELET_PLUGIN_DAEMONSET = "nvidia-dra-driver-kubelet-plugin"   # also its pods' label app=
DRA_CONTROLLER_DEPLOYMENT = "nvidia-dra-driver-controller"          # only with computeDomains.enabled
LABEL_DEPLOY_DRA_DRIVER = "nvidia.com/gpu.deploy.dra-driver"
