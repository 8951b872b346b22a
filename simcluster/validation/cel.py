"""A few `x-kubernetes-validations` CEL rules, recognised by their exact text.

There is no CEL interpreter here. The rules of the upstream CRDs we rely on
(immutability `self == oldSelf`, Kueue's borrowingLimit-needs-a-cohort and
flavors-cover-all-resources) are mapped to Python; every other rule is skipped
(see docs/simcluster-fidelity.md). Errors look like the server's:
`spec.clusterQueue: Invalid value: "string": field is immutable`.
"""

import re

from simcluster.errors import FieldError
from simcluster.validation import json_type

MISSING = object()


def _norm(rule):
    return re.sub(r"\s+", " ", (rule or "").strip())


def _no_borrowing(self, cohort_field):
    if cohort_field in self or "resourceGroups" not in self:
        return True
    for rg in self.get("resourceGroups") or ():
        for f in (rg or {}).get("flavors") or ():
            for r in (f or {}).get("resources") or ():
                if "borrowingLimit" in (r or {}):
                    return False
    return True


def _flavors_cover(self):
    covered = len(self.get("coveredResources") or ())
    return all(len((f or {}).get("resources") or ()) == covered
               for f in self.get("flavors") or ())


# rule text -> (is_transition_rule, fn(self, old) -> bool)
KNOWN = {
    "self == oldSelf": (True, lambda self, old: self == old),
    "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, "
    "rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true":
        (False, lambda self, old: _no_borrowing(self, "cohortName")),
    "!has(self.cohort) && has(self.resourceGroups) ? self.resourceGroups.all(rg, "
    "rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true":
        (False, lambda self, old: _no_borrowing(self, "cohort")),
    "self.flavors.all(x, size(x.resources) == size(self.coveredResources))":
        (False, lambda self, old: _flavors_cover(self)),
}


def compile_rules(validations):
    """[(transition, fn, message)] for the rules we know; unknown ones are dropped."""
    out = []
    for v in validations or ():
        known = KNOWN.get(_norm(v.get("rule")))
        if known:
            msg = v.get("message") or "failed rule: %s" % _norm(v.get("rule"))
            out.append((known[0], known[1], msg))
    return out


def check(node, value, old, path, errs):
    """Evaluate the known rules of node (and below) on value; old may be MISSING."""
    if value is None or (node.type == "object" and not isinstance(value, dict)) or (
            node.type == "array" and not isinstance(value, list)):
        return  # the type error is reported by the OpenAPI validation
    for transition, fn, msg in node.cel:
        if transition and old is MISSING:
            continue  # transition rules only run on updates with an old value
        if not fn(value, None if old is MISSING else old):
            errs.append(FieldError("Invalid value", path, node.type or json_type(value), msg))
    if not node.has_cel_below:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            child = node.props.get(k) if node.props else None
            if child is None and not isinstance(node.additional, bool) and node.additional:
                child = node.additional
            if child is not None and (child.cel or child.has_cel_below):
                o = old.get(k, MISSING) if isinstance(old, dict) else MISSING
                check(child, v, o, path + "." + k if path else k, errs)
    elif isinstance(value, list) and node.items is not None:
        for i, v in enumerate(value):
            # List items are not correlated with the old list (atomic lists): no transition.
            check(node.items, v, MISSING, "%s[%d]" % (path, i), errs)
