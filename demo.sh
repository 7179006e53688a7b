#!/bin/bash
# The main job in one command, on Debian 12 as root: installs what is missing (apt packages, the
# .venv with the project, Slurm 22.05 and munge) and starts the local cluster (4 nodes x 8 fake
# GPUs) through scripts/setup.sh, then runs examples/main_job.py on two workloads of the Philly
# trace (data/traces/philly-15k, in the repository): the 12 consecutive jobs of the dense window
# with the highest offered load, and the 40 jobs from a fixed offset (day 50); each scaled by one
# time factor that keeps the trace's spread, its dlprio settings from `dlprio tune` on the 200
# jobs before it, each job submitted with dlsubmit as a PAI v2 spec running examples/trainer.py,
# twice back to back: 1/2 under Slurm alone (its own multifactor priority, no daemon), 2/2 under
# `dlprio run`. At the end of each: per-job JCT of both runs side by side, both runs beside
# `dlprio simulate`'s prediction for each, jobs.csv and main_job.png under out/main-job, and the
# exact `dlprio explain` / `dlprio status` commands to look further. About 20 minutes
# after installation. Arguments go to main_job.py, e.g. `./demo.sh --jobs 6` (about 3 minutes);
# see docs/main_job.md.
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
