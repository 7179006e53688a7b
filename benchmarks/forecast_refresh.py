"""CPU time of one forecast refresh at the size of a large site (prints figures, asserts
nothing): ``--nodes`` nodes × 8 GPUs full of running jobs (two 4-GPU jobs per node, each
run 0-800 s so far: queue 0 of the default thresholds, as on a cluster where the daemon has
already made the preemptions due) and ``--queue`` pending jobs (1, 2, 4, 8 and 16 GPUs in
turn; two in three new, one in three requeued with 0-20,000 s of run time), every remaining
run time unknown (drawn). Times
:func:`prioritizer.forecast.forecast.forecast` with ``--draws`` draws, the minimum over
``--repeats`` (the machine is shared). ``--cpu-budget-s S`` stops the draws as the daemon's
``forecast.cpu_budget_s`` does (:class:`prioritizer.daemon.forecasts.DrawBudget`: no draw
after one that would overrun it, a draw that spends it ended where it is) and prints the draws
made and, for a draw ended so, how far ahead it reached.

    .venv/bin/python benchmarks/forecast_refresh.py [--nodes 1000] [--queue 10000] \\
        [--draws 20] [--policy tiresias-las] [--repeats 3] [--horizon-h H] [--cpu-budget-s S]
"""

from __future__ import annotations

import argparse
import random
import time

from prioritizer.daemon.forecasts import DrawBudget
from prioritizer.forecast.forecast import forecast
from prioritizer.forecast.world import ForecastJob, World
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.durations import load_distribution

SIZES = (1, 2, 4, 8, 16)


def world(nodes: int, queue: int, seed: int = 0) -> World:
    """The benchmark's world at ``now`` = 100,000 s (see module doc)."""
    rng = random.Random(seed)
    now = 100_000.0
    jobs = []
    for n in range(nodes):
        for k in range(2):   # two 4-GPU jobs per node
            ran = rng.uniform(0, 800)
            jobs.append(ForecastJob(f"r{n}-{k}", "running", (4,), now - ran - 60,
                                    attained_gpu_s=4 * ran, attained_s=ran,
                                    run_start=now - ran, nodes=(f"n{n}",)))
    for i in range(queue):
        gpus = SIZES[i % len(SIZES)]
        shape = (8,) * (gpus // 8) if gpus >= 8 else (gpus,)
        attained = rng.choice((0.0, 0.0, rng.uniform(0, 20_000)))
        jobs.append(ForecastJob(f"p{i}", "pending", shape, now - rng.uniform(0, 50_000),
                                attained_gpu_s=attained * gpus, attained_s=attained,
                                last_run_s=attained, last_run_end=now - 1_000 if attained else None))
    return World(now, tuple((f"n{n}", 8) for n in range(nodes)), tuple(jobs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--queue", type=int, default=10_000)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--policy", default="tiresias-las")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--horizon-h", type=float, default=None,
                        help="replay only this many hours ahead (default: to the end)")
    parser.add_argument("--cpu-budget-s", type=float, default=None,
                        help="stop the draws as the daemon's forecast.cpu_budget_s does")
    args = parser.parse_args()
    w = world(args.nodes, args.queue)
    dist = load_distribution()
    config = PolicyConfig(policy=args.policy)
    times, made, reached = [], args.draws, None
    for _ in range(args.repeats):
        started = time.process_time()
        horizon = args.horizon_h * 3600 if args.horizon_h is not None else None
        budget = DrawBudget(args.cpu_budget_s) if args.cpu_budget_s is not None else None
        made_forecast = forecast(w, config, dist, draws=args.draws, horizon_s=horizon,
                                 enough=budget, out_of_time=budget.over if budget else None)
        made, reached = made_forecast.draws, made_forecast.reached_s
        times.append(time.process_time() - started)
    limit = "" if args.cpu_budget_s is None else f" within a {args.cpu_budget_s:g} s budget"
    print(f"forecast refresh: {args.nodes} nodes, {args.queue} pending, "
          f"{2 * args.nodes} running, {args.policy}, {made} of {args.draws} draws{limit}, "
          f"horizon {args.horizon_h if args.horizon_h is not None else 'none'} h: "
          f"{min(times):.2f} s CPU (min of {args.repeats}; {min(times) / made:.3f} s "
          "per draw)" + ("" if reached is None else
                         f"; the budget ended the last draw {reached / 3600:.1f} h ahead"))


if __name__ == "__main__":
    main()
