#!/usr/bin/env bash
# Packaging test, as an air-gapped site would do it: build the artifact,
# install it offline into an empty collections path (dependencies satisfied by
# what is already installed: kubernetes.core in the venv), then document every
# module and filter and syntax-check the playbooks of the INSTALLED copy.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
export PATH=$venv/bin:$PATH
unset ANSIBLE_COLLECTIONS_PATH ANSIBLE_COLLECTIONS_PATHS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ansible-galaxy collection build "$repo" --output-path "$work" >/dev/null
tarball=$(ls "$work"/skaffon-gpu_platform-*.tar.gz)
echo "built $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB)"

# Nothing but runtime content may ship.
if tar -tzf "$tarball" | grep -E '^(tests|simcluster|scripts|benchmarks|build|\.venv|\.ci|\.helper)/'; then
  echo "FAIL: build_ignore let test or build files into the artifact" >&2
  exit 1
fi

site=$("$venv/bin/python" -c 'import ansible_collections.kubernetes.core as m, os; print(os.path.dirname(os.path.dirname(os.path.dirname(m.__path__[0]))))')
dest=$work/collections
mkdir -p "$dest"
export ANSIBLE_COLLECTIONS_PATH=$dest:$site
ansible-galaxy collection install --offline -p "$dest" "$tarball" >/dev/null
installed=$dest/ansible_collections/skaffon/gpu_platform
test -f "$installed/MANIFEST.json"

# One ansible-doc per plugin type and one syntax check for every playbook (each start of ansible
# costs half a CPU-second; one per plugin made this the slowest short suite). ansible-doc only
# warns about a plugin it cannot find, so its JSON is checked for a documentation of every name.
document() {   # document TYPE NAME...: every NAME has a documentation in ansible-doc's JSON
  ansible-doc --json -t "$1" "${@:2}" > "$work/doc-$1.json"
  python - "$work/doc-$1.json" "${@:2}" <<'EOF'
import json, sys
docs = json.load(open(sys.argv[1]))
missing = [name for name in sys.argv[2:] if not (docs.get(name) or {}).get("doc")]
if missing:
    sys.exit("FAIL: ansible-doc has no documentation for %s" % ", ".join(missing))
EOF
}
modules=() filters=()
for f in "$installed"/plugins/modules/*.py; do
  if [ -e "$f" ]; then modules+=("skaffon.gpu_platform.$(basename "$f" .py)"); fi
done
for f in "$installed"/plugins/filter/*.yml; do
  if [ -e "$f" ]; then filters+=("skaffon.gpu_platform.$(basename "$f" .yml)"); fi
done
if [ ${#modules[@]} -gt 0 ]; then document module "${modules[@]}"; fi
if [ ${#filters[@]} -gt 0 ]; then document filter "${filters[@]}"; fi
count=$(( ${#modules[@]} + ${#filters[@]} ))
echo "ansible-doc: $count plugins documented"

playbooks=()
for f in "$installed"/playbooks/*.yml; do
  if [ -e "$f" ]; then playbooks+=("skaffon.gpu_platform.$(basename "$f" .yml)"); fi
done
[ ${#playbooks[@]} -gt 0 ] || { echo "FAIL: no playbook in the installed collection" >&2; exit 1; }
ansible-playbook --syntax-check -i localhost, "${playbooks[@]}" >/dev/null
echo "syntax-check: ${#playbooks[@]} playbooks of the installed collection"
# The AWX/Tower execution environment definition must produce a build context
# whose Dockerfile installs helm with our script (no container runtime here to build it).
ansible-builder create -f "$repo/execution-environment.yml" -c "$work/ee" >/dev/null
grep -q 'python3 /tmp/install_k8s_tools.py --dest /usr/local/bin' "$work/ee/Dockerfile"
test -f "$work/ee/_build/scripts/install_k8s_tools.py"
echo "execution environment: build context created"
echo "package: 1 passed, 0 failed"
