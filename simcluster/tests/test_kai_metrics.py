"""The KAI queue-controller metrics twin (simcluster/kai_metrics.py) on a small in-memory store: 503
until a queue-controller pod runs, then the gauges of KAI v0.17's queue controller per Queue (names
with the metrics namespace, labels, values from spec and status), checked by a strict parser of the
text format and by promtool when it is installed; the operator twin gives the pod its flags."""
import re
import shutil
import subprocess

from simcluster import kai_metrics
from simcluster.twins.kai import queue_controller_args

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"'
SAMPLE = re.compile(r"^(%s)\{((?:%s)(?:,%s)*)?\} (\S+)$" % (NAME, LABEL, LABEL))


class Store:
    def __init__(self, pods=(), queues=()):
        self.objs = {"pods": list(pods), kai_metrics.QUEUES: list(queues)}

    def list(self, resource, namespace):
        return list(self.objs.get(resource, []))


def controller(args=None, phase="Running", ready=True):
    return {"metadata": {"name": "queue-controller-6c9d-x2x", "namespace": "kai-scheduler",
                         "labels": {"app": "queue-controller"}},
            "spec": {"containers": [{"name": "queue-controller", "args": args if args is not None
                                     else queue_controller_args({})}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "queue-controller", "ready": ready}]}}


def queue(name, gpu=2, cpu=-1, memory=-1, allocated=None, labels=None, display=None, resources=True):
    spec = {}
    if resources:
        spec["resources"] = {"gpu": {"quota": gpu, "limit": -1, "overQuotaWeight": 1},
                             "cpu": {"quota": cpu, "limit": -1, "overQuotaWeight": 1},
                             "memory": {"quota": memory, "limit": -1, "overQuotaWeight": 1}}
    if display:
        spec["displayName"] = display
    out = {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}
    if allocated is not None:
        out["status"] = {"allocated": allocated}
    return out


def parse(text):
    """{(name, ((label, value), ...)): value}, asserting every line is valid text format."""
    out, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            assert kind == "gauge", line
            typed.add(name)
            continue
        m = SAMPLE.match(line)
        assert m, line
        assert m.group(1) in typed, line
        labels = tuple(re.findall(LABEL, m.group(2) or ""))
        assert [k for k, _ in labels] == sorted(k for k, _ in labels), line
        out[(m.group(1), labels)] = float(m.group(m.lastindex))
    return out


def serve(store):
    return kai_metrics.handle(store, "GET", ["metrics"])


def test_no_series_until_the_queue_controller_runs():
    for pods in ([], [controller(phase="Pending")], [controller(ready=False)]):
        status, body, _ = serve(Store(pods=pods, queues=[queue("team-vision")]))
        assert status == 503 and b"queue-controller" in body
    assert serve(Store(pods=[controller()]))[0] == 200
    assert kai_metrics.handle(Store(), "GET", ["other"])[0] == 404
    assert kai_metrics.handle(Store(), "POST", ["metrics"])[0] == 405


def test_gauges_per_queue_with_the_kai_prefix_and_values_from_spec_and_status():
    q = queue("team-vision", gpu=2, cpu=8000, memory=64000, display="Vision",
              allocated={"nvidia.com/gpu": "2", "cpu": "1500m", "memory": "4Gi"})
    status, body, ctype = serve(Store(pods=[controller()], queues=[q, queue("default-queue", resources=False)]))
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    series = parse(body.decode())
    labels = (("queue_display_name", "Vision"), ("queue_metadata_name", "team-vision"), ("queue_name", "team-vision"))
    assert series[("kai_queue_info", labels)] == 1
    assert series[("kai_queue_deserved_gpus", labels)] == 2
    assert series[("kai_queue_quota_cpu_cores", labels)] == 8
    assert series[("kai_queue_quota_memory_bytes", labels)] == 64e9
    assert series[("kai_queue_allocated_gpus", labels)] == 2
    assert series[("kai_queue_allocated_cpu_cores", labels)] == 1.5
    assert series[("kai_queue_allocated_memory_bytes", labels)] == 4 * 2 ** 30
    # without spec.resources and status: zeros; no display name: empty label
    empty = (("queue_display_name", ""), ("queue_metadata_name", "default-queue"), ("queue_name", "default-queue"))
    assert [series[(n, empty)] for n in ("kai_queue_deserved_gpus", "kai_queue_quota_cpu_cores",
                                         "kai_queue_allocated_gpus")] == [0, 0, 0]
    assert len(series) == 14
    assert "# HELP kai_queue_deserved_gpus Queue deserved GPUs\n" in body.decode()


def test_unlimited_quota_stays_minus_one_and_fractions_round_to_four_places():
    q = queue("q", gpu=0.5, allocated={"nvidia.com/gpu": "0.333333", "cpu": "0"})
    series = parse(serve(Store(pods=[controller()], queues=[q]))[1].decode())
    by_name = dict((name, v) for (name, _), v in series.items())
    assert by_name["kai_queue_quota_cpu_cores"] == -1 and by_name["kai_queue_quota_memory_bytes"] == -1
    assert by_name["kai_queue_deserved_gpus"] == 0.5 and by_name["kai_queue_allocated_gpus"] == 0.3333
    assert by_name["kai_queue_allocated_memory_bytes"] == 0


def test_flags_metrics_namespace_and_queue_label_mappings_as_the_operator_renders_them():
    args = queue_controller_args({"metricsNamespace": "", "queueLabelToMetricLabel": "team=team,tier=queue_tier",
                                  "queueLabelToDefaultMetricValue": "tier=standard"})
    assert args[:2] == ["--metrics-listen-address", ":8080"] and "--metrics-namespace" in args
    pods = [controller(args)]
    text = serve(Store(pods=pods, queues=[queue("q", labels={"team": "vision"})]))[1].decode()
    series = parse(text)
    want = (("queue_display_name", ""), ("queue_metadata_name", "q"), ("queue_name", "q"),
            ("queue_tier", "standard"), ("team", "vision"))
    assert series[("queue_info", want)] == 1        # empty metrics namespace: the bare names
    assert not any(name.startswith("kai_") for name, _ in series)
    assert kai_metrics.parse_args(["--metrics-namespace=acme", "--leader-elect", "--qps", "50"]) == {
        "metrics-namespace": "acme", "leader-elect": "true", "qps": "50"}
    assert "acme_queue_info" in kai_metrics.render([queue("q")], {"metrics-namespace": "acme"})
    assert kai_metrics.render([], {}) == ""


def test_promtool_reads_the_exposition():
    promtool = shutil.which("promtool")
    if promtool is None:
        return
    queues = [queue("a", allocated={"nvidia.com/gpu": "1"}), queue("b", display='say "hi"')]
    text = serve(Store(pods=[controller()], queues=queues))[1]
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    assert b"error" not in proc.stdout.lower() + proc.stderr.lower(), proc.stdout + proc.stderr
