"""The kit's zygotes (kit/zygote.py): a run through one is what `python <script>` gives (streams,
working directory, environment, exit status, an uncaught exception, a signal), each zygote serves
one environment (but for what no import reads: HOME where ansible is told ANSIBLE_HOME, helm's
directories), a run dies with its caller, a module zygote gives a run ansible's module_utils only
when its payload holds the same files, a playbook run keeps its own local temporary directory, and a
warmed playbook zygote's run prints what ansible-playbook prints."""
import base64
import glob
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile

import pytest

from kit import zygote_client, zygote_imports
from kit.paths import BIN, COLLECTIONS, REPO
from kit.playbook import SHARED_CACHE_PLAYBOOK

PYTHON = os.path.join(BIN, "python") if os.path.exists(os.path.join(BIN, "python")) else sys.executable

SCRIPT = textwrap.dedent("""\
    import os, sys
    data = sys.stdin.read()
    print("out:%s:%s:%s" % (data.strip(), os.getcwd(), os.environ.get("ZYGOTE_TEST")))
    sys.stderr.write("err:%s\\n" % " ".join(sys.argv[1:]))
    print("path0:%s" % sys.path[0])
    sys.exit(int(os.environ.get("ZYGOTE_TEST_EXIT", "0")))
    """)


@pytest.fixture
def zygotes():
    # short: a socket's path has at most 107 bytes (pytest's tmp_path is long)
    path = tempfile.mkdtemp(prefix="zygotes-")
    yield path
    zygote_client.stop_all(path)
    assert not os.path.exists(os.path.join(path, zygote_client.OFF))
    shutil.rmtree(path)


def script(tmp_path, text, name="run.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def run(cmd, cwd, env=None, stdin="", timeout=120):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(cmd, cwd=cwd, env=full_env, input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)


def sockets(zygotes):
    return sorted(glob.glob(os.path.join(zygotes, "*.sock")))


def test_a_run_through_a_zygote_is_what_python_gives(zygotes, tmp_path):
    path = script(tmp_path, SCRIPT)
    env = {"ZYGOTE_TEST": "value", "ZYGOTE_TEST_EXIT": "3"}
    direct = run([PYTHON, path, "a", "b c"], str(tmp_path), env, stdin="input\n")
    for _attempt in range(2):      # the first starts the zygote, the second finds it
        zyg = run(zygote_client.command(zygotes, PYTHON, [path, "a", "b c"]), str(tmp_path), env, stdin="input\n")
        assert (zyg.returncode, zyg.stdout, zyg.stderr) == (direct.returncode, direct.stdout, direct.stderr)
    assert direct.returncode == 3 and "out:input:%s:value" % tmp_path in direct.stdout
    assert len(sockets(zygotes)) == 1


def test_each_environment_has_its_zygote_and_the_runs_are_its_children(zygotes, tmp_path):
    path = script(tmp_path, "import os\nprint(os.getppid())\n")
    cmd = zygote_client.command(zygotes, PYTHON, [path])
    first = run(cmd, str(tmp_path), {"ZYGOTE_TEST": "1"}).stdout
    assert run(cmd, str(tmp_path), {"ZYGOTE_TEST": "1"}).stdout == first
    other = run(cmd, str(tmp_path), {"ZYGOTE_TEST": "2"}).stdout
    assert other != first
    assert len(sockets(zygotes)) == 2


def test_runs_that_differ_in_what_no_import_reads_share_a_zygote_and_see_their_own_values(zygotes, tmp_path):
    """The simulated clusters give each test file its own HOME and helm directories: a module
    zygote imports nothing that reads them, so the runs of every cluster share it; each run still
    has its own values (the Kubernetes client finds ~/.kube/config in the run's HOME)."""
    path = script(tmp_path, """\
        import os
        from kubernetes.config import kube_config
        print(os.getppid(), os.path.expanduser(kube_config.KUBE_CONFIG_DEFAULT_LOCATION), os.environ["HELM_CACHE_HOME"])
        """)
    cmd = zygote_client.command(zygotes, PYTHON, [path])
    outs = [run(cmd, str(tmp_path), {"HOME": str(tmp_path / name), "HELM_CACHE_HOME": str(tmp_path / name / "helm")})
            .stdout.split() for name in ("a", "b")]
    assert outs[0][1:] == [str(tmp_path / "a" / ".kube" / "config"), str(tmp_path / "a" / "helm")]
    assert outs[1][1:] == [str(tmp_path / "b" / ".kube" / "config"), str(tmp_path / "b" / "helm")]
    assert outs[0][0] == outs[1][0] and len(sockets(zygotes)) == 1


def test_a_playbook_zygote_is_shared_across_homes_only_when_ansible_reads_none_of_them():
    """ansible reads HOME at import for ANSIBLE_HOME's default, ~/.ansible.cfg and `~` or `$HOME`
    in a setting: only runs that give ANSIBLE_HOME and none of those share a zygote across HOMEs."""
    base = {"ANSIBLE_HOME": "/session/ansible-home", "PATH": "/bin", "HELM_DATA_HOME": "/a/helm"}

    def key(kind="playbook", **env):
        return zygote_client.key(kind, PYTHON, "/repo", dict(base, **env))

    with tempfile.TemporaryDirectory() as home:
        assert key(HOME="/a") == key(HOME="/b", HELM_DATA_HOME="/b/helm", PYTEST_CURRENT_TEST="t (call)")
        assert key(HOME="/a", ANSIBLE_HOME="") != key(HOME="/b", ANSIBLE_HOME="")    # ~/.ansible
        assert key(HOME="/a", ANSIBLE_HOME="~/x") != key(HOME="/b", ANSIBLE_HOME="~/x")
        assert key(HOME="/a", ANSIBLE_ROLES_PATH="$HOME/roles") != key(HOME="/b", ANSIBLE_ROLES_PATH="$HOME/roles")
        assert key(HOME="/a") != key(HOME="/a", ANSIBLE_ROLES_PATH="/roles")
        with open(os.path.join(home, ".ansible.cfg"), "w") as fh:
            fh.write("[defaults]\n")
        assert key(HOME=home) != key(HOME="/b")
        assert key("module", HOME=home, ANSIBLE_HOME="") == key("module", HOME="/b", ANSIBLE_HOME="")


def test_playbook_runs_of_two_homes_share_a_zygote_with_ansible_home_given(zygotes, tmp_path):
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.debug: {msg: \"home={{ lookup('env', 'HOME') }}\"}\n")
    cache = tmp_path / "ansiballz"
    cache.mkdir()
    ansible_home = tmp_path / "ansible-home"
    cmd = zygote_client.command(zygotes, PYTHON, [SHARED_CACHE_PLAYBOOK, str(cache), "-i", "localhost,",
                                                  "-c", "local", str(play)])
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        env = {"HOME": str(tmp_path / name), "ANSIBLE_HOME": str(ansible_home),
               "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_PYTHON_INTERPRETER": PYTHON}
        proc = run(cmd, str(tmp_path), env)
        assert proc.returncode == 0 and "home=%s" % (tmp_path / name) in proc.stdout, proc.stdout + proc.stderr
    assert len(sockets(zygotes)) == 1
    # the zygote's own local temporary directory, below ANSIBLE_HOME; each run removed its own
    assert len(glob.glob(str(ansible_home / "tmp" / "ansible-local-*"))) == 1
    assert not os.path.exists(tmp_path / "a" / ".ansible") and not os.path.exists(tmp_path / "b" / ".ansible")


def test_the_client_imports_only_modules_built_into_the_interpreter():
    """The client starts some 1,900 times a suite: beside os, it imports only modules compiled into
    the interpreter (no socket, hashlib or struct, whose imports cost more than the client's own
    work)."""
    code = ("import os, sys; before = set(sys.modules); sys.path.insert(0, %r); import zygote_client; "
            "print(' '.join(sorted(set(sys.modules) - before)))" % os.path.dirname(zygote_client.__file__))
    added = subprocess.run([PYTHON, "-S", "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "zygote_client" in added
    assert [name for name in added if name != "zygote_client" and name not in sys.builtin_module_names] == []


def test_an_uncaught_exception_and_a_signal_end_the_run_as_in_python(zygotes, tmp_path):
    raising = script(tmp_path, "raise ValueError('boom')\n", "raising.py")
    direct = run([PYTHON, raising], str(tmp_path))
    zyg = run(zygote_client.command(zygotes, PYTHON, [raising]), str(tmp_path))
    assert zyg.returncode == direct.returncode == 1
    assert zyg.stderr == direct.stderr      # the script's frames only, as python shows them
    assert direct.stderr.splitlines()[-1] == "ValueError: boom"
    killed = script(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n", "killed.py")
    assert run(zygote_client.command(zygotes, PYTHON, [killed]), str(tmp_path)).returncode == -signal.SIGTERM


def test_a_run_dies_with_its_caller(zygotes, tmp_path):
    pid_file = tmp_path / "pid"
    path = script(tmp_path, """\
        import os, time
        with open(%r, "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(60)
        """ % str(pid_file))
    caller = subprocess.Popen(zygote_client.command(zygotes, PYTHON, [path]), cwd=str(tmp_path))
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    caller.kill()
    caller.wait()
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the run %d outlived its caller" % child)


def test_a_module_zygote_gives_nothing_of_ansible_to_a_run_without_a_payload(zygotes, tmp_path):
    path = script(tmp_path, """\
        import sys
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("ansible", "ansible_collections")))
        print("kubernetes.client" in sys.modules, "zygote_client" in sys.modules)
        import ansible.module_utils.basic as basic
        print(basic.AnsibleModule.__init__.__code__.co_filename == basic.__file__)
        """)
    out = run(zygote_client.command(zygotes, PYTHON, [path]), str(tmp_path)).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1] == "True False"   # the Kubernetes client preloaded; nothing of the kit
    assert out[2] == "True"         # imported from its file here, not the zygote's held copy


def test_every_group_a_module_zygote_declares_is_held_here():
    code = ("import sys; sys.path.insert(0, %r); import zygote_imports; held = zygote_imports.PayloadImports(); "
            "held.preload(); print(held.log, sorted(held.groups))" % os.path.dirname(zygote_client.__file__))
    proc = run([PYTHON, "-c", code], REPO, {"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS})
    assert proc.stdout.strip() == "[] %s" % sorted(name for name, _modules, _deps in zygote_imports.GROUPS), proc.stderr


# A module that says where ansible's module_utils came from in its run.
PROBE = textwrap.dedent("""\
    import ansible.module_utils.basic as basic
    from ansible.module_utils.basic import AnsibleModule


    def main():
        module = AnsibleModule(argument_spec={})
        module.exit_json(compiled_from=basic.AnsibleModule.__init__.__code__.co_filename,
                         file=basic.__file__.partition(".zip/")[2], probe=getattr(basic, "PROBE", None))


    main()
    """)


@pytest.fixture(scope="module")
def ansiballz(tmp_path_factory):
    """The AnsiballZ script ansible-playbook makes for PROBE (kept with ANSIBLE_KEEP_REMOTE_FILES)."""
    base = tmp_path_factory.mktemp("ansiballz")
    (base / "library").mkdir()
    (base / "library" / "probe.py").write_text(PROBE)
    (base / "play.yml").write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - probe: {}\n")
    env = {"HOME": str(base), "ANSIBLE_KEEP_REMOTE_FILES": "1", "ANSIBLE_REMOTE_TMP": str(base / "remote"),
           "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_PYTHON_INTERPRETER": PYTHON}
    proc = run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "play.yml"], str(base), env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return glob.glob(str(base / "remote" / "*" / "AnsiballZ_probe.py"))[0]


def with_payload(source, target, change):
    """`source`, an AnsiballZ script, with its payload zip rewritten: change(name, data) -> data or None."""
    text = open(source).read()
    match = re.search(r"zip_data='([^']*)'", text)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(match.group(1)))) as old, zipfile.ZipFile(out, "w") as new:
        for info in old.infolist():
            data = change(info.filename, old.read(info))
            if data is not None:
                new.writestr(info, data)
    with open(target, "w") as fh:
        fh.write(text[:match.start(1)] + base64.b64encode(out.getvalue()).decode() + text[match.end(1):])
    return target


def probe(zygotes, tmp_path, path):
    """(direct python's result, the zygote's result): the first run starts the zygote, the second is its child's."""
    direct = run([PYTHON, path], str(tmp_path))
    for _attempt in range(2):
        zyg = run(zygote_client.command(zygotes, PYTHON, [path]), str(tmp_path))
    assert len(sockets(zygotes)) == 1
    return direct, zyg


def test_a_run_gets_the_held_module_utils_when_its_payload_holds_the_same_files(zygotes, tmp_path, ansiballz):
    direct, zyg = probe(zygotes, tmp_path, ansiballz)
    assert direct.returncode == zyg.returncode == 0, direct.stdout + zyg.stdout
    ran, held = json.loads(direct.stdout), json.loads(zyg.stdout)
    assert ran["file"] == held["file"] == "ansible/module_utils/basic.py"      # the payload's, in both
    assert ".zip/" in ran["compiled_from"]
    assert held["compiled_from"].endswith("site-packages/ansible/module_utils/basic.py")   # held in the zygote


def test_a_payload_with_another_copy_of_a_held_file_is_imported_from(zygotes, tmp_path, ansiballz):
    path = with_payload(ansiballz, str(tmp_path / "AnsiballZ_changed.py"), lambda name, data: (
        data + b"\nPROBE = 'changed'\n" if name == "ansible/module_utils/basic.py" else data))
    direct, zyg = probe(zygotes, tmp_path, path)
    assert direct.returncode == zyg.returncode == 0, direct.stdout + zyg.stdout
    assert json.loads(direct.stdout)["probe"] == json.loads(zyg.stdout)["probe"] == "changed"
    assert ".zip/" in json.loads(zyg.stdout)["compiled_from"]


def test_a_payload_without_a_held_file_fails_as_python_fails(zygotes, tmp_path, ansiballz):
    missing = "ansible/module_utils/common/warnings.py"
    path = with_payload(ansiballz, str(tmp_path / "AnsiballZ_missing.py"),
                        lambda name, data: None if name == missing else data)
    direct, zyg = probe(zygotes, tmp_path, path)
    assert direct.returncode == zyg.returncode == 1
    assert "ImportError: cannot import name 'warnings' from 'ansible.module_utils.common'" in direct.stderr

    def unique(text):   # each run writes its payload to a directory of its own
        return re.sub(r"/ansible_probe_payload_[^/]+/", "/ansible_probe_payload_*/", text)
    assert (unique(zyg.stdout), unique(zyg.stderr)) == (unique(direct.stdout), unique(direct.stderr))


def test_off_runs_python_itself(zygotes, tmp_path):
    path = script(tmp_path, SCRIPT)
    zyg = run(zygote_client.command(zygotes, PYTHON, [path, "x"]), str(tmp_path),
              {zygote_client.DISABLE_ENV: "off"})
    assert zyg.returncode == 0 and zyg.stderr == "err:x\n"
    assert sockets(zygotes) == []


def test_playbook_runs_keep_their_own_local_temporary_directory(zygotes, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug: {msg: hi}\n")
    cache = tmp_path / "ansiballz"
    cache.mkdir()
    cmd = zygote_client.command(zygotes, PYTHON, [SHARED_CACHE_PLAYBOOK, str(cache), "-i", "localhost,",
                                                  "-c", "local", str(play)])
    env = {"HOME": str(home), "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_PYTHON_INTERPRETER": PYTHON}
    for _attempt in range(2):
        proc = run(cmd, str(tmp_path), env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "ok=1" in proc.stdout
    # the zygote's own directory; each run removed its own as it ended
    assert len(glob.glob(str(home / ".ansible" / "tmp" / "ansible-local-*"))) == 1


def test_a_warmed_playbook_zygote_runs_print_what_ansible_playbook_prints(zygotes, tmp_path):
    """A playbook zygote has read ansible-core's plugin settings before its runs (kit/ansible_playbook.py,
    warm()): a run still takes the options its environment and ansible.cfg give the plugins, and
    prints what ansible-playbook prints."""
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "ansible.cfg").write_text("[defaults]\ncallback_result_format = yaml\n")
    play = tmp_path / "play.yml"
    play.write_text(textwrap.dedent("""\
        - hosts: localhost
          gather_facts: false
          tasks:
            - ansible.builtin.debug: {msg: {nodes: [gpu-1, gpu-2]}}
            - ansible.builtin.debug: {msg: never}
              when: false
            - ansible.builtin.command: {argv: [sh, -c, "echo out"]}
              register: cmd
              changed_when: false
            - ansible.builtin.debug: {var: cmd.stdout_lines}
            - ansible.builtin.fail: {msg: stopped}
              ignore_errors: true
        """))
    cache = tmp_path / "ansiballz"
    cache.mkdir()
    args = ["-i", "localhost,", "-c", "local", str(play)]
    env = {"HOME": str(home), "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_PYTHON_INTERPRETER": PYTHON,
           "ANSIBLE_DISPLAY_SKIPPED_HOSTS": "false", "ANSIBLE_NOCOLOR": "true"}
    plain = run([os.path.join(BIN, "ansible-playbook")] + args, str(tmp_path), env)
    zyg = run(zygote_client.command(zygotes, PYTHON, [SHARED_CACHE_PLAYBOOK, str(cache)] + args), str(tmp_path), env)
    assert sockets(zygotes), "no zygote served the run"
    assert (zyg.returncode, zyg.stdout) == (plain.returncode, plain.stdout)
    assert "    msg:\n        nodes:\n        - gpu-1\n" in zyg.stdout, zyg.stdout      # the YAML result format
    assert "never" not in zyg.stdout and "skipping" not in zyg.stdout, zyg.stdout
    assert "    cmd.stdout_lines:\n    - out\n" in zyg.stdout and "ignored=1" in zyg.stdout, zyg.stdout
