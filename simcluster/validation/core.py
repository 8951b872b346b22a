"""Built-in kinds we rely on: Pod (and pod templates), ResourceQuota, LimitRange,
NetworkPolicy, PodDisruptionBudget, workload selectors.

Messages follow k8s.io/kubernetes pkg/apis/core/validation; each function returns
a list of FieldError (422 Invalid is raised by admission.py). Malformed quantities
raise the 400 decode error a real server gives.
"""

import ipaddress
import re

from simcluster.jsoncopy import clone
from simcluster.errors import FieldError
from simcluster.validation import names
from simcluster.validation.quantity import Quantity, QuantityError, bad_request
from simcluster.selectors import label_selector_matches as selector_matches

STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
STANDARD_QUOTA_RESOURCES = {
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
    "cpu", "memory", "ephemeral-storage", "storage",
    "requests.cpu", "requests.memory", "requests.storage", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage",
}
INTEGER_RESOURCES = {"pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
                     "configmaps", "persistentvolumeclaims", "services.nodeports",
                     "services.loadbalancers"}
RESTART_POLICIES = ["Always", "OnFailure", "Never"]


def is_hugepages(name):
    return name.startswith("hugepages-")


def is_native(name):
    return "/" not in name or "kubernetes.io/" in name


def is_extended(name):
    """helper.IsExtendedResourceName: nvidia.com/gpu yes, requests.nvidia.com/gpu no."""
    if is_native(name) or name.startswith("requests."):
        return False
    return not names.qualified_name("requests." + name)


def overcommit_allowed(name):
    return is_native(name) and not is_hugepages(name)


def is_integer_resource(name):
    return name in INTEGER_RESOURCES or is_extended(name)


def parse_q(value, ctx):
    """Parse a quantity or raise the server's 400 decode error (ctx = (kind, version))."""
    try:
        return Quantity.parse(value)
    except QuantityError as exc:
        raise bad_request(ctx[0], ctx[1], str(exc))


def _resource_name_errs(name, path, for_containers):
    errs = [FieldError("Invalid value", path, name, m) for m in names.qualified_name(name)]
    if errs:
        return errs
    if "/" not in name:
        if for_containers:
            if name not in STANDARD_CONTAINER_RESOURCES and not is_hugepages(name):
                errs.append(FieldError("Invalid value", path, name,
                                       "must be a standard resource for containers"))
        elif name not in STANDARD_QUOTA_RESOURCES and not is_hugepages(name) \
                and not name.startswith(("requests.hugepages-", "limits.hugepages-")):
            errs.append(FieldError("Invalid value", path, name,
                                   "must be a standard resource for quota"))
    elif for_containers and not is_native(name) and not is_extended(name):
        errs.append(FieldError("Invalid value", path, name,
                               "doesn't follow extended resource name standard"))
    return errs


def _quantity_value_errs(name, q, path):
    errs = []
    if q.value < 0:
        errs.append(FieldError("Invalid value", path, str(q), "must be greater than or equal to 0"))
    if is_integer_resource(name) and q.milli() % 1000 != 0:
        errs.append(FieldError("Invalid value", path, str(q), "must be an integer"))
    return errs


def validate_resources(res, path, ctx):
    """ValidateResourceRequirements of one container."""
    errs = []
    if not isinstance(res, dict):
        return errs
    limits = res.get("limits") or {}
    requests = res.get("requests") or {}
    lim_q = {}
    for name in sorted(limits):
        p = "%s.limits[%s]" % (path, name)
        errs.extend(_resource_name_errs(name, p, True))
        q = lim_q[name] = parse_q(limits[name], ctx)
        errs.extend(_quantity_value_errs(name, q, p))
    for name in sorted(requests):
        p = "%s.requests[%s]" % (path, name)
        errs.extend(_resource_name_errs(name, p, True))
        q = parse_q(requests[name], ctx)
        errs.extend(_quantity_value_errs(name, q, p))
        if name in lim_q:
            lim = lim_q[name]
            if q != lim and not overcommit_allowed(name):
                errs.append(FieldError("Invalid value", path + ".requests", str(q),
                                       "must be equal to %s limit of %s" % (name, lim)))
            elif q > lim:
                errs.append(FieldError("Invalid value", path + ".requests", str(q),
                                       "must be less than or equal to %s limit of %s"
                                       % (name, lim)))
        elif not overcommit_allowed(name):
            errs.append(FieldError("Required value", path + ".limits", None,
                                   "Limit must be set for non overcommitable resources"))
    return errs


def default_pod_requests(spec):
    """API defaulting: a container limit without a request gets request = limit."""
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or ():
            res = c.get("resources")
            if not isinstance(res, dict) or not res.get("limits"):
                continue
            req = res.setdefault("requests", {})
            if req is None:
                req = res["requests"] = {}
            for name, value in res["limits"].items():
                req.setdefault(name, value)


def validate_pod_spec(spec, path, ctx, *, template_of=None):
    """ValidatePodSpec subset. template_of: resource key of the owning workload."""
    errs = []
    if not isinstance(spec, dict):
        return [FieldError("Required value", path)]
    containers = spec.get("containers")
    if not containers:
        errs.append(FieldError("Required value", path + ".containers"))
    volumes = set()
    for i, vol in enumerate(spec.get("volumes") or ()):
        vname = (vol or {}).get("name", "")
        vp = "%s.volumes[%d].name" % (path, i)
        if not vname:
            errs.append(FieldError("Required value", vp))
        elif vname in volumes:
            errs.append(FieldError("Duplicate value", vp, vname))
        else:
            errs.extend(FieldError("Invalid value", vp, vname, m)
                        for m in names.dns1123_label(vname))
        volumes.add(vname)
    pod_claims = _validate_pod_resource_claims(spec.get("resourceClaims"), path + ".resourceClaims", errs)
    seen = set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or ()):
            cp = "%s.%s[%d]" % (path, key, i)
            errs.extend(_validate_container(c or {}, cp, ctx, seen, volumes))
            _validate_container_claims(((c or {}).get("resources") or {}).get("claims"),
                                       cp + ".resources.claims", pod_claims, errs)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in RESTART_POLICIES:
        errs.append(FieldError("Unsupported value", path + ".restartPolicy", policy,
                               "supported values: " + ", ".join('"%s"' % p
                                                                for p in RESTART_POLICIES)))
    elif template_of in ("deployments.apps", "replicasets.apps", "daemonsets.apps",
                         "statefulsets.apps", "replicationcontrollers") \
            and policy not in (None, "Always"):
        errs.append(FieldError("Unsupported value", path + ".restartPolicy", policy,
                               'supported values: "Always"'))
    elif template_of in ("jobs.batch", "cronjobs.batch") and policy not in ("OnFailure",
                                                                            "Never"):
        if policy is None:
            errs.append(FieldError("Required value", path + ".restartPolicy", None,
                                   'valid values: "OnFailure", "Never"'))
        else:
            errs.append(FieldError("Unsupported value", path + ".restartPolicy", policy,
                                   'supported values: "OnFailure", "Never"'))
    for field in ("nodeSelector",):
        errs.extend(names.validate_labels(spec.get(field), path + "." + field))
    return errs


class _Shown:
    """A Go struct in a field error (printed by the real server with its fields)."""

    def __str__(self):
        return "object"


def _validate_pod_resource_claims(claims, path, errs):
    """validatePodResourceClaim: names (DNS labels, unique), exactly one source. Returns the names."""
    out = set()
    for i, claim in enumerate(claims or ()):
        cp = "%s[%d]" % (path, i)
        name = (claim or {}).get("name")
        if not name:
            errs.append(FieldError("Required value", cp + ".name"))
        elif name in out:
            errs.append(FieldError("Duplicate value", cp + ".name", name))
        else:
            errs.extend(FieldError("Invalid value", cp + ".name", name, m) for m in names.dns1123_label(name))
            out.add(name)
        by_name, by_template = (claim or {}).get("resourceClaimName"), (claim or {}).get("resourceClaimTemplateName")
        if by_name is not None and by_template is not None:
            errs.append(FieldError("Invalid value", cp, _Shown(), "at most one of `resourceClaimName` or "
                                   "`resourceClaimTemplateName` may be specified"))
        if by_name is None and by_template is None:
            errs.append(FieldError("Invalid value", cp, _Shown(), "must specify one of: `resourceClaimName`, "
                                   "`resourceClaimTemplateName`"))
        for key, value in (("resourceClaimName", by_name), ("resourceClaimTemplateName", by_template)):
            if value is not None:
                errs.extend(FieldError("Invalid value", cp + "." + key, value, m)
                            for m in names.dns1123_subdomain(value))
    return out


def _validate_container_claims(claims, path, pod_claims, errs):
    """validateResourceClaimNames: each entry names a pod claim, (name, request) unique."""
    keys = set()
    for i, claim in enumerate(claims or ()):
        name = (claim or {}).get("name")
        if not name:
            errs.append(FieldError("Required value", "%s[%d].name" % (path, i)))
            continue
        key = name + ("/" + claim["request"] if claim.get("request") else "")
        if key in keys:
            errs.append(FieldError("Duplicate value", "%s[%d]" % (path, i), key))
        keys.add(key)
        if name not in pod_claims:
            detail = "must be one of the names in pod.spec.resourceClaims" + (
                ": " + ", ".join(sorted(pod_claims)) if pod_claims else " which is empty")
            errs.append(FieldError("Not found", "%s[%d].name" % (path, i), name, detail))


def _validate_container(c, cp, ctx, seen, volumes):
    errs = []
    name = c.get("name")
    if not name:
        errs.append(FieldError("Required value", cp + ".name"))
    else:
        if name in seen:
            errs.append(FieldError("Duplicate value", cp + ".name", name))
        errs.extend(FieldError("Invalid value", cp + ".name", name, m)
                    for m in names.dns1123_label(name))
        seen.add(name)
    if not c.get("image"):
        errs.append(FieldError("Required value", cp + ".image"))
    for j, port in enumerate(c.get("ports") or ()):
        pp = "%s.ports[%d]" % (cp, j)
        cport = (port or {}).get("containerPort")
        if cport is None:
            errs.append(FieldError("Required value", pp + ".containerPort"))
        elif not isinstance(cport, int) or not 1 <= cport <= 65535:
            errs.append(FieldError("Invalid value", pp + ".containerPort", cport,
                                   "must be between 1 and 65535, inclusive"))
        hport = (port or {}).get("hostPort")
        if hport and (not isinstance(hport, int) or not 1 <= hport <= 65535):
            errs.append(FieldError("Invalid value", pp + ".hostPort", hport,
                                   "must be between 1 and 65535, inclusive"))
        proto = (port or {}).get("protocol")
        if proto is not None and proto not in ("TCP", "UDP", "SCTP"):
            errs.append(FieldError("Unsupported value", pp + ".protocol", proto,
                                   'supported values: "SCTP", "TCP", "UDP"'))
    for j, mount in enumerate(c.get("volumeMounts") or ()):
        mp = "%s.volumeMounts[%d]" % (cp, j)
        mname = (mount or {}).get("name")
        if not mname:
            errs.append(FieldError("Required value", mp + ".name"))
        elif mname not in volumes:
            errs.append(FieldError("Not found", mp + ".name", mname))
        if not (mount or {}).get("mountPath"):
            errs.append(FieldError("Required value", mp + ".mountPath"))
    errs.extend(validate_resources(c.get("resources"), cp + ".resources", ctx))
    return errs


# Where each workload keeps its pod template.
TEMPLATE_PATHS = {
    "deployments.apps": ("spec", "template"),
    "replicasets.apps": ("spec", "template"),
    "statefulsets.apps": ("spec", "template"),
    "daemonsets.apps": ("spec", "template"),
    "replicationcontrollers": ("spec", "template"),
    "jobs.batch": ("spec", "template"),
    "cronjobs.batch": ("spec", "jobTemplate", "spec", "template"),
    "podtemplates": ("template",),
}


def pod_template(resource, obj):
    """(template dict or None, dotted path) of a workload."""
    keys = TEMPLATE_PATHS.get(resource)
    if not keys:
        return None, ""
    cur = obj
    for k in keys:
        if not isinstance(cur, dict):
            return None, ""
        cur = cur.get(k)
    return (cur if isinstance(cur, dict) else None), ".".join(keys)


def validate_workload(resource, obj, ctx):
    errs = []
    tmpl, tpath = pod_template(resource, obj)
    if tmpl is None:
        return errs
    meta = tmpl.get("metadata") or {}
    errs.extend(names.validate_labels(meta.get("labels"), tpath + ".metadata.labels"))
    errs.extend(validate_pod_spec(tmpl.get("spec"), tpath + ".spec", ctx, template_of=resource))
    if resource.endswith(".apps"):
        spec = obj.get("spec") or {}
        sel = spec.get("selector")
        if not sel:
            errs.append(FieldError("Required value", "spec.selector"))
        elif not (sel.get("matchLabels") or sel.get("matchExpressions")):
            errs.append(FieldError("Invalid value", "spec.selector", _go_selector(sel),
                                   "empty selector is invalid for deployment"
                                   if resource == "deployments.apps" else
                                   "empty selector is not valid for %s." % resource.split(".")[0]))
        elif not selector_matches(sel, meta.get("labels") or {}):
            errs.append(FieldError("Invalid value", tpath + ".metadata.labels",
                                   _go_map(meta.get("labels") or {}),
                                   "`selector` does not match template `labels`"))
    if resource == "deployments.apps":
        errs.extend(validate_deployment_strategy((obj.get("spec") or {}).get("strategy")))
    return errs


PERCENT_MSG = ("a valid percent string must be a numeric string followed by an ending '%' "
               "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")


def _fencepost(value, path, errs):
    """ValidatePositiveIntOrPercent: its value (0 when unset: the 25% default is not 0)."""
    if value is None:
        return 25
    if isinstance(value, str):
        if not re.match(r"^[0-9]+%$", value):
            errs.append(FieldError("Invalid value", path, value, PERCENT_MSG))
            return 1
        return int(value[:-1])
    if isinstance(value, bool) or not isinstance(value, int):
        errs.append(FieldError("Invalid value", path, value, "must be an integer or percentage (e.g '5%')"))
        return 1
    if value < 0:
        errs.append(FieldError("Invalid value", path, value, "must be greater than or equal to 0"))
    return value


def validate_deployment_strategy(strategy):
    """apps validation ValidateDeploymentStrategy / ValidateRollingUpdateDeployment."""
    errs = []
    if not isinstance(strategy, dict):
        return errs
    path = "spec.strategy"
    kind = strategy.get("type") or "RollingUpdate"
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            errs.append(FieldError("Forbidden", path + ".rollingUpdate", None,
                                   "may not be specified when strategy `type` is 'Recreate'"))
        return errs
    if kind != "RollingUpdate":
        errs.append(FieldError("Unsupported value", path + ".type", kind,
                               'supported values: "Recreate", "RollingUpdate"'))
        return errs
    if not isinstance(rolling, dict):
        return errs
    rp = path + ".rollingUpdate"
    unav = _fencepost(rolling.get("maxUnavailable"), rp + ".maxUnavailable", errs)
    surge = _fencepost(rolling.get("maxSurge"), rp + ".maxSurge", errs)
    if unav == 0 and surge == 0:
        errs.append(FieldError("Invalid value", rp + ".maxUnavailable", rolling.get("maxUnavailable"),
                               "may not be 0 when `maxSurge` is 0"))
    value = rolling.get("maxUnavailable")
    if isinstance(value, str) and re.match(r"^[0-9]+%$", value) and int(value[:-1]) > 100:
        errs.append(FieldError("Invalid value", rp + ".maxUnavailable", value, "must not be greater than 100%"))
    return errs


class _Raw:
    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


def _go_map(m):
    return _Raw("map[string]string{" + ", ".join('"%s":"%s"' % (k, m[k]) for k in sorted(m))
                + "}")


def _go_selector(sel):
    return _Raw("v1.LabelSelector{MatchLabels:map[string]string(nil), "
                "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}")




# -- ResourceQuota -----------------------------------------------------------

QUOTA_SCOPES = ["Terminating", "NotTerminating", "BestEffort", "NotBestEffort",
                "PriorityClass", "CrossNamespacePodAffinity", "VolumeAttributesClass"]


def validate_resource_quota(obj, ctx):
    errs = []
    spec = obj.get("spec") or {}
    for name in sorted(spec.get("hard") or {}):
        p = "spec.hard[%s]" % name
        errs.extend(_resource_name_errs(name, p, False))
        q = parse_q(spec["hard"][name], ctx)
        errs.extend(_quantity_value_errs(name, q, p))
    for i, scope in enumerate(spec.get("scopes") or ()):
        if scope not in QUOTA_SCOPES:
            errs.append(FieldError("Invalid value", "spec.scopes", scope,
                                   "unsupported scope"))
    return errs


# -- LimitRange --------------------------------------------------------------

LIMIT_TYPES = ["Pod", "Container", "PersistentVolumeClaim"]


def default_limit_range(obj):
    """SetDefaults_LimitRangeItem for Container items (max->default->defaultRequest, min)."""
    for item in (obj.get("spec") or {}).get("limits") or ():
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        default = item.setdefault("default", {}) or {}
        item["default"] = default
        dreq = item.setdefault("defaultRequest", {}) or {}
        item["defaultRequest"] = dreq
        for k, v in (item.get("max") or {}).items():
            default.setdefault(k, v)
        for k, v in default.items():
            dreq.setdefault(k, v)
        for k, v in (item.get("min") or {}).items():
            dreq.setdefault(k, v)
        if not default:
            del item["default"]
        if not dreq:
            del item["defaultRequest"]


def validate_limit_range(obj, ctx):
    errs = []
    for i, item in enumerate((obj.get("spec") or {}).get("limits") or ()):
        ip = "spec.limits[%d]" % i
        item = item or {}
        typ = item.get("type")
        if typ not in LIMIT_TYPES:
            errs.append(FieldError("Unsupported value" if typ else "Required value",
                                   ip + ".type", typ, 'supported values: "Container", '
                                   '"PersistentVolumeClaim", "Pod"' if typ else ""))
        if typ == "Pod":
            for f in ("default", "defaultRequest"):
                if item.get(f):
                    errs.append(FieldError("Forbidden", ip + "." + f, None,
                                           "may not be specified when `type` is 'Pod'"))
        q = {}
        for f in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            q[f] = {}
            for k, v in (item.get(f) or {}).items():
                q[f][k] = parse_q(v, ctx)
                errs.extend(_resource_name_errs(k, "%s.%s[%s]" % (ip, f, k), False)
                            if "/" in k else [])
        keys = set()
        for f in q:
            keys.update(q[f])
        for k in sorted(keys):
            mn, mx = q["min"].get(k), q["max"].get(k)
            d, dr = q["default"].get(k), q["defaultRequest"].get(k)
            if mn is not None and mx is not None and mn > mx:
                errs.append(FieldError("Invalid value", "%s.min[%s]" % (ip, k), str(mn),
                                       "min value %s is greater than max value %s" % (mn, mx)))
            if dr is not None:
                if mn is not None and mn > dr:
                    errs.append(FieldError("Invalid value", "%s.defaultRequest[%s]" % (ip, k),
                                           str(dr), "min value %s is greater than default "
                                           "request value %s" % (mn, dr)))
                if mx is not None and dr > mx:
                    errs.append(FieldError("Invalid value", "%s.defaultRequest[%s]" % (ip, k),
                                           str(dr), "default request value %s is greater than "
                                           "max value %s" % (dr, mx)))
                if d is not None and dr > d:
                    errs.append(FieldError("Invalid value", "%s.defaultRequest[%s]" % (ip, k),
                                           str(dr), "default request value %s is greater than "
                                           "default limit value %s" % (dr, d)))
            if d is not None:
                if mn is not None and mn > d:
                    errs.append(FieldError("Invalid value", "%s.default[%s]" % (ip, k), str(d),
                                           "min value %s is greater than default value %s"
                                           % (mn, d)))
                if mx is not None and d > mx:
                    errs.append(FieldError("Invalid value", "%s.default[%s]" % (ip, k), str(d),
                                           "default value %s is greater than max value %s"
                                           % (d, mx)))
    return errs


# -- NetworkPolicy -----------------------------------------------------------

def validate_network_policy(obj):
    errs = []
    spec = obj.get("spec") or {}
    types = spec.get("policyTypes") or []
    for i, t in enumerate(types):
        if t not in ("Ingress", "Egress"):
            errs.append(FieldError("Unsupported value", "spec.policyTypes[%d]" % i, t,
                                   'supported values: "Ingress", "Egress"'))
    if len(types) > 2:
        errs.append(FieldError("Invalid value", "spec.policyTypes", _Raw(str(types)),
                               "may not specify more than two policyTypes"))
    for direction, peers_key in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(spec.get(direction) or ()):
            rp = "spec.%s[%d]" % (direction, i)
            for j, port in enumerate((rule or {}).get("ports") or ()):
                proto = (port or {}).get("protocol")
                if proto is not None and proto not in ("TCP", "UDP", "SCTP"):
                    errs.append(FieldError("Unsupported value", "%s.ports[%d].protocol" % (rp, j),
                                           proto, 'supported values: "SCTP", "TCP", "UDP"'))
                pnum = (port or {}).get("port")
                if isinstance(pnum, int) and not 1 <= pnum <= 65535:
                    errs.append(FieldError("Invalid value", "%s.ports[%d].port" % (rp, j), pnum,
                                           "must be between 1 and 65535, inclusive"))
            for j, peer in enumerate((rule or {}).get(peers_key) or ()):
                pp = "%s.%s[%d]" % (rp, peers_key, j)
                peer = peer or {}
                n = sum(1 for k in ("podSelector", "namespaceSelector", "ipBlock")
                        if peer.get(k) is not None)
                if n == 0:
                    errs.append(FieldError("Required value", pp, None,
                                           "must specify a peer"))
                if peer.get("ipBlock") is not None:
                    if n > 1:
                        errs.append(FieldError("Forbidden", pp, None,
                                               "may not specify both ipBlock and another peer"))
                    errs.extend(_ip_block_errs(peer["ipBlock"], pp + ".ipBlock"))
    return errs


_CIDR_MSG = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"


def _ip_block_errs(block, path):
    errs = []
    cidr = (block or {}).get("cidr")
    if not cidr:
        return [FieldError("Required value", path + ".cidr")]
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return [FieldError("Invalid value", path + ".cidr", cidr, _CIDR_MSG)]
    for i, exc in enumerate((block or {}).get("except") or ()):
        try:
            enet = ipaddress.ip_network(exc, strict=False)
        except ValueError:
            errs.append(FieldError("Invalid value", "%s.except[%d]" % (path, i), exc, _CIDR_MSG))
            continue
        if enet.version != net.version or not enet.subnet_of(net) or enet == net:
            errs.append(FieldError("Invalid value", "%s.except[%d]" % (path, i), exc,
                                   "must be a strict subset of `cidr`"))
    return errs


# -- PodDisruptionBudget -----------------------------------------------------

def validate_pdb(obj):
    errs = []
    spec = obj.get("spec") or {}
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errs.append(FieldError("Invalid value", "spec", _Raw("policy.PodDisruptionBudgetSpec{...}"),
                               "minAvailable and maxUnavailable cannot be both set"))
    if not isinstance(spec.get("selector") or {}, dict):
        raise TypeError("spec.selector must be an object")
    for f in ("minAvailable", "maxUnavailable"):
        v = spec.get(f)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, str))):
            raise TypeError("spec.%s must be an int or a string" % f)
        if isinstance(v, int) and not isinstance(v, bool) and v < 0:
            errs.append(FieldError("Invalid value", "spec." + f, v,
                                   "must be greater than or equal to 0"))
        elif isinstance(v, str):
            pct = v[:-1] if v.endswith("%") else None
            if pct is None or not pct.isdigit():
                errs.append(FieldError("Invalid value", "spec." + f, v,
                                       "a valid percent string must be a numeric string "
                                       "followed by an ending '%' (e.g. '1%',  or '93%', regex "
                                       "used for validation is '[0-9]+%')"))
            elif int(pct) > 100:
                errs.append(FieldError("Invalid value", "spec." + f, v,
                                       "must not be greater than 100%"))
    return errs


# -- updates ----------------------------------------------------------------------------

POD_UPDATE_MSG = ("pod updates may not change fields other than `spec.containers[*].image`,"
                  "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                  "`spec.tolerations` (only additions to existing tolerations),"
                  "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                  "previously negative)")


def _clean(v):
    """Drop nulls so that `x: null` and an absent x compare equal (as after decoding)."""
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def validate_pod_update(new, old):
    """ValidatePodUpdate: the pod spec is immutable but for a few fields."""
    ns, os_ = clone(new.get("spec") or {}), clone(old.get("spec") or {})
    default_pod_requests(ns)
    default_pod_requests(os_)
    for key in ("containers", "initContainers"):
        olds = os_.get(key) or []
        for i, c in enumerate(ns.get(key) or []):
            if i < len(olds) and isinstance(c, dict) and isinstance(olds[i], dict):
                if "image" in olds[i]:
                    c["image"] = olds[i]["image"]
    for key in ("activeDeadlineSeconds", "terminationGracePeriodSeconds", "schedulingGates"):
        if key in os_:
            ns[key] = os_[key]
        else:
            ns.pop(key, None)
    old_tol = os_.get("tolerations") or []
    new_tol = ns.get("tolerations") or []
    if all(t in new_tol for t in old_tol):
        if old_tol:
            ns["tolerations"] = old_tol
        else:
            ns.pop("tolerations", None)
    if not os_.get("nodeName") and ns.get("nodeName"):
        ns.pop("nodeName")  # binding (pods/binding is routed through updates here)
        os_.pop("nodeName", None)
    if _clean(ns) != _clean(os_):
        return [FieldError("Forbidden", "spec", None, POD_UPDATE_MSG)]
    return []


def _go_label_selector(sel):
    sel = sel or {}
    ml = sel.get("matchLabels")
    ml_s = ("map[string]string{" + ", ".join('"%s":"%s"' % (k, ml[k]) for k in sorted(ml)) + "}"
            if ml else "map[string]string(nil)")
    exprs = sel.get("matchExpressions")
    ex_s = ("[]v1.LabelSelectorRequirement{" + ", ".join(
        'v1.LabelSelectorRequirement{Key:"%s", Operator:"%s", Values:[]string{%s}}' % (
            e.get("key"), e.get("operator"),
            ", ".join('"%s"' % v for v in e.get("values") or ())) for e in exprs) + "}"
            if exprs else "[]v1.LabelSelectorRequirement(nil)")
    return _Raw("v1.LabelSelector{MatchLabels:%s, MatchExpressions:%s}" % (ml_s, ex_s))


STS_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy",
               "persistentVolumeClaimRetentionPolicy", "minReadySeconds")


def validate_workload_update(resource, new, old):
    errs = []
    nspec, ospec = new.get("spec") or {}, old.get("spec") or {}
    if resource.endswith(".apps") and resource != "controllerrevisions.apps":
        if _clean(nspec.get("selector")) != _clean(ospec.get("selector")):
            errs.append(FieldError("Invalid value", "spec.selector",
                                   _go_label_selector(nspec.get("selector")),
                                   "field is immutable"))
    if resource == "statefulsets.apps":
        strip = lambda s: _clean({k: v for k, v in s.items()  # noqa: E731
                                  if k not in STS_MUTABLE and k != "selector"})
        if strip(nspec) != strip(ospec):
            errs.append(FieldError("Forbidden", "spec", None,
                                   "updates to statefulset spec for fields other than "
                                   "'replicas', 'ordinals', 'template', 'updateStrategy', "
                                   "'persistentVolumeClaimRetentionPolicy' and "
                                   "'minReadySeconds' are forbidden"))
    return errs


# -- serialization -----------------------------------------------------------------------

def _canon_map(m):
    if not isinstance(m, dict):
        return
    for k, v in list(m.items()):
        try:
            m[k] = str(Quantity.parse(v))
        except (QuantityError, ValueError, TypeError):
            pass  # left as is: validation reports it


def canonicalize_quantities(resource, obj):
    """The server stores and returns quantities in canonical form (2 -> "2", 0.5 -> "500m")."""
    if resource == "pods":
        specs = [obj.get("spec")]
    elif resource in TEMPLATE_PATHS:
        tmpl, _ = pod_template(resource, obj)
        specs = [tmpl.get("spec")] if tmpl else []
    elif resource == "resourcequotas":
        _canon_map((obj.get("spec") or {}).get("hard"))
        return
    elif resource == "limitranges":
        for item in (obj.get("spec") or {}).get("limits") or ():
            if isinstance(item, dict):
                for f in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
                    _canon_map(item.get(f))
        return
    else:
        return
    for spec in specs:
        if not isinstance(spec, dict):
            continue
        _canon_map(spec.get("overhead"))
        for key in ("initContainers", "containers", "ephemeralContainers"):
            for c in spec.get(key) or ():
                res = c.get("resources") if isinstance(c, dict) else None
                if isinstance(res, dict):
                    _canon_map(res.get("limits"))
                    _canon_map(res.get("requests"))
