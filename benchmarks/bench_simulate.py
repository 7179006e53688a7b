"""Benchmark: simulator replays; prints wall time and peak memory.

Cases: the Philly excerpt's dense window (submit >= 48 days, 14,237 jobs) on a cluster sized
for load ≈ 0.9 and on the issue's 127 × 8; ITP cluster04 (15,802 jobs) on 69 × 8; a
100k-job synthetic trace (Poisson arrivals, Philly-like GPU counts, log-normal durations,
seed 1) sized for load ≈ 0.9. Each (case, policy) runs in a fresh child process so that its
peak RSS (``resource.getrusage``) is its own. Zero cost and GPU counting, as in the issue's
reference runs, unless ``--costs`` / ``--consolidate``. Nothing is asserted.

Run: ``.venv/bin/python benchmarks/bench_simulate.py [--cases philly,itp] [--policies fifo]``
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from prioritizer.policy.config import POLICY_NAMES, PolicyConfig
from prioritizer.policy.durations import load_distribution
from prioritizer.sim.report import summarize
from prioritizer.sim.engine import Cluster, simulate
from prioritizer.sim.traces import Trace, TraceJob, read_trace

DATA = Path(__file__).resolve().parent.parent / "data" / "traces"
CASES = ("philly-load0.9", "philly-127x8", "itp-69x8", "synthetic-100k")


def nodes_for_load(trace: Trace, load: float, gpus_per_node: int = 8) -> int:
    """Nodes of ``gpus_per_node`` GPUs for offered load ``load`` over the submit span."""
    demand = sum(j.num_gpus * j.duration for j in trace.jobs)
    span = trace.jobs[-1].submit - trace.jobs[0].submit
    return max(1, math.ceil(demand / (load * span) / gpus_per_node))


def synthetic(n: int, seed: int = 1) -> Trace:
    rng = random.Random(seed)
    jobs, clock = [], 0.0
    for i in range(n):
        clock += rng.expovariate(1 / 60.0)
        gpus = rng.choices([1, 2, 4, 8, 16, 32], [60, 12, 12, 10, 4, 2])[0]
        duration = max(1.0, round(math.exp(rng.gauss(7.0, 2.0))))
        jobs.append(TraceJob(i, str(i), i + 2, clock, gpus, duration))
    return Trace("synthetic", "itp", tuple(jobs), 0)


def load_case(case: str) -> tuple[Trace, Cluster]:
    if case.startswith("philly"):
        trace = read_trace(DATA / "philly-15k" / "philly_data_training.csv", since=4147200)
        nodes = 127 if case == "philly-127x8" else nodes_for_load(trace, 0.9)
    elif case == "itp-69x8":
        trace, nodes = read_trace(DATA / "itp-2021" / "cluster04.csv"), 69
    else:
        trace = synthetic(100_000)
        nodes = nodes_for_load(trace, 0.9)
    return trace, Cluster(nodes, 8, "count")


def run_one(case: str, policy: str, costs: bool, consolidate: bool) -> None:
    trace, cluster = load_case(case)
    if consolidate:
        cluster = Cluster(cluster.nodes, 8, "consolidate")
    cfg = PolicyConfig(policy=policy)
    cfg = cfg if costs else cfg.zero_cost()
    start, cpu0 = time.perf_counter(), time.process_time()
    result = simulate(trace, cluster, cfg, load_distribution())
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    s = summarize(result)
    print(json.dumps({"case": case, "policy": policy, "jobs": s["jobs"],
                      "nodes": cluster.nodes, "wall_s": round(wall, 2),
                      "cpu_s": round(cpu, 2),
                      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                            / 1024, 1),
                      "avg_jct_s": round(s["avg_jct_s"], 1)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--policies", default=",".join(POLICY_NAMES))
    parser.add_argument("--costs", action="store_true", help="modeled costs on")
    parser.add_argument("--consolidate", action="store_true", help="real nodes, not counting")
    parser.add_argument("--one", nargs=2, metavar=("CASE", "POLICY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(*args.one, args.costs, args.consolidate)
        return
    print(f"{'case':16s} {'policy':17s} {'jobs':>7s} {'nodes':>5s} {'wall s':>8s} "
          f"{'cpu s':>7s} {'peak MiB':>9s} {'avg JCT s':>10s}")
    for case in args.cases.split(","):
        for policy in args.policies.split(","):
            cmd = [sys.executable, __file__, "--one", case, policy]
            cmd += ["--costs"] if args.costs else []
            cmd += ["--consolidate"] if args.consolidate else []
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            r = json.loads(out)
            print(f"{r['case']:16s} {r['policy']:17s} {r['jobs']:7d} {r['nodes']:5d} "
                  f"{r['wall_s']:8.2f} {r['cpu_s']:7.2f} {r['peak_rss_mib']:9.1f} "
                  f"{r['avg_jct_s']:10.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
