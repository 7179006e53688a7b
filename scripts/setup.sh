#!/bin/bash
# Set up this checkout on Debian 12 or 13 (root): apt packages, the virtualenv (.venv) with the
# project installed, and the local Slurm cluster (`dlcluster up`, 4 nodes x 8 fake GPUs).
# Idempotent: a second run changes nothing. One line per step says what it installs; apt's and
# pip's own output goes to a log shown only on failure.
# Usage: scripts/setup.sh [dlcluster up options...]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "setup.sh: run as root (sudo): it installs packages and starts Slurm" >&2; exit 1; fi
. /etc/os-release
case "${ID:-}/${VERSION_ID:-}" in
  debian/12) host_slurm=22.05 ;;
  debian/13) host_slurm=24.11 ;;
  *) echo "setup.sh: Debian 12 (bookworm) or 13 (trixie) is required; this is ${PRETTY_NAME:-unknown}" >&2; exit 1 ;;
esac
echo "setup.sh: [1/4] apt packages: python3 python3-venv python3-pip tmux passwd"
scripts/apt-install.sh setup.sh python3 python3-venv python3-pip tmux passwd
echo "setup.sh: [2/4] virtualenv: .venv (with /usr/bin/python3, so every user can run it)"
. scripts/venv.sh
ensure_venv setup.sh .venv
echo "setup.sh: [3/4] pip: the project (editable) and its Python dependencies from pyproject.toml into .venv"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
pip_log=$(PIP_DISABLE_PIP_VERSION_CHECK=1 .venv/bin/python -m pip install -q -e '.[test]' 2>&1) || { printf '%s\n' "$pip_log" >&2; echo "setup.sh: pip install -e '.[test]' failed (its output above)" >&2; exit 1; }
# the release asked for (--slurm X / --slurm=X; dlcluster's default is the host's own)
release=$host_slurm prev=
for a in "$@"; do
  [ "$prev" = --slurm ] && release=$a
  case $a in --slurm=*) release=${a#--slurm=} ;; esac
  prev=$a
done
if [ "$release" = "$host_slurm" ]; then
  what="installs slurm-wlm $host_slurm and munge with apt if missing"
else
  what="Slurm $release from a Debian root filesystem that dlcluster builds with mmdebstrap if missing"
fi
echo "setup.sh: [4/4] local Slurm cluster: dlcluster up $* ($what)"
.venv/bin/dlcluster up "$@"
