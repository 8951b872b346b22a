"""KAI queue-controller metrics twin: `GET /_sim/kai-queue-controller/metrics` answers what the
queue-controller pod of KAI Scheduler v0.17 serves on its metrics port (`--metrics-listen-address`,
:8080, path /metrics; the operator's Service `queue-controller`, port `metrics`), rendered from the
Queues at scrape time (Prometheus text format 0.0.4).

The seven gauges of pkg/queuecontroller/metrics/metrics.go (v0.17.0), one series per Queue, with
the metrics namespace as prefix (`--metrics-namespace`, default `kai`: kai_queue_info, ...; an
empty namespace gives the bare names):

- queue_info 1;
- queue_deserved_gpus: spec.resources.gpu.quota (the quota, not the fair share, despite the name);
- queue_quota_cpu_cores: spec.resources.cpu.quota / 1000 (millicores), -1 stays -1;
- queue_quota_memory_bytes: spec.resources.memory.quota * 10^6 (MB), -1 stays -1;
- queue_allocated_gpus: status.allocated of the first resource whose name ends in `/gpu`;
- queue_allocated_cpu_cores, queue_allocated_memory_bytes: status.allocated cpu (cores) and
  memory (bytes); values rounded to 4 decimals; 0 when absent (also without spec.resources).

Labels: queue_name and queue_metadata_name (the Queue's name), queue_display_name
(spec.displayName, "" without), then one label per entry of `--queue-label-to-metric-label`
(`queue label key=metric label`, comma separated) with the Queue's label value, else the value of
`--queue-label-to-default-metric-value`, else "". Label names sorted, as client_golang writes them.
Not modelled: the Go runtime, process and controller-runtime families the same endpoint serves.

Precondition as on a real cluster: the series exist only while a queue-controller pod runs (label
app=queue-controller, as the KAI operator deploys it from the Config), Running and ready; otherwise
503, which a scraping Prometheus records as up == 0. The flags are read from that pod's container
args (`--flag value` or `--flag=value`), as the operator renders them from
Config spec.queueController (metricsNamespace, queueLabelToMetricLabel, ...).
"""

from .ksm import _escape, _num   # the same text-format writing as kube-state-metrics'

APP = "queue-controller"
QUEUES = "queues.scheduling.run.ai"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_NAMESPACE = "kai"          # pkg/common/constants DefaultMetricsNamespace
UNLIMITED = -1.0
# (name without the namespace, HELP as the controller registers it)
FAMILIES = (
    ("queue_allocated_cpu_cores", "Queue allocated CPUs"),
    ("queue_allocated_gpus", "Queue allocated GPUs"),
    ("queue_allocated_memory_bytes", "Queue allocated memory"),
    ("queue_deserved_gpus", "Queue deserved GPUs"),
    ("queue_info", "Queues info"),
    ("queue_quota_cpu_cores", "Queue quota CPU"),
    ("queue_quota_memory_bytes", "Queue quota memory"),
)


def parse_args(args):
    """{flag: value} of Go-style flags, `--flag value` or `--flag=value` (a bare flag is "true")."""
    out, i = {}, 0
    args = list(args or ())
    while i < len(args):
        arg = str(args[i])
        if arg.startswith("-"):
            key, sep, value = arg.lstrip("-").partition("=")
            if not sep:
                if i + 1 < len(args) and not str(args[i + 1]).startswith("-"):
                    value = str(args[i + 1])
                    i += 1
                else:
                    value = "true"
            out[key] = value
        i += 1
    return out


def parse_map(value):
    """'a=b,c=d' -> {"a": "b", "c": "d"} (KAI's StringMapFlag; an item without '=' is refused at
    start-up, here it is left out)."""
    out = {}
    for pair in (value or "").split(","):
        key, sep, val = pair.partition("=")
        if sep:
            out[key] = val
    return out


def _quota(spec, resource):
    res = (spec or {}).get("resources")
    if res is None:
        return 0.0
    try:
        return float(((res.get(resource) or {}).get("quota")) or 0)
    except (TypeError, ValueError):
        return 0.0


def _allocated(status, match):
    from .twins.util import parse_quantity   # local: the server imports this module without the twins
    allocated = (status or {}).get("allocated") or {}
    for name in sorted(allocated):
        if match(name):
            try:
                return round(float(parse_quantity(allocated[name])) * 10000) / 10000
            except ValueError:
                return 0.0
    return 0.0


def queue_values(queue):
    """{family: value} of one Queue, as SetQueueMetrics computes them."""
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    cpu, memory = _quota(spec, "cpu"), _quota(spec, "memory")
    return {
        "queue_info": 1,
        "queue_deserved_gpus": _quota(spec, "gpu"),
        "queue_quota_cpu_cores": cpu if cpu == UNLIMITED else cpu / 1000,
        "queue_quota_memory_bytes": memory if memory == UNLIMITED else memory * 1000000,
        "queue_allocated_gpus": _allocated(status, lambda n: n.endswith("/gpu")),
        "queue_allocated_cpu_cores": _allocated(status, lambda n: n == "cpu"),
        "queue_allocated_memory_bytes": _allocated(status, lambda n: n == "memory"),
    }


def queue_labels(queue, label_map, defaults):
    meta = queue.get("metadata") or {}
    labels = {"queue_name": meta.get("name", ""), "queue_metadata_name": meta.get("name", ""),
              "queue_display_name": (queue.get("spec") or {}).get("displayName") or ""}
    own = meta.get("labels") or {}
    for key in sorted(label_map):
        labels[label_map[key]] = own[key] if key in own else defaults.get(key, "")
    return sorted(labels.items())


def render(queues, flags=None):
    """The exposition text for these Queues; flags: the controller's command-line flags."""
    flags = flags or {}
    prefix = flags.get("metrics-namespace", DEFAULT_NAMESPACE)
    label_map = parse_map(flags.get("queue-label-to-metric-label"))
    defaults = parse_map(flags.get("queue-label-to-default-metric-value"))
    rows = [(queue_labels(q, label_map, defaults), queue_values(q))
            for q in sorted(queues, key=lambda q: q["metadata"]["name"])]
    lines = []
    for family, text in FAMILIES:
        name = "%s_%s" % (prefix, family) if prefix else family
        if not rows:
            continue                          # a GaugeVec without children writes nothing
        lines.append("# HELP %s %s" % (name, text))
        lines.append("# TYPE %s gauge" % name)
        for labels, values in rows:
            lines.append("%s{%s} %s" % (name, ",".join('%s="%s"' % (k, _escape(v)) for k, v in labels),
                                        _num(values[family])))
    return "\n".join(lines) + ("\n" if lines else "")


def _running(pod):
    st = pod.get("status") or {}
    return st.get("phase") == "Running" and all(
        c.get("ready") for c in st.get("containerStatuses") or [{}])


def controller_pod(store):
    """The Running, ready queue-controller pod, or None."""
    for pod in sorted(store.list("pods", None), key=lambda p: p["metadata"]["name"]):
        if (pod["metadata"].get("labels") or {}).get("app") == APP and _running(pod):
            return pod
    return None


def _flags(pod):
    out = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        out.update(parse_args(list(c.get("command") or [])[1:] + list(c.get("args") or [])))
    return out


def metrics(store):
    """The text the queue-controller would serve now, or None when none runs."""
    pod = controller_pod(store)
    if pod is None:
        return None
    return render(store.list(QUEUES, None), _flags(pod))


def handle(store, method, parts):
    """(status, body bytes, content type) for /_sim/kai-queue-controller/..."""
    if parts != ["metrics"]:
        return 404, b"not found\n", "text/plain; charset=utf-8"
    if method != "GET":
        return 405, b"method not allowed\n", "text/plain; charset=utf-8"
    text = metrics(store)
    if text is None:
        return 503, b"no queue-controller pod running (label app=queue-controller)\n", "text/plain; charset=utf-8"
    return 200, text.encode(), CONTENT_TYPE
