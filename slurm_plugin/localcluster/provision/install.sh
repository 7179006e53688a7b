#!/bin/bash
# Install the host's Slurm (Debian 12: 22.05, Debian 13: 24.11) and munge when missing
# (idempotent). Used by `dlcluster up` and by vagrant/Vagrantfile, so the local cluster and the
# VMs are provisioned the same way. --no-slurm: munge (and MariaDB) and mmdebstrap only, for a
# cluster whose Slurm release runs from a root filesystem (slurm_plugin/localcluster/rootfs.py).
# --netns: also iproute2 (ip netns, veth, bridge) and util-linux (nsenter) for `dlcluster up --netns`.
# Usage: install.sh [--with-dbd] [--role all|controller|compute] [--no-slurm] [--netns]
set -euo pipefail
with_dbd=0; role=all; slurm=1; netns=0
while [ $# -gt 0 ]; do
  case "$1" in
    --with-dbd) with_dbd=1 ;;
    --role) role=$2; shift ;;
    --no-slurm) slurm=0 ;;
    --netns) netns=1 ;;
    *) echo "install.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
. /etc/os-release 2>/dev/null || true
if [ "${ID:-}" != debian ] || { [ "${VERSION_ID:-}" != 12 ] && [ "${VERSION_ID:-}" != 13 ]; }; then
  echo "install.sh: Debian 12 (bookworm) or 13 (trixie) is required; this is ${PRETTY_NAME:-an unknown system}" >&2
  exit 3
fi
pkgs="munge slurm-client slurm-wlm-basic-plugins"
case "$role" in
  all) pkgs="$pkgs slurm-wlm slurmctld slurmd" ;;
  controller) pkgs="$pkgs slurmctld" ;;
  compute) pkgs="$pkgs slurmd" ;;
  *) echo "install.sh: --role must be all, controller or compute" >&2; exit 2 ;;
esac
if [ "$slurm" = 0 ]; then pkgs="munge mmdebstrap"; fi
if [ "$with_dbd" = 1 ]; then
  pkgs="$pkgs mariadb-server"
  if [ "$slurm" = 1 ]; then pkgs="$pkgs slurmdbd"; fi
fi
if [ "$netns" = 1 ]; then pkgs="$pkgs iproute2 util-linux"; fi
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
[ -z "$missing" ] && exit 0
echo "install.sh: apt-get install$missing" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq >/tmp/dlcluster-apt.log 2>&1 \
   || ! apt-get install -y -qq --no-install-recommends $missing >>/tmp/dlcluster-apt.log 2>&1; then
  echo "install.sh: apt-get could not install:$missing (log: /tmp/dlcluster-apt.log)" >&2
  tail -5 /tmp/dlcluster-apt.log >&2
  exit 4
fi
