"""Benchmark: GPU sharing on a Philly-derived mix; prints production JCT and GPU utilisation.

Workload: the Philly 15k excerpt's dense window (submit >= 48 days), made into a mix by one
of the rules of ``prioritizer.sim.mix``:

* ``--mix extra`` (default): the first ``--jobs`` jobs (default 900) are the production
  stream, unchanged; opportunistic 0.5-GPU jobs from the 1-GPU jobs of the later windows of
  the same length offer ``--opportunistic-load`` (default 0.3 = 1 - the production load: the
  capacity production leaves idle on average) beside it (``mix.opportunistic_mix``);
* ``--mix split``: the first ``--jobs`` jobs (default 2000), every ``--shard-every``-th 1-GPU
  job asks 0.5 GPU, every ``--opportunistic-every``-th is opportunistic
  (``mix.sharing_mix``).

Replays on ``--nodes`` × 8 GPUs (by default sized for ``--load`` of the production jobs), real
nodes, the default costs (``PolicyConfig``: 60 s thrash guard, 15 s checkpoint, 121 s requeue
delay, 30 s ticks):

* **no sharing**: the production jobs alone, each shard job on a whole GPU
  (``mix.production_alone``): without gres/shard and the opportunistic class the extra work
  would compete with production, so it is not run;
* **opp. whole GPUs** (``extra`` only): the mix with each opportunistic job on a whole GPU
  (``mix.whole_gpus``), what the opportunistic class gives without the shards;
* **sharing**: the whole mix (shard jobs packed two to a GPU, opportunistic jobs on GPUs
  production leaves free).

Production JCT: the average over production jobs (paired by trace id). GPU utilisation: GPU·s
used inside the production arrival window [0, S] (S = the last production submit; a 0.5-GPU
job uses half a GPU, also where it holds a whole one) over GPUs × S. Nothing is asserted.

Run: ``.venv/bin/python benchmarks/bench_sharing.py [--mix extra|split] [--jobs N] [--load 0.7]
[--opportunistic-load 0.3] [--shard-every 2] [--opportunistic-every 4]``
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from prioritizer import numbers
from prioritizer.command import CliError
from prioritizer.policy.config import POLICY_NAMES, PolicyConfig
from prioritizer.sim.engine import Cluster, JobResult
from prioritizer.sim.shared import replay_shared
from prioritizer.sim.mix import opportunistic_mix, production_alone, sharing_mix, whole_gpus
from prioritizer.sim.traces import Trace, read_trace

def nodes_for_load(trace: Trace, load: float) -> int:
    """Nodes of 8 GPUs for offered load ``load`` over the arrival span [0, S]: GPU·s asked
    inside it (a job's duration cut at S) over ``load`` × S × 8. Raises ValueError when the
    jobs all arrive at once (no span to size for)."""
    span = trace.jobs[-1].submit if trace.jobs else 0.0
    if span <= 0:
        raise ValueError("the production jobs all arrive at once: no arrival window")
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


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options (module doc). A bad number raises :class:`CliError` naming the option."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mix", choices=("extra", "split"), default="extra")
    ap.add_argument("--jobs", type=numbers.arg_type("--jobs", numbers.parse_int, 0,
                                                    numbers.MAX_COUNT), default=0,
                    help="production jobs (extra; 0: 900) or mix jobs (split; 0: 2000)")
    ap.add_argument("--nodes", type=numbers.arg_type("--nodes", numbers.parse_int, 0,
                                                     numbers.MAX_NODES), default=0,
                    help="0: sized for --load")
    ap.add_argument("--load", type=numbers.ratio("--load"), default=0.7,
                    help="production GPU·s over (GPUs x arrival span) when --nodes is 0")
    ap.add_argument("--opportunistic-load", type=numbers.ratio("--opportunistic-load"),
                    default=0.3,
                    help="extra: opportunistic GPU·s offered over (GPUs x arrival span), > 0")
    ap.add_argument("--policy", choices=POLICY_NAMES, default="tiresias-las")
    ap.add_argument("--shard-every", type=numbers.count("--shard-every"), default=2)
    ap.add_argument("--opportunistic-every", type=numbers.count("--opportunistic-every"),
                    default=4)
    return ap.parse_args(argv)


def workloads(a: argparse.Namespace, full: Trace, n: int
              ) -> tuple[list[tuple[str, Trace]], Trace, Trace, Cluster]:
    """The replays of ``--mix`` on the first ``n`` jobs of ``full`` (module doc), the mix, its
    production jobs alone and the cluster. Raises CliError naming the option when the first
    ``n`` jobs give no production arrival window or no production job."""
    if a.mix == "extra":
        first = Trace(full.path, full.format, full.jobs[:n], 0)
        if first.jobs[-1].submit <= 0:
            raise CliError(f"--jobs: the first {n} jobs all arrive at once (no arrival "
                           "window); take more")
        cluster = Cluster(a.nodes or nodes_for_load(first, a.load), 8)
        mix = opportunistic_mix(full, n, cluster.total_gpus, a.opportunistic_load)
        alone = production_alone(mix)
        return ([("no sharing", alone), ("opp. whole GPUs", whole_gpus(mix)), ("sharing", mix)],
                mix, alone, cluster)
    base = Trace(full.path, full.format, full.jobs[:n], 0)
    mix = sharing_mix(base, a.shard_every, a.opportunistic_every)
    alone = production_alone(mix)
    if not alone.jobs:
        raise CliError(f"--opportunistic-every: {a.opportunistic_every} leaves the first {n} "
                       "jobs no production job; take a larger one or more --jobs")
    if alone.jobs[-1].submit <= 0:
        raise CliError(f"--jobs: the production jobs of the first {n} all arrive at once (no "
                       "arrival window); take more")
    cluster = Cluster(a.nodes or nodes_for_load(alone, a.load), 8)
    return [("no sharing", alone), ("sharing", mix)], mix, alone, cluster


def main(argv: Sequence[str] | None = None) -> int:
    """Run the replays and print the table; 2 (one line on stderr) on a bad option."""
    try:
        a = parse_args(argv)
        full = read_trace(PHILLY, since=48 * 86400)
        n = a.jobs or (900 if a.mix == "extra" else 2000)
        if n >= len(full.jobs):
            raise CliError(f"--jobs: expected fewer than the {len(full.jobs):,} jobs of the "
                           f"trace's dense window, got {n}")
        runs, mix, alone, cluster = workloads(a, full, n)
    except CliError as exc:
        print(f"bench_sharing: {exc}", file=sys.stderr)
        return 2
    cfg = PolicyConfig(policy=a.policy)
    uses = {j.name: j.share or float(j.num_gpus) for j in mix.jobs}
    until = max(j.submit for j in mix.jobs)
    production = {j.name for j in alone.jobs}
    opp_used = sum(uses[j.name] * min(j.duration, until - j.submit)
                   for j in mix.jobs if j.opportunistic)
    print(f"workload ({a.mix}): {len(mix.jobs)} Philly jobs (submit >= 48 d), "
          f"{sum(1 for j in mix.jobs if j.share)} at 0.5 GPU, "
          f"{sum(1 for j in mix.jobs if j.opportunistic)} opportunistic "
          f"(offered load {opp_used / (cluster.total_gpus * until):.3f} in the window); "
          f"{cluster.nodes} x 8 GPUs, {a.policy}, default costs; window [0, {until:.0f} s]")
    print(f"{'replay':<16}{'prod avg JCT s':>16}{'GPU util':>10}{'preempted':>11}{'wall s':>8}")
    rows = {}
    for name, t in runs:
        jobs, used, preempted, wall = used_gpu_s(t, cluster, cfg, uses, until)
        jct = statistics.fmean(j.jct for j in jobs if j.name in production)
        util = used / (cluster.total_gpus * until)
        rows[name] = (jct, util)
        print(f"{name:<16}{jct:>16.0f}{util:>10.1%}{preempted:>11}{wall:>8.1f}")
    j0, u0 = rows["no sharing"]
    for name, (j1, u1) in rows.items():
        if name != "no sharing":
            print(f"{name} against no sharing: production avg JCT {j1 / j0 - 1:+.2%}, "
                  f"GPU utilisation {u1 / u0 - 1:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
