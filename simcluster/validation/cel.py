"""CEL for CRD `x-kubernetes-validations` and ValidatingAdmissionPolicies (cel-python).

Rules are compiled once per text with celpy (a real CEL implementation) and
evaluated with `self` (and `oldSelf` for transition rules, which only run on
updates). Errors look like the server's:
`spec.clusterQueue: Invalid value: "string": field is immutable`.

Differences from the API server (docs/simcluster-fidelity.md): no cost
budget, no type-checking of rules against the schema at CRD creation, no
Kubernetes CEL libraries (quantity(), url(), isSorted(), ...): a rule that
fails to compile or evaluate is not enforced (the server would refuse the CRD
or report the evaluation error).
"""

import functools
import json
import logging
import re

from simcluster.errors import FieldError
from simcluster.validation import json_type

try:
    import celpy
    from celpy import celtypes
except ImportError:  # pragma: no cover - tests/requirements.txt pins cel-python
    celpy = None

LOG = logging.getLogger("simcluster.cel")
MISSING = object()
_OLD_SELF = re.compile(r"\boldSelf\b")
_ENV = None


def _norm(rule):
    return re.sub(r"\s+", " ", (rule or "").strip())


def _env():
    global _ENV
    if _ENV is None:
        _ENV = celpy.Environment()
    return _ENV


@functools.lru_cache(maxsize=4096)
def program(expr):
    """Compiled CEL program of expr, or None when celpy cannot compile it."""
    if celpy is None:
        return None
    try:
        env = _env()
        return env.program(env.compile(expr))
    except Exception as exc:  # CELParseError and friends: not enforced
        LOG.warning("CEL rule not enforced (does not compile): %s: %s", expr, exc)
        return None


def to_cel(value):
    return celpy.json_to_cel(value)


class EvalError(Exception):
    pass


def evaluate(prog, activation):
    """Run a compiled program; raise EvalError for CEL runtime errors (no_such_field, ...)."""
    try:
        result = prog.evaluate(activation)
    except Exception as exc:
        raise EvalError(str(exc))
    if isinstance(result, Exception) or type(result).__name__ == "CELEvalError":
        raise EvalError(str(result))
    return result


def truth(prog, activation):
    """True / False of a boolean rule; None when it errs or is not boolean."""
    try:
        result = evaluate(prog, activation)
    except EvalError:
        return None
    if isinstance(result, celtypes.BoolType) or isinstance(result, bool):
        return bool(result)
    return None


def _rule_fn(rule, message_expr):
    prog = program(rule)
    if prog is None:
        return None
    msg_prog = program(message_expr) if message_expr else None

    memo = {}

    def fn(self_value, old_value):
        # cel-python walks the AST (~ms per rule): objects repeat, so results are memoised
        try:
            key = json.dumps([self_value, None if old_value is MISSING else old_value, old_value is MISSING],
                             sort_keys=True)
        except (TypeError, ValueError):
            key = None
        if key is not None and key in memo:
            return memo[key]
        out = _run(self_value, old_value)
        if key is not None:
            if len(memo) >= 1024:
                memo.clear()
            memo[key] = out
        return out

    def _run(self_value, old_value):
        act = {"self": to_cel(self_value)}
        if old_value is not MISSING:
            act["oldSelf"] = to_cel(old_value)
        ok = truth(prog, act)
        if ok is None or ok:
            return None       # passed, or not evaluable here (not enforced)
        if msg_prog is not None:
            try:
                text = evaluate(msg_prog, act)
                if isinstance(text, str) and text:
                    return str(text)
            except EvalError:
                pass
        return ""
    return fn


def compile_rules(validations):
    """[(transition, fn, message)]: fn(self, old) -> None if the rule holds, else a message or ''."""
    out = []
    for v in validations or ():
        rule = _norm(v.get("rule"))
        if not rule:
            continue
        fn = _rule_fn(rule, v.get("messageExpression"))
        if fn is None:
            continue
        msg = v.get("message") or "failed rule: %s" % rule
        out.append((bool(_OLD_SELF.search(rule)), fn, msg))
    return out


def check(node, value, old, path, errs):
    """Evaluate the rules of node (and below) on value; old may be MISSING."""
    if value is None or (node.type == "object" and not isinstance(value, dict)) or (
            node.type == "array" and not isinstance(value, list)):
        return  # the type error is reported by the OpenAPI validation
    for transition, fn, msg in node.cel:
        if transition and old is MISSING:
            continue  # transition rules only run on updates with an old value
        failed = fn(value, old if transition else MISSING)
        if failed is not None:
            errs.append(FieldError("Invalid value", path, node.type or json_type(value), failed or msg))
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
