#!/bin/bash
# Run the whole test suite (pure and live) on Debian 12 as root: sets up what is missing
# (apt packages, .venv, the local Slurm cluster with slurmdbd), then runs pytest. The local
# cluster starts empty (`dlcluster up --clear`): jobs left in it, e.g. restored from the saved
# state of a run that was killed, are cancelled, since the live tests need the whole cluster.
# Extra arguments go to pytest (e.g. ./test.sh -m "not live", ./test.sh tests/test_records.py).
# Tests marked `corpus` need the real-world corpus beside the checkout (tests/corpus.py names it; on the
# project's CI machines); without it they are not collected and the run says how many.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh --with-dbd --clear
# test-only tools: vagrant (`vagrant validate` of vagrant/Vagrantfile), systemd (its
# systemd-analyze checks conf/dlprio.service), gcc and the Python headers (tests/test_compiled.py
# builds the compiled policy with `dlprio compile`)
echo "test.sh: test-only tools: vagrant, systemd-analyze, gcc with the Python headers"
scripts/apt-install.sh test.sh vagrant systemd gcc libc6-dev python3-dev
exec .venv/bin/python -m pytest "$@"
