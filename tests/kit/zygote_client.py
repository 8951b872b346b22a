"""The calling half of the test kit's warm interpreters (kit/zygote.py says what they are and why).

`python -S zygote_client.py <zygote directory> <python> <script> [arguments]` does what
`<python> <script> [arguments]` does, with the same standard streams, working directory,
environment and exit status, but has a zygote of the same kind, python, working directory and
environment fork the run. Whatever it cannot do through a zygote, it does by exec'ing the python
itself: a zygote that does not start in time, an invocation that is not `python <script file>`.

It runs some 1,900 times a suite, so it starts without site (`-S`) and imports only `os` and
modules built into the interpreter: `_socket` rather than `socket` (which imports enum and
selectors), `_sha256` rather than `hashlib` (which loads OpenSSL), no `struct`. `command()`
imports it from its bytecode rather than running this file as a script (which python compiles at
every start). A client costs about 9 ms instead of 21.
"""
import os
import sys
import time

import _socket

try:
    from _sha256 import sha256      # python 3.11
except ImportError:     # pragma: no cover - python 3.12 and later
    try:
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256

DISABLE_ENV = "GPU_PLATFORM_TEST_ZYGOTES"    # "off": every run exec's its python, as without the kit
PLAYBOOK_SCRIPT = "ansible_playbook.py"      # the kit's ansible-playbook; any other script is a module
KIT = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(KIT, "zygote.py")
# Set by the shell for each command; nothing reads them while importing.
VOLATILE = ("_", "PWD", "OLDPWD", "SHLVL")
# Read by the programs a run starts (helm), never by what a zygote imports: the simulated clusters
# give each test file its own, and its runs still share the zygotes.
RUN_TIME_ONLY = ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")
# Set by pytest and xdist for each test and worker (a cluster's environment keeps those of the test
# that started it); nothing a zygote imports reads them.
PYTEST_PREFIX = "PYTEST_"
SPAWN_WAIT = 60.0       # a new zygote imports for a second or two, longer on a loaded machine
ACK = b"A"
OFF = "off"     # written by a zygote that cannot run here (its reason inside): every run exec's


class STATUS:
    """A signed 32-bit integer in network order (a request's length, a run's exit status)."""
    size = 4

    @staticmethod
    def pack(value):
        return value.to_bytes(4, "big", signed=True)

    @staticmethod
    def unpack(data):
        if len(data) != 4:
            raise ValueError("%d bytes instead of 4" % len(data))
        return (int.from_bytes(data, "big", signed=True),)


def kind_of(script):
    return "playbook" if os.path.basename(script) == PLAYBOOK_SCRIPT else "module"


def home_read_at_import(kind, env):
    """Whether what a zygote of `kind` imports reads HOME. A module zygote's libraries expand `~`
    only when a run calls them. ansible expands it in its configuration when it is imported: the
    default of ANSIBLE_HOME (~/.ansible: the local temporary directory and the plugin paths are
    below it), ~/.ansible.cfg (read when neither ANSIBLE_CONFIG nor the working directory names a
    file), and any setting whose value names `~` or `$HOME`. The test kit gives ANSIBLE_HOME (one
    per session) so that the playbook runs of every simulated cluster, each with its own decoy
    HOME, share their zygotes."""
    if kind != "playbook":
        return False
    ansible_home = env.get("ANSIBLE_HOME", "")
    if not os.path.isabs(ansible_home):
        return True
    home = env.get("HOME")
    if home is None or os.path.exists(os.path.join(home, ".ansible.cfg")):     # without HOME: the passwd entry's
        return True
    return any("~" in value or "$" in value for name, value in env.items() if name.startswith("ANSIBLE_"))


def key(kind, python, cwd, env):
    """The zygote's name: everything a run's imports may read (ansible reads its configuration
    from the environment and the working directory's ansible.cfg when it is imported)."""
    digest = sha256()
    unread = VOLATILE + RUN_TIME_ONLY + (() if home_read_at_import(kind, env) else ("HOME",))
    parts = [kind, python, cwd] + sorted("%s=%s" % item for item in env.items()
                                         if item[0] not in unread and not item[0].startswith(PYTEST_PREFIX))
    for part in parts:
        digest.update(os.fsencode(part) + b"\0")
    return "%s-%s" % (kind, digest.hexdigest()[:24])


def encode_request(argv, cwd, env):
    fields = [cwd, str(len(argv))] + list(argv) + ["%s=%s" % item for item in env.items()]
    return b"\0".join(os.fsencode(field) for field in fields)


def decode_request(data):
    fields = [os.fsdecode(field) for field in data.split(b"\0")]
    cwd, count = fields[0], int(fields[1])
    argv = fields[2:2 + count]
    env = dict(field.split("=", 1) for field in fields[2 + count:])
    return argv, cwd, env


def recv_exact(sock, size):
    """`size` bytes from `sock`, or None if it ends before."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _ask(path, argv):
    """The run's exit status through the zygote at `path`; None when there is no zygote there, or
    it went away before it started the run (the caller may then start one, or run it itself)."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
        request = encode_request(argv, os.getcwd(), os.environ)
        # socket.send_fds, without the socket module: the three descriptors as C ints
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
        sock.sendmsg([STATUS.pack(len(request))], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        sock.sendall(request)
        if recv_exact(sock, 1) != ACK:
            return None
    except OSError:
        sock.close()
        return None
    try:
        status = recv_exact(sock, STATUS.size)     # the run goes on in the zygote's child
    except OSError:
        status = None
    sock.close()
    if status is None:
        sys.stderr.write("zygote %s ended during the run\n" % path)
        return 1
    return STATUS.unpack(status)[0]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _lock_holder(lock):
    """(pid written by the zygote, seconds since the lock was taken); pid 0 while it starts."""
    try:
        with open(lock) as fh:
            pid = int(fh.read() or 0)
        return pid, time.time() - os.stat(lock).st_mtime
    except (OSError, ValueError):
        return 0, 0.0


def _start(base, python, kind):
    """Start the zygote `base` unless it is starting or running; False when it cannot be had."""
    lock = base + ".lock"
    for _attempt in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            pid, age = _lock_holder(lock)
            if (pid and _alive(pid)) or (not pid and age < SPAWN_WAIT):
                return True
            for stale in (lock, base + ".sock"):     # its zygote was killed
                try:
                    os.unlink(stale)
                except OSError:
                    pass
            continue
        os.close(fd)
        _spawn(base, python, kind)
        return True
    return False


def _spawn(base, python, kind):
    pid = os.fork()
    if pid == 0:    # detached (its own session, no inherited descriptors): nobody waits for it
        try:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                log = os.open(base + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                os.dup2(null, 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.closerange(3, 65536)
                try:
                    os.execv(python, [python, SERVER, base, kind])
                except OSError as exc:
                    with open(os.path.join(os.path.dirname(base), OFF), "w") as fh:
                        fh.write("%s: %s\n" % (python, exc))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def through_zygote(zygotes, python, argv):
    kind = kind_of(argv[0])
    base = os.path.join(zygotes, key(kind, python, os.getcwd(), os.environ))
    deadline = time.monotonic() + SPAWN_WAIT
    while time.monotonic() < deadline:
        if os.path.exists(os.path.join(zygotes, OFF)):
            return None
        status = _ask(base + ".sock", argv)
        if status is not None:
            return status
        if not _start(base, python, kind):
            return None
        time.sleep(0.01)
    return None


def exit_with(status):
    if status < 0:      # the run was killed by a signal: so is this process
        import signal
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


def _std_streams_open():
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


def command(zygotes, python, argv):
    """The command line that runs `python argv...` through the zygotes of the directory `zygotes`."""
    return [python, "-S", "-c", "import sys; sys.path.insert(0, %r); import zygote_client; "
            "zygote_client.main(sys.argv[1], sys.argv[2], sys.argv[3:])" % KIT, zygotes, python] + list(argv)


def write_interpreter(zygotes, python):
    """An executable that ansible can take for a python interpreter (ansible_python_interpreter):
    it runs `python <module payload>` through the zygotes. Returns its path."""
    path = os.path.join(zygotes, "python")
    with open(path, "w") as fh:
        fh.write("#!%s -S\nimport sys\nsys.path.insert(0, %r)\nimport zygote_client\n"
                 "zygote_client.main(%r, %r, sys.argv[1:])\n"
                 % (python, KIT, zygotes, python))
    os.chmod(path, 0o755)
    return path


def stop_all(zygotes):
    """End the zygotes of `zygotes` (each one's pid is in its lock file)."""
    import signal
    for name in os.listdir(zygotes):
        if name.endswith(".lock"):
            pid, _age = _lock_holder(os.path.join(zygotes, name))
            if pid:
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass


def main(zygotes, python, argv):
    usable = (argv and not argv[0].startswith("-") and os.path.isfile(argv[0])
              and os.environ.get(DISABLE_ENV) != "off" and _std_streams_open())
    status = through_zygote(zygotes, python, argv) if usable else None
    if status is None:
        os.execv(python, [python] + list(argv))
    exit_with(status)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
