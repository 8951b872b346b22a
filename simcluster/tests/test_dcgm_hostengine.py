"""The standalone DCGM host engine: what ClusterPolicy spec.dcgm.enabled deploys (operator twin) and
when `dcgmi test --host <address> --inject` reaches a host engine (DCGM twin).

Real behaviour followed: assets/state-dcgm/0400_dcgm.yml and 0500_service.yaml of NVIDIA/gpu-operator
(DaemonSet nvidia-dcgm, containerPort 5555, Service nvidia-dcgm with internalTrafficPolicy Local),
TransformDCGMExporter (DCGM_REMOTE_HOSTENGINE_INFO=nvidia-dcgm:5555), dcgmi/Command.cpp (the
connection error text). Without the DaemonSet the exporter embeds nv-hostengine and dcgmi finds
nothing to connect to.
"""

import pytest

from simcluster import dcgm
from simcluster.twins.testkit import TwinCluster

pytestmark = [pytest.mark.needs_shared]

NODE = "gpu-h100-1"
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
REFUSED = "Error: unable to establish a connection to the specified host: %s\n" \
          "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n"


def _cluster(**dcgm_spec):
    c = TwinCluster("default.yaml", store="real")
    exporter = dcgm.Exporter(c.store, c.spec, c.handle)
    c.handle.ctx.kubelet.hooks.append(exporter.dcgmi_hook)
    c.install_operator(**({"dcgm": dcgm_spec} if dcgm_spec else {}))
    c.namespace("acceptance")
    c.wait(lambda: c.policy_state() == "ready" and c.ready_reason() == "Reconciled", timeout=20,
           what="ClusterPolicy ready/Reconciled")
    return c, exporter


def _dcgmi(c, name, host, value=79, env=None, node=NODE):
    words = ["dcgmi", "test", "--host", host, "--inject", "--gpuid", "0", "-f", "230", "-v", str(value)]
    container = {"name": name, "image": DCGM_IMAGE, "command": words}
    if env:
        container["env"] = env
    c.store.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "acceptance"},
                            "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [container],
                                     "tolerations": [{"operator": "Exists"}]}})
    pod = c.wait(lambda: (lambda p: p if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None)(
        c.pod("acceptance", name)), timeout=10, what="dcgmi pod %s done" % name)
    exit_code = pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
    return pod["status"]["phase"], exit_code, c.logs("acceptance", name, name)


def _engines(c, node=None):
    """Pods of the nvidia-dcgm DaemonSet (the name prefix alone also matches nvidia-dcgm-exporter-*)."""
    return [p for p in c.operand_pods("nvidia-dcgm", node) if p["metadata"]["labels"].get("app") == "nvidia-dcgm"]


def _engine(c, node=NODE):
    return c.wait(lambda: next((p for p in _engines(c, node) if (p.get("status") or {}).get("podIP")), None),
                  what="nvidia-dcgm pod on %s" % node)


def test_chart_default_deploys_no_host_engine_and_dcgmi_is_refused():
    c, exporter = _cluster()
    with c:
        assert c.store.get("daemonsets.apps", "gpu-operator", "nvidia-dcgm") is None
        assert c.store.get("services", "gpu-operator", "nvidia-dcgm") is None
        exp_ds = c.store.get("daemonsets.apps", "gpu-operator", "nvidia-dcgm-exporter")
        env = exp_ds["spec"]["template"]["spec"]["containers"][0].get("env") or []
        assert "DCGM_REMOTE_HOSTENGINE_INFO" not in [e["name"] for e in env]   # embedded host engine
        node_ip = c.handle.ctx.kubelet._node_ip(NODE)
        phase, code, log = _dcgmi(c, "inject-node-ip", "%s:5555" % node_ip)
        assert (phase, code) == ("Failed", 235)
        assert log == REFUSED % ("%s:5555" % node_ip)
        assert not exporter.faults.get("gpu_xid")


def test_dcgm_enabled_deploys_the_daemonset_service_and_points_the_exporter_at_it():
    c, exporter = _cluster(enabled=True)
    with c:
        ds = c.store.get("daemonsets.apps", "gpu-operator", "nvidia-dcgm")
        pod_spec = ds["spec"]["template"]["spec"]
        ctr = pod_spec["containers"][0]
        assert ctr["name"] == "nvidia-dcgm-ctr" and ctr["image"] == DCGM_IMAGE
        assert [(p["name"], p["containerPort"], p.get("protocol", "TCP")) for p in ctr["ports"]] == [("dcgm", 5555, "TCP")]
        assert ctr["readinessProbe"]["tcpSocket"]["port"] == 5555
        assert pod_spec["nodeSelector"] == {"nvidia.com/gpu.deploy.dcgm": "true"}
        assert not pod_spec.get("hostNetwork") and "hostPort" not in ctr["ports"][0]
        svc = c.store.get("services", "gpu-operator", "nvidia-dcgm")
        assert svc["spec"]["internalTrafficPolicy"] == "Local" and svc["spec"]["selector"] == {"app": "nvidia-dcgm"}
        exp_ds = c.store.get("daemonsets.apps", "gpu-operator", "nvidia-dcgm-exporter")
        env = exp_ds["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "DCGM_REMOTE_HOSTENGINE_INFO", "value": "nvidia-dcgm:5555"} in env

        engine = _engine(c)
        phase, code, log = _dcgmi(c, "inject-pod-ip", "%s:5555" % engine["status"]["podIP"])
        assert (phase, code, log) == ("Succeeded", 0, "Successfully injected field info.\n")
        assert exporter.faults["gpu_xid"] == [{"node": NODE, "gpu": 0, "xid": 79}]
        # the Service answers with the host engine of the client's own node (internalTrafficPolicy Local)
        phase, code, _log = _dcgmi(c, "clear-via-service", "nvidia-dcgm.gpu-operator.svc:5555", value=0)
        assert (phase, code) == ("Succeeded", 0) and exporter.faults["gpu_xid"] == []
        # without hostNetwork nothing listens on the node's address: the old $HOST_IP form is refused
        node_ip = c.handle.ctx.kubelet._node_ip(NODE)
        phase, code, log = _dcgmi(c, "inject-host-ip", "$HOST_IP:5555",
                                  env=[{"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}])
        assert (phase, code, log) == ("Failed", 235, REFUSED % ("%s:5555" % node_ip))
        # removing the host engine again removes what reached it
        c.patch_policy({"dcgm": {"enabled": False}})
        c.wait(lambda: c.store.get("services", "gpu-operator", "nvidia-dcgm") is None, what="Service removed")
        c.wait(lambda: not _engines(c), what="nvidia-dcgm pods gone")
        phase, code, _log = _dcgmi(c, "inject-after-disable", "%s:5555" % engine["status"]["podIP"])
        assert (phase, code) == ("Failed", 235)


def test_host_network_puts_the_host_engine_on_the_node_address():
    c, exporter = _cluster(enabled=True, hostNetwork=True)
    with c:
        engine = _engine(c)
        node_ip = c.handle.ctx.kubelet._node_ip(NODE)
        assert engine["spec"]["hostNetwork"] is True and engine["status"]["podIP"] == node_ip
        phase, code, _log = _dcgmi(c, "inject-host-ip", "$HOST_IP:5555",
                                   env=[{"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}])
        assert (phase, code) == ("Succeeded", 0)
        assert exporter.faults["gpu_xid"] == [{"node": NODE, "gpu": 0, "xid": 79}]
