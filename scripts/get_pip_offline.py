"""Stand-in for get-pip.py used by `ansible-test --venv` (it can't reach its CDN).

ansible-test runs ~/.ansible/test/cache/get_pip_<ver>.py with pip install
arguments; we bootstrap pip with the interpreter's own ensurepip and then let
that pip install the same arguments from the package index.
"""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"],
                      stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
