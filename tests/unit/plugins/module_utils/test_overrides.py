"""overrides.honour: a raised value is kept until the inventory catches up, then the record goes."""

import json

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.overrides import ANNOTATION, honour, record

GPU = ["spec", "hard", "requests.nvidia.com/gpu"]


def quota(value, annotation=None):
    meta = {"name": "tenant-quota", "namespace": "team-a"}
    if annotation:
        meta["annotations"] = {ANNOTATION: annotation}
    return {"kind": "ResourceQuota", "metadata": meta, "spec": {"hard": {"requests.nvidia.com/gpu": value}}}


def test_the_raised_value_stays_and_is_reported():
    live = quota("12", record({}, GPU, "12", "CHG-1", "2026-12-01T10:00:00Z"))
    desired, notes = honour(quota("8"), live)
    assert desired["spec"]["hard"]["requests.nvidia.com/gpu"] == "12"
    assert json.loads(desired["metadata"]["annotations"][ANNOTATION])[0]["ticket"] == "CHG-1"
    assert "the inventory says 8, the cluster keeps 12 from the quota change CHG-1" in notes[0]


def test_caught_up_or_passed_inventory_drops_the_record():
    live = quota("12", record({}, GPU, "12", "CHG-1", "t"))
    for inventory in ("12", "16"):
        desired, notes = honour(quota(inventory), live)
        assert desired["spec"]["hard"]["requests.nvidia.com/gpu"] == inventory
        assert ANNOTATION not in (desired["metadata"].get("annotations") or {})
        assert "caught up" in notes[0]


def test_list_elements_by_name_and_unparsable_records_are_ignored():
    path = ["spec", "resourceGroups", 0, "flavors", {"name": "h100"}, "resources", {"name": "nvidia.com/gpu"},
            "nominalQuota"]
    cq = {"kind": "ClusterQueue", "metadata": {"name": "team-a"}, "spec": {"resourceGroups": [{"flavors": [
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}]}}
    live = json.loads(json.dumps(cq))
    live["metadata"]["annotations"] = {ANNOTATION: record({}, path, 6, "CHG-2", "t")}
    desired, _notes = honour(cq, live)
    assert desired["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 6
    live["metadata"]["annotations"][ANNOTATION] = "not json"
    assert honour(cq, live) == (cq, [])
