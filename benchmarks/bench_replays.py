"""Benchmark (issue 11): wall time of whole ``dlprio simulate`` processes on the real traces.

Every policy on the Philly dense window (127 × 8) and ITP cluster04 (69 × 8), both
placements, zero cost and with costs: the replays of the regression matrix
(tests/regression_helpers.py), each run ``--repeat`` times as a fresh process (trace
reading, imports and the per-job CSV included). Prints, per replay, the minimum wall
seconds over the repeats and the minimum CPU seconds (user + system) of the process: on a
shared machine the CPU figure is the one less moved by other work. Nothing is asserted.

Run: ``.venv/bin/python benchmarks/bench_replays.py [--repeat 3] [--only philly]``
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from regression_helpers import all_cases  # noqa: E402


def _once(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "prioritizer.cli", *argv], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="only cases whose name contains this")
    args = parser.parse_args()
    cases = [c for c in all_cases() if not c.trace.startswith("60job") and args.only in c.name]
    print(f"{'replay':<48} {'wall s (min)':>12} {'cpu s (min)':>12}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            runs = [_once(case.argv(str(Path(tmp) / "jobs.csv"))) for _ in range(args.repeat)]
            wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
            worst = max(worst, wall)
            print(f"{case.name:<48} {wall:>12.2f} {cpu:>12.2f}", flush=True)
    print(f"slowest replay: {worst:.2f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
