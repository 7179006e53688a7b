"""Benchmark: GPU sharing on the Philly-derived mix; prints production JCT and GPU utilisation.

Workload: the first ``--jobs`` jobs of the Philly 15k excerpt's dense window (submit >= 48
days), made into a sharing mix by ``prioritizer.sim.mix.sharing_mix`` (every
``--shard-every``-th 1-GPU job asks 0.5 GPU, every ``--opportunistic-every``-th is
opportunistic). Two replays on ``--nodes`` × 8 GPUs (by default sized for ``--load`` of the
production jobs), real nodes, the default costs
(``PolicyConfig``: 60 s thrash guard, 15 s checkpoint, 121 s requeue delay, 30 s ticks):

* **no sharing**: the production jobs alone, each shard job on a whole GPU
  (``mix.production_alone``);
* **sharing**: the whole mix (shard jobs packed two to a GPU, opportunistic jobs on GPUs
  production leaves free).

Production JCT: the average over production jobs (paired by trace id). GPU utilisation: GPU·s
used inside the arrival window [0, S] (S = the last submit; a 0.5-GPU job uses half a GPU, also
where it holds a whole one) over GPUs × S. Nothing is asserted.

Run: ``.venv/bin/python benchmarks/bench_sharing.py [--jobs 2000] [--load 0.7] [--shard-every 2] [--opportunistic-every 4]``
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

from prioritizer.policy.config import PolicyConfig
from prioritizer.sim.engine import Cluster, JobResult
from prioritizer.sim.shared import replay_shared
from prioritizer.sim.mix import production_alone, sharing_mix
from prioritizer.sim.traces import Trace, read_trace

def nodes_for_load(trace: Trace, load: float) -> int:
    """Nodes of 8 GPUs for offered load ``load`` over the arrival span [0, S]: GPU·s asked
    inside it (a job's duration cut at S) over ``load`` × S × 8."""
    span = trace.jobs[-1].submit
    demand = sum(j.num_gpus * min(j.duration, span - j.submit) for j in trace.jobs)
    return max(1, math.ceil(demand / (load * span) / 8))


PHILLY = (Path(__file__).resolve().parent.parent / "data" / "traces" / "philly-15k"
          / "philly_data_training.csv")


def used_gpu_s(trace: Trace, cluster: Cluster, cfg: PolicyConfig, uses: dict[str, float],
               until: float) -> tuple[list[JobResult], float, int, float]:
    """Replay ``trace``: its jobs, the GPU·s they use in [0, ``until``] (``uses``: trace id
    -> GPUs a job uses, 0.5 for a shard job even where it holds a whole GPU), preemptions,
    wall seconds."""
    shapes = {j.job_id: (1,) if j.share else cluster.shape(j.num_gpus) for j in trace.jobs}
    replay, wall = replay_shared(trace, cluster.nodes, cluster.gpus_per_node, cfg, None, shapes)
    name = {j.job_id: j.name for j in trace.jobs}
    used = sum(uses[name[i]] * max(0.0, min(end, until) - start)
               for i, start, end, _ in replay.spells)
    jobs = [JobResult(j.trace.job_id, j.trace.name, j.trace.num_gpus, j.trace.submit,
                      j.first_start or 0.0, j.end or 0.0, (j.end or 0.0) - j.trace.submit,
                      0.0, j.preemptions, j.promotions) for j in replay.jobs.values()]
    return jobs, used, sum(j.preemptions for j in jobs), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=0, help="0: sized for --load")
    ap.add_argument("--load", type=float, default=0.7,
                    help="production GPU·s over (GPUs x arrival span) when --nodes is 0")
    ap.add_argument("--policy", default="tiresias-las")
    ap.add_argument("--shard-every", type=int, default=2)
    ap.add_argument("--opportunistic-every", type=int, default=4)
    a = ap.parse_args()
    full = read_trace(PHILLY, since=48 * 86400)
    base = Trace(full.path, full.format, full.jobs[:a.jobs], 0)
    mix = sharing_mix(base, a.shard_every, a.opportunistic_every)
    alone = production_alone(mix)
    cluster = Cluster(a.nodes or nodes_for_load(alone, a.load), 8)
    cfg = PolicyConfig(policy=a.policy)
    uses = {j.name: j.share or float(j.num_gpus) for j in mix.jobs}
    until = mix.jobs[-1].submit
    production = {j.name for j in alone.jobs}
    print(f"workload: {len(mix.jobs)} Philly jobs (submit >= 48 d), "
          f"{sum(1 for j in mix.jobs if j.share)} at 0.5 GPU, "
          f"{sum(1 for j in mix.jobs if j.opportunistic)} opportunistic "
          f"({sum(uses[j.name] * j.duration for j in mix.jobs if j.opportunistic) / sum(uses[j.name] * j.duration for j in mix.jobs):.1%} of GPU·s); "
          f"{cluster.nodes} x 8 GPUs, {a.policy}, default costs; window [0, {until:.0f} s]")
    print(f"{'replay':<12}{'prod avg JCT s':>16}{'GPU util':>10}{'preempted':>11}{'wall s':>8}")
    rows = {}
    for name, t in (("no sharing", alone), ("sharing", mix)):
        jobs, used, preempted, wall = used_gpu_s(t, cluster, cfg, uses, until)
        jct = statistics.fmean(j.jct for j in jobs if j.name in production)
        util = used / (cluster.total_gpus * until)
        rows[name] = (jct, util)
        print(f"{name:<12}{jct:>16.0f}{util:>10.1%}{preempted:>11}{wall:>8.1f}")
    (j0, u0), (j1, u1) = rows["no sharing"], rows["sharing"]
    print(f"sharing against no sharing: production avg JCT {j1 / j0 - 1:+.2%}, "
          f"GPU utilisation {u1 / u0 - 1:+.1%}")

if __name__ == "__main__":
    main()
