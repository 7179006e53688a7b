#!/bin/bash
# The main job in one command, on Debian 12 as root: installs what is missing (apt packages, the
# .venv with the project, Slurm 22.05 and munge) and starts the local cluster (4 nodes x 8 fake
# GPUs) through scripts/setup.sh, then runs examples/main_job.py: 24 jobs of the Philly trace,
# scaled to 20-240 s, each submitted with dlsubmit as a PAI v2 spec running examples/trainer.py,
# scheduled by `dlprio run`, shown by `dlqueue --watch`; at the end per-job JCT, preemptions and
# restarts, the real run beside `dlprio simulate` on the same scaled trace, and a PNG
# (out/main-job/main_job.png). About 10 minutes after installation. Arguments go to
# main_job.py, e.g. `./demo.sh --jobs 6` (about 2 minutes); see docs/main_job.md.
set -euo pipefail
cd "$(dirname "$0")"
# -h/--help only prints main_job.py's options: no setup (which may restart the cluster) once
# the .venv exists.
for arg in "$@"; do
  case "$arg" in
    -h|--help) if [ -x .venv/bin/python ]; then exec .venv/bin/python examples/main_job.py --help; fi ;;
  esac
done
scripts/setup.sh
exec .venv/bin/python examples/main_job.py "$@"
