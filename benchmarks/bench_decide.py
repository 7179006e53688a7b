"""Benchmark: one policy decision over 10,000 jobs on 1,000 nodes × 8 GPUs.

Prints wall time (median of repeats), CPU time of the process (minimum of repeats: on a
shared machine the figure least moved by other work) and peak traced memory per policy;
asserts nothing.
Two synthetic snapshots of a full cluster (every GPU busy with 1-8-GPU jobs, the rest
pending, mixed sizes up to 16 GPUs): ``storm`` (running jobs spread over all queues, pending
jobs new or demoted and starving: the decision promotes thousands and preempts for over a
thousand waiters, a worst case) and ``steady`` (what a cluster under Tiresias looks like
between arrivals: running jobs in queue 0, pending ones demoted, recently run, so nothing is
promoted or preempted). Each line also times the next decision given this one as
``previous=`` after one pending job changed (what the simulator does). Run:
``.venv/bin/python benchmarks/bench_decide.py [--jobs N] [--nodes N] [--repeat R]
[--scenario storm|steady]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import time
import tracemalloc

from prioritizer.policy.config import POLICY_NAMES, PolicyConfig
from prioritizer.policy.durations import load_distribution
from prioritizer.policy.model import JobPhase, JobView, NodeView, Snapshot
from prioritizer.policy.decide import decide

NOW = 1_000_000.0


def make_snapshot(jobs: int, nodes: int, gpus: int = 8, seed: int = 1,
                  steady: bool = False) -> Snapshot:
    """A full cluster plus pending jobs, deterministic for a seed (see module doc)."""
    rng = random.Random(seed)
    free = [gpus] * nodes
    views: list[JobView] = []
    node = 0
    while node < nodes and len(views) < jobs:
        size = min(rng.choice([1, 1, 2, 4, 8]), free[node])
        free[node] -= size
        attained = (100.0 if steady else rng.choice([100.0, 5000.0, 50000.0])) * size
        views.append(JobView(len(views), JobPhase.RUNNING, (size,), NOW - 5e4, attained,
                             attained / size, queue=None, run_start=NOW - rng.randint(0, 9_000),
                             nodes=(f"n{node}",), duration_s=attained / size + 1e4))
        if free[node] == 0:
            node += 1
    while len(views) < jobs:
        size = rng.choice([1, 1, 2, 4, 8, 16])
        shape = (size,) if size <= gpus else (gpus,) * (size // gpus)
        ran = rng.choice([4000.0, 9000.0]) if steady else rng.choice([0.0, 0.0, 300.0, 4000.0])
        ended = NOW - rng.randint(0, 100 if steady else 90_000)
        views.append(JobView(len(views), JobPhase.PENDING, shape, NOW - rng.randint(0, 90_000),
                             ran * size, ran, queue=(2 if steady else 1) if ran else None,
                             queue_entry_time=NOW - 5e4, last_run_s=ran,
                             last_run_end=ended if ran else None,
                             duration_s=ran + rng.randint(60, 100_000)))
    node_views = tuple(NodeView(f"n{i}", gpus, f) for i, f in enumerate(free))
    return Snapshot(node_views, tuple(views))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scenario", choices=("storm", "steady"), default="storm")
    args = parser.parse_args()
    snap = make_snapshot(args.jobs, args.nodes, steady=args.scenario == "steady")
    dist = load_distribution()
    running = sum(1 for j in snap.jobs if j.phase is JobPhase.RUNNING)
    print(f"{args.scenario}: decision over {len(snap.jobs)} jobs ({running} running) "
          f"on {args.nodes} nodes x 8 GPUs")
    for name in POLICY_NAMES:
        cfg = PolicyConfig(policy=name)
        times, cpu = [], []
        for _ in range(args.repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            decisions = decide(snap, cfg, NOW, distribution=dist)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        # The simulator's case: the next decision passes this one back (``previous=``)
        # after one pending job changed; the other views are the same objects.
        changed = Snapshot(snap.nodes, snap.jobs[:-1] + (
            dataclasses.replace(snap.jobs[-1], queue_entry_time=NOW),))
        again = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            decide(changed, cfg, NOW, distribution=dist, previous=decisions)
            again.append(time.perf_counter() - start)
        tracemalloc.start()
        decide(snap, cfg, NOW, distribution=dist)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"{name:18s} median {statistics.median(times) * 1e3:7.1f} ms  "
              f"cpu min {min(cpu) * 1e3:7.1f} ms  "
              f"peak {peak / 2**20:6.1f} MiB  preemptions {len(decisions.preemptions):4d}  "
              f"promotions {len(decisions.promotions):4d}  "
              f"with previous= {statistics.median(again) * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
