"""The test kit's own promises: `needs_shared` tests are skipped without ../shared, a chart is
rendered once per chart, values and helm binary in a session, each caller getting its own copy, and
the module payloads' bytecode runs only while it matches the source beside it, and the collection
loader's cached bytecode only for the source it was compiled from."""
import base64
import io
import os
import subprocess
import sys
import zipfile
import zipimport

import pytest

from kit import ansible_playbook, charts, paths, plugin


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


def _payload(files):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return base64.b64encode(out.getvalue())


def _write(tmp_path, zip_data):
    path = tmp_path / "payload.zip"
    path.write_bytes(base64.b64decode(zip_data))
    return str(path)


def test_payload_bytecode_is_what_zipimport_runs(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/mod.py": "VALUE = 6 * 7\n"}
    archive = _write(tmp_path, ansible_playbook.with_bytecode(_payload(files)))
    with zipfile.ZipFile(archive) as zf:
        assert sorted(zf.namelist()) == ["pkg/__init__.py", "pkg/__init__.pyc", "pkg/mod.py", "pkg/mod.pyc"]
    importer = zipimport.zipimporter(archive + "/pkg/")
    assert importer.get_filename("pkg.mod").endswith("pkg/mod.pyc")
    code = importer.get_code("pkg.mod")
    namespace = {}
    exec(code, namespace)
    assert namespace["VALUE"] == 42
    assert code.co_filename == ansible_playbook.PAYLOAD_PREFIX + "pkg/mod.py"


def test_payload_bytecode_of_another_source_is_not_run(tmp_path):
    stale = ansible_playbook.with_bytecode(_payload({"mod.py": "VALUE = 1\n"}))
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(stale))) as zf:
        pyc = zf.read("mod.pyc")
    archive = tmp_path / "payload.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("mod.py", "VALUE = 2\n")
        zf.writestr("mod.pyc", pyc)
    namespace = {}
    exec(zipimport.zipimporter(str(archive)).get_code("mod"), namespace)
    assert namespace["VALUE"] == 2


COLLECTION_IMPORT = """
import importlib, sys
sys.path.insert(0, sys.argv[3])
import collection_bytecode
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder([sys.argv[1]])._install()
collection_bytecode.cache(sys.argv[2])
module = importlib.import_module("ansible_collections.ns.col.plugins.module_utils.answer")
print(module.ANSWER, module.where.__code__.co_filename == module.__file__)
"""


def test_the_collection_loaders_bytecode_is_kept_per_source(tmp_path):
    """A collection module imported in two processes is compiled once; its code names its own file;
    a changed source is compiled again, never given the old code."""
    source = tmp_path / "collections" / "ansible_collections" / "ns" / "col" / "plugins" / "module_utils" / "answer.py"
    source.parent.mkdir(parents=True)
    cache = tmp_path / "bytecode"

    def imported():
        return subprocess.run([sys.executable, "-c", COLLECTION_IMPORT, str(tmp_path / "collections"), str(cache),
                               os.path.dirname(ansible_playbook.__file__)],
                              capture_output=True, text=True, check=True).stdout.split()

    source.write_text("ANSWER = 42\ndef where():\n    pass\n")
    assert imported() == ["42", "True"]
    kept = sorted(os.listdir(cache))
    assert len(kept) == 1
    assert imported() == ["42", "True"] and sorted(os.listdir(cache)) == kept
    source.write_text("ANSWER = 43\ndef where():\n    pass\n")
    assert imported() == ["43", "True"]
    assert len(os.listdir(cache)) == 2
