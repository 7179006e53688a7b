"""Live: ``squeue --start`` beside the daemon's start-time forecast, against the actual starts
(prints figures, asserts nothing).

On the cluster ``SLURM_CONF`` names (a ``dlcluster``; nothing else may run jobs there), it
starts ``dlprio run`` (``--policy``, 5 s cycles, a forecast every cycle, 20 draws) on a
scratch ledger, submits ``--jobs`` jobs of ``--gpus`` GPUs each with a time limit of
``--time-min`` minutes that sleep a run time drawn uniformly from ``--run-s`` (seeded), waits
for the first forecast made after the last submission and at that moment reads
``squeue --start`` (the backfill scheduler's estimate, built from the time limits). Then it
waits for every job to start and prints per waiting job the wait from that moment as
``squeue --start`` estimated it, the forecast's p10/p50/p90 (the published, calibrated band;
a fresh ledger has no past outcome, so it is the draws' raw band) and the actual wait; then
per estimate the median ``|estimate - actual| / actual`` and, for the forecast, the share of
actual starts inside p10-p90.

    SLURM_CONF=/etc/slurm-NAME/slurm.conf .venv/bin/python benchmarks/forecast_vs_squeue_start.py \\
        [--jobs 8] [--gpus 1] [--run-s 15,45] [--time-min 1] [--policy fifo] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import yaml

from prioritizer import numbers
from prioritizer.command import CliError
from prioritizer.policy.config import POLICY_NAMES

ROOT = Path(__file__).resolve().parent.parent


def slurm(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout


def epoch(stamp: str) -> float | None:
    """squeue's ``%S`` (local time ``YYYY-MM-DDTHH:MM:SS``) as epoch s; None for N/A."""
    try:
        return datetime.fromisoformat(stamp.strip()).timestamp()
    except ValueError:
        return None


def starts(ids: list[str], flag: str = "") -> dict[str, tuple[str, float | None]]:
    """``{job id: (state, StartTime epoch s)}`` from squeue (``--start``: pending jobs'
    estimates)."""
    argv = ["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%S"]
    argv[1:1] = [flag] if flag else ["-t", "all"]
    out = {}
    for line in slurm(*argv).splitlines():
        job, state, stamp = line.split("|")
        out[job] = (state, epoch(stamp))
    return out


def wait_for(check, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(1)
    raise SystemExit(f"no {what} within {timeout_s:.0f} s")


def run_range(value: str) -> tuple[float, float]:
    """``--run-s LOW,HIGH``: two numbers, 0 <= LOW <= HIGH (s). Raises CliError."""
    try:
        low, high = (numbers.parse_float(x, 0.0, numbers.MAX_SECONDS) for x in value.split(","))
    except ValueError:
        raise CliError(f"--run-s: expected LOW,HIGH seconds with 0 <= LOW <= HIGH, got "
                       f"{value!r}") from None
    if low > high:
        raise CliError(f"--run-s: expected LOW,HIGH seconds with 0 <= LOW <= HIGH, got {value!r}")
    return low, high


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options (module doc). A bad value raises :class:`CliError` naming the option."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=numbers.count("--jobs", 10_000), default=8)
    parser.add_argument("--gpus", type=numbers.count("--gpus", numbers.MAX_GPUS_PER_NODE),
                        default=1)
    parser.add_argument("--run-s", type=run_range, default=(15.0, 45.0),
                        help="run time range LOW,HIGH (s)")
    parser.add_argument("--time-min", type=numbers.count("--time-min"), default=1,
                        help="sbatch --time (minutes)")
    parser.add_argument("--policy", choices=POLICY_NAMES, default="fifo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout-s", type=numbers.ratio("--timeout-s"), default=240)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except CliError as exc:
        print(f"forecast_vs_squeue_start: {exc}", file=sys.stderr)
        return 2
    if not os.environ.get("SLURM_CONF"):
        print("SLURM_CONF: not set; point it at a dlcluster (dlcluster env --name NAME)",
              file=sys.stderr)
        return 2
    low, high = args.run_s
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="fc-vs-squeue-"))
    snapshot = tmp / "snapshot.json"
    config = tmp / "dlprio.yaml"
    config.write_text(yaml.safe_dump({
        "policy": {"policy": args.policy}, "interval_s": 5, "metrics_port": 0,
        "ledger_path": str(tmp / "ledger.sqlite"), "snapshot_path": str(snapshot),
        "forecast": {"every_cycles": 1, "cpu_budget_s": 2, "draws": 20, "horizon_s": 3600}}))
    log = open(tmp / "daemon.log", "ab")
    daemon = subprocess.Popen([sys.executable, "-m", "prioritizer.cli", "run", "--config",
                               str(config)], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    ids: list[str] = []
    try:
        for k in range(args.jobs):
            run_s = round(rng.uniform(low, high))
            ids.append(slurm("sbatch", "--parsable", "-J", f"fc{k}", f"--gres=gpu:{args.gpus}",
                             f"--time={args.time_min}", "-o", "/dev/null",
                             "--wrap", f"sleep {run_s}").strip().split(";")[0])
        submitted = time.time()

        def fresh() -> dict | None:
            if daemon.poll() is not None:
                raise SystemExit(f"dlprio run exited {daemon.returncode} (its log: "
                                 f"{tmp / 'daemon.log'})")
            data = json.loads(snapshot.read_text()) if snapshot.exists() else {}
            made = data.get("forecast")
            return made if made and made["made_at"] > submitted + 1 else None

        made = wait_for(fresh, 60, "forecast after the submissions")
        estimates = starts(ids, "--start")
        asked = time.time()
        actual: dict[str, float] = {}

        def all_started() -> bool:
            for job, (state, at) in starts(ids).items():
                if state != "PENDING" and at is not None:
                    actual.setdefault(job, at)
            return len(actual) == len(ids)

        wait_for(all_started, args.timeout_s, "start of every job")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
        log.close()
        if ids:
            subprocess.run(["scancel", *ids], check=False)
    now = made["made_at"]
    rows, sq_err, fc_err, inside = [], [], [], []
    print(f"forecast made at {now:.0f}, squeue --start read {asked - now:+.0f} s later; waits "
          "in s from the forecast's moment")
    print(f"{'job':>6} {'squeue --start':>15} {'p10':>6} {'p50':>6} {'p90':>6} {'actual':>7}")
    for job in ids:
        state, est = estimates.get(job, ("", None))
        entry = made["jobs"].get(job)
        if state != "PENDING" or entry is None or entry["start"] is None:
            continue   # started before the forecast: nothing to compare
        band = [None if v is None else v - now for v in entry["start"]]
        wait = actual[job] - now
        sq = None if est is None else est - now
        rows.append(job)
        cells = " ".join(f"{'-' if v is None else f'{v:.0f}':>6}" for v in band)
        print(f"{job:>6} {'N/A' if sq is None else f'{sq:.0f}':>15} {cells} {wait:>7.0f}")
        if wait > 0:
            if sq is not None:
                sq_err.append(abs(sq - wait) / wait)
            if band[1] is not None:
                fc_err.append(abs(band[1] - wait) / wait)
            inside.append(band[0] is not None and band[0] <= wait and (
                band[2] is None or wait <= band[2]))
    calibrated = sum(made["jobs"][j].get("calibrated", 0) > 0 for j in rows)
    print(f"{len(rows)} waiting jobs ({calibrated} with a calibrated band)")
    if sq_err:
        print(f"squeue --start: median |estimate - actual| / wait {statistics.median(sq_err):.0%}")
    if fc_err:
        print(f"forecast p50:   median |p50 - actual| / wait {statistics.median(fc_err):.0%}; "
              f"inside p10-p90: {sum(inside)}/{len(inside)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
