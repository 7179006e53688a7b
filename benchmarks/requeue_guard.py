"""Who pays with the requeue guard (``policy.requeue_guard``), side by side with ``fifo-fit``,
the oracle ``srtf``, the default settings and the wait guard, on the two real traces of
docs/simulator.md. Prints figures (no timing).

    .venv/bin/python benchmarks/requeue_guard.py [--only philly|itp] [--guard X] [--walk]
        [--walk-ranking both|avg|bars] [--no-fixed]

Per trace (real nodes, modeled costs, windows of 200 jobs against ``fifo-fit``; Philly dense
from ``--since 4147200`` on 127 × 8, ITP cluster04 on 69 × 8), one line per setting held
fixed: the worst window's avg JCT ratio to ``fifo-fit``, the windows over 1.03, the share of
hurt jobs (JCT > 2 × and > 1 h more than under ``fifo-fit``), all jobs' avg JCT ratio, p95 JCT
and the preemptions. ``--guard`` is the ``requeue_guard`` of the guarded lines (default 0.1,
chosen before any replay: a job loses at most a tenth of its run time to preemptions after
its first, besides its last wait). ``--walk`` adds ``dlprio tune --walk-forward`` (Philly
every day, ITP every 7 days) on the grid :data:`WALK_GRID`, starting from the settings of
the first guarded line, twice (:data:`RANKINGS`): ranked by avg JCT only, and with the
no-regret bars on (their defaults: hurt <= 0.05 %, worst window <= the oracle's, on each
history against ``fifo-fit``); ``--walk-ranking avg|bars`` runs one of them, ``--no-fixed``
skips the fixed lines. About 1 min for the fixed lines of both traces on 2 shared cores; the
walk-forward runs about 2 + 1.5 min on Philly and 6 + 4 min on ITP (avg JCT only + bars).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.durations import load_distribution
from prioritizer.sim.engine import SimResult, simulate
from prioritizer.sim.report import summarize, window_comparison
from wait_guard import with_baseline  # this script's folder, benchmarks/, is on sys.path
from walk_forward import print_periods, walk_from

TRACES = {  # name: (file, --since, nodes, walk-forward days)
    "philly": ("data/traces/philly-15k/philly_data_training.csv", 4147200.0, 127, 1.0),
    "itp": ("data/traces/itp-2021/cluster04.csv", None, 69, 7.0),
}
#: the grid the walk-forward run re-tunes
WALK_GRID = "knob=1,8;wait_guard=0,1;requeue_guard=0,{guard}"


def runs(guard: float) -> list[tuple[str, PolicyConfig]]:
    """(label, settings) of the fixed lines; ``guard``: their ``requeue_guard``."""
    g = f"requeue_guard {guard:g}"
    return [
        ("srtf (oracle)", PolicyConfig(policy="srtf")),
        ("2D-LAS, defaults", PolicyConfig()),
        ("2D-LAS, wait_guard 1", PolicyConfig(wait_guard=1.0)),
        (f"2D-LAS, {g}", PolicyConfig(requeue_guard=guard)),
        (f"2D-LAS, wait_guard 1, {g}", PolicyConfig(wait_guard=1.0, requeue_guard=guard)),
        (f"2D-LAS, knob 1, wait_guard 1, {g}",
         PolicyConfig(starve_knob=1.0, wait_guard=1.0, requeue_guard=guard)),
        (f"srtf (oracle), {g}", PolicyConfig(policy="srtf", requeue_guard=guard)),
    ]


def figures_line(label: str, f: dict, s: dict | None = None) -> str:
    tail = "" if s is None else (f"  p95 {s['p95_jct_s']:9,.0f} s  "
                                 f"preemptions {s['preemptions']:7,d}")
    return (f"  {label:48s} worst window {f['worst_window_ratio']:.3f}  windows > 1.03 "
            f"{f['windows_over_1_03']:3d}  hurt {100 * f['hurt_jobs_share']:.3f} %  "
            f"avg JCT ratio {f['avg_jct_ratio']:.3f}{tail}")


def line(label: str, base: SimResult, result: SimResult) -> str:
    f = window_comparison([base, result], base.policy, 200)[result.policy]
    return figures_line(label, f, summarize(result))


#: the two rankings of the walk-forward runs: (label, extra ``dlprio tune`` options)
RANKINGS = [("avg JCT only", ["--max-hurt-share", "off", "--max-worst-window", "off"]),
            ("no-regret bars (default)", [])]


def walk(path: str, since: float | None, nodes: int, days: float, grid: str,
         config: PolicyConfig, extra: list[str]) -> list[dict]:
    """``dlprio tune --walk-forward`` from ``config``'s settings (its ``--json``), with
    ``extra`` options."""
    return walk_from(path, since, nodes, days, grid,
                     {"starve_knob": config.starve_knob, "wait_guard": config.wait_guard,
                      "requeue_guard": config.requeue_guard}, extra)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(TRACES))
    parser.add_argument("--guard", type=float, default=0.1,
                        help="requeue_guard of the guarded lines (default 0.1)")
    parser.add_argument("--walk", action="store_true",
                        help="add the walk-forward runs (slow on ITP)")
    parser.add_argument("--walk-ranking", choices=("both", "avg", "bars"), default="both",
                        help="--walk: ranked by avg JCT only, with the bars, or both (default)")
    parser.add_argument("--no-fixed", action="store_true", help="--walk: skip the fixed lines")
    args = parser.parse_args()
    rankings = [r for i, r in enumerate(RANKINGS)
                if args.walk_ranking in ("both", ("avg", "bars")[i])]
    if args.guard <= 0:
        parser.error(f"--guard must be > 0 (got {args.guard:g})")
    dist = load_distribution()
    for name, (path, since, nodes, days) in TRACES.items():
        if args.only and name != args.only:
            continue
        trace, cluster, base = with_baseline(path, since, nodes)
        print(f"{name}: {len(trace.jobs)} jobs, {nodes} x 8 GPUs, against fifo-fit "
              f"(fifo-fit p95 {summarize(base)['p95_jct_s']:,.0f} s)")
        settings = runs(args.guard)
        for label, config in [] if args.no_fixed else settings:
            with contextlib.redirect_stdout(io.StringIO()):
                result = simulate(trace, cluster, config, distribution=dist)
            print(line(label, base, result), flush=True)
        if args.walk:
            start = settings[3][1]
            grid = WALK_GRID.format(guard=f"{args.guard:g}")
            print(f"  walk-forward every {days:g} day(s), grid {grid}, from {settings[3][0]}:")
            for ranking, extra in rankings:
                out = {r["policy"]: r for r in walk(path, since, nodes, days, grid, start, extra)}
                print(figures_line(f"walk-forward, {ranking}", out["walk-forward"]), flush=True)
                print_periods(out["walk-forward"]["periods"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
