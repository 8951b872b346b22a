#!/bin/sh
# The bad-input catalogue (or other integration tests: pass pytest arguments) on the oldest
# ansible-core the README supports, 2.16, from a virtual environment of its own:
#   scripts/test_oldest_ansible.sh [pytest args]   (default: tests/integration/test_bad_inputs.py)
# kubernetes.core and ansible.posix are copied from .venv (no Galaxy needed).
set -eu
cd "$(dirname "$0")/.."
VENV=${GPU_PLATFORM_ANSIBLE_VENV:-build/venv-ansible-core-2.16}
if [ ! -x "$VENV/bin/ansible-playbook" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q 'ansible-core==2.16.*' kubernetes==37.0.2 PyYAML jsonpatch jmespath
fi
SRC=$(.venv/bin/python -c 'import ansible_collections, os; print(os.path.dirname(ansible_collections.__file__))' 2>/dev/null \
      || ls -d .venv/lib/python3*/site-packages/ansible_collections)
DEST=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ansible_collections
mkdir -p "$DEST/ansible"
[ -d "$DEST/kubernetes" ] || cp -r "$SRC/kubernetes" "$DEST/"
[ -d "$DEST/ansible/posix" ] || cp -r "$SRC/ansible/posix" "$DEST/ansible/"
"$VENV/bin/python" -c "from ansible.release import __version__; print(\"ansible-core\", __version__)"
[ $# -gt 0 ] || set -- tests/integration/test_bad_inputs.py
GPU_PLATFORM_ANSIBLE_VENV=$(cd "$VENV" && pwd) PYTHONPATH="scripts${PYTHONPATH:+:$PYTHONPATH}" \
    exec .venv/bin/python -m pytest -q -p no:cacheprovider -p oldest_ansible_plugin "$@"
