"""Who pays with and without the wait guard (``policy.wait_guard``), on the two real traces of
docs/simulator.md. Prints figures (no timing).

    .venv/bin/python benchmarks/wait_guard.py [--only philly|itp] [--guard X]

Per trace (real nodes, modeled costs, windows of 200 jobs against ``fifo-fit``; Philly dense
from ``--since 4147200`` on 127 × 8, ITP cluster04 on 69 × 8): every preempting policy with
the default settings, then 2D-LAS with ``starve_knob: 1`` and with ``promoted_preempts:
false`` and knob 1, each with ``wait_guard`` 0 and ``--guard`` (default 1). A line gives the
worst window's avg JCT ratio to ``fifo-fit``, the windows over 1.03, the share of hurt jobs
(JCT > 2 × and > 1 h more than under ``fifo-fit``), all jobs' avg JCT ratio, p95 JCT and the
preemptions. About 1 min for both traces on 2 shared cores.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
from pathlib import Path

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.durations import load_distribution
from prioritizer.sim.engine import Cluster, SimResult, simulate
from prioritizer.sim.report import summarize, window_comparison
from prioritizer.sim.traces import Trace, read_trace

REPO = Path(__file__).resolve().parents[1]
TRACES = {  # name: (file, --since, nodes)
    "philly": ("data/traces/philly-15k/philly_data_training.csv", 4147200.0, 127),
    "itp": ("data/traces/itp-2021/cluster04.csv", None, 69),
}
#: (label, settings) replayed with the guard off and on
RUNS = [
    ("srtf (oracle)", PolicyConfig(policy="srtf")),
    ("tiresias-las", PolicyConfig()),
    ("tiresias-gittins", PolicyConfig(policy="tiresias-gittins")),
    ("las", PolicyConfig(policy="las")),
    ("2D-LAS, knob 1", PolicyConfig(starve_knob=1.0)),
    ("2D-LAS, knob 1, promoted_preempts false",
     PolicyConfig(starve_knob=1.0, promoted_preempts=False)),
]


def with_baseline(path: str, since: float | None, nodes: int
                  ) -> tuple[Trace, Cluster, SimResult]:
    """The trace at ``path`` (from ``since``, s) on ``nodes`` real nodes × 8 GPUs and its
    ``fifo-fit`` replay, the baseline every line is measured against."""
    trace = read_trace(REPO / path, None, since)
    cluster = Cluster(nodes, 8)
    with contextlib.redirect_stdout(io.StringIO()):
        base = simulate(trace, cluster, PolicyConfig(policy="fifo-fit"))
    return trace, cluster, base


def line(label: str, base: SimResult, result: SimResult) -> str:
    f = window_comparison([base, result], base.policy, 200)[result.policy]
    s = summarize(result)
    return (f"  {label:54s} worst window {f['worst_window_ratio']:.3f}  windows > 1.03 "
            f"{f['windows_over_1_03']:3d}  hurt {100 * f['hurt_jobs_share']:.3f} %  "
            f"avg JCT ratio {f['avg_jct_ratio']:.3f}  p95 {s['p95_jct_s']:9,.0f} s  "
            f"preemptions {s['preemptions']:7,d}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(TRACES))
    parser.add_argument("--guard", type=float, default=1.0,
                        help="wait_guard of the guarded runs (default 1)")
    args = parser.parse_args()
    if args.guard <= 0:
        parser.error(f"--guard must be > 0 (got {args.guard:g})")
    dist = load_distribution()
    for name, (path, since, nodes) in TRACES.items():
        if args.only and name != args.only:
            continue
        trace, cluster, base = with_baseline(path, since, nodes)
        print(f"{name}: {len(trace.jobs)} jobs, {nodes} x 8 GPUs, against fifo-fit")
        for label, config in RUNS:
            for guard in (0.0, args.guard):
                with contextlib.redirect_stdout(io.StringIO()):
                    result = simulate(trace, cluster,
                                      dataclasses.replace(config, wait_guard=guard),
                                      distribution=dist)
                print(line(f"{label}, wait_guard {guard:g}", base, result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
