"""Gittins with a distribution learned from the first half of a trace, replayed on the second
half, against the packaged YARN distribution and 2D-LAS. Prints figures.

    .venv/bin/python benchmarks/learned_gittins.py

Each trace is split at its middle job (submit order): the first half's GPU·s are the learned
samples, the second half (re-based to 0) is replayed with GPU counting and zero cost (the
README's reference settings).
"""

from __future__ import annotations

import argparse

import dataclasses
import statistics
import sys
from pathlib import Path

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.durations import load_distribution
from prioritizer.sim.engine import Cluster, simulate
from prioritizer.sim.learned import learned_distribution, samples_from_trace
from prioritizer.sim.report import nearest_rank
from prioritizer.sim.traces import Trace, TraceJob, read_trace

ROOT = Path(__file__).resolve().parents[1] / "data" / "traces"
TRACES = {
    "philly-window": (ROOT / "philly-15k/philly_data_training.csv", 4147200, 127),
    "itp-cluster04": (ROOT / "itp-2021/cluster04.csv", None, 69),
    # the 763 Philly jobs before the dense window, on 16 nodes so that jobs queue
    "philly-before-window-16x8": (ROOT / "philly-15k/philly_data_training.csv", None, 16),
}


def halves(trace: Trace, until: float | None = None) -> tuple[Trace, Trace]:
    jobs = [j for j in trace.jobs if until is None or j.submit < until]
    mid = len(jobs) // 2
    first, second = jobs[:mid], jobs[mid:]
    base = second[0].submit
    rebased = tuple(TraceJob(i, j.name, j.line, j.submit - base, j.num_gpus, j.duration)
                    for i, j in enumerate(second))
    return (Trace(trace.path, trace.format, tuple(first), 0),
            Trace(trace.path, trace.format, rebased, 0))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", choices=[*TRACES, []], metavar="TRACE",
                        help=f"traces to replay (default all: {', '.join(TRACES)})")
    names = parser.parse_args(argv).names
    base = PolicyConfig().zero_cost()
    for name in names or list(TRACES):
        path, since, nodes = TRACES[name]
        until = 4147200.0 if name.startswith("philly-before-window") else None
        learn, replay = halves(read_trace(path, since=since), until)
        learned, note = learned_distribution(samples_from_trace(learn), source=f"{name} 1st half")
        cluster = Cluster(nodes, 8, "count")
        print(f"{name}: {len(learn.jobs)} jobs learn, {len(replay.jobs)} replay; {note}")
        for label, policy, dist in (("2D-LAS", "tiresias-las", None),
                                    ("Gittins packaged YARN", "tiresias-gittins", load_distribution()),
                                    ("Gittins learned", "tiresias-gittins", learned),
                                    ("SRTF oracle", "srtf", None)):
            res = simulate(replay, cluster, dataclasses.replace(base, policy=policy), dist)
            jcts = [j.jct for j in res.jobs]
            print(f"  {label:<22} avg JCT {statistics.fmean(jcts):>10,.0f} s  "
                  f"p95 {nearest_rank(jcts, 95):>10,.0f} s  (replay {res.wall_s:.1f} s)")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
