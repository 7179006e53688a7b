"""Benchmark: wall time of whole ``dlprio simulate`` processes on the real traces.

Every policy on the Philly dense window (127 × 8) and ITP cluster04 (69 × 8), both
placements, zero cost and with costs: the replays of the regression matrix
(tests/regression_helpers.py), each run ``--repeat`` times as a fresh process (trace
reading, imports and the per-job CSV included). Prints, per replay, the minimum wall
seconds over the repeats and the minimum CPU seconds (user + system) of the process: on a
shared machine the CPU figure is the one less moved by other work. Nothing is asserted.
``--code DIR`` (repeatable) replays with the ``prioritizer`` of each checkout DIR instead
(``git archive COMMIT | tar -x -C DIR``), the checkouts taking turns run by run so that
they share the same load: before/after figures of one change. ``--compiled on`` /
``--compiled off`` (repeatable too, taking turns the same way) sets ``DLPRIO_COMPILED`` for
the replays: ``on`` needs a current ``dlprio compile`` build (a replay without one fails),
``off`` runs the interpreted policy; without the option, what ``dlprio simulate`` would use.

Run: ``.venv/bin/python benchmarks/bench_replays.py [--repeat 3] [--only philly]
[--code DIR --code DIR2] [--compiled on --compiled off]``
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the repository before tests/: tests/ has folders named like the packages (tests/prioritizer/,
# tests/slurm_plugin/, ...), which would otherwise be imported in their place
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "tests")]
from regression_helpers import all_cases  # noqa: E402


def _once(argv: list[str], code: str | None = None,
          compiled: str | None = None) -> tuple[float, float]:
    # another checkout: on PYTHONPATH, run from a directory without a prioritizer/ of its own
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(Path(code).resolve())
    if compiled is not None:
        env["DLPRIO_COMPILED"] = compiled
    cwd = None if code is None else tempfile.gettempdir()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "prioritizer.cli", *argv], check=True,
                   stdout=subprocess.DEVNULL, env=env, cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="only cases whose name contains this")
    parser.add_argument("--code", action="append", default=[], metavar="DIR",
                        help="replay with this checkout's prioritizer (repeatable; turns)")
    parser.add_argument("--compiled", action="append", default=[], choices=("on", "off"),
                        help="DLPRIO_COMPILED for the replays (repeatable; turns)")
    args = parser.parse_args()
    known = [c for c in all_cases() if not c.trace.startswith("60job")]
    cases = [c for c in known if args.only in c.name]
    if not cases:
        parser.error(f"--only {args.only!r} matches no case; names: "
                     + ", ".join(sorted(c.name for c in known)))
    codes: list[tuple[str | None, str | None]] = [
        (code, mode) for code in (list(args.code) or [None])
        for mode in (list(args.compiled) or [None])]
    print(f"{'replay':<48} {'wall s (min)':>12} {'cpu s (min)':>12}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            argv = case.argv(str(Path(tmp) / "jobs.csv"))
            runs: dict[tuple[str | None, str | None], list[tuple[float, float]]] = {
                c: [] for c in codes}
            for _ in range(args.repeat):
                for code in codes:
                    runs[code].append(_once(argv, *code))
            for code in codes:
                wall = min(r[0] for r in runs[code])
                cpu = min(r[1] for r in runs[code])
                worst = max(worst, wall)
                tags = [t for t in (code[0] and Path(code[0]).name,
                                    code[1] and f"compiled {code[1]}") if t]
                label = case.name + (f" [{', '.join(tags)}]" if tags else "")
                print(f"{label:<48} {wall:>12.2f} {cpu:>12.2f}", flush=True)
    print(f"slowest replay: {worst:.2f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
