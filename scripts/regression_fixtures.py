#!/usr/bin/env python3
"""Make or check the simulator's regression fixtures.

    regression_fixtures.py make  [--code DIR] [--jobs 2] [--only SUBSTR]
    regression_fixtures.py check [--jobs 2] [--only SUBSTR]

``make`` replays every case of ``tests/regression_helpers.all_cases()`` with the code found in
``--code`` (a checkout of the commit the fixtures are taken from; the fixtures in the
repository come from a99a6b1: ``git archive a99a6b1 | tar -x -C DIR``), one process per
replay, ``--jobs`` at a time, and stores each ``--jobs-csv`` output gzipped under
``tests/fixtures/regression/`` (existing fixtures are kept). ``check`` replays the same
cases with this checkout's code and reports every case whose output differs from its fixture
by a single byte; exit 1 if any does, 0 otherwise. Each line printed gives the case and the
wall seconds of its whole ``dlprio`` process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# the repository before tests/: tests/ has folders named like the packages (tests/prioritizer/,
# tests/slurm_plugin/, ...), which would otherwise be imported in their place
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "tests")]
from regression_helpers import (  # noqa: E402
    FIXTURES, ROOT, Case, all_cases, read_fixture, write_fixture)


def _replay(case: Case, code: Path) -> tuple[bytes, float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "jobs.csv"
        env = dict(os.environ, PYTHONPATH=str(code))
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "prioritizer.cli", *case.argv(str(out))],
                              cwd=tmp, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            return b"", wall, proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"
        return out.read_bytes(), wall, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("make", "check"))
    parser.add_argument("--code", type=Path, default=ROOT,
                        help="checkout whose prioritizer/ replays (make: the fixture commit)")
    parser.add_argument("--jobs", type=int, default=2, help="replays at a time")
    parser.add_argument("--only", default="", help="only cases whose name contains this")
    args = parser.parse_args()
    cases = [c for c in all_cases() if args.only in c.name]
    if args.action == "make":
        FIXTURES.mkdir(parents=True, exist_ok=True)
        cases = [c for c in cases if not c.fixture.exists()]
    bad = 0

    def one(case: Case) -> None:
        nonlocal bad
        data, wall, error = _replay(case, args.code)
        if error:
            bad += 1
            print(f"{case.name}: FAILED ({error})", flush=True)
        elif args.action == "make":
            write_fixture(case.fixture, data)
            print(f"{case.name}: {wall:.1f} s, {len(data)} bytes", flush=True)
        else:
            same = case.fixture.exists() and read_fixture(case.fixture) == data
            bad += not same
            print(f"{case.name}: {wall:.1f} s, {'identical' if same else 'DIFFERS'}", flush=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(one, cases))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
