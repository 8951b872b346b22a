"""The fork servers (kit/playbook_server.py) of one test process: one per import key, started by the
first run with that key (which itself runs the ordinary way while the server imports), at most
KEEP alive. The runs of one test file share a simulated cluster and so a HOME and an
environment: one key. `GPU_PLATFORM_TEST_FORK_SERVER=0` runs every playbook as a new process."""
import atexit
import collections
import os
import shutil
import subprocess
import tempfile

from kit.paths import BIN
from kit.playbook_server import import_key

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "playbook_server.py")
CLIENT = os.path.join(HERE, "playbook_client.py")
SWITCH_ENV = "GPU_PLATFORM_TEST_FORK_SERVER"
KEEP = 2        # a file's key and the one before it: an xdist worker runs a file's tests together

Server = collections.namedtuple("Server", "proc path")
_servers = collections.OrderedDict()
_state = {"dir": None, "count": 0}


def command(fallback, session_cache, env, cwd):
    """The command line of a run with `env` in `cwd`: the client of this key's server, which
    becomes `fallback` when the server is not ready."""
    if not session_cache or os.environ.get(SWITCH_ENV) == "0":
        return list(fallback)
    key = import_key(env, cwd)
    server = _servers.get(key)
    if server is None or server.proc.poll() is not None:
        server = _start(key, session_cache, env, cwd)
    _servers.move_to_end(key)
    return [os.path.join(BIN, "python"), "-I", "-S", CLIENT, server.path, str(len(fallback))] + list(fallback)


def _start(key, session_cache, env, cwd):
    if _state["dir"] is None:
        _state["dir"] = tempfile.mkdtemp(prefix="gpp-")     # short: a socket path has 107 bytes
        atexit.register(stop_all)
    _state["count"] += 1
    path = os.path.join(_state["dir"], "%d.sock" % _state["count"])
    with open(path + ".log", "wb") as log:
        proc = subprocess.Popen([os.path.join(BIN, "python"), SERVER, path, session_cache], env=env, cwd=cwd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    _servers[key] = Server(proc, path)
    while len(_servers) > KEEP:
        _stop(_servers.popitem(last=False)[1])
    return _servers[key]


def _stop(server):
    if server.proc.poll() is None:
        server.proc.terminate()
        try:
            server.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()


def stop_all():
    while _servers:
        _stop(_servers.popitem()[1])
    if _state["dir"]:
        shutil.rmtree(_state["dir"], ignore_errors=True)
        _state["dir"] = None
