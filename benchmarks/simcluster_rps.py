#!/usr/bin/env python3
"""Requests per second of the simulated API server, one client, keep-alive.

    .venv/bin/python benchmarks/simcluster_rps.py [--url http://127.0.0.1:PORT] [-n 2000]

Without --url it starts `python -m simcluster` with tests/clusters/default.yaml
(or a minimal cluster) and stops it afterwards. Prints requests/second for
simple GETs, creates and the `kubernetes` python client, with the ratio to
the 300 rps target. Nothing is asserted.
"""

import argparse
import http.client
import json
import os
import sys
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

TARGET = 300.0


def bench(label, n, fn):
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    elapsed = time.perf_counter() - start
    rps = n / elapsed
    print("%-34s %6d requests %7.2fs %8.1f req/s  %5.2fx target (%d rps)"
          % (label, n, elapsed, rps, rps / TARGET, TARGET))
    return rps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="running simcluster (default: start one)")
    parser.add_argument("-n", type=int, default=2000, help="requests per scenario")
    parser.add_argument("--cluster", default=None, help="cluster file when starting one")
    args = parser.parse_args()
    sim = None
    url = args.url
    if not url:
        from simcluster import testing
        sim = testing.start(args.cluster)
        url = sim.url
    try:
        run(url, args.n)
    finally:
        if sim is not None:
            sim.stop()


def run(url, n):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

    def call(method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, data, {"Content-Type": "application/json",
                                          "Accept": "application/json"})
        resp = conn.getresponse()
        payload = resp.read()
        if resp.status >= 300 and resp.status != 409:
            raise SystemExit("%s %s -> %d %s" % (method, path, resp.status, payload[:200]))
        return payload

    ns = "bench-%d" % os.getpid()
    call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": ns}})
    base = "/api/v1/namespaces/%s/configmaps" % ns
    call("POST", base, {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "target"}, "data": {"k": "v"}})
    print("simcluster at %s, one client, keep-alive" % url)
    results = {}
    results["get"] = bench("GET configmap", n, lambda i: call("GET", base + "/target"))
    results["create"] = bench("POST configmap (create)", n, lambda i: call(
        "POST", base, {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "cm-%d" % i}, "data": {"i": str(i)}}))
    results["get_node_list"] = bench("GET /api/v1/nodes (list)", max(n // 4, 1),
                                     lambda i: call("GET", "/api/v1/nodes"))
    try:
        from kubernetes import client
        cfg = client.Configuration()
        cfg.host = url
        v1 = client.CoreV1Api(client.ApiClient(cfg))
        results["python_client_get"] = bench(
            "kubernetes client read_namespaced_cm", max(n // 4, 1),
            lambda i: v1.read_namespaced_config_map("target", ns))
    except ImportError:
        pass
    call("DELETE", "/api/v1/namespaces/%s" % ns)
    slowest = min(results["get"], results["create"])
    print("simple requests: %.1f req/s (%.2fx the %d rps target)"
          % (slowest, slowest / TARGET, TARGET))


if __name__ == "__main__":
    main()
