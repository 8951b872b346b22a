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
- kube_pod_owner{namespace, pod, uid, owner_kind, owner_name, owner_is_controller}: one series per
  ownerReference (owner_is_controller "false" when `controller` is unset), one with empty values for
  a pod without owner.
- kube_pod_labels{namespace, pod, uid, label_*}: only the pod labels the exporter pod's
  `--metric-labels-allowlist` names for `pods` (exact keys, `*` alone first = every label, one
  partial `*` per key), as label_ + the key with characters outside [a-zA-Z0-9_] as `_`,
  snake_cased, sorted by key; no series at all without an allowlist for pods (kube-state-metrics'
  default).
- kube_pod_container_info{namespace, pod, uid, container, image_spec, image, image_id,
  container_id}: per spec container that has a status (image_spec from the spec, the others from
  the status).
- kube_pod_container_status_restarts_total{namespace, pod, uid, container} (a counter):
  restartCount.
- kube_pod_container_status_terminated_reason and ..._last_terminated_reason {namespace, pod, uid,
  container, reason}: 1 per container whose state (lastState) is terminated.
- kube_job_status_failed{namespace, job_name[, reason]}: with status.failed 0 one series without
  reason (value 0); with a Failed condition one series per known reason (BackoffLimitExceeded,
  DeadlineExceeded, Evicted), 1 for the condition's reason; otherwise one series reason="" with
  status.failed.

`--resources` of the exporter pod limits the families to those resources (daemonsets, jobs, nodes,
pods), as kube-state-metrics' collectors do; without it every family is rendered.

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

JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "Evicted")   # internal/store/job.go
LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")

# (name, HELP as kube-state-metrics v2 writes it: "[STABLE] " before a stable family's text, an
# alpha family's text alone; type; the resource whose collector renders it)
FAMILIES = (
    ("kube_daemonset_status_number_unavailable",
     "[STABLE] The number of nodes that should be running the daemon pod and have none of the "
     "daemon pod running and available", "gauge", "daemonsets"),
    ("kube_job_status_failed",
     "[STABLE] The number of pods which reached Phase Failed and the reason for failure.", "gauge", "jobs"),
    ("kube_node_status_allocatable",
     "[STABLE] The allocatable for different resources of a node that are available for scheduling.", "gauge",
     "nodes"),
    ("kube_pod_container_info", "[STABLE] Information about a container in a pod.", "gauge", "pods"),
    ("kube_pod_container_status_last_terminated_reason",
     "Describes the last reason the container was in terminated state.", "gauge", "pods"),
    ("kube_pod_container_status_restarts_total", "[STABLE] The number of container restarts per container.",
     "counter", "pods"),
    ("kube_pod_container_status_terminated_reason",
     "Describes the reason the container is currently in terminated state.", "gauge", "pods"),
    ("kube_pod_labels", "[STABLE] Kubernetes labels converted to Prometheus labels.", "gauge", "pods"),
    ("kube_pod_owner", "[STABLE] Information about the Pod's owner.", "gauge", "pods"),
    ("kube_pod_status_phase", "[STABLE] The pods current phase.", "gauge", "pods"),
)
METRIC_NAMES = tuple(f[0] for f in FAMILIES)


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


def prometheus_label(key):
    """kube-state-metrics' Prometheus label for a Kubernetes label key in kube_*_labels."""
    return "label_" + LOWER_UPPER.sub(r"\1_\2", INVALID_LABEL_CHARS.sub("_", key)).lower()


def parse_allowlist(value):
    """`pods=[a,b],jobs=[*]` -> {"pods": ["a", "b"], "jobs": ["*"]} (kube-state-metrics'
    LabelsAllowList.Set; a malformed value makes kube-state-metrics exit, here it allows nothing)."""
    out = {}
    for m in re.finditer(r"\s*([^=,\[\]]+)=\[([^\]]*)\]\s*(?:,|$)", value or ""):
        out[m.group(1).strip()] = [k.strip() for k in m.group(2).split(",") if k.strip()]
    return out


def allowed_labels(labels, allow):
    """The pod labels the allowlist entries let through (createPrometheusLabelKeysValues)."""
    picked = {}
    for i, entry in enumerate(allow or ()):
        if entry == "*":
            if i == 0:
                return dict(labels)
            continue
        if "*" not in entry:
            if entry in labels:
                picked[entry] = labels[entry]
            continue
        if entry.count("*") > 1:
            continue                       # more than one partial wildcard: ignored with a warning
        head, tail = entry.split("*")
        pattern = re.compile("^%s.*%s$" % (re.escape(head), re.escape(tail)))
        picked.update((k, v) for k, v in labels.items() if pattern.match(k))
    return picked


def _pod_series(rows, pod, allow):
    meta = pod["metadata"]
    base = [("namespace", meta.get("namespace", "")), ("pod", meta["name"]), ("uid", meta.get("uid", ""))]
    owners = meta.get("ownerReferences") or []
    for ref in owners or [{}]:
        controller = ref.get("controller")
        rows["kube_pod_owner"].append(_series("kube_pod_owner", base + [
            ("owner_kind", ref.get("kind", "")), ("owner_name", ref.get("name", "")),
            ("owner_is_controller", "" if not ref else ("true" if controller else "false"))], 1))
    if allow is not None:
        picked = allowed_labels(meta.get("labels") or {}, allow)
        rows["kube_pod_labels"].append(_series("kube_pod_labels", base + [
            (prometheus_label(k), picked[k]) for k in sorted(picked)], 1))
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    for c in (pod.get("spec") or {}).get("containers") or []:
        for cs in statuses:
            if cs.get("name") == c.get("name"):
                rows["kube_pod_container_info"].append(_series("kube_pod_container_info", base + [
                    ("container", cs["name"]), ("image_spec", c.get("image", "")), ("image", cs.get("image", "")),
                    ("image_id", cs.get("imageID", "")), ("container_id", cs.get("containerID", ""))], 1))
    for cs in statuses:
        name = cs.get("name", "")
        rows["kube_pod_container_status_restarts_total"].append(_series(
            "kube_pod_container_status_restarts_total", base + [("container", name)], cs.get("restartCount") or 0))
        for family, state in (("kube_pod_container_status_terminated_reason", cs.get("state")),
                              ("kube_pod_container_status_last_terminated_reason", cs.get("lastState"))):
            term = (state or {}).get("terminated")
            if term is not None:
                rows[family].append(_series(
                    family, base + [("container", name), ("reason", term.get("reason", ""))], 1))


def _job_series(rows, job):
    meta = job["metadata"]
    base = [("namespace", meta.get("namespace", "")), ("job_name", meta["name"])]
    status = job.get("status") or {}
    failed = status.get("failed") or 0
    name = "kube_job_status_failed"
    if not failed:
        rows[name].append(_series(name, base, 0))
        return
    known = False
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Failed":
            for reason in JOB_FAILURE_REASONS:
                hit = cond.get("reason") == reason
                known = known or hit
                rows[name].append(_series(name, base + [("reason", reason)], 1 if hit else 0))
    if not known:
        rows[name].append(_series(name, base + [("reason", "")], failed))


def _args(pod):
    """{flag: value} of the exporter container's --flag=value arguments."""
    out = {}
    for c in (pod or {}).get("spec", {}).get("containers") or []:
        for arg in (c.get("args") or []) + (c.get("command") or []):
            if arg.startswith("--") and "=" in arg:
                key, _sep, value = arg[2:].partition("=")
                out[key] = value
    return out


def render(nodes, pods, daemonsets, jobs=(), flags=None):
    """The exposition text for these objects (lists of API objects as the store returns them);
    flags: the exporter's command-line flags ({"metric-labels-allowlist": ..., "resources": ...})."""
    from .twins.util import parse_quantity   # local: the server imports this module without the twins
    flags = flags or {}
    resources = set(r.strip() for r in flags["resources"].split(",")) if flags.get("resources") else None
    allow = parse_allowlist(flags.get("metric-labels-allowlist")).get("pods")
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
    for job in jobs:
        _job_series(rows, job)
    for pod in pods:
        _pod_series(rows, pod, allow)
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
    for name, text, kind, resource in FAMILIES:
        if resources is not None and resource not in resources:
            continue
        lines.append("# HELP %s %s" % (name, text))
        lines.append("# TYPE %s %s" % (name, kind))
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
    pod = exporter_pod(store)
    if pod is None:
        return None
    return render(store.list("nodes", None), store.list("pods", None),
                  store.list("daemonsets.apps", None), store.list("jobs.batch", None), _args(pod))


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
