#!/usr/bin/env bash
# ansible-test sanity on a copy of the collection laid out as
# build/sanity/ansible_collections/skaffon/gpu_platform (what ansible-test needs),
# next to kubernetes.core taken from the venv. Offline: a get-pip stand-in.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
root=$repo/build/sanity/ansible_collections
dest=$root/skaffon/gpu_platform

for ver in 24_2 25_0 25_1; do
  mkdir -p ~/.ansible/test/cache
  cp "$repo/scripts/get_pip_offline.py" ~/.ansible/test/cache/get_pip_$ver.py
done

rm -rf "$dest"
mkdir -p "$dest" "$root/kubernetes"
# What ships in the collection, plus unit tests (sanity also lints those). The rendered example
# manifests of docs/design-example/templates are multi-document Kubernetes YAML (PodGroup + Job),
# which yamllint's single-document rule does not fit.
git -C "$repo" ls-files -co --exclude-standard -z \
  | grep -zv -E '^(simcluster|benchmarks|scripts|\.ci|\.helper|molecule|tests/integration|tests/charts|tests/clusters|docs/design-example/templates)/' \
  | (cd "$repo" && xargs -0 cp --parents -t "$dest" 2>/dev/null || true)
ln -sfn "$venv/lib/python3.11/site-packages/ansible_collections/kubernetes/core" "$root/kubernetes/core"
cd "$dest"
git init -q . && git add -A >/dev/null   # ansible-test reads the file list from git
PATH=$venv/bin:$PATH ansible-test sanity --venv --python 3.11 --color no "$@"
