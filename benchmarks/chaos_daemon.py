"""The daemon under chaos, the long version (prints figures, asserts nothing).

Seeded churn of mixed jobs while ``dlprio run`` is SIGKILLed at random moments and right after
each preemption step, then per job: ledger vs ``sacct --duplicates``, runs counted once, every
intent finished, no attempt signalled twice (tests/chaos_helpers.py; the short version is
tests/live/test_chaos_live.py). Needs a cluster with slurmdbd, all its GPUs free.

    SLURM_CONF=/etc/slurm-NAME/slurm.conf .venv/bin/python benchmarks/chaos_daemon.py [SEED] [JOBS] [CHURN_S]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from chaos_helpers import run_chaos  # noqa: E402
from daemon_helpers import live_jobs  # noqa: E402


def main(argv: list[str]) -> int:
    seed = int(argv[0]) if argv else 1
    n_jobs = int(argv[1]) if len(argv) > 1 else 30
    churn_s = float(argv[2]) if len(argv) > 2 else 240.0
    with tempfile.TemporaryDirectory(prefix="dlprio-chaos-") as tmp, live_jobs(Path(tmp)) as jobs:
        report = run_chaos(jobs, Path(tmp), seed=seed, n_jobs=n_jobs, churn_s=churn_s,
                           kill_every_s=(5, 25), timeout_s=churn_s + 900)
    print("\n".join(report.lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
