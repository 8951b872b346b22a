"""The test kit's own promises: `needs_shared` tests are skipped without ../shared, and a chart is
rendered once per chart, values and helm binary in a session, each caller getting its own copy."""
import subprocess

import pytest

from kit import charts, paths, plugin


class Item:
    def __init__(self, *markers, nodeid="tests/unit/test_x.py::test_x"):
        self.markers = set(markers)
        self.added = []
        self.nodeid = nodeid

    def get_closest_marker(self, name):
        return name if name in self.markers else None

    def add_marker(self, marker):
        self.added.append(marker)


@pytest.mark.parametrize("have_shared,skipped", [(False, [True, False]), (True, [False, False])])
def test_needs_shared_is_skipped_only_without_shared(monkeypatch, have_shared, skipped):
    monkeypatch.setattr(paths, "have_shared", lambda: have_shared)
    items = [Item("needs_shared", "slow"), Item("slow")]
    plugin.pytest_collection_modifyitems(None, items)
    assert [bool(i.added) for i in items] == skipped
    for item in items:
        for marker in item.added:
            assert marker.name == "skip" and "../shared" in marker.kwargs["reason"]


def test_the_slowest_files_come_first_each_in_its_own_order(monkeypatch):
    monkeypatch.setattr(plugin, "SLOWEST_FIRST", ("b/test_slow.py", "a/test_slower_than_c.py"))
    ids = ["a/test_c.py::t1", "a/test_slower_than_c.py::t1", "a/test_c.py::t2", "b/test_slow.py::t2",
           "b/test_slow.py::t1", "a/test_slower_than_c.py::t2"]
    items = [Item(nodeid=nodeid) for nodeid in ids]
    plugin.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == ["b/test_slow.py::t2", "b/test_slow.py::t1", "a/test_slower_than_c.py::t1",
                                         "a/test_slower_than_c.py::t2", "a/test_c.py::t1", "a/test_c.py::t2"]


def test_a_chart_is_rendered_once_per_values_and_helm_major(monkeypatch, tmp_path):
    chart = tmp_path / "demo-0.1.0.tgz"
    chart.write_bytes(b"")
    calls = []

    def helm(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout="---\nkind: ConfigMap\nmetadata: {name: a}\n---\n\n")
    monkeypatch.setattr(charts.subprocess, "run", helm)
    monkeypatch.setattr(charts, "_CACHE", {})
    first = charts.render(str(chart), {"a": 1}, "helm3")
    first[0]["metadata"]["name"] = "changed by the caller"
    assert charts.render(str(chart), {"a": 1}, "helm3") == [{"kind": "ConfigMap", "metadata": {"name": "a"}}]
    assert len(calls) == 1
    charts.render(str(chart), {"a": 2}, "helm3")
    charts.render(str(chart), {"a": 1}, "helm4")
    charts.render(str(chart), {"a": 1}, "helm3", args=["--is-upgrade"])
    assert len(calls) == 4
    assert [c[0].rsplit("/", 1)[-1] for c in calls] == ["helm3", "helm3", "helm4", "helm3"]


def test_a_missing_chart_skips():
    with pytest.raises(pytest.skip.Exception):
        charts.render("/nonexistent/chart.tgz")
