#!/bin/bash
# Run the whole test suite (pure and live) on Debian 12 as root: sets up what is missing
# (apt packages, .venv, the local Slurm cluster with slurmdbd), then runs pytest.
# Extra arguments go to pytest (e.g. ./test.sh -m "not live", ./test.sh tests/test_records.py).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh --with-dbd
# test-only tools: vagrant (for `vagrant validate` of vagrant/Vagrantfile)
if ! command -v vagrant >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends vagrant >/dev/null
fi
exec .venv/bin/python -m pytest "$@"
