"""Load twin: `python3 /opt/skaffon/acceptance/load.py --url http://SVC.NS.svc:PORT/PATH
--seconds D --concurrency C` against the simulated cluster's serving pods.

A kubelet hook for pods whose container runs a script named load.py (directly, or inside
`sh -c`). The run lasts D simulated seconds, each taken in `timings.load_tick` wall seconds
(0.05 by default: a 60 s run takes 3 s). Every simulated second looks at the cluster as it is
then and prints the log contract of the workload acceptance:

    {"event": "tick", "requests": n, "errors": e, "endpoints": k, "time": T}      per second
    {"event": "summary", "requests": N, "errors": E, "error_rate": r, "p50_ms": a,
     "p90_ms": b, "p99_ms": c, "rps": x, "seconds": D, "time": T}                  at the end, exit 0

(`endpoints`: ready endpoints that second; a tick with errors also carries the `error` text.)
T is the wall clock at the end of that simulated second.

The model (simulated figures, not measured ones):
- The URL's host is looked up like cluster DNS: `svc`, `svc.ns`, `svc.ns.svc`,
  `svc.ns.svc.cluster.local` or a Service ClusterIP. No such Service: every request fails as
  urllib reports it, `<urlopen error [Errno -2] Name or service not known>` (20 ms each).
- Requests go to the Service's ready endpoints (its selector, ready pods, the port's
  targetPort). A second with none: `<urlopen error [Errno 111] Connection refused>` (5 ms each:
  kube-proxy rejects). A port the Service does not have, or endpoints no NetworkPolicy lets the
  client reach: `<urlopen error timed out>` after --timeout (default 5 s).
- Latency per request from the cluster file's `workload.serving.latency_ms` {p50, p90, p99}:
  a quantile function through those points (linear between them), so a run reproduces them.
- Throughput: C workers back to back, C / mean latency requests per second, at most
  ready endpoints x `workload.serving.rps_per_replica`; above that requests queue and their
  latency grows to C / capacity (Little's law).
- A pod leaves the endpoints the moment it is deleted or stops being Ready (the simulator
  deletes at once, no graceful termination) and requests are not in flight across seconds, so
  a rollout that keeps ready endpoints (RollingUpdate, maxUnavailable 0, readiness) loses
  nothing, and Recreate loses every request of the seconds between the old pods going and the
  new ones getting Ready.
The script must be mounted (a volumeMount whose mountPath holds it, the ConfigMap of the
scripts): otherwise python3 fails as it does, exit 2.
"""

import bisect
import hashlib
import json
import math
import random
import time
from urllib.parse import urlsplit

from ..netpol import Network
from .nccl_tests import SEPARATORS, words

SCRIPT = "load.py"
DEFAULT_SERVING = {"latency_ms": {"p50": 40.0, "p90": 70.0, "p99": 120.0}, "rps_per_replica": 50.0}
DNS_ERROR = "<urlopen error [Errno -2] Name or service not known>"
REFUSED = "<urlopen error [Errno 111] Connection refused>"
TIMED_OUT = "<urlopen error timed out>"
FAIL_SECONDS = {DNS_ERROR: 0.02, REFUSED: 0.005}
SAMPLES_PER_SECOND = 1000        # latencies kept per second for the percentiles
CLUSTER_SUFFIX = ["svc", "cluster", "local"]


# -- the program's arguments ----------------------------------------------------------------

def invocation(container):
    """(interpreter, script path, arguments) when the container runs load.py, else None."""
    argv = words(container)
    for i, word in enumerate(argv):
        if word.rsplit("/", 1)[-1] == SCRIPT:
            end = i + 1
            while end < len(argv) and argv[end] not in SEPARATORS:
                end += 1
            interpreter = argv[i - 1] if i > 0 and argv[i - 1] not in SEPARATORS else None
            return interpreter, word, argv[i + 1:end]
    return None


def options(args):
    """--url, --seconds, --concurrency, --timeout (argparse style: `--k v` or `--k=v`)."""
    out = {"url": None, "seconds": 30.0, "concurrency": 4, "timeout": 5.0}
    i = 0
    while i < len(args):
        word = args[i]
        if word.startswith("--"):
            key, eq, value = word[2:].partition("=")
            if not eq and i + 1 < len(args):
                i += 1
                value = args[i]
            if key in out:
                out[key] = value
        i += 1
    try:
        out["seconds"] = float(out["seconds"])
        out["concurrency"] = max(1, int(out["concurrency"]))
        out["timeout"] = max(0.001, float(out["timeout"]))
    except (TypeError, ValueError):
        out["error"] = "invalid number in %s" % " ".join(args)
    return out


def mounted(container, path):
    """True when a volumeMount of the container holds `path`."""
    for mount in container.get("volumeMounts") or []:
        base = (mount.get("mountPath") or "").rstrip("/")
        if base and path.startswith(base + "/"):
            return True
    return not path.startswith("/")       # a relative path: the image's working directory


# -- latency model --------------------------------------------------------------------------

def serving_of(spec):
    """The cluster file's workload.serving with the defaults (read defensively: the cluster
    file may not declare the section)."""
    serving = (spec.get("workload") or {}).get("serving") or {}
    lat = dict(DEFAULT_SERVING["latency_ms"], **(serving.get("latency_ms") or {}))
    return {"latency_ms": {k: float(lat[k]) for k in ("p50", "p90", "p99")},
            "rps_per_replica": float(serving.get("rps_per_replica") or DEFAULT_SERVING["rps_per_replica"])}


class Latency:
    """A latency distribution (ms) whose 50th, 90th and 99th percentiles are the given ones: the
    quantile function runs linearly through (0, p50/2), (.5, p50), (.9, p90), (.99, p99),
    (1, p99 + (p99 - p90))."""

    def __init__(self, p50, p90, p99):
        p90, p99 = max(p90, p50), max(p99, p90, p50)
        self.knots = [(0.0, p50 / 2.0), (0.5, p50), (0.9, p90), (0.99, p99), (1.0, p99 + (p99 - p90))]
        self.us = [u for u, _q in self.knots]
        # the mean of a piecewise linear quantile function: the trapezoids under it
        self.mean_ms = sum((u1 - u0) * (q0 + q1) / 2.0
                           for (u0, q0), (u1, q1) in zip(self.knots, self.knots[1:]))

    def quantile(self, u):
        i = min(max(bisect.bisect_right(self.us, u) - 1, 0), len(self.knots) - 2)
        (u0, q0), (u1, q1) = self.knots[i], self.knots[i + 1]
        return q0 + (q1 - q0) * (u - u0) / (u1 - u0)

    def sample(self, rng, n, extra_ms=0.0):
        return [self.quantile(rng.random()) + extra_ms for _ in range(n)]


def percentile(sorted_values, p):
    """Nearest rank."""
    if not sorted_values:
        return None
    k = max(0, int(math.ceil(p / 100.0 * len(sorted_values))) - 1)
    return sorted_values[min(k, len(sorted_values) - 1)]


def second(latency, rng, carry, concurrency, endpoints, rps_per_replica, failure, fail_seconds):
    """One simulated second: (requests, errors, latencies kept, carry of fractional requests)."""
    if failure is not None:
        rate = offered = concurrency / max(fail_seconds, 0.001)
    else:
        offered = concurrency / (max(latency.mean_ms, 0.001) / 1000.0)
        rate = min(offered, endpoints * rps_per_replica)
    if rate <= 0:
        return 0, 0, [], carry
    total = carry + rate
    n = int(total)
    carry = total - n
    if failure is not None:
        return n, n, [], carry
    extra = 0.0
    if rate < offered:
        # queueing at the pods: Little's law, C requests in the system at `rate` per second
        extra = max(0.0, concurrency / rate * 1000.0 - latency.mean_ms)
    return n, 0, latency.sample(rng, min(n, SAMPLES_PER_SECOND), extra), carry


# -- where the requests go ------------------------------------------------------------------

def target(net, client, url):
    """(ready endpoint count, failure text or None) for the URL as seen from the client pod now."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return 0, DNS_ERROR
    if not host:
        return 0, DNS_ERROR
    svc = net.service_by_ip(host)
    if svc is None:
        labels = host.rstrip(".").split(".")
        ns = client["metadata"]["namespace"]
        if len(labels) == 1:
            svc = net.service_named(labels[0], ns)
        elif 2 <= len(labels) <= 5 and labels[2:] == CLUSTER_SUFFIX[:len(labels) - 2]:
            svc = net.service_named(labels[0], labels[1])
    if svc is None or (svc.get("spec") or {}).get("type") == "ExternalName":
        return 0, DNS_ERROR
    eps = net.endpoints(svc, port, "TCP")
    headless = svc["spec"].get("clusterIP") == "None"
    if eps is None:
        return 0, DNS_ERROR if headless else TIMED_OUT
    if not eps:
        return 0, DNS_ERROR if headless else REFUSED
    peer = net.peer_of_pod(client)
    reachable = [e for e in eps if net.allowed(peer, net.peer_of_pod(e[0]), e[1])]
    if not reachable:
        return 0, TIMED_OUT
    return len(reachable), None


def run_key(pod, opts):
    """What makes two runs the same run: the namespace, the owning Job (else the pod's name) and the
    arguments. The latencies are drawn from a generator seeded with it, so a scenario gives the same
    figures at every run (a pod's uid is new each time: its figures would scatter run to run)."""
    meta = pod["metadata"]
    owner = next((o.get("name") for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    return "%s/%s/%s/%s/%s" % (meta.get("namespace"), owner or meta.get("name"), opts["url"],
                               opts["seconds"], opts["concurrency"])


class LoadTwin:
    """The kubelet hook; state per pod uid while it runs."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.runs = {}

    @staticmethod
    def _container(pod):
        for c in pod["spec"].get("containers") or []:
            got = invocation(c)
            if got is not None:
                return c, got
        return None, None

    def pod_hook(self, pod, elapsed):
        container, got = self._container(pod)
        if container is None:
            return None
        interpreter, script, args = got
        name = container["name"]
        if not mounted(container, script):
            prog = (interpreter or "python3").rsplit("/", 1)[-1]
            return {"kind": "complete", "exit": 2, "logs": {
                name: "%s: can't open file '%s': [Errno 2] No such file or directory\n" % (prog, script)}}
        opts = options(args)
        if opts.get("error") or not opts["url"]:
            return {"kind": "complete", "exit": 2, "logs": {name: (
                "usage: load.py [-h] --url URL [--seconds SECONDS] [--concurrency CONCURRENCY]\n"
                "load.py: error: %s\n" % (opts.get("error") or "the following arguments are required: --url"))}}
        t = self.ctx.timings
        tick = t.get("load_tick", 0.05) or 0.05
        run = self._run(pod, opts, elapsed - t["pod_start"])
        now_sim = (elapsed - t["pod_start"]) / tick
        seconds = int(math.ceil(opts["seconds"]))
        if run["done"] < min(seconds, int(now_sim)):
            self._advance(run, pod, opts, min(seconds, int(now_sim)), tick)
        if run["done"] >= seconds:
            return {"kind": "complete", "exit": 0, "logs": {name: self._log(run, opts, tick, final=True)}}
        return {"kind": "run", "ready": True, "retry": tick, "logs": {name: self._log(run, opts, tick)}}

    def _run(self, pod, opts, since_start):
        uid = pod["metadata"]["uid"]
        run = self.runs.get(uid)
        if run is None:
            if len(self.runs) > 256:     # forget the runs whose pods are gone
                live = {p["metadata"]["uid"] for p in self.ctx.list("pods")}
                self.runs = {k: v for k, v in self.runs.items() if k in live}
            serving = serving_of(self.ctx.spec)
            seed = int(hashlib.sha256(run_key(pod, opts).encode()).hexdigest()[:8], 16)
            run = self.runs[uid] = {
                "latency": Latency(**serving["latency_ms"]), "rps": serving["rps_per_replica"],
                "rng": random.Random(seed), "carry": 0.0, "done": 0, "ticks": [], "latencies": [],
                "t0": time.time() - max(0.0, since_start)}
        return run

    def _advance(self, run, pod, opts, upto, tick):
        net = Network.from_ctx(self.ctx)
        client = self.ctx.get_cached("pods", pod["metadata"]["name"], pod["metadata"]["namespace"]) or pod
        endpoints, failure = target(net, client, opts["url"])
        fail_s = FAIL_SECONDS.get(failure, opts["timeout"])
        while run["done"] < upto:
            n, errors, lat, run["carry"] = second(run["latency"], run["rng"], run["carry"],
                                                  opts["concurrency"], endpoints, run["rps"], failure, fail_s)
            run["done"] += 1
            line = {"event": "tick", "requests": n, "errors": errors, "endpoints": endpoints,
                    "time": round(run["t0"] + run["done"] * tick, 3)}
            if errors:
                line["error"] = failure
            run["ticks"].append(line)
            run["latencies"].extend(lat)

    def _log(self, run, opts, tick, final=False):
        lines = [json.dumps(t) for t in run["ticks"]]
        if final:
            requests = sum(t["requests"] for t in run["ticks"])
            errors = sum(t["errors"] for t in run["ticks"])
            lat = sorted(run["latencies"])
            seconds = opts["seconds"]
            pct = lambda p: None if not lat else round(percentile(lat, p), 1)  # noqa: E731
            lines.append(json.dumps({
                "event": "summary", "requests": requests, "errors": errors,
                "error_rate": round(errors / requests, 4) if requests else 0.0,
                "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99),
                "rps": round(requests / seconds, 1) if seconds else 0.0,
                "seconds": int(seconds) if float(seconds).is_integer() else seconds,
                "time": round(run["t0"] + len(run["ticks"]) * tick, 3)}))
        return "\n".join(lines) + ("\n" if lines else "")
