"""Who pays with the gain rule (``policy.preempt_gain``), side by side with ``fifo-fit``, the
oracle ``srtf`` and the default settings, on the two real traces of docs/simulator.md. Prints
figures (no timing).

    PYTHONPATH=. .venv/bin/python benchmarks/preempt_gain.py [--only philly|itp] [--gain X]
        [--dist packaged,history,oracle] [--whole-run] [--no-reference] [--walk] [--no-fixed]

Per trace (real nodes, modeled costs, windows of 200 jobs against ``fifo-fit``; Philly dense
from ``--since 4147200`` on 127 × 8, ITP cluster04 on 69 × 8), one line per setting: the worst
window's avg JCT ratio to ``fifo-fit``, the windows over 1.03, the share of hurt jobs (JCT
> 2 × and > 1 h more than under ``fifo-fit``), all jobs' avg JCT ratio, p95 JCT and the
preemptions. The rule's expected remaining times come from a duration distribution
(``--dist``, default all three):

* ``packaged``: the packaged YARN samples (``prioritizer.policy.durations``), what the daemon
  and ``dlprio simulate`` use unless given another;
* ``history``: the trace's own jobs submitted before the replay (Philly: the 7,010 jobs
  before ``--since``); ITP's replay starts at its first job, so its first 7 days' jobs
  (a look-ahead inside those 7 days);
* ``oracle``: every job of the replay itself, an upper bound (it knows the future mix).

``--gain`` is the rule's factor (default 1, break-even, chosen before any replay).
``--whole-run`` measures the plain exchange of two jobs instead (not in the policy): every
waiter's quantum is its whole run (``victims.quantum_gpu_s`` replaced by ``inf``), so a waiter
must repay with its mean remaining time, ``p`` 1. ``--no-reference`` skips the ``srtf`` and
defaults lines. About 20 s per trace and distribution on 2 shared cores. ``--walk`` adds
``dlprio tune --walk-forward`` (Philly every day, ITP every 7 days) on the grid
:data:`WALK_GRID` with the no-regret bars (their defaults), starting from ``wait_guard: 1``
and ``preempt_gain: --gain``, the rule weighed at each point with the packaged samples and
with the distribution learned from the jobs ended before it (``--walk-dist``, default both;
``dlprio tune --durations-from-history``). About 1.2 min on Philly and 4 min on ITP per
distribution; ``--no-fixed`` skips the fixed lines.
"""

from __future__ import annotations

import argparse
import contextlib
import io

from prioritizer.policy import victims
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.durations import load_distribution
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.sim.engine import simulate
from prioritizer.sim.traces import Trace, read_trace
from requeue_guard import TRACES as WALK_DAYS, figures_line  # benchmarks/ is on sys.path
from wait_guard import REPO, TRACES, line, with_baseline
from walk_forward import print_periods, walk_from

#: ITP's history: the jobs of the trace's first days (its replay starts at its first job)
HISTORY_DAYS = 7.0
DISTRIBUTIONS = ("packaged", "history", "oracle")
#: the grid the walk-forward run re-tunes
WALK_GRID = "knob=1,8;wait_guard=0,1;preempt_gain=0,{gain}"


def samples(trace: Trace, before: float | None = None) -> list[float]:
    """GPU·s of the trace's jobs (submitted before ``before`` s, when given)."""
    return [j.num_gpus * j.duration for j in trace.jobs
            if j.num_gpus > 0 and j.duration > 0 and (before is None or j.submit < before)]


def distribution(kind: str, path: str, since: float | None, trace: Trace
                 ) -> tuple[GittinsDistribution, str]:
    """The distribution ``kind`` (see the module doc) and a note of where it came from."""
    if kind == "packaged":
        return load_distribution(), "packaged yarn-gput1000.csv"
    if kind == "oracle":
        found = samples(trace)
        return GittinsDistribution(found), f"oracle: the replay's own {len(found)} jobs"
    if since is not None:
        found = samples(read_trace(REPO / path, None, None), since)
        return GittinsDistribution(found), f"history: {len(found)} jobs before --since"
    found = samples(trace, trace.jobs[0].submit + HISTORY_DAYS * 86400)
    return GittinsDistribution(found), f"history: {len(found)} jobs of the first 7 days"


def runs(gain: float) -> list[tuple[str, PolicyConfig]]:
    """(label, settings) replayed with each distribution."""
    g = f"preempt_gain {gain:g}"
    return [
        (f"2D-LAS, {g}", PolicyConfig(preempt_gain=gain)),
        (f"2D-LAS, wait_guard 1, {g}", PolicyConfig(wait_guard=1.0, preempt_gain=gain)),
        (f"2D-Gittins, {g}", PolicyConfig(policy="tiresias-gittins", preempt_gain=gain)),
    ]


def walk(path: str, since: float | None, nodes: int, days: float, gain: float,
         dist: str) -> list[dict]:
    """``dlprio tune --walk-forward`` from ``wait_guard: 1`` and ``preempt_gain: gain`` (its
    ``--json``), no-regret bars on; ``dist`` ``history``: each point's distribution learned
    from the jobs ended before it (``--durations-from-history``), else the packaged one."""
    return walk_from(path, since, nodes, days, WALK_GRID.format(gain=f"{gain:g}"),
                     {"wait_guard": 1.0, "preempt_gain": gain},
                     ["--durations-from-history"] if dist == "history" else [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(TRACES))
    parser.add_argument("--gain", type=float, default=1.0,
                        help="preempt_gain of the ruled lines (default 1)")
    parser.add_argument("--dist", default=",".join(DISTRIBUTIONS),
                        help="distributions, comma-separated (default all)")
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the srtf and defaults lines")
    parser.add_argument("--whole-run", action="store_true",
                        help="the plain exchange: every waiter's quantum is its whole run")
    parser.add_argument("--walk", action="store_true", help="add the walk-forward runs")
    parser.add_argument("--no-fixed", action="store_true", help="--walk: skip the fixed lines")
    parser.add_argument("--walk-dist", default="packaged,history",
                        help="--walk: the rule's distribution at each point, packaged and/or "
                        "history (learned from the jobs ended before it); default both")
    args = parser.parse_args()
    if args.whole_run:   # read by victims.gain_test at each decision
        victims.quantum_gpu_s = lambda config, attained_gpu_s, gpus: float("inf")
    kinds = args.dist.split(",")
    if args.gain <= 0 or any(k not in DISTRIBUTIONS for k in kinds):
        parser.error(f"--gain must be > 0 and --dist among {','.join(DISTRIBUTIONS)}")
    packaged = load_distribution()
    for name, (path, since, nodes) in TRACES.items():
        if args.only and name != args.only:
            continue
        trace, cluster, base = with_baseline(path, since, nodes)
        print(f"{name}: {len(trace.jobs)} jobs, {nodes} x 8 GPUs, against fifo-fit", flush=True)
        reference = [] if args.no_reference or args.no_fixed else [
            ("srtf (oracle)", PolicyConfig(policy="srtf")),
            ("2D-LAS, defaults", PolicyConfig()),
            ("2D-Gittins, defaults", PolicyConfig(policy="tiresias-gittins"))]
        for label, config in reference:
            with contextlib.redirect_stdout(io.StringIO()):
                result = simulate(trace, cluster, config, distribution=packaged)
            print(line(label, base, result), flush=True)
        for kind in [] if args.no_fixed else kinds:
            dist, note = distribution(kind, path, since, trace)
            print(f"  distribution: {note}")
            for label, config in runs(args.gain):
                with contextlib.redirect_stdout(io.StringIO()):
                    result = simulate(trace, cluster, config, distribution=dist)
                print(line(f"{label} [{kind}]", base, result), flush=True)
        if args.walk:
            days = WALK_DAYS[name][3]
            for walk_dist in args.walk_dist.split(","):
                print(f"  walk-forward every {days:g} day(s), grid "
                      f"{WALK_GRID.format(gain=f'{args.gain:g}')}, from wait_guard 1, "
                      f"preempt_gain {args.gain:g}, no-regret bars, {walk_dist} distribution:")
                out = {r["policy"]: r for r in walk(path, since, nodes, days, args.gain,
                                                    walk_dist)}
                print(figures_line("walk-forward, no-regret bars", out["walk-forward"]),
                      flush=True)
                print_periods(out["walk-forward"]["periods"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
