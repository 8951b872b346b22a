"""One ansible-playbook run through the fork server (kit/playbook_server.py), as a process of its own.

The test kit runs this where it would run ansible-playbook, so its caller keeps what a process gives
(captured output, exit status, a timeout that kills it): the run writes to this process's standard
streams, its exit status is this process's, and when this process is killed the server kills the
run. Without a server, or one for other imports, it becomes the ordinary command (FALLBACK...).

    python -I -S tests/kit/playbook_client.py SOCKET N FALLBACK_1..FALLBACK_N ANSIBLE_PLAYBOOK_ARGS...

Standard library only, and started without site: it costs a hundredth of ansible-playbook's start.
"""
import json
import os
import signal
import socket
import struct
import sys

HEADER = struct.Struct("!I")


def run(path, argv):
    """The run's exit status as a wait status ("exit", N) or ("signal", N); None for the fallback."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        return None     # no server (yet): the ordinary command
    body = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode("utf-8")
    socket.send_fds(conn, [HEADER.pack(len(body))], [0, 1, 2])
    conn.sendall(body)
    reader = conn.makefile("rb")
    for line in reader:
        word, _sep, value = line.decode("ascii").strip().partition(" ")
        if word == "fallback":
            return None
        if word in ("exit", "signal"):
            return word, int(value)
    return "exit", 1     # the server went away mid-run


def main():
    path, count = sys.argv[1], int(sys.argv[2])
    fallback, argv = sys.argv[3:3 + count], sys.argv[3 + count:]
    status = run(path, argv)
    if status is None:
        os.execv(fallback[0], fallback + argv)
    word, value = status
    if word == "signal":
        signal.signal(value, signal.SIG_DFL)
        os.kill(os.getpid(), value)
    sys.exit(value)


if __name__ == "__main__":
    main()
