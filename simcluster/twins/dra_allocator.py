"""The structured allocator of Dynamic Resource Allocation (resource.k8s.io/v1), as the scheduler's
DynamicResources plugin runs it: an independent reading of
k8s.io/dynamic-resource-allocation/structured (allocator.go, internal/stable/allocator_stable.go,
Kubernetes 1.34).

For one node and the claims of one pod that are not allocated yet:
- the devices are those of the ResourceSlices for that node (`nodeName`), for all nodes
  (`allNodes`) or whose `nodeSelector` matches it, from complete pools only (every slice of the
  pool's newest generation present: a pool being updated is skipped; a request for `All` devices
  that sees such a pool fails, as upstream);
- a device is a candidate for a request when it is not allocated to any claim (nor picked for an
  earlier request of this pod), and every selector of the DeviceClass, then every selector of the
  request, is true; a selector that fails to evaluate is an error, not a mismatch;
- `allocationMode: ExactCount` takes `count` devices, `All` every candidate (at least one);
  `firstAvailable` tries the subrequests in order; constraints `matchAttribute` require the same
  value of that attribute on every device of the requests it names (all requests when none);
- the search backtracks over devices, requests and claims (all or nothing), like upstream.

Selectors are CEL over `device.driver`, `device.attributes["<domain>"].<name>` and
`device.capacity["<domain>"].<name>`, with the Kubernetes quantity functions the selectors use
(`quantity()`, `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, `asApproximateFloat`) and
`semver()` comparisons of version attributes. A request with admin access may use devices in use and
does not take them. Not evaluated: device taints, binding conditions, partitionable devices
(counters), consumable capacity (docs/simcluster-fidelity.md).

The slices are indexed once per scheduling pass (SliceIndex: by node, all-nodes, selector slices), so
a pod looks only at the devices of the node being filtered.
"""

import functools
import re

from simcluster.validation import cel
from simcluster.validation.quantity import Quantity

from .matching import node_selector_term_matches

SLICES = "resourceslices.resource.k8s.io"
CLAIMS = "resourceclaims.resource.k8s.io"
CLASSES = "deviceclasses.resource.k8s.io"
TEMPLATES = "resourceclaimtemplates.resource.k8s.io"
MAX_RESULTS = 32
FINALIZER = "resource.kubernetes.io/delete-protection"


class AllocationError(Exception):
    """A claim or class the allocator cannot work with (a CEL runtime error): the scheduler's
    Filter returns an error for the node, not "cannot allocate all claims"."""


# -- CEL ---------------------------------------------------------------------------------------

if cel.celpy is not None:
    from celpy import celtypes

    class CelQuantity(celtypes.StringType):
        """A capacity value in CEL: the Kubernetes quantity type (compared exactly)."""

        def __new__(cls, text):
            obj = super().__new__(cls, str(text))
            obj.q = Quantity.parse(str(text))
            return obj

    class CelSemver(celtypes.StringType):
        def __new__(cls, text):
            obj = super().__new__(cls, str(text))
            core = str(text).split("+", 1)[0].split("-", 1)[0]
            obj.key = tuple(int(p) for p in core.split("."))
            return obj

    def _q(value):
        if isinstance(value, CelQuantity):
            return value.q
        return Quantity.parse(str(value))

    def _cmp(a, b):
        if isinstance(a, CelSemver) or isinstance(b, CelSemver):
            ka = a.key if isinstance(a, CelSemver) else CelSemver(a).key
            kb = b.key if isinstance(b, CelSemver) else CelSemver(b).key
            return (ka > kb) - (ka < kb)
        qa, qb = _q(a), _q(b)
        return (qa > qb) - (qa < qb)

    FUNCTIONS = {
        "quantity": lambda s: CelQuantity(s),
        "semver": lambda s: CelSemver(s),
        "compareTo": lambda a, b: celtypes.IntType(_cmp(a, b)),
        "isGreaterThan": lambda a, b: celtypes.BoolType(_cmp(a, b) > 0),
        "isLessThan": lambda a, b: celtypes.BoolType(_cmp(a, b) < 0),
        "asInteger": lambda a: celtypes.IntType(int(_q(a).value)),
        "asApproximateFloat": lambda a: celtypes.DoubleType(float(_q(a).value)),
        "isQuantity": lambda s: celtypes.BoolType(_is_quantity(s)),
        "isSemver": lambda s: celtypes.BoolType(_is_semver(s)),
    }
else:  # pragma: no cover
    FUNCTIONS = {}


_SEMVER_TYPES = (CelSemver,) if cel.celpy is not None else ()


def _is_quantity(s):
    try:
        Quantity.parse(str(s))
        return True
    except ValueError:
        return False


def _is_semver(s):
    from simcluster.validation.resource import SEMVER
    return bool(SEMVER.match(str(s)))


@functools.lru_cache(maxsize=4096)
def _program(expr):
    if cel.celpy is None:
        return None
    env = cel._env()
    try:
        return env.program(env.compile(expr), functions=FUNCTIONS)
    except Exception as exc:
        return exc


def _attr_value(value):
    if not isinstance(value, dict):
        return value
    if "string" in value:
        return value["string"]
    if "int" in value:
        return value["int"]
    if "bool" in value:
        return value["bool"]
    if "version" in value:
        return CelSemver(value["version"]) if cel.celpy is not None else value["version"]
    return None


def qualified(driver, name):
    """The fully qualified attribute name: an unqualified one belongs to the driver's domain."""
    return name if "/" in name else "%s/%s" % (driver, name)


class Device:
    """One device of a slice, with what the allocator and CEL need of it."""

    __slots__ = ("driver", "pool", "name", "raw", "attrs", "caps", "_act", "_memo", "key")

    def __init__(self, driver, pool, raw):
        self.driver, self.pool, self.raw = driver, pool, raw
        self.name = raw.get("name")
        self.key = (driver, pool, self.name)
        self.attrs = {qualified(driver, k): _attr_value(v) for k, v in (raw.get("attributes") or {}).items()}
        self.caps = {qualified(driver, k): (v or {}).get("value") for k, v in (raw.get("capacity") or {}).items()}
        self._act = None
        self._memo = {}

    def activation(self):
        if self._act is None:
            attrs, caps = {}, {}
            for full, v in self.attrs.items():
                domain, _, ident = full.rpartition("/")
                attrs.setdefault(domain, {})[ident] = v
            for full, v in self.caps.items():
                domain, _, ident = full.rpartition("/")
                caps.setdefault(domain, {})[ident] = v
            conv = {}
            for domain, m in attrs.items():
                conv[domain] = celtypes.MapType({celtypes.StringType(k): _to_cel(v) for k, v in m.items()})
            cconv = {}
            for domain, m in caps.items():
                cconv[domain] = celtypes.MapType({celtypes.StringType(k): CelQuantity(v) for k, v in m.items()})
            dev = celtypes.MapType({
                celtypes.StringType("driver"): celtypes.StringType(self.driver),
                celtypes.StringType("attributes"): _DomainMap(conv),
                celtypes.StringType("capacity"): _DomainMap(cconv),
                celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(False),
            })
            self._act = {"device": dev}
        return self._act

    def matches(self, expr):
        """True/False of one selector on this device; AllocationError when it does not evaluate."""
        got = self._memo.get(expr)
        if got is None:
            got = self._memo[expr] = _evaluate(expr, self)
        if isinstance(got, str):
            raise AllocationError(got)
        return got


if cel.celpy is not None:
    class _DomainMap(celtypes.MapType):
        """device.attributes / device.capacity: an unknown domain is an empty map (as upstream)."""

        def __getitem__(self, key):
            try:
                return super().__getitem__(key)
            except KeyError:
                return celtypes.MapType({})


def _to_cel(v):
    if isinstance(v, bool):
        return celtypes.BoolType(v)
    if isinstance(v, int):
        return celtypes.IntType(v)
    if cel.celpy is not None and isinstance(v, CelSemver):
        return v
    return celtypes.StringType("" if v is None else str(v))


_TERM_DRIVER = re.compile(r"""^device\.driver\s*==\s*(['"])([^'"]*)\1$""")
_TERM_ATTR = re.compile(r"""^device\.attributes\[(['"])([^'"]+)\1\]\.([A-Za-z_][A-Za-z0-9_]*)\s*==\s*"""
                        r"""(?:(['"])([^'"]*)\4|(-?\d+)|(true|false))$""")


@functools.lru_cache(maxsize=4096)
def _fast(expr):
    """The selectors drivers and classes write most (`device.driver == '...'`, `device.attributes['d'].a ==
    <literal>`, joined by &&) as Python tests: cel-python walks the AST at ~0.3 ms a device, too slow for
    1000 nodes of 8 GPUs. None when the expression has another shape (then CEL runs)."""
    terms = []
    for part in expr.split("&&"):
        part = part.strip()
        while part.startswith("(") and part.endswith(")"):
            part = part[1:-1].strip()
        m = _TERM_DRIVER.match(part)
        if m:
            terms.append(("driver", m.group(2)))
            continue
        m = _TERM_ATTR.match(part)
        if m is None or "||" in part:
            return None
        if m.group(5) is not None or m.group(4):
            value = m.group(5)
        elif m.group(6) is not None:
            value = int(m.group(6))
        else:
            value = m.group(7) == "true"
        terms.append(("attr", m.group(2) + "/" + m.group(3), value))
    return terms


_MISSING = object()


def _fast_eval(terms, device):
    """CEL's &&: false wins over an error, an error over true."""
    error = None
    for term in terms:
        if term[0] == "driver":
            ok = device.driver == term[1]
        else:
            got = device.attrs.get(term[1], _MISSING)
            if got is _MISSING:
                error = error or "CEL runtime error: no such key: %s" % term[1].rsplit("/", 1)[1]
                continue
            want = term[2]
            if isinstance(want, bool) or isinstance(got, bool):
                ok = isinstance(got, bool) and isinstance(want, bool) and got == want
            elif isinstance(want, int):
                ok = isinstance(got, int) and got == want
            else:
                ok = isinstance(got, str) and str(got) == want and not isinstance(got, _SEMVER_TYPES)
        if not ok:
            return False
    return error or True


def _evaluate(expr, device):
    terms = _fast(expr)
    if terms is not None:
        return _fast_eval(terms, device)
    prog = _program(expr)
    if prog is None:
        return True          # no CEL library: every device matches (documented)
    if isinstance(prog, Exception):
        return "compilation failed: %s" % prog
    try:
        result = cel.evaluate(prog, device.activation())
    except cel.EvalError as exc:
        m = re.search(r"no such member in mapping: '([^']+)'", str(exc))
        return "CEL runtime error: %s" % ("no such key: " + m.group(1) if m else exc)
    if not isinstance(result, (bool, celtypes.BoolType)):
        return "CEL result type is not bool"
    return bool(result)


# -- the slices of the cluster, indexed ------------------------------------------------------

class SliceIndex:
    """The devices of complete pools, by node; built once per scheduling pass."""

    def __init__(self, slices):
        pools = {}
        for s in slices:
            spec = s.get("spec") or {}
            pool = spec.get("pool") or {}
            key = (spec.get("driver"), pool.get("name"))
            gen = pool.get("generation") or 0
            cur = pools.get(key)
            if cur is None or gen > cur[0]:
                pools[key] = (gen, pool.get("resourceSliceCount") or 1, [s])
            elif gen == cur[0]:
                cur[2].append(s)
        self.by_node = {}
        self.all_nodes = []
        self.selected = []            # (nodeSelector, [Device])
        self.incomplete = set()       # (driver, pool) being updated
        self.incomplete_on = {}       # node name or None (all nodes) -> {(driver, pool)}
        for (driver, pool), (_gen, count, members) in sorted(pools.items(),
                                                             key=lambda kv: (kv[0][0] or "", kv[0][1] or "")):
            members.sort(key=lambda s: s["metadata"].get("name") or "")
            complete = len(members) >= count
            for s in members:
                spec = s["spec"]
                where = spec.get("nodeName")
                if not complete:
                    self.incomplete.add((driver, pool))
                    self.incomplete_on.setdefault(where, set()).add((driver, pool))
                    continue
                devs = [Device(driver, pool, d) for d in spec.get("devices") or () if isinstance(d, dict)]
                if where:
                    self.by_node.setdefault(where, []).extend(devs)
                elif spec.get("allNodes"):
                    self.all_nodes.extend(devs)
                elif spec.get("nodeSelector"):
                    self.selected.append((spec["nodeSelector"], devs))
        for devs in self.by_node.values():
            devs.sort(key=lambda d: (d.driver, d.pool))     # pools in order, devices as published

    def devices_for(self, node):
        """(devices of the node, with node-local ones first; the nodeSelector of the result)."""
        name = node["metadata"]["name"]
        out = list(self.by_node.get(name, ()))
        for sel, devs in self.selected:
            if any(node_selector_term_matches(t, node) for t in sel.get("nodeSelectorTerms") or ()):
                out.extend(devs)
        out.extend(self.all_nodes)
        return out

    def pool_incomplete(self, node):
        """The first pool for this node that is being updated ("driver/pool"), or None."""
        pools = sorted((self.incomplete_on.get(node["metadata"]["name"]) or set())
                       | (self.incomplete_on.get(None) or set()))
        return "%s/%s" % pools[0] if pools else None


def allocated_devices(claims):
    """(driver, pool, device) of every allocated claim; admin access does not take a device."""
    out = set()
    for c in claims:
        for r in ((((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()):
            if not r.get("adminAccess"):
                out.add((r.get("driver"), r.get("pool"), r.get("device")))
    return out


# -- the allocator ---------------------------------------------------------------------------

class _Slot:
    """One request (or chosen subrequest) of a claim to fill."""

    def __init__(self, claim_i, name, req, klass):
        self.claim_i, self.name, self.req, self.klass = claim_i, name, req, klass
        self.mode = req.get("allocationMode") or "ExactCount"
        self.admin = req.get("adminAccess") is True     # may use devices in use; does not take them
        self.count = int(req.get("count") or 1)
        exprs = [((s or {}).get("cel") or {}).get("expression")
                 for s in list((klass.get("spec") or {}).get("selectors") or ()) + list(req.get("selectors") or ())]
        self.selectors = [e for e in exprs if e]      # the class's first, then the request's


def _ref(claim):
    meta = claim.get("metadata") or {}
    return "%s/%s" % (meta["namespace"], meta.get("name")) if meta.get("namespace") else meta.get("name")


def _class_of(classes, name, claim, request):
    if not name:
        raise AllocationError("claim %s, request %s: missing device class name (unsupported request type?)"
                              % (_ref(claim), request))
    klass = classes.get(name)
    if klass is None:
        raise AllocationError("claim %s, request %s: could not retrieve device class %s" % (_ref(claim), request, name))
    return klass


def allocate(claims, node, index, in_use, classes):
    """Allocation results for `claims` (unallocated, in the pod's order) on `node`, or None when
    they do not all fit. `in_use`: (driver, pool, device) already allocated; `classes`: name ->
    DeviceClass. Raises AllocationError for a selector that does not evaluate."""
    devices = index.devices_for(node)
    free = [d for d in devices if d.key not in in_use]
    everything = devices
    alternatives = []              # per claim: per request: [slot options in order]
    for ci, claim in enumerate(claims):
        reqs = []
        for req in (((claim.get("spec") or {}).get("devices") or {}).get("requests") or ()):
            options = []
            if req.get("firstAvailable"):
                for sub in req["firstAvailable"]:
                    rname = "%s/%s" % (req.get("name"), sub.get("name"))
                    klass = _class_of(classes, sub.get("deviceClassName"), claim, rname)
                    options.append(_Slot(ci, "%s/%s" % (req.get("name"), sub.get("name")), sub, klass))
            else:
                exact = req.get("exactly") or {}
                klass = _class_of(classes, exact.get("deviceClassName"), claim, req.get("name"))
                options.append(_Slot(ci, req.get("name"), exact, klass))
            reqs.append((req.get("name"), options))
        alternatives.append(reqs)
    # candidates per slot, computed once (selectors are memoised per device)
    for reqs in alternatives:
        for _name, options in reqs:
            for slot in options:
                if slot.mode == "All" and index.pool_incomplete(node):
                    raise AllocationError("claim %s, request %s: asks for all devices, but resource pool %s is "
                                          "currently being updated" % (_ref(claims[slot.claim_i]), slot.name,
                                                                       index.pool_incomplete(node)))
                slot.cands = [d for d in (everything if slot.admin else free)
                              if all(d.matches(e) for e in slot.selectors)]
    picked = {}                # claim index -> [(request name, Device)]
    taken = set()

    def constraints_ok(ci, claim):
        cons = (((claim.get("spec") or {}).get("devices") or {}).get("constraints") or ())
        chosen = picked.get(ci, [])
        for con in cons:
            attr = con.get("matchAttribute")
            if not attr:
                continue
            names = con.get("requests") or ()
            vals = set()
            for rname, dev in chosen:
                base = rname.split("/", 1)[0]
                if names and rname not in names and base not in names:
                    continue
                if attr not in dev.attrs:
                    return False
                vals.add(repr(dev.attrs[attr]))
                if len(vals) > 1:
                    return False
        return True

    flat = [(ci, name, options) for ci, reqs in enumerate(alternatives) for name, options in reqs]

    def fill(k):
        if k == len(flat):
            return True
        ci, _name, options = flat[k]
        for slot in options:
            if slot.cands is None:
                continue
            if slot.mode == "All":
                devs = [d for d in slot.cands if d.key not in taken]
                if not devs or len(devs) != len(slot.cands) or len(devs) > MAX_RESULTS:
                    continue
                if _try(ci, slot, devs, k):
                    return True
                continue
            if _choose(ci, slot, [d for d in slot.cands if d.key not in taken], slot.count, 0, k):
                return True
        return False

    def _try(ci, slot, devs, k):
        lst = picked.setdefault(ci, [])
        for d in devs:
            lst.append((slot.name, d))
            taken.add(d.key)
            if not constraints_ok(ci, claims[ci]):
                raise AllocationError("claim %s, request %s: cannot add device %s/%s/%s because a claim "
                                      "constraint would not be satisfied"
                                      % (_ref(claims[ci]), slot.name, d.driver, d.pool, d.name))
        ok = len(lst) <= MAX_RESULTS and fill(k + 1)
        if not ok:
            for d in devs:
                lst.pop()
                taken.discard(d.key)
        return ok

    def _choose(ci, slot, cands, need, start, k):
        if need == 0:
            return fill(k + 1)
        lst = picked.setdefault(ci, [])
        for i in range(start, len(cands) - need + 1):
            d = cands[i]
            if d.key in taken:
                continue
            lst.append((slot.name, d))
            taken.add(d.key)
            if constraints_ok(ci, claims[ci]) and len(lst) <= MAX_RESULTS and \
                    _choose(ci, slot, cands, need - 1, i + 1, k):
                return True
            lst.pop()
            taken.discard(d.key)
        return False

    if not fill(0):
        return None
    results = []
    for ci, claim in enumerate(claims):
        chosen = picked.get(ci, [])
        local = any(d.key in {x.key for x in index.by_node.get(node["metadata"]["name"], ())} for _, d in chosen)
        configs = []
        used_classes = []
        for _r, options in alternatives[ci]:
            for slot in options:
                if any(n == slot.name for n, _ in chosen) and slot.klass not in used_classes:
                    used_classes.append(slot.klass)
                    for conf in (slot.klass.get("spec") or {}).get("config") or ():
                        configs.append(dict(conf, source="FromClass", requests=[slot.name]))
        for conf in (((claim.get("spec") or {}).get("devices") or {}).get("config") or ()):
            configs.append(dict(conf, source="FromClaim"))
        admin = {slot.name for _r, options in alternatives[ci] for slot in options if slot.admin}
        allocation = {"devices": {"results": [
            dict({"request": n, "driver": d.driver, "pool": d.pool, "device": d.name},
                 **({"adminAccess": True} if n in admin else {})) for n, d in chosen]}}
        if configs:
            allocation["devices"]["config"] = configs
        selector = None
        if local:
            selector = {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node["metadata"]["name"]]}]}]}
        else:
            for sel, devs in index.selected:
                keys = {x.key for x in devs}
                if any(d.key in keys for _, d in chosen):
                    selector = sel
                    break
        if selector is not None:
            allocation["nodeSelector"] = selector
        results.append(allocation)
    return results
