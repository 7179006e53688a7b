#!/bin/bash
# Install Debian 12's Slurm 22.05 and munge when missing (idempotent). Used by `dlcluster up`
# and by vagrant/Vagrantfile, so the local cluster and the VMs are provisioned the same way.
# Usage: install.sh [--with-dbd] [--role all|controller|compute]
set -euo pipefail
with_dbd=0; role=all
while [ $# -gt 0 ]; do
  case "$1" in
    --with-dbd) with_dbd=1 ;;
    --role) role=$2; shift ;;
    *) echo "install.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
. /etc/os-release 2>/dev/null || true
if [ "${ID:-}" != debian ] || [ "${VERSION_ID:-}" != 12 ]; then
  echo "install.sh: Debian 12 (bookworm) is required; this is ${PRETTY_NAME:-an unknown system}" >&2
  exit 3
fi
pkgs="munge slurm-client slurm-wlm-basic-plugins"
case "$role" in
  all) pkgs="$pkgs slurm-wlm slurmctld slurmd" ;;
  controller) pkgs="$pkgs slurmctld" ;;
  compute) pkgs="$pkgs slurmd" ;;
  *) echo "install.sh: --role must be all, controller or compute" >&2; exit 2 ;;
esac
[ "$with_dbd" = 1 ] && pkgs="$pkgs slurmdbd mariadb-server"
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
