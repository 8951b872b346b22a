"""gpu_monitoring's converge: one LIST per kind and namespace, a write only for what differs."""
import copy

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import objects as monitoring
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring.apply import converge, differs


class FakeKube:
    def __init__(self, objects=()):
        self.objects = dict(((o["kind"], o["metadata"]["name"]), copy.deepcopy(o)) for o in objects)
        self.calls = []

    def list(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        self.calls.append(("list", kind, namespace, label_selector))
        return [copy.deepcopy(o) for (k, _name), o in self.objects.items() if k == kind], "1"

    def get(self, api_version, kind, name, namespace=None):
        self.calls.append(("get", kind, name))
        return None

    def apply(self, body, field_manager, force=True, dry_run=False):
        self.calls.append(("apply", body["kind"], body["metadata"]["name"], dry_run))
        if not dry_run:
            self.objects[(body["kind"], body["metadata"]["name"])] = copy.deepcopy(body)
        return body


def test_first_run_applies_all_then_nothing():
    objs = monitoring.objects()
    kube = FakeKube()
    changed, results, diffs = converge(kube, objs)
    assert changed and [r["action"] for r in results] == ["created"] * 3 and len(diffs) == 3
    kube.calls = []
    changed, results, _diffs = converge(kube, objs)
    assert not changed
    assert kube.calls == [("list", "PrometheusRule", "monitoring", "app.kubernetes.io/part-of=skaffon-gpu-platform"),
                          ("list", "ConfigMap", "monitoring", "app.kubernetes.io/part-of=skaffon-gpu-platform")]


def test_one_changed_object_one_write_and_check_mode_is_a_dry_run():
    kube = FakeKube(monitoring.objects())
    new = monitoring.objects({"thresholds": {"temperature_critical": 92}})
    kube.calls = []
    changed, results, diffs = converge(kube, new, check_mode=True)
    assert changed and [r["action"] for r in results] == ["updated", "unchanged", "unchanged"]
    assert [c for c in kube.calls if c[0] == "apply"] == [("apply", "PrometheusRule", "skaffon-gpu-alerts", True)]
    assert diffs[0]["before"]["spec"] != diffs[0]["after"]["spec"]
    assert converge(kube, new)[0] is True        # the dry run wrote nothing


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
