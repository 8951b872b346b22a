"""The DCGM exporter twin (simcluster/dcgm.py) on a small in-memory store.

What the exporter serves depends on what runs: the exporter pod (else 503), the metrics CSV the
ClusterPolicy names, the pods holding GPUs, MIG instances, time-sliced replicas, and faults
(cluster file or POST at run time).
"""
import copy
import json
import re

import pytest

from kit.dcgm import running, samples
from simcluster import clusterfile, dcgm

NODES = [{"name": "gpu-1", "host_driver": "550.54.15",
          "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 2, "memory_mib": 81559, "mig_capable": True}},
         {"name": "cpu-1", "gpus": None}]
CSV = ("# ours\nDCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
       "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
       "DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.\n"
       "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.\n"
       "DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n"
       "DCGM_FI_DRIVER_VERSION, label, Driver Version\n")


class Store:
    def __init__(self):
        self.objs = {}

    def add(self, resource, obj):
        self.objs.setdefault(resource, []).append(obj)

    def list(self, resource, namespace):
        return [copy.deepcopy(o) for o in self.objs.get(resource, [])]

    def get(self, resource, namespace, name):
        for o in self.objs.get(resource, []):
            if o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace:
                return copy.deepcopy(o)
        return None


@pytest.fixture
def store():
    s = Store()
    s.add("pods", running("nvidia-dcgm-exporter-abcde", "gpu-operator", "gpu-1", {"app": "nvidia-dcgm-exporter"},
                          image="nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless"))
    s.add("clusterpolicies.nvidia.com", {"metadata": {"name": "cluster-policy"},
                                         "spec": {"dcgmExporter": {"config": {"name": "ours"}}}})
    s.add("configmaps", {"metadata": {"name": "ours", "namespace": "gpu-operator"},
                         "data": {"dcgm-metrics.csv": CSV}})
    return s


def exporter(store, faults=None, twins=None):
    return dcgm.Exporter(store, {"nodes": NODES, "faults": faults or {}}, twins)


def test_503_without_a_running_exporter_pod_and_404_for_a_cpu_node():
    exp = exporter(Store())
    assert exp.handle("GET", ["gpu-1", "metrics"])[0] == 503
    assert exp.handle("GET", ["cpu-1", "metrics"])[0] == 404


def test_fields_come_from_the_configmap_the_policy_names(store):
    status, body, ctype = exporter(store).handle("GET", ["gpu-1", "metrics"])
    text = body.decode()
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    names = set(re.findall(r"^(DCGM_\w+)\{", text, re.M))
    assert names == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS",
                     "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_FB_USED"}
    assert "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter" in text
    assert "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C)." in text
    labels, value = samples(text, "DCGM_FI_DEV_GPU_UTIL")[0]
    # exporter 4.8.3 writes `hostname` (dcgm-exporter#655); driver version as a label field
    assert labels["hostname"] == "gpu-1" and "Hostname" not in labels
    assert labels["DCGM_FI_DRIVER_VERSION"] == "550.54.15" and labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert labels["pod"] == "" and value == 0


def test_older_exporter_writes_Hostname(store):
    store.objs["pods"][0]["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04"
    labels, _ = samples(exporter(store).metrics("gpu-1"), "DCGM_FI_DEV_GPU_UTIL")[0]
    assert labels["Hostname"] == "gpu-1" and "hostname" not in labels


def test_utilisation_follows_the_pods_holding_gpus(store):
    store.add("pods", running("train-1", "team-a", "gpu-1", limits={"nvidia.com/gpu": "1"},
                              annotations={dcgm.UTIL_ANNOTATION: "93", dcgm.MEMORY_ANNOTATION: "1000"}))
    done = running("old", "team-b", "gpu-1", limits={"nvidia.com/gpu": "1"})
    done["status"]["phase"] = "Succeeded"
    store.add("pods", done)
    text = exporter(store).metrics("gpu-1")
    util = dict((l["gpu"], (l["pod"], l["namespace"], l["container"], v))
                for l, v in samples(text, "DCGM_FI_DEV_GPU_UTIL"))
    assert util == {"0": ("train-1", "team-a", "main", 93.0), "1": ("", "", "", 0.0)}
    fb = dict((l["gpu"], v) for l, v in samples(text, "DCGM_FI_DEV_FB_USED"))
    assert fb == {"0": 1000.0, "1": 0.0}


def test_faults_from_the_cluster_file_and_at_run_time(store):
    exp = exporter(store, {"gpu_xid": [{"node": "gpu-1", "gpu": 1, "xid": 79}]})
    xid = dict((l["gpu"], v) for l, v in samples(exp.metrics("gpu-1"), "DCGM_FI_DEV_XID_ERRORS"))
    assert xid == {"0": 0, "1": 79}
    status, body, _ = exp.handle("POST", ["faults"], json.dumps(
        {"gpu_overheat": [{"node": "gpu-1", "gpu": 0, "temp": 97}],
         "gpu_ecc_dbe": [{"node": "gpu-1", "gpu": 0, "count": 3}],
         "gpu_xid": [{"node": "gpu-1", "gpu": 1, "xid": 79, "lost": True}]}).encode())
    assert status == 200
    text = exp.metrics("gpu-1")
    assert [(l["gpu"], v) for l, v in samples(text, "DCGM_FI_DEV_GPU_TEMP")] == [("0", 97.0)]   # GPU 1 gone
    assert [(l["gpu"], v) for l, v in samples(text, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")] == [("0", 3.0)]
    assert exp.handle("POST", ["faults"], b'{"dcgm_exporter_down": ["gpu-1"]}')[0] == 200
    assert exp.handle("GET", ["gpu-1", "metrics"])[0] == 503
    bad = exp.handle("POST", ["faults"], b'{"gpu_xid": [{"node": "gpu-9", "gpu": 0, "xid": 79}]}')
    assert bad[0] == 400 and b"gpu-9" in bad[1]
    assert exp.handle("POST", ["faults"], b'{"gpu_melt": []}')[0] == 400


class Twins:
    class ctx:  # noqa: N801 - stands in for the twins' context
        class mig:  # noqa: N801
            @staticmethod
            def layout(node):
                return [{"3g.40gb": 2}, None]


def test_mig_instances_carry_gpu_i_labels_and_their_pods(store):
    store.add("pods", running("infer-1", "team-a", "gpu-1", limits={"nvidia.com/mig-3g.40gb": "1"}))
    text = exporter(store, twins=Twins).metrics("gpu-1")
    got = [(l["gpu"], l.get("GPU_I_PROFILE"), l.get("GPU_I_ID"), l["pod"])
           for l, _ in samples(text, "DCGM_FI_DEV_GPU_UTIL")]
    assert got == [("0", "3g.40gb", "1", "infer-1"), ("0", "3g.40gb", "2", ""), ("1", None, None, "")]


def test_time_sliced_replicas_give_one_series_per_pod(store):
    for i in range(3):
        store.add("pods", running("nb-%d" % i, "team-a", "gpu-1", limits={"nvidia.com/gpu.shared": "1"},
                                  created="2026-12-01T00:00:0%dZ" % i))
    got = sorted((l["gpu"], l["pod"]) for l, _ in samples(exporter(store).metrics("gpu-1"), "DCGM_FI_DEV_GPU_UTIL"))
    assert got == [("0", "nb-0"), ("0", "nb-2"), ("1", "nb-1")]


def test_cluster_file_refuses_a_fault_on_an_unknown_node(tmp_path):
    with pytest.raises(clusterfile.ClusterFileError, match="gpu-9"):
        clusterfile.validate({"nodes": [{"name": "gpu-1"}],
                              "faults": {"gpu_xid": [{"node": "gpu-9", "gpu": 0, "xid": 79}]}})
    spec = clusterfile.validate({"nodes": [{"name": "gpu-1"}], "faults": {
        "gpu_xid": [{"node": "gpu-1", "gpu": 0, "xid": 79}], "dcgm_exporter_down": ["gpu-1"]}})
    assert spec["faults"]["gpu_xid"][0]["xid"] == 79
