#!/usr/bin/env python3
"""The simulated cluster at platform scale: 10, 100 and 1000 GPU nodes.

    .venv/bin/python benchmarks/simcluster_scale.py [--nodes 10,100,1000] [--rps-seconds 5]

For each size (N nodes with 8 H100 each plus one CPU node, default timings) it starts
`python -m simcluster` and measures, through the HTTP API like a client would:
  ready     time from creating the ClusterPolicy (with the operator Deployment) to
            status.state=ready
  mig       time to reconfigure min(N, 100) nodes to all-1g.10gb in batches of 10
            (label a batch, wait until all of it reports mig.config.state=success and
            56 allocatable nvidia.com/gpu (strategy single), next batch)
  ns        time to create 500 namespaces with 10 ConfigMaps each
  kubectl   `kubectl get pods -A` and `kubectl get configmaps -A` line counts against
            the API's item counts (chunked Table lists)
  rps       requests per second of 4 concurrent client processes (keep-alive; GET a
            node, LIST a namespace's ConfigMaps, create a ConfigMap, in turn)
  rss       the simulator's resident memory at the end
and prints one table with the targets (1000 nodes ready <= 60 s, growth 100 -> 1000 at
most linear, RSS < 2 GiB) and the load average, since the machine is shared. Nothing is
asserted: it is a benchmark, not a test.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
CRDS = [os.path.join(SHARED, "upstream", "gpu-operator", "crds", f)
        for f in ("nvidia.com_clusterpolicies.yaml", "nvidia.com_nvidiadrivers.yaml")]
KUBECTL = os.path.join(REPO, ".venv", "bin", "kubectl")
NS_COUNT, NS_OBJECTS = 500, 10
MIG_NODES, MIG_BATCH = 100, 10
MIG_RESOURCE, MIG_COUNT = "nvidia.com/gpu", "56"     # all-1g.10gb, strategy single: 7 x 8 GPUs
READY_TARGET = 60.0
RSS_TARGET = 2 * 1024 ** 3


class Client:
    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)

    def call(self, method, path, body=None, ctype="application/json", ok=(200, 201)):
        data = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, data, {"Content-Type": ctype,
                                               "Accept": "application/json"})
        resp = self.conn.getresponse()
        payload = resp.read()
        if resp.status not in ok:
            raise SystemExit("%s %s -> %d %s" % (method, path, resp.status, payload[:300]))
        return json.loads(payload) if payload else None


def cluster_file(n, workdir):
    import yaml
    nodes = [{"name": "gpu-%04d" % i, "host_driver": None,
              "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 8, "memory_mib": 81559,
                       "mig_capable": True}} for i in range(n)]
    nodes.append({"name": "cpu-0"})
    path = os.path.join(workdir, "cluster-%d.yaml" % n)
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump({"crds": CRDS, "nodes": nodes}, fh)
    return path


def rss(pid):
    with open("/proc/%d/status" % pid, encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def wait(pred, timeout, poll=0.2):
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if pred():
            return time.monotonic() - start
        time.sleep(poll)
    return None


def install_operator(c):
    """What the real chart renders (the operator Deployment runs the gpu-operator binary, NFD), then
    the ClusterPolicy: the operator twin reconciles only as that running pod."""
    from simcluster.twins.testkit import OPERATOR_IMAGE, chart_workloads, cluster_policy
    c.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "gpu-operator", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    for obj in chart_workloads("gpu-operator", OPERATOR_IMAGE):
        plural = "deployments" if obj["kind"] == "Deployment" else "daemonsets"
        c.call("POST", "/apis/apps/v1/namespaces/gpu-operator/" + plural, obj)
    c.call("POST", "/apis/nvidia.com/v1/clusterpolicies", cluster_policy())


def policy_state(c):
    cp = c.call("GET", "/apis/nvidia.com/v1/clusterpolicies/cluster-policy")
    return (cp.get("status") or {}).get("state")


def mig_reconfigure(c, n):
    nodes = ["gpu-%04d" % i for i in range(min(n, MIG_NODES))]
    start = time.monotonic()
    for i in range(0, len(nodes), MIG_BATCH):
        batch = nodes[i:i + MIG_BATCH]
        for node in batch:
            c.call("PATCH", "/api/v1/nodes/" + node,
                   {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}}},
                   "application/merge-patch+json")

        def done():
            # what a user waits for: state success AND the MIG devices allocatable (the
            # state label alone still says success from the previous config at first)
            sel = urllib.parse.quote("nvidia.com/mig.config.state=success,"
                                     "nvidia.com/mig.config=all-1g.10gb")
            items = c.call("GET", "/api/v1/nodes?labelSelector=" + sel)["items"]
            ok = {o["metadata"]["name"] for o in items
                  if (o.get("status") or {}).get("allocatable", {}).get(MIG_RESOURCE) == MIG_COUNT}
            return set(batch) <= ok
        if wait(done, 300, 0.1) is None:
            return None
    return time.monotonic() - start


def namespaces(c):
    start = time.monotonic()
    for i in range(NS_COUNT):
        ns = "team-%03d" % i
        c.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": ns}})
        for j in range(NS_OBJECTS):
            c.call("POST", "/api/v1/namespaces/%s/configmaps" % ns, {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%d" % j},
                "data": {"k": "v" * 64}})
    return time.monotonic() - start


def kubectl_count(sim, *args):
    res = subprocess.run([KUBECTL, "get", *args, "-A", "--no-headers"], env=sim.env,
                         capture_output=True, text=True, timeout=600)
    return len(res.stdout.splitlines()) if res.returncode == 0 else -1


def _rps_worker(url, seconds, idx, out):
    c = Client(url)
    n, i = 0, 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        k = n % 3
        if k == 0:
            c.call("GET", "/api/v1/nodes/gpu-%04d" % (n % 10))
        elif k == 1:
            c.call("GET", "/api/v1/namespaces/team-%03d/configmaps" % (n % NS_COUNT))
        else:
            i += 1
            c.call("POST", "/api/v1/namespaces/team-%03d/configmaps" % (n % NS_COUNT), {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "rps-%d-%d" % (idx, i)}})
        n += 1
    out.put(n)


def rps(url, seconds, clients=4):
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_rps_worker, args=(url, seconds, i, out))
             for i in range(clients)]
    start = time.monotonic()
    for p in procs:
        p.start()
    total = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    return total / (time.monotonic() - start)


def run(n, workdir, rps_seconds):
    from simcluster import testing
    sim = testing.start(cluster_file(n, workdir), os.path.join(workdir, "run-%d" % n),
                        timeout=300)
    row = {"nodes": n, "load_before": os.getloadavg()[0]}
    try:
        c = Client(sim.url)
        t0 = time.monotonic()
        install_operator(c)
        ready = wait(lambda: policy_state(c) == "ready", 600)
        row["ready"] = ready if ready is not None else float("nan")
        row["pods"] = len(c.call("GET", "/api/v1/pods")["items"])
        row["mig"] = mig_reconfigure(c, n) or float("nan")
        row["ns"] = namespaces(c)
        api_cms = len(c.call("GET", "/api/v1/configmaps")["items"])
        row["kubectl_pods"] = "%d/%d" % (kubectl_count(sim, "pods"), row["pods"])
        row["kubectl_cms"] = "%d/%d" % (kubectl_count(sim, "configmaps"), api_cms)
        row["rps"] = rps(sim.url, rps_seconds)
        row["rss"] = rss(sim.proc.pid)
        row["load"] = os.getloadavg()[0]
        row["total"] = time.monotonic() - t0
    finally:
        sim.stop()
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10,100,1000")
    parser.add_argument("--rps-seconds", type=float, default=5.0)
    args = parser.parse_args()
    missing = [p for p in CRDS if not os.path.exists(p)]
    if missing:
        raise SystemExit("needs the upstream CRDs (../shared): %s" % ", ".join(missing))
    rows = []
    with tempfile.TemporaryDirectory(prefix="simscale-") as workdir:
        for n in [int(x) for x in args.nodes.split(",")]:
            row = run(n, workdir, args.rps_seconds)
            rows.append(row)
            print("# %d nodes done in %.1fs" % (n, row["total"]), file=sys.stderr, flush=True)
    print("| nodes | pods | ClusterPolicy ready | MIG 100 nodes (batches of 10) | 500 ns x 10 "
          "| kubectl pods -A | kubectl cm -A | req/s (4 clients) | RSS | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %d | %d | %.1f s | %.1f s | %.1f s | %s | %s | %.0f | %.0f MiB | %.1f-%.1f |"
              % (r["nodes"], r["pods"], r["ready"], r["mig"], r["ns"], r["kubectl_pods"],
                 r["kubectl_cms"], r["rps"], r["rss"] / 2 ** 20, r["load_before"], r["load"]))
    by = {r["nodes"]: r for r in rows}
    if 1000 in by:
        r = by[1000]
        print("target: 1000 nodes ready <= %.0f s: %s (%.1f s)" % (
            READY_TARGET, "met" if r["ready"] <= READY_TARGET else "NOT met", r["ready"]))
        print("target: RSS < 2 GiB: %s (%.0f MiB)" % (
            "met" if r["rss"] < RSS_TARGET else "NOT met", r["rss"] / 2 ** 20))
    if 100 in by and 1000 in by:
        growth = by[1000]["ready"] / max(by[100]["ready"], 1e-9)
        print("target: growth 100 -> 1000 nodes at most linear (<= 10x): %s (%.1fx)"
              % ("met" if growth <= 10 else "NOT met", growth))


if __name__ == "__main__":
    main()
