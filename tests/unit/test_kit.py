"""The test kit's own promises: `needs_shared` tests are skipped without ../shared, a chart is
rendered once per chart, values and helm binary in a session, each caller getting its own copy,
the module payloads' bytecode runs only while it matches the source beside it, and a run through the
playbook fork server is the run a new process makes."""
import base64
import io
import os
import subprocess
import time
import zipfile
import zipimport

import pytest

from kit import ansible_playbook, charts, paths, playbook_server, playbook_servers, plugin


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


def test_runs_with_one_import_key_import_the_same():
    env = {"HOME": "/h", "ANSIBLE_NOCOLOR": "1", "PATH": "/bin", "KUBECONFIG_OF_A_TEST": "x"}
    key = playbook_server.import_key(env, "/repo")
    # what ansible does not read while it imports may differ
    assert playbook_server.import_key(dict(env, PATH="/usr/bin", OTHER="y"), "/repo") == key
    # its configuration, HOME, the working directory and the interpreter's variables may not
    # HOME too: the child evaluates the settings under it again
    assert playbook_server.import_key(dict(env, HOME="/other"), "/repo") == key
    # its configuration, the working directory and the interpreter's variables may not
    for changed in ({"ANSIBLE_NOCOLOR": "0"}, {"ANSIBLE_CACHE_PLUGIN": "jsonfile"},
                    {"PYTHONPATH": "/lib"}, {"LC_ALL": "C"}, {"_ANSIBLE_TEMPLAR_SANDBOX_MODE": "allow"}):
        assert playbook_server.import_key(dict(env, **changed), "/repo") != key
    assert playbook_server.import_key(env, "/elsewhere") != key


def test_a_home_with_an_ansible_cfg_is_another_key(tmp_path):
    (tmp_path / ".ansible.cfg").write_text("[defaults]\n")
    assert (playbook_server.import_key({"HOME": str(tmp_path)}, "/repo")
            != playbook_server.import_key({"HOME": "/nonexistent"}, "/repo"))


# A run prints a variable of its own environment (not in the import key) and the command lines of
# the processes it runs under: the fork server's, or ansible-playbook's started by the client.
WHO_RUNS = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.debug:
        msg: "value={{ lookup('env', 'KIT_TEST_VALUE') }} under={{ lookup('pipe', '%s') }}"
    - ansible.builtin.fail:
        msg: asked to fail
      when: lookup('env', 'KIT_TEST_FAIL') == 'yes'
"""
ANCESTORS = """\
#!/bin/sh
pid=$$
while [ "$pid" -gt 1 ]; do
  tr '\\0' ' ' < /proc/$pid/cmdline; echo
  pid=$(sed 's/.*) //' /proc/$pid/stat | cut -d' ' -f2)
done
"""


@pytest.fixture
def fork_server(tmp_path):
    cache = tmp_path / "ansiballz"
    cache.mkdir()
    ancestors = tmp_path / "ancestors.sh"
    ancestors.write_text(ANCESTORS)
    ancestors.chmod(0o755)
    playbook = tmp_path / "who.yml"
    playbook.write_text(WHO_RUNS % ancestors)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=paths.COLLECTIONS, ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=os.path.join(paths.BIN, "python"))
    fallback = [os.path.join(paths.BIN, "python"), ansible_playbook.__file__, str(cache)]

    def run(start_only=False, **extra):
        run_env = dict(env, **extra)
        cmd = playbook_servers.command(fallback, str(cache), run_env, paths.REPO)
        cmd += ["-i", "localhost,", "-c", "local", str(playbook)]
        if start_only:
            return subprocess.Popen(cmd, cwd=paths.REPO, env=run_env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
        return subprocess.run(cmd, cwd=paths.REPO, env=run_env, capture_output=True, text=True,
                              timeout=120, check=False)

    yield run, playbook
    playbook_servers.stop_all()


def _wait_for_socket(seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        servers = list(playbook_servers._servers.values())
        if servers and os.path.exists(servers[-1].path):
            return
        time.sleep(0.1)
    raise AssertionError("the fork server did not start")


def test_a_run_through_the_fork_server_is_the_run_a_new_process_makes(fork_server):
    run, _playbook = fork_server
    first = run(KIT_TEST_VALUE="one")       # starts the server, runs as a new process meanwhile
    _wait_for_socket()
    second = run(KIT_TEST_VALUE="two")
    failed = run(KIT_TEST_VALUE="three", KIT_TEST_FAIL="yes")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "value=one" in first.stdout and "playbook_server.py" not in first.stdout
    assert "ansible_playbook.py" in first.stdout
    assert second.returncode == 0, second.stdout + second.stderr
    assert "value=two" in second.stdout and "playbook_server.py" in second.stdout
    assert first.stdout.count("ok=") == second.stdout.count("ok=") == 1
    assert failed.returncode == 2 and "asked to fail" in failed.stdout
    assert "value=three" in failed.stdout and "playbook_server.py" in failed.stdout


def test_a_run_whose_imports_differ_starts_as_a_new_process(fork_server):
    run, _playbook = fork_server
    run(KIT_TEST_VALUE="one")
    _wait_for_socket()
    servers = list(playbook_servers._servers.values())
    # the kit starts another server for another key; the client of the first one falls back
    other = dict(os.environ, ANSIBLE_NOCOLOR="0")
    cmd = [os.path.join(paths.BIN, "python"), "-I", "-S", playbook_servers.CLIENT, servers[0].path, "1", "/bin/echo", "fallback"]
    proc = subprocess.run(cmd, cwd=paths.REPO, env=other, capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.strip() == "fallback"


def test_a_run_its_caller_gives_up_on_ends_with_its_workers(fork_server, tmp_path):
    run, playbook = fork_server
    run(KIT_TEST_VALUE="one")
    _wait_for_socket()
    marker = "%.6f" % (40 + time.time() % 1)      # a sleep no other process runs
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                        "    - ansible.builtin.command: sleep %s\n" % marker)

    def sleeping():
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as fh:
                    if fh.read().split(b"\0")[:2] == [b"sleep", marker.encode()]:
                        found.append(pid)
            except OSError:
                pass
        return found

    def wait(condition, seconds):
        deadline = time.monotonic() + seconds
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.1)
        return condition()

    client = run(start_only=True)
    assert wait(sleeping, 120), "the run never reached its task"
    client.kill()       # what subprocess.run does when its timeout expires
    client.wait()
    client.stdout.close()
    client.stderr.close()
    # SIGTERM to the run, which ends its workers' sessions; SIGKILL to its group after 5 s
    assert wait(lambda: not sleeping(), 10), "still running: %s" % sleeping()


def test_a_run_under_another_home_uses_the_roles_and_plugins_of_its_home(fork_server, tmp_path):
    run, playbook = fork_server
    run(KIT_TEST_VALUE="one")       # the server imports under this process's HOME
    _wait_for_socket()
    home = tmp_path / "home"
    role = home / ".ansible" / "roles" / "kit_home_role" / "tasks"
    role.mkdir(parents=True)
    (role / "main.yml").write_text("- ansible.builtin.debug:\n    msg: role of the run's home\n")
    filters = home / ".ansible" / "plugins" / "filter"
    filters.mkdir(parents=True)
    (filters / "kit_home.py").write_text(
        "class FilterModule:\n    def filters(self):\n        return {'kit_home': lambda v: 'filter of the run s home'}\n")
    playbook.write_text(WHO_RUNS % (tmp_path / "ancestors.sh") + (
        "    - ansible.builtin.include_role:\n        name: kit_home_role\n"
        "    - ansible.builtin.debug:\n        msg: \"{{ 'x' | kit_home }}\"\n"))
    proc = run(KIT_TEST_VALUE="two", HOME=str(home))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "playbook_server.py" in proc.stdout
    assert "role of the run's home" in proc.stdout and "filter of the run s home" in proc.stdout
