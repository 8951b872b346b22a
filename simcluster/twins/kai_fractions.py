"""KAI GPU fractions and node/GPU placement scoring, as KAI Scheduler v0.17.0 does them.

A reading of kai-scheduler/KAI-Scheduler at v0.17.0 (independent of the collection's
module_utils, so a misreading on one side fails a test):
- a pod asks for part of one GPU by annotation `gpu-fraction` ("0.5") or `gpu-memory` (MiB)
  and requests no `nvidia.com/gpu` (pkg/common/constants/constants.go,
  pkg/common/resources/gpu_sharing.go); the binder refuses a fraction outside 0 < f < 1 and
  gpu-memory that is not a positive integer (pkg/binder/plugins/gpusharing/gpu-request/
  gpu_request_validator.go);
- the scheduler gives the pod a GPU group: an existing shared GPU of the node where it fits
  or a new group on a whole idle GPU (pkg/scheduler/gpu_sharing/gpuSharing.go), the GPUs
  ordered by gpupack (score = used portion, a whole GPU 0) or gpuspread (1 - used portion, a
  whole GPU 1), highest first (plugins/gpupack, plugins/gpuspread, framework/session.go
  sortGPUs); the used portion is memory of the group / memory of one GPU of the node (label
  `nvidia.com/gpu.memory`, floored to 100 MiB; 100 without it: api/node_info/node_info.go);
- the binder labels the pod `runai-gpu-group: <group>` and, for a new group, creates the
  reservation pod `gpu-reservation-<node>-<5 chars>` in `kai-resource-reservation` (labels
  app=kai-resource-reservation and the group, nodeName set, nvidia.com/gpu: 1 in requests and
  limits, annotation karpenter.sh/do-not-disrupt), whose process writes the UUID of the GPU it
  got into `run.ai/reserve_for_gpu_index` (binding/resourcereservation/resource_reservation.go,
  pkg/resourcereservation/patcher/pod_patcher.go); a reservation pod whose group has no
  Running/Pending pod left is deleted (syncForPods);
- the binder's gpusharing plugin writes NVIDIA_VISIBLE_DEVICES (the reserved GPU's UUID) into
  ConfigMap `<prefix>-<container index>-evar` and GPU_PORTION into `<prefix>-<index>`, prefix
  = annotation `runai/shared-gpu-configmap` (`<owner or pod name>-<7 chars>-shared-gpu`)
  (binder/plugins/gpusharing/gpu_sharing.go, binder/common/gpu_access.go,
  common/gpusharingconfigmap/config_map.go);
- node order (plugins/nodeplacement, plugins/gpusharingorder, plugins/scores): binpack scores
  9 * (1 - (idle - min idle) / (max idle - min idle)) over the fitting nodes (9 when all are
  equal), plus 10000 under binpack when a shared GPU of the node fits the fraction; spread
  scores idle / GPUs of the node. Idle GPUs are whole GPUs: a shared GPU is not idle.
"""

from .util import random_suffix

FRACTION = "gpu-fraction"
MEMORY = "gpu-memory"
GROUP_LABEL = "runai-gpu-group"
RESERVATION_NS = "kai-resource-reservation"
RESERVATION_APP = "kai-resource-reservation"
RESERVATION_PREFIX = "gpu-reservation"
GPU_INDEX_ANNOTATION = "run.ai/reserve_for_gpu_index"
CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"
NODE_GPU_MEMORY = "nvidia.com/gpu.memory"
DEFAULT_GPU_MEMORY = 100
MAX_HIGH_DENSITY = 9.0           # plugins/scores/scores.go
GPU_SHARING_SCORE = 10000.0
WHOLE = "<whole>"                # pod_info.WholeGpuIndicator
EPS = 1e-9


def requests_fraction(pod):
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    return FRACTION in ann or MEMORY in ann


def validation_error(pod):
    """KAI's binder refusal of the request (gpu_request_validator.go), or None."""
    ann = pod["metadata"].get("annotations") or {}
    if MEMORY in ann:
        if FRACTION in ann:
            return "cannot request both GPU and GPU memory"
        value = str(ann[MEMORY])
        if not value.isdigit() or int(value) == 0:
            return "gpu-memory annotation value must be a positive integer greater than 0"
        return None
    try:
        value = float(ann[FRACTION])
    except (TypeError, ValueError):
        value = -1.0
    if not 0 < value < 1:
        return "gpu-fraction annotation value must be a positive number smaller than 1.0"
    return None


def node_gpu_memory(node):
    """MiB of one GPU of the node as KAI reads it, floored to 100 (DefaultGpuMemory without the label)."""
    try:
        mem = int((node["metadata"].get("labels") or {})[NODE_GPU_MEMORY])
    except (KeyError, TypeError, ValueError):
        return DEFAULT_GPU_MEMORY
    return mem - mem % 100


def portion(pod, node=None):
    """The part of one GPU the pod takes on `node` (gpu-memory over the node's GPU memory)."""
    ann = pod["metadata"].get("annotations") or {}
    if FRACTION in ann:
        try:
            return float(ann[FRACTION])
        except ValueError:
            return 0.0
    if MEMORY in ann and node is not None:
        try:
            return int(ann[MEMORY]) / float(node_gpu_memory(node))
        except ValueError:
            return 0.0
    return 0.0


# -- scoring (ported, see simcluster/tests/test_twins_kai_fractions.py) ------------------------

def gpu_pack_score(used):
    """gpupack.go gpuOrderFn: a whole GPU 0, a shared GPU its used portion."""
    return 0.0 if used is None else used


def gpu_spread_score(used):
    """gpuspread.go gpuOrderFn: a whole GPU 1, a shared GPU 1 - its used portion."""
    return 1.0 if used is None else 1.0 - used


def node_pack_score(min_idle, max_idle, idle, overall):
    """nodeplacement/pack.go getScoreOfCurrentNode."""
    if overall == 0 or max_idle == 0:
        return 0.0
    if min_idle == max_idle:
        return MAX_HIGH_DENSITY
    return MAX_HIGH_DENSITY * (1 - (idle - min_idle) / float(max_idle - min_idle))


def node_spread_score(idle, gpus):
    """nodeplacement/spread.go: the share of the node's GPUs that is not allocated."""
    return 0.0 if not gpus else idle / float(gpus)


def order_gpus(groups, whole, want, strategy):
    """The GPUs a fraction `want` fits on, best first: groups {group: used portion} of the node,
    `whole` idle whole GPUs. Equal scores keep groups (by name) before whole GPUs."""
    fit = [(g, used) for g, used in sorted(groups.items()) if used + want <= 1 + EPS]
    fit += [(WHOLE, None)] * max(0, int(whole))
    score = gpu_pack_score if strategy == "binpack" else gpu_spread_score
    return [g for g, used in sorted(fit, key=lambda gu: -score(gu[1]))]


# -- the binder's writes -------------------------------------------------------------------------

def reservation_settings(config_spec):
    """(namespace, service account, app label, image) of the Config's binder.resourceReservation."""
    rr = ((config_spec or {}).get("binder") or {}).get("resourceReservation") or {}
    img = rr.get("image") or {}
    image = "%s/%s:%s" % ((img.get("repository") or "ghcr.io/kai-scheduler/kai-scheduler").rstrip("/"),
                          img.get("name") or "resourcereservation", img.get("tag") or "v0.17.0")
    return (rr.get("namespace") or RESERVATION_NS, rr.get("serviceAccountName") or RESERVATION_APP,
            rr.get("appLabel") or RESERVATION_APP, image)


def reservation_pod(node, group, settings=(RESERVATION_NS, RESERVATION_APP, RESERVATION_APP,
                                           "ghcr.io/kai-scheduler/kai-scheduler/resourcereservation:v0.17.0")):
    namespace, account, app, image = settings
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "%s-%s-%s" % (RESERVATION_PREFIX, node, random_suffix(5)),
                         "namespace": namespace,
                         "labels": {"app": app, GROUP_LABEL: group},
                         "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
            "spec": {"nodeName": node, "serviceAccountName": account, "containers": [{
                "name": "resource-reservation", "image": image, "imagePullPolicy": "IfNotPresent",
                "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]}]}}


def is_reservation(pod, app=RESERVATION_APP):
    """IsResourceReservationTask: the pod's app label is the binder's reservation app label."""
    return (pod["metadata"].get("labels") or {}).get("app") == app


def configmap_prefix(pod):
    """The admission webhook's name for the pod's GPU-sharing ConfigMaps (generateConfigMapNamePrefix)."""
    ann = pod["metadata"].get("annotations") or {}
    if ann.get(CONFIGMAP_ANNOTATION):
        return ann[CONFIGMAP_ANNOTATION], False
    owners = pod["metadata"].get("ownerReferences") or []
    base = (owners[0]["name"] if owners else pod["metadata"]["name"])[:63 - 13 - len("shared-gpu") - 2 - 5]
    return "%s-%s-shared-gpu" % (base.rstrip(".-"), random_suffix(7)), True


def configmaps(pod, prefix, uuid, share):
    """The two ConfigMaps the binder fills for container 0: GPU_PORTION and NVIDIA_VISIBLE_DEVICES."""
    ns = pod["metadata"]["namespace"]
    owner = [{"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}]
    text = ("%g" % share)
    return [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "%s-0" % prefix, "namespace": ns, "ownerReferences": owner},
         "data": {"GPU_PORTION": text, "RUNAI_NUM_OF_GPUS": text}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "%s-0-evar" % prefix, "namespace": ns, "ownerReferences": owner},
         "data": {"NVIDIA_VISIBLE_DEVICES": uuid}},
    ]
