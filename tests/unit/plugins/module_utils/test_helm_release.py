"""The one rule both roles use to decide whether Helm must run (core/helm_release.py)."""
import pytest

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
