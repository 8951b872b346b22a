#!/usr/bin/env bash
# molecule test of every scenario under molecule/, each against a fresh
# simulated cluster (tests/clusters/default.yaml) with the real GPU Operator chart
# (../shared/upstream/gpu-operator/charts/gpu-operator-v26.7.0.tgz, an air-gapped site's archive).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
export PATH=$venv/bin:$PATH MOLECULE_PYTHON=$venv/bin/python
export ANSIBLE_COLLECTIONS_PATH=$repo/build/collections
# No cluster may come from the environment or ~/.kube/config (HOME is an empty directory below).
unset KUBECONFIG $(compgen -e | grep '^K8S_AUTH_' || true)
# The simulated cluster needs the upstream CRDs in ../shared (like the pytest suites,
# skip with the reason when they are absent).
crd=$repo/../shared/upstream/gpu-operator/crds/nvidia.com_clusterpolicies.yaml
chart=$repo/../shared/upstream/gpu-operator/charts/gpu-operator-v26.7.0.tgz
for f in "$crd" "$chart"; do
  if [ ! -f "$f" ]; then
    echo "molecule: skipped: $f not found (../shared next to the repo)"
    exit 0
  fi
done
work=$(mktemp -d)
sim=
cleanup() { [ -n "$sim" ] && kill "$sim" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/home"

export MOLECULE_CHART_ARCHIVE=$(cd "$(dirname "$chart")" && pwd)/$(basename "$chart")
cd "$repo"
for dir in molecule/*/; do
  scenario=$(basename "$dir")
  python -m simcluster --cluster tests/clusters/default.yaml --kubeconfig "$work/kubeconfig" >"$work/ready" &
  sim=$!
  for _ in $(seq 100); do grep -q '^ready ' "$work/ready" 2>/dev/null && break; sleep 0.1; done
  grep -q '^ready ' "$work/ready" || { echo "simcluster did not start" >&2; exit 1; }
  # the scenario's inventory carries the cluster (molecule.yml group_vars); nothing in the environment
  MOLECULE_CLUSTER_CONFIG=$work/kubeconfig HOME=$work/home molecule test -s "$scenario"
  kill "$sim"; wait "$sim" 2>/dev/null || true; sim=
  echo "molecule: scenario $scenario passed"
done
