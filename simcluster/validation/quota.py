"""ResourceQuota: usage of pods and object counts, admission check, status.

Follows plugin/pkg/admission/resourcequota and pkg/quota/v1/evaluator/core:
only `requests.<extended>` is counted for extended resources, so quota keys such
as `limits.nvidia.com/gpu` or `nvidia.com/gpu` are accepted and never enforced.
"""

from simcluster.validation import core, qos
from simcluster.validation.quantity import Quantity, pretty

ONE = Quantity(1)
# Legacy object-count names and the resource they count.
LEGACY_COUNTS = {"pods": "pods", "services": "services", "secrets": "secrets",
                 "configmaps": "configmaps", "persistentvolumeclaims": "persistentvolumeclaims",
                 "replicationcontrollers": "replicationcontrollers",
                 "resourcequotas": "resourcequotas"}
COMPUTE_KEYS = {"cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
                "requests.ephemeral-storage", "limits.cpu", "limits.memory",
                "limits.ephemeral-storage"}
CONSTRAINT_KEYS = {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu",
                   "limits.memory"}


def count_key(resource):
    """The count/<resource> key ("count/deployments.apps", "count/pods")."""
    return "count/" + resource


def is_pod_key(key):
    return (key in COMPUTE_KEYS or key in ("pods", "count/pods")
            or key.startswith(("hugepages-", "requests.hugepages-", "limits.hugepages-"))
            or (key.startswith("requests.") and core.is_extended(key[len("requests."):])))


def _q(v):
    try:
        return Quantity.parse(v)
    except ValueError:
        return Quantity(0)


def _container_usage(c):
    res = (c or {}).get("resources") or {}
    requests = {k: _q(v) for k, v in (res.get("requests") or {}).items()}
    limits = {k: _q(v) for k, v in (res.get("limits") or {}).items()}
    return requests, limits


def _sum(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = out[k] + v if k in out else v
    return out


def _max(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = out[k].max(v) if k in out else v
    return out


def pod_requests_limits(spec):
    """Effective pod requests and limits: sum of containers (and sidecars), max with init."""
    req, lim = {}, {}
    for c in spec.get("containers") or ():
        r, li = _container_usage(c)
        req, lim = _sum(req, r), _sum(lim, li)
    side_r, side_l = {}, {}
    init_r, init_l = {}, {}
    for c in spec.get("initContainers") or ():
        r, li = _container_usage(c)
        if (c or {}).get("restartPolicy") == "Always":
            side_r, side_l = _sum(side_r, r), _sum(side_l, li)
            req, lim = _sum(req, r), _sum(lim, li)
        else:
            init_r = _max(init_r, _sum(side_r, r))
            init_l = _max(init_l, _sum(side_l, li))
    req, lim = _max(req, init_r), _max(lim, init_l)
    for k, v in (spec.get("overhead") or {}).items():
        req = _sum(req, {k: _q(v)})
        lim = _sum(lim, {k: _q(v)}) if k in lim else lim
    return req, lim


def pod_usage(pod):
    """{quota key: Quantity} a pod consumes (podComputeUsageHelper)."""
    spec = pod.get("spec") or {}
    requests, limits = pod_requests_limits(spec)
    out = {"pods": ONE, "count/pods": ONE}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = requests[name]
            out["requests." + name] = requests[name]
        if name in limits:
            out["limits." + name] = limits[name]
    for name, q in requests.items():
        if name.startswith("hugepages-"):
            out[name] = q
            out["requests." + name] = q
        if core.is_extended(name):
            out["requests." + name] = q
    for name, q in limits.items():
        if name.startswith("hugepages-"):
            out["limits." + name] = q
    return out


STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"


def is_pvc_key(key):
    """Keys the PVC evaluator (evaluator/core/persistent_volume_claims.go) tracks beyond its counts."""
    return key == "requests.storage" or STORAGE_CLASS_SUFFIX in key


def pvc_usage(pvc):
    """{quota key: Quantity} one PersistentVolumeClaim consumes: the count, requests.storage, and both per
    StorageClass (spec.storageClassName, else the beta annotation)."""
    spec = pvc.get("spec") or {}
    out = {"persistentvolumeclaims": ONE, "count/persistentvolumeclaims": ONE}
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    sc = spec.get("storageClassName")
    if sc is None:
        sc = ((pvc.get("metadata") or {}).get("annotations") or {}).get(BETA_STORAGE_CLASS)
    if sc:
        out[sc + STORAGE_CLASS_SUFFIX + "persistentvolumeclaims"] = ONE
    if storage is not None:
        q = _q(storage)
        out["requests.storage"] = q
        if sc:
            out[sc + STORAGE_CLASS_SUFFIX + "requests.storage"] = q
    return out


CLAIM_COUNT = "count/resourceclaims.resource.k8s.io"
DEVICE_CLASS_SUFFIX = ".deviceclass.resource.k8s.io/devices"
ALL_DEVICES = 32          # AllocationResultsMaxSize: what allocationMode All is charged


def is_claim_key(key):
    """Keys the ResourceClaim evaluator (evaluator/core/resource_claims.go) tracks; the old
    `resourceclaims` alias is gone since resource.k8s.io v1beta1."""
    return key == CLAIM_COUNT or key.endswith(DEVICE_CLASS_SUFFIX)


def _request_devices(req):
    mode = req.get("allocationMode") or "ExactCount"
    if mode == "ExactCount":
        return int(req.get("count") or 1)
    if mode == "All":
        return ALL_DEVICES
    return 0        # an unknown mode (after a downgrade) is not charged


def claim_usage(claim):
    """{quota key: Quantity} one ResourceClaim consumes in 1.34: the count, and per DeviceClass the
    devices its requests may take (allocationMode All: 32, the most an allocation holds; a
    firstAvailable list: its worst subrequest per class). Admin access is charged too."""
    out = {CLAIM_COUNT: ONE}
    for req in (((claim.get("spec") or {}).get("devices") or {}).get("requests") or ()):
        if not isinstance(req, dict):
            continue
        if req.get("firstAvailable"):
            worst = {}
            for sub in req["firstAvailable"]:
                key = (sub.get("deviceClassName") or "") + DEVICE_CLASS_SUFFIX
                worst[key] = max(worst.get(key, 0), _request_devices(sub))
            for key, n in worst.items():
                out[key] = out.get(key, Quantity(0)) + Quantity(n)
            continue
        exact = req.get("exactly")
        if not isinstance(exact, dict) or not exact.get("deviceClassName"):
            continue
        key = exact["deviceClassName"] + DEVICE_CLASS_SUFFIX
        out[key] = out.get(key, Quantity(0)) + Quantity(_request_devices(exact))
    return out


def pod_counts(pod):
    """QuotaV1Pod: terminal pods stop counting."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _best_effort(pod):
    return qos.pod_qos_of(pod) == "BestEffort"     # the quota evaluator's isBestEffort: GetPodQOS


def _scope_matches(scope, op, values, pod):
    spec = pod.get("spec") or {}
    if scope == "Terminating":
        return spec.get("activeDeadlineSeconds") is not None
    if scope == "NotTerminating":
        return spec.get("activeDeadlineSeconds") is None
    if scope == "BestEffort":
        return _best_effort(pod)
    if scope == "NotBestEffort":
        return not _best_effort(pod)
    if scope == "PriorityClass":
        pc = spec.get("priorityClassName")
        if op == "Exists":
            return bool(pc)
        if op == "DoesNotExist":
            return not pc
        if op == "In":
            return pc in (values or ())
        if op == "NotIn":
            return pc not in (values or ())
        return bool(pc)
    if scope == "CrossNamespacePodAffinity":
        return False
    return True


def quota_matches_pod(quota, pod):
    spec = quota.get("spec") or {}
    for scope in spec.get("scopes") or ():
        if not _scope_matches(scope, None, None, pod):
            return False
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or ():
        if not _scope_matches(expr.get("scopeName"), expr.get("operator"),
                              expr.get("values"), pod):
            return False
    return True


def hard_of(quota):
    hard = {}
    for k, v in ((quota.get("spec") or {}).get("hard") or {}).items():
        hard[k] = _q(v)
    return hard


def _unhandled(key):
    """Keys no evaluator tracks (limits.nvidia.com/gpu, nvidia.com/gpu): never used."""
    return not (is_pod_key(key) or key.startswith("count/") or key in LEGACY_COUNTS or is_pvc_key(key)
                or key.startswith("services.") or is_claim_key(key))


def compute_used(quota, pods, counts, usage_of=None, pvcs=(), claims=()):
    """status.used of one quota. pods: live pods; counts: {count key: number}; pvcs: live claims;
    claims: live ResourceClaims.

    usage_of(pod) may memoize pod_usage (admission caches it per resourceVersion).
    """
    usage_of = usage_of or pod_usage
    hard = hard_of(quota)
    used = {}
    pod_keys = [k for k in hard if is_pod_key(k)]
    if pod_keys:
        for k in pod_keys:
            used[k] = Quantity(0)
        for pod in pods:
            if not pod_counts(pod) or not quota_matches_pod(quota, pod):
                continue
            u = usage_of(pod)
            for k in pod_keys:
                if k in u:
                    used[k] = used[k] + u[k]
    pvc_keys = [k for k in hard if is_pvc_key(k)]
    for k in pvc_keys:
        used[k] = Quantity(0)
    for pvc in pvcs or ():
        u = pvc_usage(pvc)
        for k in pvc_keys:
            if k in u:
                used[k] = used[k] + u[k]
    claim_keys = [k for k in hard if is_claim_key(k)]
    for k in claim_keys:
        used[k] = Quantity(0)
    for claim in claims or ():
        u = claim_usage(claim)
        for k in claim_keys:
            if k in u:
                used[k] = used[k] + u[k]
    for k in hard:
        if k in used or _unhandled(k):
            continue
        if k in counts:
            used[k] = Quantity(counts[k])
        elif k.startswith("count/") or k in LEGACY_COUNTS:
            used[k] = Quantity(0)
    return used


def status_of(quota, pods, counts, usage_of=None, pvcs=(), claims=()):
    hard = (quota.get("spec") or {}).get("hard") or {}
    used = compute_used(quota, pods, counts, usage_of, pvcs, claims)
    return {"hard": dict(hard), "used": {k: str(v) for k, v in sorted(used.items())}}


def constraints(pod, required):
    """Constraints: with a cpu/memory quota, every container must state them."""
    req_set = set(required) & CONSTRAINT_KEYS
    if not req_set:
        return None
    missing = {}
    spec = pod.get("spec") or {}
    for c in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()):
        r, li = _container_usage(c)
        have = set()
        for name in ("cpu", "memory"):
            if name in r:
                have.update((name, "requests." + name))
            if name in li:
                have.add("limits." + name)
        for k in sorted(req_set - have):
            missing.setdefault(k, []).append((c or {}).get("name"))
    if not missing:
        return None
    return "must specify " + "; ".join("%s for: %s" % (k, ",".join(sorted(missing[k])))
                                       for k in sorted(missing))


def check(quota, delta, used):
    """Forbidden text if delta would exceed this quota, else None."""
    hard = hard_of(quota)
    requested = {k: v for k, v in delta.items() if k in hard and not v.is_zero()}
    exceeded = []
    for k in sorted(requested):
        if (used.get(k, Quantity(0)) + requested[k]) > hard[k]:
            exceeded.append(k)
    if not exceeded:
        return None
    return "exceeded quota: %s, requested: %s, used: %s, limited: %s" % (
        quota["metadata"]["name"],
        pretty({k: requested[k] for k in exceeded}),
        pretty({k: used.get(k, Quantity(0)) for k in exceeded}),
        pretty({k: hard[k] for k in exceeded}))
