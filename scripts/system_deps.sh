#!/usr/bin/env bash
# System packages the integration tests use: debootstrap builds the Debian 12
# root the node_prereqs role is tested in; prometheus (promtool and the server)
# checks and runs the GPU rules of roles/monitoring. Installed when we can (root + apt);
# otherwise those tests skip and say why.
set -euo pipefail
missing=()
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages: ${missing[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "note: ${missing[*]} missing and not installable here (needs root + apt-get); the chroot and Prometheus tests will skip"
fi
