"""resource.k8s.io/v1: defaulting and validation of DeviceClass, ResourceClaim, ResourceClaimTemplate
and ResourceSlice, an independent reading of kube's pkg/apis/resource/validation/validation.go and
pkg/apis/resource/v1/defaults.go (Kubernetes 1.34).

The limits are the API's constants (types.go): 32 requests, selectors, constraints and configs per
claim, 32 results, 128 devices per slice, 32 attributes and capacities per device. Selectors are
compiled with the same CEL library the allocator uses (simcluster/validation/cel.py); the server also
type-checks them and estimates their cost, which is not done here (docs/simcluster-fidelity.md).
"""

import re

from simcluster.errors import FieldError
from simcluster.validation import cel, names

MAX_REQUESTS = 32            # DeviceRequestsMaxSize
MAX_SELECTORS = 32           # DeviceSelectorsMaxSize
MAX_CONSTRAINTS = 32         # DeviceConstraintsMaxSize
MAX_CONFIGS = 32             # DeviceConfigMaxSize
MAX_SUBREQUESTS = 8          # FirstAvailableDeviceRequestMaxSize
MAX_RESULTS = 32             # AllocationResultsMaxSize
MAX_DEVICES = 128            # ResourceSliceMaxDevices
MAX_ATTRS = 32               # ResourceSliceMaxAttributesAndCapacitiesPerDevice
MAX_RESERVED = 256           # ResourceClaimReservedForMaxSize
MAX_STRING = 64              # DeviceAttributeMaxValueLength
MAX_ID = 32                  # DeviceMaxIDLength
MAX_DRIVER = 63              # DriverNameMaxLength
MAX_POOL = 253               # PoolNameMaxLength
ALLOCATION_MODES = ["All", "ExactCount"]
FINALIZER = "resource.kubernetes.io/delete-protection"
_C_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
C_ID_MSG = ("a valid C identifier must start with alphabetic character or '_', followed by a string of "
            "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
            "validation is '[A-Za-z_][A-Za-z0-9_]*')")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z-.]+)?(?:\+[0-9A-Za-z-.]+)?$")


class _Raw:
    """A value printed as is (Go's field.Invalid with a nil value prints `null`)."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


NULL = _Raw("null")


# -- defaults (pkg/apis/resource/v1/defaults.go) ------------------------------------------------

def _default_exact(req):
    if not isinstance(req, dict):
        return
    if not req.get("allocationMode"):
        req["allocationMode"] = "ExactCount"
    if req["allocationMode"] == "ExactCount" and not req.get("count"):
        req["count"] = 1
    for tol in req.get("tolerations") or ():
        if isinstance(tol, dict) and not tol.get("operator"):
            tol["operator"] = "Equal"


def _default_claim_spec(spec):
    if not isinstance(spec, dict):
        return
    for req in ((spec.get("devices") or {}).get("requests") or ()):
        if not isinstance(req, dict):
            continue
        _default_exact(req.get("exactly"))
        for sub in req.get("firstAvailable") or ():
            _default_exact(sub)


def default(resource, obj):
    if resource == "resourceclaims.resource.k8s.io":
        _default_claim_spec(obj.get("spec"))
    elif resource == "resourceclaimtemplates.resource.k8s.io":
        _default_claim_spec((obj.get("spec") or {}).get("spec"))


# -- helpers ---------------------------------------------------------------------------------

def _too_many(path, n, limit):
    return FieldError("Too many", path, n, "must have at most %d items" % limit, reason="FieldValueTooMany")


def _dns(value, path, errs, label=False, required=True):
    if not value:
        if required:
            errs.append(FieldError("Required value", path))
        return
    for msg in (names.dns1123_label(value) if label else names.dns1123_subdomain(value)):
        errs.append(FieldError("Invalid value", path, value, msg))


def _selectors(selectors, path, errs):
    selectors = selectors or []
    if len(selectors) > MAX_SELECTORS:
        errs.append(_too_many(path, len(selectors), MAX_SELECTORS))
    for i, sel in enumerate(selectors):
        p = "%s[%d]" % (path, i)
        expr = ((sel or {}).get("cel") or {}).get("expression") if isinstance(sel, dict) else None
        if not isinstance(sel, dict) or sel.get("cel") is None:
            errs.append(FieldError("Required value", p + ".cel"))
            continue
        if not expr:
            errs.append(FieldError("Required value", p + ".cel.expression"))
            continue
        problem = compile_problem(expr)
        if problem:
            errs.append(FieldError("Invalid value", p + ".cel.expression", expr, problem))


def compile_problem(expr):
    """None if the selector compiles, else the server's 'compilation failed: ...' text."""
    if cel.celpy is None:
        return None
    try:
        env = cel._env()
        env.compile(expr)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        return "compilation failed: ERROR: <input>: %s" % (text[0] if text else "syntax error")
    return None


def _exact(req, path, errs):
    _dns(req.get("deviceClassName"), path + ".deviceClassName", errs)
    _selectors(req.get("selectors"), path + ".selectors", errs)
    mode, count = req.get("allocationMode"), req.get("count") or 0
    if mode == "All":
        if count:
            errs.append(FieldError("Invalid value", path + ".count", count,
                                   "must not be specified when allocationMode is 'All'"))
    elif mode == "ExactCount":
        if count <= 0:
            errs.append(FieldError("Invalid value", path + ".count", count, "must be greater than zero"))
    else:
        errs.append(FieldError("Unsupported value", path + ".allocationMode", mode or "",
                               'supported values: "All", "ExactCount"'))


def _request_names(spec):
    out = set()
    for req in ((spec.get("devices") or {}).get("requests") or ()):
        if isinstance(req, dict) and req.get("name"):
            out.add(req["name"])
            for sub in req.get("firstAvailable") or ():
                if isinstance(sub, dict) and sub.get("name"):
                    out.add("%s/%s" % (req["name"], sub["name"]))
    return out


def _qualified_attr(value, path, errs):
    """validateFullyQualifiedName: <domain>/<C identifier>."""
    if not value:
        errs.append(FieldError("Required value", path))
        return
    domain, sep, ident = value.partition("/")
    if not sep:
        errs.append(FieldError("Invalid value", path, value, "must include a domain"))
        return
    for msg in names.dns1123_subdomain(domain):
        errs.append(FieldError("Invalid value", path, domain, msg))
    _c_identifier(ident, path, errs)


def _c_identifier(ident, path, errs):
    if not ident:
        errs.append(FieldError("Required value", path))
        return
    if len(ident) > MAX_ID:
        errs.append(FieldError("Too long", path, ident, "may not be more than %d bytes" % MAX_ID))
    if not _C_ID.match(ident):
        errs.append(FieldError("Invalid value", path, ident, C_ID_MSG))


def validate_claim_spec(spec, path):
    errs = []
    if not isinstance(spec, dict):
        return errs
    devices = spec.get("devices") or {}
    reqs = devices.get("requests") or []
    rp = path + ".devices.requests"
    if len(reqs) > MAX_REQUESTS:
        errs.append(_too_many(rp, len(reqs), MAX_REQUESTS))
    seen = set()
    for i, req in enumerate(reqs):
        p = "%s[%d]" % (rp, i)
        name = req.get("name")
        _dns(name, p + ".name", errs, label=True)
        if name and name in seen:
            errs.append(FieldError("Duplicate value", p + ".name", name))
        seen.add(name)
        exactly, first = req.get("exactly"), req.get("firstAvailable") or []
        kinds = (exactly is not None) + bool(first)
        if kinds == 0:
            errs.append(FieldError("Required value", p, None,
                                   "exactly one of `exactly` or `firstAvailable` is required"))
        elif kinds > 1:
            errs.append(FieldError("Invalid value", p, NULL,
                                   "exactly one of `exactly` or `firstAvailable` is required, but multiple "
                                   "fields are set"))
        if exactly is not None:
            _exact(exactly, p + ".exactly", errs)
        if len(first) > MAX_SUBREQUESTS:
            errs.append(_too_many(p + ".firstAvailable", len(first), MAX_SUBREQUESTS))
        subs = set()
        for j, sub in enumerate(first):
            sp = "%s.firstAvailable[%d]" % (p, j)
            _dns(sub.get("name"), sp + ".name", errs, label=True)
            if sub.get("name") in subs:
                errs.append(FieldError("Duplicate value", sp + ".name", sub.get("name")))
            subs.add(sub.get("name"))
            _exact(sub, sp, errs)
    known = _request_names(spec)
    cons = devices.get("constraints") or []
    if len(cons) > MAX_CONSTRAINTS:
        errs.append(_too_many(path + ".devices.constraints", len(cons), MAX_CONSTRAINTS))
    for i, con in enumerate(cons):
        p = "%s.devices.constraints[%d]" % (path, i)
        for j, name in enumerate(con.get("requests") or ()):
            if name not in known:
                errs.append(FieldError("Invalid value", "%s.requests[%d]" % (p, j), name,
                                       "must be the name of a request in the claim or the name of a request "
                                       "and a subrequest separated by '/'"))
        if con.get("matchAttribute") is None and con.get("distinctAttribute") is None:
            errs.append(FieldError("Required value", p + ".matchAttribute"))
        elif con.get("matchAttribute") is not None:
            _qualified_attr(con["matchAttribute"], p + ".matchAttribute", errs)
    configs = devices.get("config") or []
    if len(configs) > MAX_CONFIGS:
        errs.append(_too_many(path + ".devices.config", len(configs), MAX_CONFIGS))
    for i, conf in enumerate(configs):
        p = "%s.devices.config[%d]" % (path, i)
        for j, name in enumerate(conf.get("requests") or ()):
            if name not in known:
                errs.append(FieldError("Invalid value", "%s.requests[%d]" % (p, j), name,
                                       "must be the name of a request in the claim or the name of a request "
                                       "and a subrequest separated by '/'"))
        _opaque(conf.get("opaque"), p, errs)
    return errs


def _opaque(opaque, path, errs):
    if opaque is None:
        errs.append(FieldError("Required value", path + ".opaque"))
        return
    _dns(opaque.get("driver"), path + ".opaque.driver", errs)
    if opaque.get("parameters") is None:
        errs.append(FieldError("Required value", path + ".opaque.parameters"))


def _immutable(new, old, path):
    if new != old:
        return [FieldError("Invalid value", path, _Raw("object"), "field is immutable")]
    return []


# -- kinds -------------------------------------------------------------------------------------

def validate_claim(obj, old):
    errs = validate_claim_spec(obj.get("spec") or {}, "spec")
    if old is not None:
        errs.extend(_immutable(obj.get("spec"), old.get("spec"), "spec"))
    return errs


def validate_claim_status(obj, old):
    """validateResourceClaimStatusUpdate: reservedFor entries unique by uid, at most 256; an
    allocation may not change once set (only be removed); reservedFor needs an allocation."""
    errs = []
    st = obj.get("status") or {}
    old_st = (old or {}).get("status") or {}
    reserved = st.get("reservedFor") or []
    if len(reserved) > MAX_RESERVED:
        errs.append(_too_many("status.reservedFor", len(reserved), MAX_RESERVED))
    uids = set()
    for i, ref in enumerate(reserved):
        p = "status.reservedFor[%d]" % i
        if not ref.get("name"):
            errs.append(FieldError("Required value", p + ".name"))
        if not ref.get("resource"):
            errs.append(FieldError("Required value", p + ".resource"))
        if ref.get("uid") in uids:
            errs.append(FieldError("Duplicate value", p, ref))
        uids.add(ref.get("uid"))
    if reserved and st.get("allocation") is None:
        errs.append(FieldError("Forbidden", "status.reservedFor", None,
                               "may not be specified when `allocated` is not set"))
    if old_st.get("allocation") is not None and st.get("allocation") is not None \
            and st["allocation"] != old_st["allocation"]:
        errs.append(FieldError("Invalid value", "status.allocation", _Raw("object"), "field is immutable"))
    results = ((st.get("allocation") or {}).get("devices") or {}).get("results") or []
    if len(results) > MAX_RESULTS:
        errs.append(_too_many("status.allocation.devices.results", len(results), MAX_RESULTS))
    known = _request_names(obj.get("spec") or {})
    for i, res in enumerate(results):
        p = "status.allocation.devices.results[%d]" % i
        if res.get("request") not in known:
            errs.append(FieldError("Invalid value", p + ".request", res.get("request"),
                                   "must be the name of a request in the claim or the name of a request and "
                                   "a subrequest separated by '/'"))
        _dns(res.get("driver"), p + ".driver", errs)
        _dns(res.get("device"), p + ".device", errs, label=True)
        if not res.get("pool"):
            errs.append(FieldError("Required value", p + ".pool"))
    return errs


def validate_claim_template(obj, old):
    errs = validate_claim_spec((obj.get("spec") or {}).get("spec") or {}, "spec.spec")
    if old is not None:
        errs.extend(_immutable(obj.get("spec"), old.get("spec"), "spec"))
    return errs


def validate_device_class(obj, old):
    errs = []
    spec = obj.get("spec") or {}
    _selectors(spec.get("selectors"), "spec.selectors", errs)
    configs = spec.get("config") or []
    if len(configs) > MAX_CONFIGS:
        errs.append(_too_many("spec.config", len(configs), MAX_CONFIGS))
    for i, conf in enumerate(configs):
        _opaque(conf.get("opaque"), "spec.config[%d]" % i, errs)
    return errs


def _pool_name(value, path, errs):
    if not value:
        errs.append(FieldError("Required value", path))
        return
    if len(value) > MAX_POOL:
        errs.append(FieldError("Too long", path, value, "may not be more than %d bytes" % MAX_POOL))
    for part in value.split("/"):
        for msg in names.dns1123_subdomain(part):
            errs.append(FieldError("Invalid value", path, value, msg))
            return


def _attribute(name, value, path, errs):
    p = "%s[%s]" % (path, name)
    domain, sep, ident = name.partition("/")
    if sep:
        for msg in names.dns1123_subdomain(domain):
            errs.append(FieldError("Invalid value", p, name, msg))
        _c_identifier(ident, p, errs)
    else:
        _c_identifier(name, p, errs)
    kinds = [k for k in ("bool", "int", "string", "version") if isinstance(value, dict) and k in value]
    if len(kinds) != 1:
        errs.append(FieldError("Invalid value", p, _Raw("object"), "exactly one value must be specified"
                               if kinds else "exactly one value must be specified"))
        return
    v = value[kinds[0]]
    if kinds[0] == "string" and len(v or "") > MAX_STRING:
        errs.append(FieldError("Too long", p + ".string", v, "may not be more than %d bytes" % MAX_STRING))
    if kinds[0] == "version" and not SEMVER.match(v or ""):
        errs.append(FieldError("Invalid value", p + ".version", v,
                               "must be a string compatible with semver.org spec 2.0.0"))


def validate_slice(obj, old):
    errs = []
    spec = obj.get("spec") or {}
    driver = spec.get("driver")
    _dns(driver, "spec.driver", errs)
    if driver and len(driver) > MAX_DRIVER:
        errs.append(FieldError("Too long", "spec.driver", driver, "may not be more than %d bytes" % MAX_DRIVER))
    pool = spec.get("pool")
    if not isinstance(pool, dict):
        errs.append(FieldError("Required value", "spec.pool.name"))
        pool = {}
    else:
        _pool_name(pool.get("name"), "spec.pool.name", errs)
        if (pool.get("generation") or 0) < 0:
            errs.append(FieldError("Invalid value", "spec.pool.generation", pool.get("generation"),
                                   "must be greater than or equal to 0"))
        if (pool.get("resourceSliceCount") or 0) <= 0:
            errs.append(FieldError("Invalid value", "spec.pool.resourceSliceCount",
                                   pool.get("resourceSliceCount") or 0, "must be greater than zero"))
    selection = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
                 if spec.get(k) not in (None, False, "")]
    if not selection:
        errs.append(FieldError("Required value", "spec", None,
                               "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                               "`perDeviceNodeSelection` is required"))
    elif len(selection) > 1:
        errs.append(FieldError("Invalid value", "spec", NULL,
                               "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                               "`perDeviceNodeSelection` is required, but multiple fields are set"))
    if spec.get("nodeName"):
        _dns(spec["nodeName"], "spec.nodeName", errs)
    devices = spec.get("devices") or []
    if len(devices) > MAX_DEVICES:
        errs.append(_too_many("spec.devices", len(devices), MAX_DEVICES))
    seen = set()
    for i, dev in enumerate(devices):
        p = "spec.devices[%d]" % i
        _dns(dev.get("name"), p + ".name", errs, label=True)
        if dev.get("name") in seen:
            errs.append(FieldError("Duplicate value", p + ".name", dev.get("name")))
        seen.add(dev.get("name"))
        attrs, caps = dev.get("attributes") or {}, dev.get("capacity") or {}
        if len(attrs) + len(caps) > MAX_ATTRS:
            errs.append(FieldError("Too many", p, len(attrs) + len(caps),
                                   "the total number of attributes and capacities must not exceed %d" % MAX_ATTRS,
                                   reason="FieldValueTooMany"))
        for name in sorted(attrs):
            _attribute(name, attrs[name], p + ".attributes", errs)
        for name in sorted(caps):
            if not isinstance(caps[name], dict) or caps[name].get("value") is None:
                errs.append(FieldError("Required value", "%s.capacity[%s].value" % (p, name)))
    if old is not None:
        ospec = old.get("spec") or {}
        for key in ("driver", "nodeName"):
            if spec.get(key) != ospec.get(key):
                errs.append(FieldError("Invalid value", "spec." + key, spec.get(key), "field is immutable"))
    return errs


ADMIN_LABEL = "resource.kubernetes.io/admin-access"
ADMIN_CHECKED = ("resourceclaims.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io")


def authorized_for_admin(resource, obj, namespace):
    """AuthorizedForAdmin (DRAAdminAccess, beta and on in 1.34): a request with `adminAccess: true`
    needs the namespace label `resource.kubernetes.io/admin-access: "true"`. Only on create: the
    spec is immutable."""
    spec = obj.get("spec") or {}
    if resource == "resourceclaimtemplates.resource.k8s.io":
        spec = spec.get("spec") or {}
    for i, req in enumerate(((spec.get("devices") or {}).get("requests") or ())):
        if isinstance(req, dict) and (req.get("exactly") or {}).get("adminAccess") is True:
            labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
            if labels.get(ADMIN_LABEL) != "true":
                return [FieldError("Forbidden", "spec.devices.requests[%d].adminAccess" % i, None,
                                   "admin access to devices requires the `%s: true` label on the containing "
                                   "namespace" % ADMIN_LABEL)]
            return []
    return []


VALIDATORS = {
    "resourceclaims.resource.k8s.io": validate_claim,
    "resourceclaimtemplates.resource.k8s.io": validate_claim_template,
    "deviceclasses.resource.k8s.io": validate_device_class,
    "resourceslices.resource.k8s.io": validate_slice,
}
