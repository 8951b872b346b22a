"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) with real CEL (cel.py).

A policy applies through each binding whose policyName names it. Matching as
in the API server: the policy's matchConstraints and the binding's
matchResources (resourceRules with `*` and `res/sub`, excludeResourceRules,
namespaceSelector, objectSelector), then matchConditions, then validations.
A false validation with action Deny refuses the request:
  pods "x" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: <message>
(the status code follows `reason`: Forbidden 403, Invalid 422, ...). An
expression that errs follows failurePolicy (Fail refuses, Ignore admits).

Not done (docs/simcluster-fidelity.md): paramKind/paramRef, authorizer,
auditAnnotations, type checking and status.typeChecking, cost limits,
matchPolicy Equivalent conversions, Warn/Audit actions (admitted silently).
"""

import threading
import weakref

from simcluster.errors import ApiError
from simcluster.validation import cel
from simcluster.selectors import label_selector_matches

POLICIES = "validatingadmissionpolicies.admissionregistration.k8s.io"
BINDINGS = "validatingadmissionpolicybindings.admissionregistration.k8s.io"
_CODES = {"Forbidden": 403, "Invalid": 422, "BadRequest": 400, "RequestEntityTooLarge": 413,
          "Unauthorized": 401}
_STATES = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


class _State:
    def __init__(self):
        self.policies = {}
        self.bindings = {}


def _attach(store):
    with _LOCK:
        st = _STATES.get(store)
        if st is not None:
            return st
        st = _STATES[store] = _State()
    store.subscribe(lambda ev, res, obj: _on_event(st, ev, res, obj))
    for res, table in ((POLICIES, st.policies), (BINDINGS, st.bindings)):
        try:
            for o in store.list(res):
                table[o["metadata"]["name"]] = o
        except (ApiError, KeyError):
            pass
    return st


def _on_event(st, ev, res, obj):
    table = st.policies if res == POLICIES else st.bindings if res == BINDINGS else None
    if table is None or not obj:
        return
    name = obj["metadata"]["name"]
    if ev == "DELETED":
        table.pop(name, None)
    else:
        table[name] = obj




def _split(resource):
    plural, _, group = resource.partition(".")
    return plural, group


def _rule_matches(rule, group, version, plural, subresource, op, namespaced):
    res = plural + ("/" + subresource if subresource else "")
    ops = rule.get("operations") or []
    if "*" not in ops and op not in ops:
        return False
    if not any(g in ("*", group) for g in rule.get("apiGroups") or []):
        return False
    if not any(v in ("*", version) for v in rule.get("apiVersions") or []):
        return False
    names = rule.get("resources") or []
    if not any(r == res or r == "*/*" or (r == "*" and not subresource) or
               (subresource and r == plural + "/*") or (subresource and r == "*/" + subresource)
               for r in names):
        return False
    scope = rule.get("scope") or "*"
    return scope == "*" or (scope == "Namespaced") == namespaced


def _match(match, store, group, version, plural, subresource, op, obj, old, ns):
    if not match:
        return True
    rules = match.get("resourceRules")
    namespaced = bool(ns)
    if rules is not None and not any(_rule_matches(r, group, version, plural, subresource, op, namespaced)
                                     for r in rules):
        return False
    if any(_rule_matches(r, group, version, plural, subresource, op, namespaced)
           for r in match.get("excludeResourceRules") or []):
        return False
    nsel = match.get("namespaceSelector")
    if nsel and (nsel.get("matchLabels") or nsel.get("matchExpressions")):
        if not ns:
            if plural != "namespaces":
                return True  # cluster-scoped objects are not filtered by namespaceSelector
            labels = ((obj or old or {}).get("metadata") or {}).get("labels") or {}
        else:
            nsobj = store.get("namespaces", None, ns)
            labels = ((nsobj or {}).get("metadata") or {}).get("labels") or {}
        if not label_selector_matches(nsel, labels):
            return False
    osel = match.get("objectSelector")
    if osel and (osel.get("matchLabels") or osel.get("matchExpressions")):
        labels_new = ((obj or {}).get("metadata") or {}).get("labels") or {}
        labels_old = ((old or {}).get("metadata") or {}).get("labels") or {}
        if not (label_selector_matches(osel, labels_new) or (old and label_selector_matches(osel, labels_old))):
            return False
    return True


def _request(store, resource, obj, old, op, subresource, user, kind, group, version, plural, ns):
    meta = (obj or old or {}).get("metadata") or {}
    return {"kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "subResource": subresource or "", "name": meta.get("name") or "", "namespace": ns or "",
            "operation": op, "userInfo": {"username": user or "", "groups": []},
            "dryRun": False}


def admit(store, op, resource, obj, old, *, subresource=None, user="admin"):
    """Raise ApiError when a bound policy with action Deny refuses the request."""
    if op not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        return
    st = _attach(store)
    if not st.policies or not st.bindings:
        return
    target = obj if op != "DELETE" else None
    plural, group = _split(resource)
    src = obj or old or {}
    api = src.get("apiVersion") or "v1"
    version = api.rsplit("/", 1)[-1]
    kind = src.get("kind") or plural
    ns = ((src.get("metadata") or {}).get("namespace")) or None
    act = None
    for bname, binding in sorted(st.bindings.items()):
        bspec = binding.get("spec") or {}
        policy = st.policies.get(bspec.get("policyName"))
        if policy is None:
            continue
        pspec = policy.get("spec") or {}
        actions = bspec.get("validationActions") or []
        if "Deny" not in actions:
            continue
        if pspec.get("paramKind") or bspec.get("paramRef"):
            continue  # params not supported (fidelity doc)
        if not _match(pspec.get("matchConstraints"), store, group, version, plural, subresource, op,
                      target, old, ns):
            continue
        if not _match(bspec.get("matchResources"), store, group, version, plural, subresource, op,
                      target, old, ns):
            continue
        if act is None:
            nsobj = store.get("namespaces", None, ns) if ns else None
            act = {"object": cel.to_cel(target), "oldObject": cel.to_cel(old if op != "CREATE" else None),
                   "request": cel.to_cel(_request(store, resource, obj, old, op, subresource, user,
                                                  kind, group, version, plural, ns)),
                   "namespaceObject": cel.to_cel(nsobj), "params": cel.to_cel(None)}
        _run_policy(policy, bname, act, resource, src)


def _variables(pspec, act):
    if not pspec.get("variables"):
        return act
    values = {}
    full = dict(act)
    for var in pspec["variables"]:
        prog = cel.program(var.get("expression") or "")
        try:
            values[var["name"]] = cel.evaluate(prog, dict(full, variables=cel.to_cel(values))) if prog else None
        except cel.EvalError:
            values[var["name"]] = None
        full["variables"] = values
    full["variables"] = celpy_map(values)
    return full


def celpy_map(values):
    from celpy import celtypes
    return celtypes.MapType({celtypes.StringType(k): v for k, v in values.items() if v is not None})


def _run_policy(policy, bname, act, resource, src):
    pspec = policy.get("spec") or {}
    fail_closed = (pspec.get("failurePolicy") or "Fail") == "Fail"
    pname = policy["metadata"]["name"]
    act = _variables(pspec, act)
    for cond in pspec.get("matchConditions") or []:
        prog = cel.program(cond.get("expression") or "")
        ok = cel.truth(prog, act) if prog else None
        if ok is None:
            if fail_closed:
                _deny(pname, bname, resource, src, "failed to evaluate matchCondition %s" % cond.get("name"),
                      "Forbidden")
            return
        if not ok:
            return
    for v in pspec.get("validations") or []:
        expr = v.get("expression") or ""
        prog = cel.program(expr)
        ok = cel.truth(prog, act) if prog else None
        if ok is None:
            if fail_closed:
                _deny(pname, bname, resource, src, "expression '%s' resulted in error" % expr, "Forbidden")
            continue
        if ok:
            continue
        message = None
        if v.get("messageExpression"):
            mprog = cel.program(v["messageExpression"])
            try:
                out = cel.evaluate(mprog, act) if mprog else None
                if isinstance(out, str) and out.strip():
                    message = str(out)
            except cel.EvalError:
                pass
        if message is None:
            message = v.get("message") or "failed expression: %s" % expr
        _deny(pname, bname, resource, src, message, v.get("reason") or "Invalid")


def _deny(pname, bname, resource, src, message, reason):
    plural, group = _split(resource)
    name = ((src.get("metadata") or {}).get("name")) or ""
    qual = plural + ("." + group if group else "")
    code = _CODES.get(reason, 403 if reason == "Forbidden" else 422)
    text = "%s \"%s\" is forbidden: ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s" % (
        qual, name, pname, bname, message)
    raise ApiError(code, reason, text, {"name": name, "group": group, "kind": plural})
