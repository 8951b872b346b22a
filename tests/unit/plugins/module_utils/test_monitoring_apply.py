"""gpu_monitoring's converge: one LIST per kind and namespace, a write only for what differs."""
import copy

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import objects as monitoring
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring.apply import converge, differs
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import Call, FakeKube


def test_first_run_applies_all_then_nothing():
    objs = monitoring.objects()
    kube = FakeKube()
    out = converge(kube, objs)
    assert out["changed"] and [r["action"] for r in out["objects"]] == ["created"] * 3 and len(out["diff"]) == 3
    kube.calls = []
    out = converge(kube, objs)
    assert not out["changed"]
    selector = "app.kubernetes.io/part-of=skaffon-gpu-platform"
    assert kube.calls == [Call("LIST", "PrometheusRule", None, "monitoring", selector, False),
                          Call("LIST", "ConfigMap", None, "monitoring", selector, False)]
    assert out["requests"] == {"LIST": 2}


def test_one_changed_object_one_write_and_check_mode_is_a_dry_run():
    kube = FakeKube(monitoring.objects())
    new = monitoring.objects({"thresholds": {"temperature_critical": 92}})
    kube.calls = []
    out = converge(kube, new, check_mode=True)
    assert out["changed"] and [r["action"] for r in out["objects"]] == ["updated", "unchanged", "unchanged"]
    assert [(c.verb, c.kind, c.name, c.dry_run) for c in kube.writes()] == [
        ("APPLY", "PrometheusRule", "skaffon-gpu-alerts", True)]
    assert out["diff"][0]["before"]["spec"] != out["diff"][0]["after"]["spec"]
    assert converge(kube, new)["changed"] is True        # the dry run wrote nothing


def test_labels_added_by_others_do_not_count_as_a_difference():
    obj = monitoring.objects()[1]
    current = copy.deepcopy(obj)
    current["metadata"]["labels"]["team"] = "sre"
    current["metadata"]["resourceVersion"] = "7"
    assert not differs(obj, current)
    current["data"] = {"x": "y"}
    assert differs(obj, current)


def test_refuses_objects_without_namespace_before_any_call():
    kube = FakeKube()
    bad = monitoring.objects()
    del bad[2]["metadata"]["namespace"]
    with pytest.raises(DomainError, match="objects\\[2\\]"):
        converge(kube, bad)
    assert kube.calls == []
