# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring-alert hand-over check: GPU metrics are in Prometheus, and a simulated GPU failure
fires the alarm.

The failure is simulated the way NVIDIA's tooling does it on real hardware: `dcgmi test --inject`
writes a field value (DCGM_FI_DEV_XID_ERRORS = 79, "GPU has fallen off the bus") into the node's DCGM
host engine, the exporter publishes it, Prometheus evaluates the rule. The pod runs the DCGM image
the ClusterPolicy deploys (so it comes from the site's mirror), on the chosen GPU node; afterwards the
value is set back to 0 the same way.

Only a standalone host engine can take the injection: with the chart default (dcgm.enabled false)
nv-hostengine runs embedded in the exporter process and nothing listens on port 5555. With
dcgm.enabled the operator runs it as the DaemonSet nvidia-dcgm (containerPort 5555, no hostPort,
on the node's network only with dcgm.hostNetwork) and points the exporter at it; the check
connects to the Ready pod of that DaemonSet on the chosen node, by its pod IP.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.six.moves.urllib.parse import urlencode
from ansible.module_utils.urls import open_url

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.runner import FAIL, PASS, SKIP, Result

XID_FIELD = 230            # DCGM_FI_DEV_XID_ERRORS (dcgm_fields.h)
XID_FALLEN_OFF_BUS = 79
DEFAULT_DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
HOSTENGINE_VARIABLE = "gpu_operator_dcgm_hostengine"   # the role variable that sets dcgm.enabled


def _ready(pod):
    return any(c.get("type") == upstream.COND_POD_READY and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


class AlertProbe(object):
    def __init__(self, ctx, test_pod, wait_for, pod_log):
        self.ctx, self.test_pod, self.wait_for, self.pod_log = ctx, test_pod, wait_for, pod_log
        self.url = ctx.params["prometheus_url"].rstrip("/")

    def query(self, promql):
        def call():
            resp = open_url("%s/api/v1/query?%s" % (self.url, urlencode({"query": promql})), timeout=10,
                            validate_certs=self.ctx.params.get("prometheus_validate_certs", True))
            return json.loads(resp.read())
        from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
        try:
            data = call()
        except Exception as exc:  # URLError, HTTPError, timeouts: one message naming the URL
            raise ApiError("GET", "Prometheus query", promql, status=getattr(exc, "code", None),
                           message=str(exc), url=self.url)
        return (data.get("data") or {}).get("result") or []

    def dra(self):
        return self.ctx.params.get("allocation_api") == "dra"

    def policy(self):
        """The operator's CR: the ClusterPolicy, or the GPUCluster in DRA mode (both carry spec.dcgm)."""
        if self.dra():
            return self.ctx.kube.get(upstream.GPUCLUSTER_API_VERSION, upstream.GPUCLUSTER_KIND,
                                     upstream.GPUCLUSTER_NAME) or {}
        return self.ctx.kube.get(upstream.CLUSTER_POLICY_API_VERSION, upstream.CLUSTER_POLICY_KIND,
                                 self.ctx.params["cluster_policy"]) or {}

    @staticmethod
    def dcgm_image(policy):
        dcgm = (policy.get("spec") or {}).get("dcgm") or {}
        if dcgm.get("repository") and dcgm.get("image") and dcgm.get("version"):
            return "%s/%s:%s" % (dcgm["repository"].rstrip("/"), dcgm["image"], dcgm["version"])
        return DEFAULT_DCGM_IMAGE

    def hostengine(self, policy, node):
        """(status, pod, message): (PASS, the Ready nv-hostengine pod on node, "") when one runs;
        SKIP when the ClusterPolicy deploys none; FAIL when it should run on node but is not Ready."""
        name = "%s %s" % ((upstream.GPUCLUSTER_KIND, upstream.GPUCLUSTER_NAME) if self.dra() else
                          (upstream.CLUSTER_POLICY_KIND, self.ctx.params["cluster_policy"]))
        app = upstream.DCGM_HOSTENGINE_DRA_APP if self.dra() else upstream.DCGM_HOSTENGINE_APP
        enabled = ((policy.get("spec") or {}).get("dcgm") or {}).get("enabled")
        if enabled is not True:
            return SKIP, None, (
                "the failure injection needs the standalone DCGM host engine, and %s has "
                "spec.dcgm.enabled=%s: nv-hostengine runs embedded in the exporter, nothing listens on port %d "
                "for dcgmi; set %s: true (chart value dcgm.enabled) to deploy the %s DaemonSet"
                % (name, "false" if enabled is None else json.dumps(enabled), upstream.DCGM_HOSTENGINE_PORT,
                   HOSTENGINE_VARIABLE, app))
        namespace = (policy.get("status") or {}).get("namespace") or self.ctx.params["operator_namespace"]
        pods = self.ctx.kube.list("v1", "Pod", namespace=namespace,
                                  label_selector="%s=%s" % (upstream.LABEL_APP, app),
                                  field_selector="spec.nodeName=%s" % node)[0]
        pods = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(upstream.LABEL_APP)
                == app and (p.get("spec") or {}).get("nodeName") == node]
        ready = [p for p in pods if _ready(p) and (p.get("status") or {}).get("podIP")]
        if ready:
            return PASS, ready[0], ""
        seen = ", ".join("%s %s" % (p["metadata"]["name"], (p.get("status") or {}).get("phase") or "Pending")
                         for p in pods) or "none"
        return FAIL, None, (
            "%s enables the standalone DCGM host engine (spec.dcgm.enabled=true) but no Ready %s "
            "pod runs on %s in namespace %s (pods seen: %s): the failure cannot be injected"
            % (name, app, node, namespace, seen))

    def inject(self, node, value, name, image, address):
        ns = self.ctx.params["test_namespace"]
        pod = self.test_pod(self.ctx, name, {}, node_selector={"kubernetes.io/hostname": node}, image=image)
        container = pod["spec"]["containers"][0]
        del container["resources"]
        container["command"] = ["dcgmi", "test", "--host", address, "--inject", "--gpuid", "0",
                                "-f", str(XID_FIELD), "-v", str(value)]
        self.ctx.kube.create(pod)
        self.ctx.track(pod)
        final = self.wait_for(self.ctx, "v1", "Pod", name, ns,
                              lambda p: (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
                              self.ctx.params["pod_timeout"])
        phase = ((final or {}).get("status") or {}).get("phase")
        log = self.pod_log(self.ctx, ns, name).strip() if phase else ""
        return phase, log

    def firing(self, alert, node):
        rows = self.query('ALERTS{alertname="%s",alertstate="firing"}' % alert)
        return [r["metric"] for r in rows if not node or node in r["metric"].values()]

    def run(self):
        alert = self.ctx.params.get("failure_alert") or "GpuXidFatal"
        nodes = [n["name"] for n in self.ctx.params["gpu_nodes"]]
        if not nodes:
            return Result("monitoring-alert", FAIL, "the inventory names no GPU node")
        series = self.query("DCGM_FI_DEV_GPU_UTIL")
        hosts = sorted(set(v for s in series for k, v in s["metric"].items() if k in ("Hostname", "hostname", "node")
                           and v in nodes))
        evidence = ["DCGM_FI_DEV_GPU_UTIL: %d series, from GPU nodes %s" % (len(series), ", ".join(hosts) or "none")]
        missing = [n for n in nodes if n not in hosts]
        if missing:
            return Result("monitoring-alert", FAIL, "no GPU metrics from %s" % ", ".join(missing), evidence)
        node = nodes[0]
        policy = self.policy()
        status, engine, message = self.hostengine(policy, node)
        if engine is None:
            evidence.append(message)
            return Result("monitoring-alert", status, message, evidence)
        address = "%s:%d" % (engine["status"]["podIP"], upstream.DCGM_HOSTENGINE_PORT)
        evidence.append("DCGM host engine on %s: pod %s, %s" % (node, engine["metadata"]["name"], address))
        if self.firing(alert, node):
            return Result("monitoring-alert", FAIL, "%s is already firing for %s before the test" % (alert, node),
                          evidence)
        image = self.dcgm_image(policy)
        phase, log = self.inject(node, XID_FALLEN_OFF_BUS, "acceptance-dcgm-inject", image, address)
        evidence.append("dcgmi test --host %s --inject Xid %d on %s GPU 0: %s %s" % (
            address, XID_FALLEN_OFF_BUS, node, phase, log))
        try:
            if phase != "Succeeded":
                return Result("monitoring-alert", FAIL, "the failure could not be injected", evidence)
            deadline = self.ctx.clock() + self.ctx.params.get("alert_timeout", 180)
            fired = self.firing(alert, node)
            while not fired and self.ctx.clock() < deadline:
                self.ctx.sleep(2.0)
                fired = self.firing(alert, node)
            evidence.append("ALERTS{alertname=%s} firing: %s" % (alert, json.dumps(fired, sort_keys=True)[:300]))
        finally:
            phase_back, log_back = self.inject(node, 0, "acceptance-dcgm-clear", image, address)
            evidence.append("cleared (Xid 0): %s %s" % (phase_back, log_back))
        if not fired:
            return Result("monitoring-alert", FAIL, "%s did not fire for %s" % (alert, node), evidence)
        return Result("monitoring-alert", PASS, "metrics from all %d GPU nodes; the injected Xid %d fired %s" % (
            len(nodes), XID_FALLEN_OFF_BUS, alert), evidence)
