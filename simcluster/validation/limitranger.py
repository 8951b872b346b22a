"""LimitRanger admission (plugin/pkg/admission/limitranger) for pods.

Mutation: Container defaults (limits) and defaultRequest onto containers that
lack them, plus the `kubernetes.io/limit-ranger` annotation. Validation: min,
max and maxLimitRequestRatio per Container and per Pod, real messages.
"""

from simcluster.validation.quantity import Quantity
from simcluster.validation import quota as quota_mod

ANNOTATION = "kubernetes.io/limit-ranger"


def _q(v):
    try:
        return Quantity.parse(v)
    except ValueError:
        return Quantity(0)


def _container_items(lr):
    return [i for i in (lr.get("spec") or {}).get("limits") or ()
            if isinstance(i, dict) and i.get("type") == "Container"]


def mutate_pod(pod, limit_ranges):
    spec = pod.get("spec") or {}
    notes = []
    for lr in limit_ranges:
        default_lim, default_req = {}, {}
        for item in _container_items(lr):
            default_lim.update(item.get("default") or {})
            default_req.update(item.get("defaultRequest") or {})
        if not default_lim and not default_req:
            continue
        for key in ("initContainers", "containers"):
            for c in spec.get(key) or ():
                res = c.get("resources")
                if not isinstance(res, dict):
                    res = c["resources"] = {}
                lims = res.get("limits")
                if lims is None:
                    lims = res["limits"] = {}
                reqs = res.get("requests")
                if reqs is None:
                    reqs = res["requests"] = {}
                set_lim = [k for k in sorted(default_lim) if k not in lims]
                set_req = [k for k in sorted(default_req) if k not in reqs]
                for k in set_lim:
                    lims[k] = default_lim[k]
                for k in set_req:
                    reqs[k] = default_req[k]
                if not lims:
                    del res["limits"]
                if not reqs:
                    del res["requests"]
                if set_req:
                    notes.append("%s request for %s %s" % (
                        ", ".join(set_req), "init container" if key == "initContainers"
                        else "container", c.get("name")))
                if set_lim:
                    notes.append("%s limit for %s %s" % (
                        ", ".join(set_lim), "init container" if key == "initContainers"
                        else "container", c.get("name")))
    if notes:
        meta = pod.setdefault("metadata", {})
        ann = meta.get("annotations")
        if ann is None:
            ann = meta["annotations"] = {}
        ann[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def _min(limit_type, name, enforced, request, limit):
    if name not in request:
        return "minimum %s usage per %s is %s.  No request is specified" % (
            name, limit_type, enforced)
    if request[name] < enforced:
        return "minimum %s usage per %s is %s, but request is %s" % (
            name, limit_type, enforced, request[name])
    if name in limit and limit[name] < enforced:
        return "minimum %s usage per %s is %s, but limit is %s" % (
            name, limit_type, enforced, limit[name])
    return None


def _max(limit_type, name, enforced, request, limit):
    if name not in limit:
        return "maximum %s usage per %s is %s.  No limit is specified" % (
            name, limit_type, enforced)
    if limit[name] > enforced:
        return "maximum %s usage per %s is %s, but limit is %s" % (
            name, limit_type, enforced, limit[name])
    if name in request and request[name] > enforced:
        return "maximum %s usage per %s is %s, but request is %s" % (
            name, limit_type, enforced, request[name])
    return None


def _ratio(limit_type, name, enforced, request, limit):
    req, lim = request.get(name), limit.get(name)
    if req is None or req.is_zero():
        return ("%s max limit to request ratio per %s is %s, but no request is specified or "
                "request is 0" % (name, limit_type, enforced))
    if lim is None or lim.is_zero():
        return ("%s max limit to request ratio per %s is %s, but no limit is specified or "
                "limit is 0" % (name, limit_type, enforced))
    ratio = float(lim.value / req.value)
    if not enforced.is_zero() and ratio > float(enforced.value):
        return "%s max limit to request ratio per %s is %s, but provided ratio is %f" % (
            name, limit_type, enforced, ratio)
    return None


def _apply(item, limit_type, request, limit, errs):
    for name in sorted(item.get("min") or {}):
        e = _min(limit_type, name, _q(item["min"][name]), request, limit)
        if e:
            errs.append(e)
    for name in sorted(item.get("max") or {}):
        e = _max(limit_type, name, _q(item["max"][name]), request, limit)
        if e:
            errs.append(e)
    for name in sorted(item.get("maxLimitRequestRatio") or {}):
        e = _ratio(limit_type, name, _q(item["maxLimitRequestRatio"][name]), request, limit)
        if e:
            errs.append(e)


def validate_pod(pod, limit_ranges):
    """Error texts (joined into one 403 by admission.py)."""
    errs = []
    spec = pod.get("spec") or {}
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or ():
            if not isinstance(item, dict):
                continue
            if item.get("type") == "Container":
                for c in list(spec.get("containers") or ()) + list(
                        spec.get("initContainers") or ()):
                    res = (c or {}).get("resources") or {}
                    request = {k: _q(v) for k, v in (res.get("requests") or {}).items()}
                    limit = {k: _q(v) for k, v in (res.get("limits") or {}).items()}
                    _apply(item, "Container", request, limit, errs)
            elif item.get("type") == "Pod":
                request, limit = quota_mod.pod_requests_limits(spec)
                _apply(item, "Pod", request, limit, errs)
    return errs
