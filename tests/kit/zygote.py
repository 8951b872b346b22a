"""Warm interpreters for the suite's ansible-playbook and module processes ("zygotes").

The integration suite starts ansible-playbook some 400 times, and those runs start about 1,400
module processes. Each one is a new python that first imports what every other one imported:
ansible-playbook its own code (about 0.3 CPU-s of the 0.5 an empty play costs), a Kubernetes module
the Kubernetes client and its dependencies (about 0.25 of 0.45 CPU-s). A zygote imports that once
and forks a child per run; the child then does exactly what `python <script> <arguments>` would do,
on the caller's standard streams, working directory and environment, and its exit status is the
caller's (kit/zygote_client.py, the caller, is a python that imports nothing but the standard library).

What a zygote imports, and what it does not:
- a playbook zygote: ansible-playbook (tests/kit/ansible_playbook.py, the kit's ansible-playbook)
  and ansible-core's executor. ansible reads its configuration from the environment and the working
  directory when it is imported, so a zygote serves one working directory and one environment only:
  its name is a digest of both, and a run with another environment gets a zygote of its own. Left
  out of the digest is what neither kind's imports read (zygote_client.key): the variables pytest
  sets per test and worker, helm's directories, and HOME for a module zygote, and for a playbook zygote when ansible is given ANSIBLE_HOME and
  nothing else that makes it read HOME. The kit gives one ANSIBLE_HOME per session, so the runs of
  every simulated cluster, each with its own decoy HOME and helm directories, share two zygotes
  instead of starting two of their own (about 0.7 CPU-s a cluster). Each child gets its own local
  temporary directory, as each ansible-playbook process makes one.
- a module zygote: the third-party libraries the modules use (the Kubernetes client, PyYAML,
  jsonpatch) and the standard library modules ansible's module_utils import. It also imports
  ansible's, kubernetes.core's and the collection's base module_utils, but holds them apart from
  sys.modules (kit/zygote_imports.py): a run gets them only if its payload holds the very same files,
  so a module_util missing from a payload still fails here as it fails on a host. It runs
  `python <file>` only (ansible's AnsiballZ); any other invocation exec's python.

Differences a test could see, none of which the tests read: a warning that a library prints when it
is imported goes to the zygote's log, not the run's stderr; the run's parent process is the
zygote, not ansible's worker; a run whose caller is killed is killed (SIGKILL, its process group).
`GPU_PLATFORM_TEST_ZYGOTES=off` turns them off (every run exec's python, as before);
`GPU_PLATFORM_TEST_ZYGOTE_STATS=<file>` has each zygote append its runs and their CPU-s as it ends.

A zygote lives in the session's directory (kit.plugin makes it and removes it at the end) and
ends when it has had nothing to do for IDLE seconds, or when its socket is gone.

    python zygote.py <path without extension> <playbook|module>
"""
import atexit
import importlib
import os
import selectors
import signal
import socket
import sys
import threading
import time

from zygote_client import ACK, OFF, STATUS, decode_request, recv_exact

IDLE = 20.0     # a zygote started again costs what the run that starts it would import anyway
POLL = 2.0
STATS_ENV = "GPU_PLATFORM_TEST_ZYGOTE_STATS"   # a file: each zygote appends its figures as it ends
KIT = os.path.dirname(os.path.abspath(__file__))

# A Kubernetes module run's imports that are not its payload's (from runs of the collection's
# modules, kubernetes.core's k8s and helm): a module's own imports are found in sys.modules.
MODULE_PRELOAD = (
    "kubernetes.dynamic", "kubernetes.client", "kubernetes.config", "kubernetes.stream", "kubernetes.watch",
    "yaml", "jsonpatch", "distro",
    "argparse", "ast", "base64", "binascii", "contextlib", "copy", "csv", "dataclasses", "datetime",
    "decimal", "difflib", "email.parser", "encodings.cp437", "enum", "errno", "fcntl", "fractions", "grp",
    "hashlib", "http.client", "importlib.util", "inspect", "json", "locale", "logging", "pathlib",
    "platform", "pprint", "pwd", "queue", "runpy", "secrets", "select", "selectors", "shlex", "shutil",
    "signal", "socket", "ssl", "string", "subprocess", "syslog", "tempfile", "textwrap", "threading",
    "traceback", "typing", "unicodedata", "uuid", "weakref", "zipfile", "zoneinfo",
)
# What ansible-playbook imports for any play, beside its command line's own imports.
PLAYBOOK_PRELOAD = (
    "ansible.executor.playbook_executor", "ansible.executor.task_queue_manager",
    "ansible.executor.task_executor", "ansible.executor.process.worker", "ansible.playbook",
    "ansible.playbook.play", "ansible.playbook.task", "ansible.plugins.strategy",
    "ansible.template", "ansible.inventory.manager", "ansible.vars.manager",
)


class Zygote:
    def __init__(self, base, kind):
        self.base, self.kind = base, kind
        self.path = base + ".sock"
        self.selector = selectors.DefaultSelector()
        self.children = {}      # pid -> (connection or None once its caller left, pidfd)
        self.listener = None
        self.inode = None
        self.last_active = time.monotonic()
        self.started = time.monotonic()
        self.runs = 0

    # -- the zygote ------------------------------------------------------------------------------

    def preload(self):
        if self.kind == "playbook":
            import ansible_playbook       # the kit's ansible-playbook: ansible.cli.playbook and constants
            ansible_playbook.cache_bytecode()
            self.playbook = ansible_playbook
            names = PLAYBOOK_PRELOAD
        else:
            names = MODULE_PRELOAD
        for name in names:
            try:
                importlib.import_module(name)
            except ImportError:     # a library this venv lacks: its modules report it themselves
                pass
        if self.kind == "playbook":
            self.playbook.warm()
        else:
            import zygote_imports
            held = zygote_imports.PayloadImports()
            held.preload()
            for line in held.log:
                sys.stderr.write("zygote %s: not held: %s\n" % (self.path, line))
        # what the runs import comes from where their own python finds it, the kit's modules aside
        sys.path[:] = [entry for entry in sys.path if os.path.realpath(entry) != os.path.realpath(KIT)]
        for name in ("zygote_client", "zygote_imports"):
            sys.modules.pop(name, None)

    def listen(self):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        tmp = "%s.%d.tmp" % (self.base, os.getpid())
        self.listener.bind(tmp)
        self.listener.listen(64)
        os.rename(tmp, self.path)   # a caller connects only to a zygote ready to serve
        self.inode = os.stat(self.path).st_ino
        with open(self.base + ".lock", "w") as fh:
            fh.write(str(os.getpid()))
        self.selector.register(self.listener, selectors.EVENT_READ, ("accept", None))

    def serve(self):
        while True:
            for key, _events in self.selector.select(POLL):
                what, pid = key.data
                try:
                    if what == "accept":
                        self.accept()
                    elif what == "exited":
                        self.reap(pid)
                    else:
                        self.caller_left(pid)
                except OSError as exc:      # one caller's trouble (a fork refused, a lost socket), not the others'
                    sys.stderr.write("zygote %s: %s: %s\n" % (self.path, what, exc))
            if not self.children and (time.monotonic() - self.last_active > IDLE or self.socket_gone()):
                return self.stop()

    def socket_gone(self):
        try:
            return os.stat(self.path).st_ino != self.inode
        except OSError:
            return True

    def stop(self):
        if not self.socket_gone():
            os.unlink(self.path)
        try:
            with open(self.base + ".lock") as fh:
                if fh.read() == str(os.getpid()):
                    os.unlink(self.base + ".lock")
        except OSError:
            pass
        self.listener.close()

    def write_stats(self, path):
        """One line: kind, runs, CPU-s of the zygote itself and of its runs (with everything they
        started), seconds alive."""
        import resource
        own, runs = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(path, "a") as fh:
            fh.write("%s %d %.2f %.2f %.1f\n" % (self.kind, self.runs, own.ru_utime + own.ru_stime,
                                                 runs.ru_utime + runs.ru_stime, time.monotonic() - self.started))

    def accept(self):
        conn, _addr = self.listener.accept()
        conn.settimeout(10)
        fds = []
        try:
            header, fds, _flags, _addr = socket.recv_fds(conn, STATUS.size, 3)
            data = recv_exact(conn, STATUS.unpack(header)[0])
            if data is None or len(fds) != 3:
                raise ValueError("an incomplete request")
            argv, cwd, env = decode_request(data)
            pid = os.fork()
        except (OSError, ValueError, IndexError, TypeError):
            for fd in fds:
                os.close(fd)
            conn.close()        # before the acknowledgement: the caller runs it another way
            return
        if pid == 0:
            self.run_child(conn, fds, argv, cwd, env)     # never returns
        for fd in fds:
            os.close(fd)        # the caller's streams reach their end when the run's copies close
        self.last_active = time.monotonic()
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:     # no descriptor left to watch it by: wait for this run alone
            conn.sendall(ACK)
            conn.sendall(STATUS.pack(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])))
            conn.close()
            self.runs += 1
            return
        self.children[pid] = (conn, pidfd)
        self.selector.register(pidfd, selectors.EVENT_READ, ("exited", pid))
        try:
            conn.sendall(ACK)
        except OSError:
            return self.caller_left(pid)
        self.selector.register(conn, selectors.EVENT_READ, ("caller", pid))

    def reap(self, pid):
        conn, pidfd = self.children.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _pid, status = os.waitpid(pid, 0)
        self.last_active = time.monotonic()
        self.runs += 1
        if conn is not None:
            self.selector.unregister(conn)
            try:
                conn.sendall(STATUS.pack(os.waitstatus_to_exitcode(status)))
            except OSError:
                pass
            conn.close()

    def caller_left(self, pid):
        """The caller's connection ended before its run did: it was killed, and so is the run."""
        conn, pidfd = self.children[pid]
        try:
            self.selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()
        self.children[pid] = (None, pidfd)
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass

    # -- the child: a run -------------------------------------------------------------------------

    def close_zygote(self, conn):
        self.selector.close()
        self.listener.close()
        conn.close()
        for other, pidfd in self.children.values():
            if other is not None:
                other.close()
            os.close(pidfd)

    def run_child(self, conn, fds, argv, cwd, env):
        code = 1
        try:
            os.setpgid(0, 0)    # the run and what it starts: killed together if its caller is
            self.close_zygote(conn)
            for target, fd in zip((0, 1, 2), fds):
                os.dup2(fd, target)
                os.close(fd)
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(env)
            signal.signal(signal.SIGINT, signal.default_int_handler)    # python's own, as at its start
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            sys.argv = list(argv)
            code = 0
            try:
                self.run(argv)
            except SystemExit as exc:
                code = exit_code(exc.code)
            except BaseException:     # as python reports an uncaught exception
                kind, value, trace = sys.exc_info()
                value.with_traceback(script_frames(trace, argv[0]))     # python prints the exception's own
                sys.excepthook(kind, value, value.__traceback__)
                code = 1
            threading._shutdown()     # as the interpreter ends: threads first, then atexit
            atexit._run_exitfuncs()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)

    def run(self, argv):
        if self.kind == "playbook":
            fresh_local_tmp()
            self.playbook.share_payload_cache(sys.argv.pop(1))
            sys.exit(self.playbook.main())
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        import runpy
        runpy.run_path(argv[0], run_name="__main__")


def script_frames(trace, script):
    """A traceback from the script's own frame on, as python shows it (not the zygote's frames)."""
    start = trace
    while start is not None and start.tb_frame.f_code.co_filename != script:
        start = start.tb_next
    return start or trace


def exit_code(value):
    """The exit status python gives for SystemExit(value)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    sys.stderr.write("%s\n" % (value,))
    return 1


def fresh_local_tmp():
    """The run's own local temporary directory, as ansible's configuration makes one per process
    when it is read (the zygote's is the zygote's, and removed when the zygote ends)."""
    import tempfile
    from ansible import constants as C
    from ansible.config.manager import cleanup_tmp_file
    atexit.unregister(cleanup_tmp_file)
    C.DEFAULT_LOCAL_TMP = tempfile.mkdtemp(prefix="ansible-local-%s" % os.getpid(),
                                           dir=os.path.dirname(C.DEFAULT_LOCAL_TMP))
    atexit.register(cleanup_tmp_file, C.DEFAULT_LOCAL_TMP, warn=True)


def main(base, kind):
    zygote = Zygote(base, kind)
    try:
        if not hasattr(os, "pidfd_open"):
            raise OSError("os.pidfd_open: python 3.9 and Linux 5.3 or later")
        zygote.preload()
        zygote.listen()
    except Exception as exc:    # every run exec's python from now on: slower, never wrong
        with open(os.path.join(os.path.dirname(base), OFF), "w") as fh:
            fh.write("%s: %s\n" % (kind, exc))
        raise
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))     # kit.plugin at the session's end
    try:
        zygote.serve()
    finally:
        if os.environ.get(STATS_ENV):
            zygote.write_stats(os.environ[STATS_ENV])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
