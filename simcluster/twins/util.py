"""Small helpers shared by the twins: quantities, names, conditions, safe writes."""

import functools
import json
import random

from ..clock import now as now_iso  # noqa: F401 (the twins' name for the one clock)
from ..errors import ApiError
from ..jsoncopy import clone  # noqa: F401 (the twins take it from here)
from ..validation.quantity import Quantity

# The alphabet Kubernetes uses for generated suffixes (no vowels, no confusables).
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

@functools.lru_cache(maxsize=4096)
def _parse_text(text):
    return Quantity.parse(text).value


def parse_quantity(value):
    """Kubernetes quantity ("100m", "2Gi", 3) -> its exact value (int or Fraction, rounded up to
    nano units as the API server stores it), parsed by validation/quantity.py like the quota is,
    so a twin and the API server never disagree; bad input -> ValueError. Where the real
    component computes in float64 (KAI's queue shares, kube-state-metrics), convert there."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return _parse_text(value if isinstance(value, str) else repr(value))


def random_suffix(n=5):
    return "".join(random.choice(SAFE_ALPHABET) for _ in range(n))


def fnv32a(text):
    h = 0x811C9DC5
    for b in text.encode():
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def template_hash(template):
    """pod-template-hash style: fnv32a of the template, encoded in the safe alphabet."""
    h = fnv32a(json.dumps(template, sort_keys=True))
    out = ""
    while h:
        out += SAFE_ALPHABET[h % len(SAFE_ALPHABET)]
        h //= len(SAFE_ALPHABET)
    return out[:10] or "0"


def owner_ref(obj, kind, api_version, controller=True):
    return {"apiVersion": api_version, "kind": kind, "name": obj["metadata"]["name"],
            "uid": obj["metadata"].get("uid", ""), "controller": controller,
            "blockOwnerDeletion": True}


def controller_uid(obj):
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def controller_of(obj):
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def set_condition(conditions, ctype, status, reason=None, message=None, *, transition=True):
    """Set one condition in a list (in place); keep lastTransitionTime if status is unchanged.

    Returns the list. Only fields given are written, like meta.SetStatusCondition."""
    for cond in conditions:
        if cond.get("type") == ctype:
            if cond.get("status") != status and transition:
                cond["lastTransitionTime"] = now_iso()
            cond["status"] = status
            if reason is not None:
                cond["reason"] = reason
            else:
                cond.pop("reason", None)
            if message is not None:
                cond["message"] = message
            else:
                cond.pop("message", None)
            return conditions
    cond = {"type": ctype, "status": status}
    if transition:
        cond["lastTransitionTime"] = now_iso()
    if reason is not None:
        cond["reason"] = reason
    if message is not None:
        cond["message"] = message
    conditions.append(cond)
    return conditions


def strip_times(value):
    """A copy without timestamps, to compare a desired status with the stored one."""
    if isinstance(value, dict):
        return {k: strip_times(v) for k, v in value.items()
                if k not in ("lastTransitionTime", "lastProbeTime", "lastHeartbeatTime",
                             "lastUpdateTime", "startedAt", "finishedAt", "startTime",
                             "completionTime", "time")}
    if isinstance(value, list):
        return [strip_times(v) for v in value]
    return value


def same(a, b):
    return a == b or strip_times(a) == strip_times(b)


def write_status(store, resource, obj, status):
    """Replace obj's status if it differs (ignoring timestamps); tolerate races.

    Returns the stored object (or None when the object is gone)."""
    if same(obj.get("status") or {}, status):
        return obj
    # a /status write reads only the name and the status: no copy of the spec
    meta = obj["metadata"]
    new = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
           "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if k in meta},
           "status": status}
    try:
        return store.update_status(resource, new)
    except ApiError as err:
        if err.code in (404, 409):
            return None
        raise


def _label_delta(have, labels):
    return {k: v for k, v in labels.items() if have.get(k) != v and not (v is None and k not in have)}


def patch_labels(store, resource, namespace, name, labels, current=None):
    """Merge-patch labels ({key: value or None}) if any differs; 404 ignored.

    `current`: the object as the caller's (informer) cache has it; when its labels
    already match, nothing is read or written (at 1000 nodes most passes change nothing)."""
    if current is not None and not _label_delta(current["metadata"].get("labels") or {}, labels):
        return current
    cur = store.get(resource, namespace, name)
    if cur is None:
        return None
    have = cur["metadata"].get("labels") or {}
    delta = _label_delta(have, labels)
    if not delta:
        return cur
    try:
        return store.merge_patch(resource, namespace, name, {"metadata": {"labels": delta}})
    except ApiError as err:
        if err.code == 404:
            return None
        raise


def containers_requests(spec):
    """Effective requests of a pod spec: sum of containers, max with each init container.

    Extended resources have only limits in most manifests; the API defaults
    requests from limits, which we mirror here."""
    def one(c):
        res = c.get("resources") or {}
        req = dict(res.get("requests") or {})
        for k, v in (res.get("limits") or {}).items():
            req.setdefault(k, v)
        out = {}
        for k, v in req.items():
            try:
                out[k] = parse_quantity(v)
            except ValueError:
                continue
        return out

    total = {}
    for c in spec.get("containers") or []:
        for k, v in one(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or []:
        if c.get("restartPolicy") == "Always":     # sidecar: runs along the containers
            for k, v in one(c).items():
                total[k] = total.get(k, 0) + v
            continue
        for k, v in one(c).items():
            total[k] = max(total.get(k, 0), v)
    return total


GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


def gpu_requests(spec):
    return {k: v for k, v in containers_requests(spec).items()
            if k.startswith(GPU_RESOURCE_PREFIXES) and v > 0}


def pod_active(pod):
    """Counts against node resources: bound, not finished, not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed")
