#!/usr/bin/env bash
# System packages the tests and the demo use: debootstrap builds the Debian 12
# root the node_prereqs role is tested in; prometheus (promtool and the server)
# checks and runs the GPU rules of roles/monitoring. Installed when we can (root + apt).
#   scripts/system_deps.sh              both (make unit, make integration)
#   scripts/system_deps.sh prometheus   only Prometheus (make demo: its alert check needs it)
# The tests skip and say why when a package cannot be installed; the demo stops with the
# command to run, since its monitoring-alert check cannot pass without Prometheus.
set -euo pipefail
wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=(debootstrap prometheus)
missing=()
for pkg in "${wanted[@]}"; do
  case $pkg in
    debootstrap) command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap) ;;
    prometheus) { command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; } || missing+=(prometheus) ;;
    *) echo "system_deps.sh: unknown package $pkg" >&2; exit 2 ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages: ${missing[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
elif [ "${wanted[*]}" = prometheus ]; then
  echo "make demo needs the Debian package prometheus and cannot install it here (needs root + apt-get):" >&2
  echo "  sudo apt-get update && sudo apt-get install -y prometheus" >&2
  exit 1
else
  echo "note: ${missing[*]} missing and not installable here (needs root + apt-get); the chroot and Prometheus tests will skip"
fi
