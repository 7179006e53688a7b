#!/bin/bash
# Install the .[torch] extra (torch 2.13.0, pinned in pyproject.toml) into .venv unless that
# torch is there: examples/ddp_train.py, tests/live/test_ddp_live.py, ./demo.sh --ddp. Without a GPU
# (no nvidia-smi) PyTorch's CPU index is added when it answers: its build is a local version,
# 2.13.0+cpu, which pip prefers to PyPI's multi-GB CUDA build of 2.13.0.
# Usage: scripts/install-torch.sh [CALLER]   (CALLER names the script in its messages)
set -euo pipefail
cd "$(dirname "$0")/.."
who=${1:-install-torch.sh}
if .venv/bin/python -c 'import sys, torch; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
  exit 0
fi
echo "$who: pip: the .[torch] extra (torch 2.13.0; the CPU build where there is no GPU)"
index=()
cpu_index=https://download.pytorch.org/whl/cpu
# the CPU index only where it answers: pip would otherwise wait out its timeout and retries on a
# machine that reaches PyPI (or a local wheel of 2.13.0+cpu, which pip prefers) but not it
if ! command -v nvidia-smi >/dev/null &&
   .venv/bin/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/torch/", timeout=5)' \
     "$cpu_index" 2>/dev/null; then
  index=(--extra-index-url "$cpu_index")
fi
pip_log=$(.venv/bin/python -m pip install -q "${index[@]}" -e '.[torch]' 2>&1) ||
  { printf '%s\n' "$pip_log" >&2; echo "$who: pip install -e '.[torch]' failed (its output above)" >&2; exit 1; }
