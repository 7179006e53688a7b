"""Who pays under walk-forward tuned settings, on the two real traces of docs/simulator.md.
Prints figures (no timing).

    .venv/bin/python benchmarks/walk_forward.py [--only philly|itp] [--grid SPEC] [--workers N]
        [--ranking both|avg|bars] [--config DLPRIO.yaml]

Per trace (real nodes, modeled costs, windows of 200 jobs against ``fifo-fit``): the oracle
``srtf``, 2D-LAS with the default settings held fixed, and 2D-LAS re-tuned every period by
``dlprio tune --walk-forward`` (Philly dense: every day, from ``--since 4147200``, 127 × 8;
ITP cluster04: every 7 days, 69 × 8) on the coarse grid below. Each line gives the worst
window's avg JCT ratio to ``fifo-fit``, the windows over 1.03, the share of hurt jobs (JCT
> 2 × and > 1 h more than under ``fifo-fit``) and all jobs' avg JCT ratio; then the settings
the walk-forward run had in force per period. ``--ranking``: the walk-forward runs ranked by
avg JCT only (``avg``), with ``dlprio tune``'s default no-regret bars (``bars``: hurt <= 0.05 %,
worst window <= the oracle's, on each history against ``fifo-fit``), or ``both``
(default). ``--config`` sets the settings in force
before the first re-tune point (and held fixed for the comparison). The targets (docs/simulator.md, "Who pays"):
worst window <= srtf's, hurt <= 0.05 %, avg JCT ratio <= the fixed defaults'.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from prioritizer.policy.config import PolicyConfig
from prioritizer.sim.engine import Cluster, simulate
from prioritizer.sim.report import window_comparison
from prioritizer.sim.traces import read_trace

REPO = Path(__file__).resolve().parents[1]
TRACES = {  # name: (file, --since, nodes, walk-forward days)
    "philly": ("data/traces/philly-15k/philly_data_training.csv", 4147200.0, 127, 1.0),
    "itp": ("data/traces/itp-2021/cluster04.csv", None, 69, 7.0),
}
GRID = "promoted_preempts=yes,no;knob=1,8;min_run=60,3600"


def srtf_figures(path: str, since: float | None, nodes: int) -> dict:
    trace = read_trace(REPO / path, None, since)
    cluster = Cluster(nodes, 8)
    results = [simulate(trace, cluster, PolicyConfig(policy=p)) for p in ("fifo-fit", "srtf")]
    return window_comparison(results, "fifo-fit", 200)["srtf"]


#: ``--ranking``: the extra ``dlprio tune`` options of each walk-forward ranking
RANKINGS = {"avg": ["--max-hurt-share", "off", "--max-worst-window", "off"], "bars": []}


def walk(path: str, since: float | None, nodes: int, days: float, grid: str, workers: int,
         config: str | None, extra: list[str]) -> list[dict]:
    argv = [sys.executable, "-m", "prioritizer.cli", "tune", "--trace", str(REPO / path),
            "--nodes", str(nodes), "--gpus-per-node", "8", "--grid", grid,
            "--walk-forward", f"{days:g}", "--workers", str(workers), "--json", *extra]
    if since is not None:
        argv += ["--since", f"{since:g}"]
    if config is not None:
        argv += ["--config", config]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, cwd=REPO)
    return json.loads(out.stdout)


def walk_from(path: str, since: float | None, nodes: int, days: float, grid: str,
              policy: dict[str, float], extra: tuple[str, ...] | list[str] = ()) -> list[dict]:
    """:func:`walk` on 2 workers from the settings ``policy`` (a ``policy:`` section's keys
    and values, e.g. ``{"wait_guard": 1}``) written to a temporary config."""
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "dlprio.yaml"
        conf.write_text("policy:\n" + "".join(f"  {k}: {v:g}\n" for k, v in policy.items()))
        return walk(path, since, nodes, days, grid, 2, str(conf), list(extra))


def line(name: str, f: dict) -> str:
    return (f"  {name:24s} worst window {f['worst_window_ratio']:.3f}  windows > 1.03 "
            f"{f['windows_over_1_03']:3d}  hurt {100 * f['hurt_jobs_share']:.3f} %  "
            f"avg JCT ratio {f['avg_jct_ratio']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(TRACES))
    parser.add_argument("--grid", default=GRID)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--config", metavar="DLPRIO.yaml",
                        help="the settings in force before the first re-tune point and held "
                        "fixed for the comparison (default: the defaults)")
    parser.add_argument("--ranking", choices=("both", *RANKINGS), default="both",
                        help="walk-forward ranked by avg JCT only (avg), with the no-regret "
                        "bars (bars, dlprio tune's default), or both (default)")
    args = parser.parse_args()
    rankings = list(RANKINGS) if args.ranking == "both" else [args.ranking]
    for name, (path, since, nodes, days) in TRACES.items():
        if args.only and name != args.only:
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            srtf = srtf_figures(path, since, nodes)
        print(f"{name}: {nodes} x 8, re-tuned every {days:g} day(s), grid {args.grid}")
        print(line("srtf (oracle)", srtf), flush=True)
        for i, ranking in enumerate(rankings):
            runs = walk(path, since, nodes, days, args.grid, args.workers, args.config,
                        RANKINGS[ranking])
            by_run = {r["policy"]: r for r in runs}
            if i == 0:
                print(line("fixed", by_run["fixed"]) + ("" if args.config is None else
                                                        "  (--config)"))
            print(line(f"walk-forward, {ranking}", by_run["walk-forward"]), flush=True)
            print_periods(by_run["walk-forward"]["periods"])
    return 0


def print_periods(periods: list[dict]) -> None:
    """One line per walk-forward period (``--json``'s ``periods``): its first day, the jobs of
    its history and the settings in force, with the fallback when no setting cleared the bars."""
    for p in periods:
        note = f"  [{p['fallback']}]" if p["fallback"] else ""
        learned = p.get("durations") or ""
        if learned.startswith("Gittins distribution learned from "):
            note += f"  [learned from {learned.split()[4]} jobs]"
        print(f"    from day {p['from_s'] / 86400:g} ({p['history_jobs']} jobs "
              f"before): {p['settings']}{note}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
