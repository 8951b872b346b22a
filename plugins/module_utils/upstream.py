# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place that knows upstream names: labels, states, conditions, keys.

Every module, filter and role of the collection imports these names instead of
spelling them again. Sources: NVIDIA GPU Operator v26.7 (ClusterPolicy CRD,
values.yaml, mig-manager), k8s-device-plugin, KAI Scheduler, Kueue and
Kubernetes itself, as condensed in shared/upstream/FACTS.md.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# --- Kubernetes -------------------------------------------------------------
GPU_RESOURCE = "nvidia.com/gpu"
GPU_SHARED_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
# Only the requests.<name> form of an extended resource is enforced by quota.
QUOTA_ENFORCED_PREFIX = "requests."
QUOTA_IGNORED_PREFIXES = ("limits.",)

PSA_LABEL_PREFIX = "pod-security.kubernetes.io/"
PSA_MODES = ("enforce", "audit", "warn")
PSA_LEVELS = ("privileged", "baseline", "restricted")

# --- GPU Operator / ClusterPolicy -------------------------------------------
CLUSTER_POLICY_GROUP = "nvidia.com"
CLUSTER_POLICY_VERSION = "v1"
CLUSTER_POLICY_API_VERSION = "nvidia.com/v1"
CLUSTER_POLICY_KIND = "ClusterPolicy"
CLUSTER_POLICY_NAME = "cluster-policy"

CP_STATE_READY = "ready"
CP_STATE_NOT_READY = "notReady"
CP_STATE_IGNORED = "ignored"

COND_READY = "Ready"
COND_ERROR = "Error"
REASON_RECONCILED = "Reconciled"
REASON_RECONCILE_FAILED = "ReconcileFailed"
REASON_OPERAND_NOT_READY = "OperandNotReady"
REASON_NFD_LABELS_MISSING = "NFDLabelsMissing"
REASON_NO_GPU_NODES = "NoGPUNodes"
REASON_DRIVER_NOT_READY = "DriverNotReady"
REASON_PREREQUISITE_NOT_MET = "PrerequisiteNotMet"
# `state: ready` with these reasons serves no GPU at all (FACTS.md trap).
READY_BUT_NO_GPU_REASONS = (REASON_NFD_LABELS_MISSING, REASON_NO_GPU_NODES)

DEVICE_PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"

# --- Node labels set or read by the operator ----------------------------------
LABEL_DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
LABEL_DEPLOY_DRIVER = "nvidia.com/gpu.deploy.driver"
LABEL_DEPLOY_TOOLKIT = "nvidia.com/gpu.deploy.container-toolkit"
LABEL_DEPLOY_OPERANDS = "nvidia.com/gpu.deploy.operands"
DEPLOY_PREINSTALLED = "pre-installed"
DEPLOY_PAUSED_FOR_MIG = "paused-for-mig-change"

LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
LABEL_GPU_COUNT = "nvidia.com/gpu.count"
LABEL_GPU_MEMORY = "nvidia.com/gpu.memory"
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
MIG_STATE_REBOOTING = "rebooting"
MIG_STRATEGIES = ("none", "single", "mixed")
DEFAULT_MIG_CONFIGMAP = "default-mig-parted-config"
MIG_CONFIGMAP_KEY = "config.yaml"
PER_NODE_MIG_CONFIGMAP_SUFFIX = "-mig-config"

# --- Time-slicing ---------------------------------------------------------------
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
OPERATOR_APP_SELECTOR = "app=gpu-operator"  # label of the operator Deployment and its pods
NFD_SUBCHART = "node-feature-discovery"  # values key of the NFD subchart
ANNOTATION_RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"  # `kubectl rollout restart`

# --- Tenants: namespaces, quotas, NetworkPolicy, RBAC (roles/tenants) ----------------
# (names added by the tenants work go here)


# --- Queue backends: more KAI Scheduler and Kueue names (roles/queues) ----------------
# (names added by the queues work go here)


# --- Monitoring: DCGM exporter, Prometheus Operator (roles/monitoring) ---------------
# (names added by the monitoring work go here)


# --- Platform design (filter platform_design) -----------------------------------------
# (names added by the design work go here)
# Annotation on a batch Job (its top owner): PodGroup minMember, i.e. a gang; without it a Job is
# minMember 1 (KAI v0.17.0 pkg/podgrouper/.../job/job_grouper.go calcMinMember).
KAI_BATCH_MIN_MEMBER = "kai.scheduler/batch-min-member"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
MIG_CONFIG_ALL_DISABLED = "all-disabled"           # mig-parted config: whole GPUs
MIG_CONFIG_ALL_PREFIX = "all-"                     # mig-parted: all-<profile> = max instances per GPU
