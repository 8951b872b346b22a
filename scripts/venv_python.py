"""Print the interpreter `make` builds .venv from: this Python, or another install of the same
version whose executable has the interpreter linked in.

A CPython built with --enable-shared (pyenv's default) runs the interpreter from libpython3.X.so,
compiled as position-independent code; the suite is CPU-bound, and on the machine where it was
measured an executable with the interpreter linked in (such as Debian's /usr/bin/python3.11) ran
`make test` about 10 % faster (docs/architecture.md). Only the build differs: the version is the
one `python3` gives, and an install without venv and ensurepip is not a candidate. Linux only (it
reads /proc/self/maps); elsewhere, or when nothing else qualifies, this Python.

    python3 scripts/venv_python.py      (make sets PYTHON=... to choose one itself)
"""
import os
import shutil
import subprocess
import sys

PROBE = ("import sys, ensurepip, venv\n"
         "with open('/proc/self/maps') as fh: shared = 'libpython' in fh.read()\n"
         "print('%d.%d' % sys.version_info[:2], 'shared' if shared else 'linked')")


def probe(python):
    """(version, 'shared' | 'linked') of `python`, or None when it cannot make a venv."""
    try:
        out = subprocess.run([python, "-I", "-c", PROBE], capture_output=True, text=True, timeout=30,
                             check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return tuple(out) if len(out) == 2 else None


def candidates(version):
    """This version's interpreters, each once: the one on PATH first, then the usual system places."""
    found, real = [], set()
    for path in (shutil.which("python" + version), "/usr/bin/python" + version, "/usr/local/bin/python" + version):
        if path and os.path.exists(path) and os.path.realpath(path) not in real:
            real.add(os.path.realpath(path))
            found.append(path)
    return found


def main():
    version = "%d.%d" % sys.version_info[:2]
    for python in candidates(version):
        found = probe(python)
        if found == (version, "linked"):
            print(python)
            return
    print(sys.executable)


if __name__ == "__main__":
    main()
