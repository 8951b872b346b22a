"""Pod-to-node predicates shared by the scheduler and the DaemonSet controller."""


def _expr_match(expr, value_of):
    key, op = expr.get("key"), expr.get("operator")
    values = expr.get("values") or []
    present, val = value_of(key)
    if op == "In":
        return present and val in values
    if op == "NotIn":
        return not present or val not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        try:
            a, b = int(val), int(values[0])
        except (TypeError, ValueError, IndexError):
            return False
        return present and (a > b if op == "Gt" else a < b)
    return False


def node_selector_term_matches(term, node):
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    exprs = term.get("matchExpressions") or []
    fexprs = term.get("matchFields") or []
    if not exprs and not fexprs:
        return False          # an empty term matches nothing (like the real scheduler)
    for e in exprs:
        if not _expr_match(e, lambda k: (k in labels, labels.get(k))):
            return False
    for e in fexprs:
        if not _expr_match(e, lambda k: (k in fields, fields.get(k))):
            return False
    return True


def matches_node_selector(pod_spec, node):
    labels = node["metadata"].get("labels") or {}
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if terms is not None:
        if not any(node_selector_term_matches(t, node) for t in terms):
            return False
    return True


def tolerates(tolerations, taint):
    for tol in tolerations or []:
        effect = tol.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        op = tol.get("operator") or "Equal"
        key = tol.get("key")
        if not key:
            if op == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if op == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def untolerated_taint(pod_spec, node):
    """The first NoSchedule/NoExecute taint the pod does not tolerate, or None."""
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not tolerates(pod_spec.get("tolerations"), taint):
            return taint
    return None


# Tolerations the DaemonSet controller adds to every DaemonSet pod.
DAEMONSET_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
