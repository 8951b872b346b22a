"""scripts/venv_python.py: the venv's interpreter is python3's version, from an install that has the
interpreter linked into its executable when there is one, else python3 itself."""
import importlib.util
import os
import sys

import pytest

from kit.paths import REPO

SPEC = importlib.util.spec_from_file_location("venv_python", os.path.join(REPO, "scripts", "venv_python.py"))
venv_python = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(venv_python)
VERSION = "%d.%d" % sys.version_info[:2]


def test_the_probe_reads_the_version_and_how_the_interpreter_is_built():
    with open("/proc/self/maps") as fh:
        build = "shared" if "libpython" in fh.read() else "linked"
    assert venv_python.probe(sys.executable) == (VERSION, build)
    assert venv_python.probe("/nonexistent/python3") is None


@pytest.mark.parametrize("found,chosen", [
    ({"/a/python": (VERSION, "shared"), "/b/python": (VERSION, "linked")}, "/b/python"),
    ({"/a/python": (VERSION, "shared"), "/b/python": ("2.7", "linked")}, sys.executable),
    ({"/a/python": (VERSION, "shared"), "/b/python": None}, sys.executable),
])
def test_a_linked_install_of_the_same_version_is_chosen_else_this_python(monkeypatch, capsys, found, chosen):
    monkeypatch.setattr(venv_python, "candidates", lambda version: list(found))
    monkeypatch.setattr(venv_python, "probe", found.get)
    venv_python.main()
    assert capsys.readouterr().out.strip() == chosen
