"""A real Prometheus server (Debian package `prometheus`) for tests: loopback only, temp data dir,
stopped by the fixture that started it; the scrape config of the simulated cluster (DCGM exporters,
kube-state-metrics, KAI's queue controller) that the tests and the demo share; the series selectors
of a PromQL expression."""
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import yaml

BINARY = shutil.which("prometheus")
DCGM_APP = "nvidia-dcgm-exporter"           # label app= of the operator's exporter pods
KSM_LABEL = "app.kubernetes.io/name"          # what the kube-state-metrics chart labels its pods with
KSM_APP = "kube-state-metrics"
KSM_SELECTOR = "%s=%s" % (KSM_LABEL, KSM_APP)
KAI_QUEUE_CONTROLLER = "queue-controller"   # label app= of the pod KAI's operator deploys; its Service's name
KSM_IMAGE = "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.15.0"
# the pod labels the usage report's workload view reads (docs/monitoring.md: a site sets this as
# kube-prometheus-stack's kube-state-metrics.metricLabelsAllowlist; the chart's default is none)
KSM_LABELS_ALLOWLIST = "pods=[gpu.skaffon.io/owner,gpu.skaffon.io/model,gpu.skaffon.io/dataset]"


def kube_state_metrics_deployment(namespace="monitoring", image=KSM_IMAGE, labels_allowlist=KSM_LABELS_ALLOWLIST):
    """The kube-state-metrics Deployment a site gets from kube-prometheus-stack (its subchart's
    names, labels, image, port; jobs among its default collectors), which the platform does not
    install, with the label allowlist docs/monitoring.md asks for: a string, or the list of the
    chart's value kube-state-metrics.metricLabelsAllowlist, which the chart renders as one
    --metric-labels-allowlist joined with ",". The simulator's twin (simcluster/ksm.py) serves the
    series only while this pod runs and reads its flags."""
    args = ["--port=8080", "--resources=daemonsets,jobs,nodes,pods"]
    if labels_allowlist:
        if not isinstance(labels_allowlist, str):
            labels_allowlist = ",".join(labels_allowlist)
        args.append("--metric-labels-allowlist=" + labels_allowlist)
    labels = {KSM_LABEL: KSM_APP, "app.kubernetes.io/instance": "kube-prometheus-stack"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "kube-prometheus-stack-kube-state-metrics", "namespace": namespace,
                         "labels": dict(labels)},
            "spec": {"replicas": 1, "selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)}, "spec": {
                         "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                             "seccompProfile": {"type": "RuntimeDefault"}},
                         "containers": [{
                             "name": "kube-state-metrics", "image": image,
                             "args": args,
                             "ports": [{"name": "http", "containerPort": 8080}],
                             "securityContext": {"allowPrivilegeEscalation": False,
                                                 "readOnlyRootFilesystem": True,
                                                 "capabilities": {"drop": ["ALL"]}}}]}}}}


def scrape_config(sim_url, pods, interval="1s"):
    """Prometheus config that scrapes the simulated cluster the way kube-prometheus-stack's
    ServiceMonitors scrape a real one. `pods`: the cluster's pods (`kubectl get pods -A`).

    There is no Service discovery here, so each target gets the labels a ServiceMonitor gives
    it: job (the Service's app label), namespace/pod/container of the exporter pod and, for
    DCGM, node (the role's relabeling). honor_labels as both ServiceMonitors set it: the
    exporter's own namespace/pod labels (the pod holding a GPU; the object kube-state-metrics
    describes) win over the target's. One scrape config per DCGM node: each node has its own path.
    KAI's queue controller, when its pod exists, as its ServiceMonitor scrapes it (below)."""
    host = sim_url.split("//", 1)[1].rstrip("/")
    configs = []
    dcgm = sorted((p["spec"]["nodeName"], p) for p in pods
                  if (p["metadata"].get("labels") or {}).get("app") == DCGM_APP and p["spec"].get("nodeName"))
    for node, pod in dcgm:
        configs.append({
            "job_name": "dcgm-%s" % node, "honor_labels": True, "scrape_interval": interval,
            "metrics_path": "/_sim/dcgm/%s/metrics" % node,
            "static_configs": [{"targets": [host], "labels": {
                "node": node, "job": DCGM_APP, "namespace": pod["metadata"]["namespace"],
                "pod": pod["metadata"]["name"], "container": DCGM_APP}}]})
    ksm = [p for p in pods if (p["metadata"].get("labels") or {}).get(KSM_LABEL) == KSM_APP]
    if ksm:
        pod = sorted(ksm, key=lambda p: p["metadata"]["name"])[0]
        configs.append({
            "job_name": KSM_APP, "honor_labels": True, "scrape_interval": interval,
            "metrics_path": "/_sim/kube-state-metrics/metrics",
            "static_configs": [{"targets": [host], "labels": {
                "job": KSM_APP, "namespace": pod["metadata"]["namespace"],
                "pod": pod["metadata"]["name"], "container": KSM_APP}}]})
    # KAI's queue controller: the ServiceMonitor KAI's operator writes for it (Config
    # spec.prometheus.enabled) or a site's own: Service queue-controller, port metrics, jobLabel
    # queue-controller (the Service has no such label: job is the Service name), no honorLabels
    kai = sorted((p for p in pods if (p["metadata"].get("labels") or {}).get("app") == KAI_QUEUE_CONTROLLER),
                 key=lambda p: p["metadata"]["name"])
    if kai:
        pod = kai[0]
        configs.append({
            "job_name": KAI_QUEUE_CONTROLLER, "scrape_interval": interval,
            "metrics_path": "/_sim/kai-queue-controller/metrics",
            "static_configs": [{"targets": [host], "labels": {
                "job": KAI_QUEUE_CONTROLLER, "namespace": pod["metadata"]["namespace"],
                "pod": pod["metadata"]["name"], "container": KAI_QUEUE_CONTROLLER,
                "service": KAI_QUEUE_CONTROLLER, "endpoint": "metrics"}}]})
    return {"global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": configs}


# --- the series selectors of a PromQL expression ------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<range>\[[^\]]*\])
  | (?P<duration>[0-9]+(?:ms|s|m|h|d|w|y)(?![a-zA-Z0-9_:]))
  | (?P<number>(?:0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)(?![a-zA-Z_:]))
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<brace>\{)
  | (?P<op>==|!=|>=|<=|=~|!~|[-+*/%^(),<>=])
""", re.X)
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}


def _tokens(expr):
    pos, out = 0, []
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            raise ValueError("cannot read PromQL at %r" % expr[pos:pos + 20])
        kind = m.lastgroup
        if kind == "brace":           # a matcher block up to its closing brace (strings may hold })
            end, body = m.end(), ["{"]
            while end < len(expr) and expr[end] != "}":
                s = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[^}"\']+').match(expr, end)
                if s is None:
                    raise ValueError("unterminated matcher in %r" % expr)
                body.append(s.group(0))
                end = s.end()
            out.append(("matchers", "".join(body) + "}"))
            pos = end + 1
            continue
        if kind != "space":
            out.append((kind, m.group(0)))
        pos = m.end()
    return out


def series_selectors(expr):
    """The instant/range vector selectors of a PromQL expression ('up{job="x"}', 'DCGM_FI_DEV_GPU_TEMP'),
    in order, without duplicates: what must match series for the expression to mean anything."""
    toks = _tokens(expr)
    out = []
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else (None, None)
        if kind == "ident" and text in LABEL_LISTS:
            i += 1
            if nxt == ("op", "("):
                while i < len(toks) and toks[i] != ("op", ")"):
                    i += 1
            i += 1
            continue
        if kind == "ident" and (text in AGGREGATIONS or text in KEYWORDS or nxt == ("op", "(")):
            i += 1
            continue
        if kind == "ident":
            selector = text + (nxt[1] if nxt[0] == "matchers" else "")
            i += 2 if nxt[0] == "matchers" else 1
        elif kind == "matchers":
            selector = text
            i += 1
        else:
            i += 1
            continue
        if selector not in out:
            out.append(selector)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, workdir, config, rule_groups=None, extra_args=(), data_dir=None):
        self.workdir = str(workdir)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        os.makedirs(self.workdir, exist_ok=True)
        if rule_groups is not None:
            rules = os.path.join(self.workdir, "rules.yml")
            with open(rules, "w", encoding="utf-8") as fh:
                yaml.safe_dump({"groups": rule_groups}, fh)
            config = dict(config, rule_files=[rules])
        self.config_path = os.path.join(self.workdir, "prometheus.yml")
        with open(self.config_path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(config, fh)
        self.log = open(os.path.join(self.workdir, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            [BINARY, "--config.file", self.config_path,
             "--storage.tsdb.path", str(data_dir or os.path.join(self.workdir, "data")),
             "--web.listen-address", "127.0.0.1:%d" % self.port] + list(extra_args),
            stdout=self.log, stderr=subprocess.STDOUT)
        self.wait(self._ready, 60, "Prometheus ready")

    def _ready(self):
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            if self.proc.poll() is not None:
                raise RuntimeError("prometheus exited: %s" % self.logs())
            return False

    def logs(self):
        with open(os.path.join(self.workdir, "prometheus.log"), encoding="utf-8", errors="replace") as fh:
            return fh.read()[-5000:]

    def api(self, path, **params):
        url = self.url + "/api/v1/" + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr, **params):
        return self.api("query", query=expr, **params)["result"]

    @staticmethod
    def wait(cond, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = cond()
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
