"""The real gpu-operator chart v26.7.0 installed with helm in its DRA mode on tests/clusters/dra.yaml:
the GPUCluster turns ready and every GPU node publishes its ResourceSlice; an upgrade to the
chart's defaults (ClusterPolicy) keeps the GPUCluster and both CRs are refused; uninstall runs the
chart's cleanup hook, which removes the GPUCluster."""
import json
import os
import time

import pytest

from kit.paths import binary
from simcluster.twins.testkit import CHART

pytestmark = [pytest.mark.cluster("dra.yaml"), pytest.mark.slow, pytest.mark.needs_shared]
NS = "gpu-operator"
DRA_VALUES = ["--set", "gpuCluster.deployCR=true", "--set", "clusterPolicy.deployCR=false",
              "--set", "driver.enabled=false"]


def _wait(fn, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError("timed out waiting for %s" % what)


def test_chart_dra_mode_install_switch_and_uninstall(simcluster):
    if not os.path.exists(CHART):
        pytest.skip("chart %s not found" % CHART)
    helm, kubectl = binary("helm3"), binary("kubectl")

    def get(*args):
        res = simcluster.run(kubectl, "get", *args, "-o", "json", check=False)
        return json.loads(res.stdout) if res.returncode == 0 else None

    def gc_status():
        return (get("gpuclusters.nvidia.com", "gpu-cluster") or {}).get("status") or {}

    simcluster.run(helm, "install", "gpu-operator", CHART, "-n", NS, "--create-namespace", *DRA_VALUES)
    _wait(lambda: gc_status().get("state") == "ready", what="GPUCluster ready")
    ready = next(c for c in gc_status()["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Reconciled")
    slices = _wait(lambda: len((get("resourceslices") or {}).get("items") or []) == 4
                   and get("resourceslices")["items"], what="4 ResourceSlices")
    assert sorted(s["spec"]["nodeName"] for s in slices) == ["gpu-h100-1", "gpu-h100-2", "gpu-h100-mig-1",
                                                            "gpu-l40s-1"]
    assert get("clusterpolicies.nvidia.com", "cluster-policy") is None

    # back to the chart's defaults: the chart keeps the GPUCluster (resource policy keep)
    simcluster.run(helm, "upgrade", "gpu-operator", CHART, "-n", NS, "--set", "driver.enabled=false")
    err = _wait(lambda: next((c for c in gc_status().get("conditions") or []
                              if c["type"] == "Error" and c["reason"] == "PrerequisiteNotMet"), None),
                what="GPUCluster refusing the ClusterPolicy")
    assert 'A ClusterPolicy CR "cluster-policy" exists' in err["message"]
    cp = _wait(lambda: (get("clusterpolicies.nvidia.com", "cluster-policy") or {}).get("status"),
               what="ClusterPolicy status")
    assert cp["state"] == "notReady"

    simcluster.run(helm, "uninstall", "gpu-operator", "-n", NS)
    _wait(lambda: get("gpuclusters.nvidia.com", "gpu-cluster") is None, what="GPUCluster removed by the hook")
