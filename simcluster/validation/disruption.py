"""PodDisruptionBudget arithmetic (the disruption controller's status) and eviction.

The budget's numbers are computed from the live pods when needed (eviction) and
written to the PDB's status by simcluster/controllers/disruption.py.
"""

import math

from simcluster.validation.core import selector_matches


def pod_ready(pod):
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def pod_healthy(pod):
    meta = pod.get("metadata") or {}
    return (not meta.get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") == "Running" and pod_ready(pod))


def matching_pods(pdb, pods):
    sel = (pdb.get("spec") or {}).get("selector")
    if sel is None:
        return []
    if not sel.get("matchLabels") and not sel.get("matchExpressions"):
        return list(pods)  # policy/v1: an empty selector matches every pod
    return [p for p in pods if selector_matches(sel, (p.get("metadata") or {}).get("labels") or {})]


def _scaled(value, total, round_up):
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1] or 0)
        raw = pct * total / 100.0
        return int(math.ceil(raw)) if round_up else int(math.floor(raw))
    return int(value)


def expected_scale(pods, scale_of):
    """getExpectedScale: the summed replicas of the pods' controllers.

    scale_of(namespace, owner_reference) -> replicas or None. Pods without a
    controller count as one each (the real controller reports an error instead).
    """
    seen, total = set(), 0
    for p in pods:
        meta = p.get("metadata") or {}
        ref = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
        if ref is None:
            total += 1
            continue
        key = (ref.get("kind"), ref.get("name"))
        if key in seen:
            continue
        seen.add(key)
        scale = scale_of(meta.get("namespace"), ref) if scale_of else None
        total += scale if scale is not None else sum(
            1 for q in pods if ref in ((q.get("metadata") or {}).get("ownerReferences") or ()))
    return total


def budget(pdb, pods, scale_of=None):
    """Status numbers: expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed
    (disruption controller getExpectedPodCount + countHealthyPods)."""
    matched = [p for p in matching_pods(pdb, pods)
               if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    healthy = sum(1 for p in matched if pod_healthy(p))
    spec = pdb.get("spec") or {}
    min_avail, max_unavail = spec.get("minAvailable"), spec.get("maxUnavailable")
    if max_unavail is not None:
        expected = expected_scale(matched, scale_of)
        desired = max(0, expected - _scaled(max_unavail, expected, True))
    elif isinstance(min_avail, int):
        expected = len(matched)
        desired = min_avail
    elif min_avail is not None:
        expected = expected_scale(matched, scale_of)
        desired = _scaled(min_avail, expected, True)
    else:
        # neither field (policy/v1 allows it, nothing defaults one): getExpectedPodCount falls
        # through with 0 and 0, and no pod expected means no disruption allowed (fail closed)
        expected = desired = 0
    allowed = max(0, healthy - desired) if expected > 0 else 0
    return {"expectedPods": expected, "currentHealthy": healthy, "desiredHealthy": desired,
            "disruptionsAllowed": allowed}


def status_of(pdb, pods, now, scale_of=None):
    nums = budget(pdb, pods, scale_of)
    ok = nums["disruptionsAllowed"] > 0
    old = {c.get("type"): c for c in (pdb.get("status") or {}).get("conditions") or ()}
    prev = old.get("DisruptionAllowed")
    cond = {"type": "DisruptionAllowed", "status": "True" if ok else "False",
            "reason": "SufficientPods" if ok else "InsufficientPods", "message": "",
            "observedGeneration": (pdb.get("metadata") or {}).get("generation", 1),
            "lastTransitionTime": (prev or {}).get("lastTransitionTime") or now}
    if prev and prev.get("status") != cond["status"]:
        cond["lastTransitionTime"] = now
    status = dict(nums)
    status["observedGeneration"] = (pdb.get("metadata") or {}).get("generation", 1)
    status["conditions"] = [cond]
    return status
