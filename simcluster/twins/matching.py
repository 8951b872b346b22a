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


# InterPodAffinity, required anti-affinity only (kube-scheduler's messages): the pod's own terms,
# and the terms of pods already on the node's topology domain against the incoming pod
ANTI_AFFINITY_MISMATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"


def anti_affinity_terms(spec):
    return (((spec.get("affinity") or {}).get("podAntiAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def _term_selects(term, owner_namespace, pod):
    from ..selectors import label_selector_matches
    meta = pod["metadata"]
    namespaces = term.get("namespaces") or []
    if term.get("namespaceSelector") is not None:
        # a namespace selector {} is every namespace; others are not evaluated (no namespace labels here)
        if term["namespaceSelector"] != {} and meta.get("namespace") not in namespaces:
            return False
    elif meta.get("namespace") not in (namespaces or [owner_namespace]):
        return False
    return label_selector_matches(term.get("labelSelector"), meta.get("labels"))


class PodPlacements(object):
    """The active pods per node (and those placed during one scheduling pass), for InterPodAffinity."""

    def __init__(self, pods, nodes):
        self.by_node = {}
        self.nodes = dict((n["metadata"]["name"], n) for n in nodes)
        self.any_terms = False
        for p in pods:
            name = p["spec"].get("nodeName")
            if name and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                self.add(p, name)

    def add(self, pod, node_name):
        self.by_node.setdefault(node_name, []).append(pod)
        self.any_terms = self.any_terms or bool(anti_affinity_terms(pod["spec"]))

    def copy(self):
        out = PodPlacements((), ())
        out.by_node = dict((k, list(v)) for k, v in self.by_node.items())
        out.nodes, out.any_terms = self.nodes, self.any_terms
        return out

    def _domain(self, node, key):
        value = (node["metadata"].get("labels") or {}).get(key)
        if value is None:
            return []
        if key == "kubernetes.io/hostname":
            return [node["metadata"]["name"]]
        return [n for n, obj in self.nodes.items() if (obj["metadata"].get("labels") or {}).get(key) == value]

    def conflict(self, pod, node):
        """None, or kube-scheduler's reason why `pod` may not go to `node`."""
        own = anti_affinity_terms(pod["spec"])
        ns = pod["metadata"].get("namespace")
        for term in own:
            for name in self._domain(node, term.get("topologyKey") or ""):
                if any(_term_selects(term, ns, other) for other in self.by_node.get(name, ())
                       if other["metadata"].get("uid") != pod["metadata"].get("uid")):
                    return ANTI_AFFINITY_MISMATCH
        if self.any_terms:
            for name in [node["metadata"]["name"]]:
                for other in self.by_node.get(name, ()):
                    for term in anti_affinity_terms(other["spec"]):
                        if node["metadata"]["name"] in self._domain(node, term.get("topologyKey") or "") and \
                                _term_selects(term, other["metadata"].get("namespace"), pod):
                            return EXISTING_ANTI_AFFINITY
        return None
