"""Run a real ansible-playbook against the simulated cluster and read its recap.

Shared by every integration test: one place knows how to call ansible-playbook
(JSON callback, environment, collections path) and how to read the result.
"""
import json
import os
import subprocess

from kit import zygote_client
from kit.paths import BIN, COLLECTIONS, REPO

# The session's directory, made and removed by kit.plugin; xdist workers inherit it from the
# controller's environment. It holds the AnsiballZ payload cache (kit/ansible_playbook.py says why)
# and the zygotes, the warm interpreters that fork the runs (kit/zygote.py).
SESSION_ENV = "GPU_PLATFORM_TEST_SESSION"
SHARED_CACHE_PLAYBOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ansible_playbook.py")
PYTHON = os.path.join(BIN, "python")


def session_dirs(session):
    """(payload cache, zygotes, ANSIBLE_HOME of the runs) of a session directory."""
    return tuple(os.path.join(session, name) for name in ("ansiballz", "zygotes", "ansible-home"))


def ansible_playbook():
    """The ansible-playbook command line: with the session's payload cache and zygotes when there
    is a session."""
    session = os.environ.get(SESSION_ENV)
    if session:
        cache, zygotes, _home = session_dirs(session)
        return zygote_client.command(zygotes, PYTHON, [SHARED_CACHE_PLAYBOOK, cache])
    return [os.path.join(BIN, "ansible-playbook")]


def module_python():
    """The python the modules of the runs start with (ANSIBLE_PYTHON_INTERPRETER): the venv's,
    through the session's zygotes when there is a session."""
    session = os.environ.get(SESSION_ENV)
    if session:
        return os.path.join(session_dirs(session)[1], "python")
    return PYTHON


class PlaybookResult:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.stderr = proc.stderr
        try:
            self.data = json.loads(proc.stdout[proc.stdout.index("{"):])
        except ValueError:
            self.data = {"plays": [], "stats": {}}
            self.stderr = proc.stdout + proc.stderr

    @property
    def stats(self):
        """{host: {ok, changed, failures, unreachable, skipped, ...}}"""
        return self.data.get("stats", {})

    def changed(self, host="localhost"):
        return self.stats.get(host, {}).get("changed", 0)

    def failed(self, host="localhost"):
        stats = self.stats.get(host, {})
        return stats.get("failures", 0) + stats.get("unreachable", 0)

    def task_results(self, name, host="localhost"):
        """Results of every task run whose name ends with `name`."""
        found = []
        for play in self.data.get("plays", []):
            for task in play.get("tasks", []):
                if task["task"]["name"].endswith(name) and host in task["hosts"]:
                    found.append(task["hosts"][host])
        return found

    def changed_tasks(self, host="localhost"):
        """Names of the tasks that reported changed (with the loop item labels)."""
        out = []
        for play in self.data.get("plays", []):
            for task in play.get("tasks", []):
                res = task["hosts"].get(host) or {}
                if res.get("changed"):
                    items = [r.get("item") for r in res.get("results") or [] if r.get("changed")]
                    out.append(task["task"]["name"] + (" %s" % items if items else ""))
        return out

    def failure_messages(self):
        msgs = []
        for play in self.data.get("plays", []):
            for task in play.get("tasks", []):
                for host, res in task["hosts"].items():
                    if res.get("failed") or res.get("unreachable"):
                        msgs.append("%s | %s: %s" % (host, task["task"]["name"], res.get("msg")))
        return msgs

    def __repr__(self):
        return "PlaybookResult(rc=%s, stats=%s, failures=%s, stderr=%s)" % (
            self.rc, self.stats, self.failure_messages(), self.stderr[-2000:])


def cluster_inventory(kubeconfig):
    """An inventory source that says only how the control node reaches the simulated cluster:
    localhost and the site-wide `gpu_platform_kubeconfig`, as an operator's group_vars/all does.
    Given before the test's own inventory, so a test that sets credentials itself wins."""
    inv = os.path.join(os.path.dirname(kubeconfig), "cluster-inventory")
    if not os.path.isdir(inv):
        tmp = "%s.%d" % (inv, os.getpid())
        os.makedirs(os.path.join(tmp, "group_vars"), exist_ok=True)
        with open(os.path.join(tmp, "hosts.yml"), "w") as fh:
            json.dump({"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}}, fh)
        with open(os.path.join(tmp, "group_vars", "all.yml"), "w") as fh:
            json.dump({"gpu_platform_kubeconfig": kubeconfig}, fh)
        try:
            os.rename(tmp, inv)
        except OSError:      # another worker made it first
            pass
    return inv


# What a play of an operator's own sets so that every Kubernetes module (both collections') uses
# the inventory's cluster; the one-task plays of the tests start with it.
CLUSTER_DEFAULTS = """\
  module_defaults:
    group/skaffon.gpu_platform.k8s:
      kubeconfig: "{{ gpu_platform_kubeconfig }}"
"""


def task_play(path, module, args, name="under test"):
    """Write a one-task play for localhost (the module with `args`), with CLUSTER_DEFAULTS."""
    with open(str(path), "w") as fh:
        fh.write("- hosts: localhost\n  gather_facts: false\n" + CLUSTER_DEFAULTS +
                 "  tasks:\n    - name: %s\n      %s: %s\n" % (name, module, json.dumps(args)))
    return str(path)


def run_playbook(playbook, env, inventory=None, extra_vars=None, check=False, diff=False,
                 limit=None, timeout=600):
    """ansible-playbook with the JSON callback; `env` is the simcluster fixture's env: the cluster
    reaches the playbook through an inventory (`cluster_inventory`), never the environment."""
    cmd = ansible_playbook() + [playbook]
    kubeconfig = getattr(env, "kubeconfig", None)
    if kubeconfig:
        cmd += ["-i", cluster_inventory(kubeconfig)]
    # one inventory source or several (a site's inventory, then an overlay), in that order
    sources = [inventory] if isinstance(inventory, str) else list(inventory or [])
    for source in sources:
        cmd += ["-i", source]
    if not sources and not kubeconfig:
        # Without an inventory the play targets the control node itself.
        cmd += ["-i", "localhost,", "-c", "local"]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    if limit:
        cmd += ["--limit", limit]
    run_env = dict(env)
    session = os.environ.get(SESSION_ENV)
    if session:
        # one ~/.ansible for the session's runs: the runs of every cluster (each with its own decoy
        # HOME) then share their zygotes (kit/zygote_client.py, home_read_at_import)
        run_env["ANSIBLE_HOME"] = session_dirs(session)[2]
    run_env.update(
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
        ANSIBLE_PYTHON_INTERPRETER=module_python(),
        ANSIBLE_NOCOLOR="1",
    )
    # a failed run is a result the tests read (rc, output), not an exception
    proc = subprocess.run(cmd, cwd=REPO, env=run_env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return PlaybookResult(proc)
