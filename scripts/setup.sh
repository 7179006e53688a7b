#!/bin/bash
# Set up this checkout on Debian 12 (root): apt packages, the virtualenv (.venv) with the
# project installed, and the local Slurm cluster (`dlcluster up`, 4 nodes x 8 fake GPUs).
# Idempotent: a second run changes nothing. Usage: scripts/setup.sh [dlcluster up options...]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "setup.sh: run as root (sudo): it installs packages and starts Slurm" >&2; exit 1; fi
. /etc/os-release
if [ "${ID:-}" != debian ] || [ "${VERSION_ID:-}" != 12 ]; then
  echo "setup.sh: Debian 12 (bookworm) is required; this is ${PRETTY_NAME:-unknown}" >&2; exit 1
fi
need=""
for p in python3 python3-venv python3-pip tmux passwd; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
if [ -n "$need" ]; then
  echo "setup.sh: apt-get install$need" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
# Slurm, munge (and MariaDB/slurmdbd with --with-dbd) come with `dlcluster up` (install.sh).
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
pip_log=$(PIP_DISABLE_PIP_VERSION_CHECK=1 .venv/bin/python -m pip install -q -e '.[test]' 2>&1) || { printf '%s\n' "$pip_log" >&2; echo "setup.sh: pip install -e '.[test]' failed (its output above)" >&2; exit 1; }
.venv/bin/dlcluster up "$@"
