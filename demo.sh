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
#
# `./demo.sh --ddp`: instead, a real PyTorch DDP job (examples/ddp_demo.py) on its own cluster
# whose nodes have their own addresses (`dlcluster up --netns`), preempted once and moved to other
# nodes, printed beside a run never interrupted: the same loss at every step and the same final
# weights, bit for bit. Installs torch 2.13.0 (the .[torch] extra) when missing. About 3 minutes.
set -euo pipefail
cd "$(dirname "$0")"
# -h/--help only prints the demo's options (main_job.py's, ddp_demo.py's with --ddp): no setup
# (which may restart the cluster) once the .venv exists.
main=examples/main_job.py
if [ "${1:-}" = --ddp ]; then shift; main=examples/ddp_demo.py; fi
for arg in "$@"; do
  case "$arg" in
    -h|--help) if [ -x .venv/bin/python ]; then exec .venv/bin/python "$main" --help; fi ;;
  esac
done
scripts/setup.sh
if [ "$main" = examples/ddp_demo.py ]; then scripts/install-torch.sh demo.sh; fi
exec .venv/bin/python "$main" "$@"
