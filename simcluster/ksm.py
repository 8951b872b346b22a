"""kube-state-metrics twin: `GET /_sim/kube-state-metrics/metrics` answers what a kube-state-metrics
v2 pod's /metrics would, rendered from the store at scrape time (Prometheus text format 0.0.4).

Only the families the platform's rules, dashboards and usage report read are rendered, with the
metric names, label names, label order, HELP text and value semantics of kube-state-metrics
(docs/metrics/cluster/node-metrics.md, workload/pod-metrics.md, workload/daemonset-metrics.md,
internal/store/*.go):

- kube_node_status_allocatable{node, resource, unit}: one series per entry of
  status.allocatable; the resource name with every character outside [a-zA-Z0-9_] turned into
  `_` (nvidia.com/mig-1g.10gb -> nvidia_com_mig_1g_10gb); unit core (cpu), byte (memory,
  ephemeral-storage, storage, hugepages-*, attachable-volumes-*), integer (pods and extended
  resources such as nvidia.com/gpu); the value is the quantity (MilliValue / 1000). Other
  kubernetes.io resources are skipped, as kube-state-metrics does.
- kube_daemonset_status_number_unavailable{namespace, daemonset}: status.numberUnavailable
  (0 when the controller omits it).
- kube_pod_status_phase{namespace, pod, uid, phase}: five series per pod (Pending, Succeeded,
  Failed, Unknown, Running), 1 for the pod's phase and 0 for the others; none while the phase
  is empty.

Precondition as on a real cluster: the series exist only while a kube-state-metrics pod runs.
The platform does not install one (sites get it from kube-prometheus-stack), so the endpoint
answers 503 (a scraping Prometheus records up == 0) unless a pod labelled
app.kubernetes.io/name=kube-state-metrics is Running and ready; tests and the demo create one
(tests/integration/prometheus.py). Its RBAC is not checked (the simulator authorises nothing).
"""

import re

APP_LABEL = "app.kubernetes.io/name"
APP = "kube-state-metrics"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PHASES = ("Pending", "Succeeded", "Failed", "Unknown", "Running")   # kube-state-metrics' order
INVALID_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")
BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")

# (name, HELP as kube-state-metrics v2 writes it: stability level first)
FAMILIES = (
    ("kube_daemonset_status_number_unavailable",
     "[STABLE] The number of nodes that should be running the daemon pod and have none of the "
     "daemon pod running and available"),
    ("kube_node_status_allocatable",
     "[STABLE] The allocatable for different resources of a node that are available for scheduling."),
    ("kube_pod_status_phase", "[STABLE] The pods current phase."),
)
METRIC_NAMES = tuple(name for name, _help in FAMILIES)


def resource_unit(resource):
    """(sanitised resource label, unit) kube-state-metrics gives a node resource, or None when it
    skips it (a kubernetes.io resource it has no unit for)."""
    label = INVALID_LABEL_CHARS.sub("_", resource)
    if resource == "cpu":
        return label, "core"
    if resource in BYTE_RESOURCES or resource.startswith(("hugepages-", "attachable-volumes-")):
        return label, "byte"
    if resource == "pods":
        return label, "integer"
    # extended resource: a domain-qualified name outside kubernetes.io (v1helper.IsExtendedResourceName)
    domain = resource.split("/", 1)[0] if "/" in resource else ""
    if domain and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io")) \
            and not resource.startswith("requests."):
        return label, "integer"
    return None


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value):
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _series(name, labels, value):
    return "%s{%s} %s" % (name, ",".join('%s="%s"' % (k, _escape(v)) for k, v in labels), _num(value))


def render(nodes, pods, daemonsets):
    """The exposition text for these objects (lists of API objects as the store returns them)."""
    from .twins.util import parse_quantity   # local: the server imports this module without the twins
    rows = {name: [] for name in METRIC_NAMES}
    for ds in daemonsets:
        meta = ds["metadata"]
        rows["kube_daemonset_status_number_unavailable"].append(_series(
            "kube_daemonset_status_number_unavailable",
            [("namespace", meta.get("namespace", "")), ("daemonset", meta["name"])],
            (ds.get("status") or {}).get("numberUnavailable") or 0))
    for node in nodes:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for resource in sorted(allocatable):
            ru = resource_unit(resource)
            if ru is None:
                continue
            try:
                value = float(parse_quantity(allocatable[resource]))    # the metric is a float64
            except ValueError:
                continue          # the API server refuses such a quantity; nothing to export
            rows["kube_node_status_allocatable"].append(_series(
                "kube_node_status_allocatable",
                [("node", node["metadata"]["name"]), ("resource", ru[0]), ("unit", ru[1])], value))
    for pod in pods:
        meta = pod["metadata"]
        phase = (pod.get("status") or {}).get("phase") or ""
        if not phase:
            continue
        for p in PHASES:
            rows["kube_pod_status_phase"].append(_series(
                "kube_pod_status_phase",
                [("namespace", meta.get("namespace", "")), ("pod", meta["name"]),
                 ("uid", meta.get("uid", "")), ("phase", p)], 1 if p == phase else 0))
    lines = []
    for name, text in FAMILIES:
        lines.append("# HELP %s %s" % (name, text))
        lines.append("# TYPE %s gauge" % name)
        lines.extend(rows[name])
    return "\n".join(lines) + "\n"


def _running(pod):
    st = pod.get("status") or {}
    return st.get("phase") == "Running" and all(
        c.get("ready") for c in st.get("containerStatuses") or [{}])


def exporter_pod(store):
    """The Running, ready kube-state-metrics pod, or None."""
    for pod in store.list("pods", None):
        if ((pod["metadata"].get("labels") or {}).get(APP_LABEL) == APP) and _running(pod):
            return pod
    return None


def metrics(store):
    """The text the kube-state-metrics pod would serve now, or None when none runs."""
    if exporter_pod(store) is None:
        return None
    return render(store.list("nodes", None), store.list("pods", None),
                  store.list("daemonsets.apps", None))


def handle(store, method, parts):
    """(status, body bytes, content type) for /_sim/kube-state-metrics/..."""
    if parts != ["metrics"]:
        return 404, b"not found\n", "text/plain; charset=utf-8"
    if method != "GET":
        return 405, b"method not allowed\n", "text/plain; charset=utf-8"
    text = metrics(store)
    if text is None:
        return (503, b"no kube-state-metrics pod running (label app.kubernetes.io/name=kube-state-metrics)\n",
                "text/plain; charset=utf-8")
    return 200, text.encode(), CONTENT_TYPE
