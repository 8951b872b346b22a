"""The one rule both roles use to decide whether Helm must run (core/helm_release.py)."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import helm_release
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.helm_release import release_differs

VALUES = {"driver": {"enabled": False}, "devicePlugin": {"config": {"name": "time-slicing-config"}}}


def deployed(chart="gpu-operator-v26.7.0", status="deployed", values=None):
    return {"name": "gpu-operator", "revision": "3", "status": status, "chart": chart,
            "values": VALUES if values is None else values}


def test_the_release_the_inventory_asks_for_needs_no_helm():
    assert release_differs(deployed(), "gpu-operator", "v26.7.0", VALUES) is False
    # the version written with or without the v the chart carries (Kueue's carries none)
    assert release_differs(deployed(), "gpu-operator", "26.7.0", VALUES) is False
    assert release_differs(deployed("kueue-0.19.2", values={}), "kueue", "0.19.2", {}) is False
    assert release_differs(deployed("kueue-0.19.2", values={}), "kueue", "v0.19.2", None) is False


@pytest.mark.parametrize("release", [None, {}, deployed(status="failed"), deployed(status="pending-upgrade"),
                                     deployed("gpu-operator-v26.3.3"), deployed("gpu-operator-extra-v26.7.0"),
                                     deployed(values={"driver": {"enabled": True}}), deployed(values={})],
                         ids=["none", "empty", "failed", "pending", "other-version", "other-chart",
                              "other-values", "no-values"])
def test_anything_else_runs_helm(release):
    assert release_differs(release, "gpu-operator", "v26.7.0", VALUES) is True


def release(status, revision="1", chart="gpu-operator-v26.7.0", values=None):
    return {"name": "gpu-operator", "status": status, "revision": revision, "chart": chart,
            "values": {"driver": {"enabled": False}} if values is None else values}


def stuck(rel, version="v26.7.0", values=None):
    return helm_release.stuck(rel, "gpu-operator", "gpu-operator", "gpu-operator", version,
                              {"driver": {"enabled": False}} if values is None else values)


def test_a_failed_release_the_run_would_not_change_is_stuck_with_the_fix():
    # kubernetes.core.helm compares chart version and values only: it would not run Helm for this release
    msg = stuck(release("failed"))
    assert msg.startswith("Helm release gpu-operator in gpu-operator is failed (revision 1) with the chart "
                          "version and values this run would install"), msg
    assert msg.endswith("nothing was ever deployed (revision 1 failed), so `helm uninstall gpu-operator -n "
                        "gpu-operator`."), msg
    later = stuck(release("failed", revision="4"))
    assert "`helm rollback gpu-operator <the last deployed revision> -n gpu-operator`" in later
    # other values or another version: kubernetes.core.helm upgrades it, nothing is stuck
    assert stuck(release("failed"), values={"driver": {"enabled": True}}) == ""
    assert stuck(release("failed"), version="v26.8.0") == ""
    assert stuck(release("deployed")) == "" and stuck(None) == ""


@pytest.mark.parametrize("status,fix", [
    ("pending-install", "nothing was ever deployed, so `helm uninstall gpu-operator -n gpu-operator`"),
    ("pending-upgrade", "`helm rollback gpu-operator -n gpu-operator` (back to the last deployed revision)")])
def test_an_interrupted_release_is_stuck_whatever_the_run_wants(status, fix):
    msg = stuck(release(status), values={"other": 1})
    assert "is %s: an earlier helm run was interrupted, and Helm refuses every new operation on it" % status in msg
    assert msg.endswith(fix + "."), msg
