"""The daemon under chaos, the long version (prints figures, asserts nothing).

Seeded churn of mixed jobs while ``dlprio run`` is SIGKILLed at random moments and right after
each preemption step, then per job: ledger vs ``sacct --duplicates``, runs counted once, every
intent finished, no attempt signalled twice (tests/chaos_helpers.py; the short version is
tests/live/test_chaos_live.py). Needs a cluster with slurmdbd, all its GPUs free.

    SLURM_CONF=/etc/slurm-NAME/slurm.conf .venv/bin/python benchmarks/chaos_daemon.py [SEED] [JOBS] [CHURN_S]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

# the repository before tests/: tests/ has folders named like the packages (tests/prioritizer/,
# tests/slurm_plugin/, ...), which would otherwise be imported in their place
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "tests")]

from chaos_helpers import run_chaos  # noqa: E402
from daemon_helpers import live_jobs  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seed", nargs="?", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("jobs", nargs="?", type=int, default=30, help="jobs submitted (default 30)")
    parser.add_argument("churn_s", nargs="?", type=float, default=240.0,
                        help="seconds of submissions and kills (default 240)")
    args = parser.parse_args(argv)
    if args.jobs < 1 or not args.churn_s > 0:
        parser.error("JOBS must be at least 1 and CHURN_S above 0")
    seed, n_jobs, churn_s = args.seed, args.jobs, args.churn_s
    with tempfile.TemporaryDirectory(prefix="dlprio-chaos-") as tmp, live_jobs(Path(tmp)) as jobs:
        report = run_chaos(jobs, Path(tmp), seed=seed, n_jobs=n_jobs, churn_s=churn_s,
                           kill_every_s=(5, 25), timeout_s=churn_s + 900)
    print("\n".join(report.lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
