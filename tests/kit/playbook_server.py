"""A fork server for the tests' ansible-playbook runs: ansible imported once, each run a fork of it.

Starting ansible-playbook costs about 0.5 CPU-s before the first task, most of it Python importing
ansible, Jinja, the YAML loader and ansible's configuration (the integration suite starts it some 430
times). What ansible does while it imports depends on its interpreter and on what it reads: the
ANSIBLE_* variables (its configuration), the working directory (./ansible.cfg), the locale, the
PYTHON* variables, and HOME (~/.ansible.cfg, ~/.ansible/...). This server imports what
ansible-playbook imports, for one such set (`import_key`, without HOME's path), and forks a child
per run, which takes the run's arguments, environment, working directory and standard streams,
evaluates ansible's settings again for that environment (`reconfigure`: the paths under the run's
HOME, the plugin loaders' directories among them) and calls ansible-playbook's `main`, as
`kit/ansible_playbook.py` does in a new process. A run whose key differs is refused and the client
starts ansible-playbook the ordinary way.

What differs from a new process, and why it does not matter to a run:
- ansible's configuration creates a private temporary directory while it imports (ansible-local-PID):
  the child's settings make the run's own, which it removes when it ends, as a new process does;
- Python's warnings at import (the cryptography deprecation) went to the server's stderr once;
- the hash seed is the server's, the same for every run (a new process draws one).

    python tests/kit/playbook_server.py SOCKET SESSION_CACHE   (started by kit.playbook_servers)

Each connection: the client (kit/playbook_client.py) sends its three standard streams and a JSON
message (argv, env, cwd) and gets back "pid N", then "exit N" or "signal N"; "fallback" when the
run's key is not this server's. When the client goes away (its caller's timeout killed it), the
run's process group is killed.
"""
import json
import os
import signal
import socket
import struct
import sys
import threading

# Environment variables ansible reads while it imports (besides every ANSIBLE_* and _ANSIBLE_*
# one and HOME): the configuration's few others, the temporary directory, the locale; PYTHON*
# change the interpreter itself.
IMPORT_ENV = ("EDITOR", "NO_COLOR", "PAGER", "TMPDIR", "TEMP", "TMP", "LANG", "LANGUAGE")
IMPORT_ENV_PREFIXES = ("ANSIBLE_", "_ANSIBLE_", "PYTHON", "LC_")
HEADER = struct.Struct("!I")
KIT_RUNNER = "gpu_platform_kit_ansible_playbook"
RUNNER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ansible_playbook.py")


def import_key(env, cwd):
    """What a run's imports depend on: two runs with one key import the same. HOME is not in it
    (each simulated cluster has a HOME of its own): the child evaluates the settings again
    (`reconfigure`), ~/.ansible/... with them; whether HOME holds an .ansible.cfg is in it."""
    home_cfg = os.path.exists(os.path.join(env.get("HOME", "/nonexistent"), ".ansible.cfg"))
    return json.dumps([os.path.realpath(cwd), home_cfg, sorted(
        (k, v) for k, v in env.items() if k in IMPORT_ENV or k.startswith(IMPORT_ENV_PREFIXES))])


def receive(conn):
    """The client's message and its three standard streams."""
    data, fds, _flags, _addr = socket.recv_fds(conn, HEADER.size, 3)
    while len(data) < HEADER.size:
        more = conn.recv(HEADER.size - len(data))
        if not more:
            raise EOFError("client closed the connection")
        data += more
    (size,) = HEADER.unpack(data)
    body = b""
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise EOFError("client closed the connection")
        body += more
    return json.loads(body.decode("utf-8")), fds


def reconfigure(C):
    """Evaluate ansible's settings again, as ansible.constants does at import, and point the plugin
    loaders built at import from a path setting (~/.ansible/plugins/...) at the new value."""
    from ansible.plugins import loader as plugin_loader

    settings = C.config.get_configuration_definitions()
    by_value = dict((id(getattr(C, name)), name) for name in settings if isinstance(getattr(C, name, None), list))
    loaders = [(obj, by_value[id(obj.config)]) for obj in vars(plugin_loader).values()
               if isinstance(obj, plugin_loader.PluginLoader) and id(obj.config) in by_value]
    for name in settings:
        C.set_constant(name, C.config.get_config_value(name, variables=vars(C)))
    for obj, name in loaders:
        obj.config = getattr(C, name)
        obj._clear_caches()


def run_playbook(message, fds, session_cache):
    """In the forked child: become the run's process and run ansible-playbook; never returns."""
    code = 1
    try:
        import atexit

        from ansible import constants as C
        from ansible.utils.path import cleanup_tmp_file

        ansible_playbook = sys.modules[KIT_RUNNER]
        os.setpgid(0, 0)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(message["cwd"])
        os.environ.clear()
        os.environ.update(message["env"])
        sys.argv = [ansible_playbook.__file__] + message["argv"]
        # the configuration as this run's environment gives it (HOME is not in the key)
        atexit.unregister(cleanup_tmp_file)     # the server's ansible-local-PID; the run makes its own
        reconfigure(C)
        ansible_playbook.share_payload_cache(session_cache)
        ansible_playbook.cache_bytecode()
        code = ansible_playbook.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:   # noqa: B036 - a run's crash is its exit status, as in a new process
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        try:
            import atexit
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


def handle(conn, key, session_cache):
    """In a forked child per connection: start the run, report its end; never returns."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        message, fds = receive(conn)
        if import_key(message["env"], message["cwd"]) != key:
            conn.sendall(b"fallback\n")
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            conn.close()
            signal.signal(signal.SIGINT, signal.default_int_handler)
            run_playbook(message, fds, session_cache)
        for fd in fds:
            os.close(fd)     # the client's pipes reach their end when the run's own copies close
        conn.sendall(b"pid %d\n" % pid)

        ended = threading.Event()

        def client_gone():
            # recv returns b"" when the client exits: its caller gave up, so does the run. SIGTERM
            # first: ansible-playbook's handler ends its workers, which run in sessions of their own.
            try:
                conn.recv(1)
            except OSError:
                pass
            for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 0)):
                try:
                    os.killpg(pid, sig)
                except OSError:
                    return
                if ended.wait(grace):
                    return

        threading.Thread(target=client_gone, daemon=True).start()
        _pid, status = os.waitpid(pid, 0)
        ended.set()
        if os.WIFSIGNALED(status):
            report = b"signal %d\n" % os.WTERMSIG(status)
        else:
            report = b"exit %d\n" % os.WEXITSTATUS(status)
        try:
            conn.sendall(report)
        except OSError:
            pass    # the client is gone (that ended the run)
    except BaseException:   # noqa: B036 - into the server's log; the client sees its connection end
        import traceback
        traceback.print_exc()
    finally:
        os._exit(0)


def preload():
    """Import what ansible-playbook imports before its first task: the kit's runner (with it
    ansible.cli.playbook, the configuration, module_common) and what its `main` imports."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(KIT_RUNNER, RUNNER_PATH)
    runner = importlib.util.module_from_spec(spec)
    sys.modules[KIT_RUNNER] = runner
    spec.loader.exec_module(runner)
    import ansible.executor.task_queue_manager  # noqa: F401
    import ansible.inventory.manager  # noqa: F401
    import ansible.plugins.loader  # noqa: F401
    import ansible.vars.manager  # noqa: F401


def reap():
    """Wait for the handlers that ended (so that their CPU time counts as the server's, and the
    server's as its starter's: the tests' CPU accounting sees the runs)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(path, session_cache):
    parent = os.getppid()
    preload()
    key = import_key(os.environ, os.getcwd())
    import gc
    gc.freeze()     # the imported objects stay in the shared pages of every fork
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = "%s.%d" % (path, os.getpid())
    server.bind(tmp)
    server.listen(16)
    os.rename(tmp, path)     # a client that finds the socket finds a server ready to fork
    server.settimeout(1.0)
    try:
        while os.getppid() == parent:     # the test process that started it is gone: so is the server
            reap()
            try:
                conn, _addr = server.accept()
            except socket.timeout:
                continue
            conn.settimeout(None)
            if os.fork() == 0:
                server.close()
                handle(conn, key, session_cache)
            conn.close()
    finally:
        server.close()
        reap()
        try:
            os.unlink(path)
        except OSError:
            pass


if __name__ == "__main__":
    del sys.path[0]     # this script's directory: nothing ansible imports comes from the test kit
    serve(sys.argv[1], sys.argv[2])
