#!/bin/bash
# Run the whole test suite (pure and live) on Debian 12 or 13 as root: sets up what is missing
# (apt packages, .venv, the local Slurm cluster with slurmdbd), then runs pytest. The local
# cluster starts empty (`dlcluster up --clear`): jobs left in it, e.g. restored from the saved
# state of a run that was killed, are cancelled, since the live tests need the whole cluster.
#
# Slurm releases: every live test runs on the host's own release (22.05 on Debian 12, 24.11 on
# Debian 13); then, for each other release in DLTEST_RELEASES (default: the other two of 22.05,
# 24.11 and 26.05), a cluster of that release is brought up from its Debian root filesystem
# (`dlcluster up --slurm R`, built once) and the live subset (tests marked `releases`) runs on
# it, with the same pytest options: on all of them at once, and beside them the host's tests
# not marked live (niced), each one's output printed after.
# A run that selects tests (-m, -k, a test path) runs on the host's release alone unless
# DLTEST_RELEASES names releases; DLTEST_RELEASES= runs none.
# Extra arguments go to pytest (e.g. ./test.sh -m "not live", ./test.sh tests/slurm_plugin/slurm/test_records.py).
# Tests marked `corpus` need the real-world corpus beside the checkout (tests/corpus.py names it; on the
# project's CI machines); without it they are not collected and the run says how many.
# Type checks run as tests in the same pytest run (tests/repo/test_typing.py): mypy on the whole package
# (pyproject's [tool.mypy]) and --strict on prioritizer/policy/; the import contracts likewise
# (tests/repo/test_import_contract.py runs lint-imports). `./test.sh tests/repo/test_typing.py` runs mypy alone.
# Exit status: pytest's of the first run that failed, else 0.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh --with-dbd --clear
# test-only tools: vagrant (`vagrant validate` of vagrant/Vagrantfile), systemd (its
# systemd-analyze checks conf/dlprio.service), gcc and the Python headers (tests/prioritizer/test_compiled.py
# builds the compiled policy with `dlprio compile`)
echo "test.sh: test-only tools: vagrant, systemd-analyze, gcc with the Python headers"
scripts/apt-install.sh test.sh vagrant systemd gcc libc6-dev python3-dev

# the .[torch] extra: tests/examples/test_ddp_example.py and tests/live/test_ddp_live.py run examples/ddp_train.py
scripts/install-torch.sh test.sh

host=$(.venv/bin/python -c 'from slurm_plugin.localcluster import provision; print(provision.host_release())')
if [ -z "${DLTEST_RELEASES+set}" ]; then
  DLTEST_RELEASES=""
  selects=0
  for arg in "$@"; do
    case "$arg" in -m|-m*|-k|-k*|tests/*|*.py|*::*) selects=1 ;; esac
  done
  if [ "$selects" = 0 ]; then
    for release in 22.05 24.11 26.05; do
      [ "$release" = "$host" ] || DLTEST_RELEASES="$DLTEST_RELEASES $release"
    done
  fi
fi

# pytest runs in the background so that a SIGTERM or SIGINT (CI's stop) reaches it at once and
# lets it tear its tests down (tests/sigterm_teardown.py); this script then ends with the signal
children=
logs=
stop() {
  for pid in $children; do kill "-$1" "$pid" 2>/dev/null || true; done
  for pid in $children; do wait "$pid" 2>/dev/null || true; done
  for log in $logs; do cat "$log"; done
  exit "$2"
}
trap 'stop TERM 143' TERM
trap 'stop INT 130' INT

status=0
if [ -n "$DLTEST_RELEASES" ]; then
  # the host's pure tests run below, beside the other releases' live subsets (niced: those
  # wait on jobs and daemon cycles, the pure tests only on the CPU)
  echo "test.sh: the live tests on the host's Slurm $host (cluster 'dlcluster')"
  .venv/bin/python -m pytest "$@" -m live &
else
  echo "test.sh: every test on the host's Slurm $host (cluster 'dlcluster')"
  .venv/bin/python -m pytest "$@" &
fi
children=$!
wait "$children" || status=$?
children=

# The other releases: each cluster is brought up in turn, then their live subsets run at the
# same time (they wait on jobs far more than they compute; the tests that bring up clusters of
# their own or add users pick ports and names per release, tests/live_helpers.py), each
# printing its output when all have ended.
names=
trap 'for name in $names; do .venv/bin/dlcluster down --name "$name" >/dev/null 2>&1 || true; done' EXIT
for release in $DLTEST_RELEASES; do
  case "$release" in 22.05) port=7200 ;; 24.11) port=7400 ;; 26.05) port=7600 ;;
    *) echo "test.sh: DLTEST_RELEASES: $release is not one of 22.05, 24.11, 26.05" >&2; exit 2 ;; esac
  name="rel${release/./}"
  .venv/bin/dlcluster up --slurm "$release" --name "$name" --port-base "$port" --with-dbd --clear
  names="$names $name"
done
if [ -n "$names" ]; then
  out=$(mktemp -d)
  echo "test.sh: the tests not marked live, on the host: $out/pure.log"
  nice -n 10 .venv/bin/python -m pytest "$@" -m "not live" > "$out/pure.log" 2>&1 &
  children=$!
  logs="$out/pure.log"
  set -- "$@" -m "live and releases"
  for release in $DLTEST_RELEASES; do
    name="rel${release/./}"
    echo "test.sh: the live subset (-m 'live and releases') on Slurm $release (cluster '$name'): $out/$name.log"
    ( eval "$(.venv/bin/dlcluster env --name "$name")"
      exec .venv/bin/python -m pytest "$@" ) > "$out/$name.log" 2>&1 &
    children="$children $!"
    logs="$logs $out/$name.log"
  done
  for pid in $children; do
    rc=0
    wait "$pid" || rc=$?
    if [ "$status" = 0 ]; then status=$rc; fi
  done
  children=
  echo "test.sh: ---- the tests not marked live, on the host ----"
  cat "$out/pure.log"
  for name in $names; do
    echo "test.sh: ---- the live subset on cluster '$name' ----"
    cat "$out/$name.log"
  done
  logs=
  rm -rf "$out"
fi
exit "$status"
