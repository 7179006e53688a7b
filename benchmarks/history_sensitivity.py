"""How much a few seconds of timing noise move the per-job figure of ``dlprio history check``,
for the two workloads of the live test under ``dlprio run``. Prints figures.

    .venv/bin/python benchmarks/history_sensitivity.py

Each workload (30 jobs of 1, 2, 4 or 8 GPUs in three bursts of ten on 4 × 8 GPUs, 2D-LAS with the
live test's costs: 5 s checkpoint, 11 s requeue delay, 5 s decisions) is replayed once as the
"truth"; that outcome is then checked again with one timing detail changed: no start latency,
5 s instead of 2.5 s, 1 s of dispatch latency, or the decision ticks 2 s / 4 s out of phase.
Each cell is ``avg JCT error % / share of jobs within 20 %``: what a real run's noise of that
size does to the check. ``short`` is the first version of the live test (6–25 s jobs, first
threshold 40 GPU·s, bursts 4 s apart), ``long`` the current one (15–75 s, 210 GPU·s, 10 s).
One seed per line (the workload's random draw).
"""

from __future__ import annotations

import dataclasses
import random

from prioritizer.history.check import check
from prioritizer.history.trace import HistoryRow
from prioritizer.policy.config import PolicyConfig
from prioritizer.sim.engine import Cluster

WORKLOADS = {  # steps low/high (s), first threshold (GPU·s), gap between bursts (s)
    "short": (6, 25, 40, 4),
    "long": (15, 75, 210, 10),
}
VARIANTS = {"latency 0 s": {"start_latency_s": 0}, "latency 5 s": {"start_latency_s": 5},
            "dispatch 1 s": {"dispatch_s": 1}, "phase +2 s": {"cycle_at": 2.0},
            "phase +4 s": {"cycle_at": 4.0}}
CLUSTER = Cluster(4, 8)


def workload(seed: int, low: int, high: int, gap: int) -> list[HistoryRow]:
    """30 rows: sizes and step counts drawn as the live test draws them; 2 s of start-up each."""
    rng = random.Random(seed)
    rows = []
    for i in range(30):
        gpus, steps, eligible = rng.choice((1, 2, 4, 8)), rng.randint(low, high), (i // 10) * gap
        rows.append(HistoryRow(str(i), "u", "a", "gpu", eligible, eligible, gpus, 1,
                               gpus * (steps + 2), steps + 2, 0, 0, "COMPLETED", 1, "self"))
    return rows


def main() -> None:
    print("workload seed  " + "  ".join(f"{name:>12}" for name in VARIANTS))
    for name, (low, high, threshold, gap) in WORKLOADS.items():
        config = PolicyConfig.from_mapping({
            "policy": "tiresias-las", "thresholds_gpu_s": [threshold, 100000], "starve_knob": 0,
            "min_run_s": 5, "checkpoint_overhead_s": 5, "requeue_delay_s": 11,
            "decision_interval_s": 5})
        worst = 1.0
        for seed in range(10):
            rows = workload(seed, low, high, gap)
            truth = check(rows, CLUSTER, config, start_latency_s=2.5)
            real = {j.job_id: j.replay_jct for j in truth.jobs}
            rows = [dataclasses.replace(r, jct=real[r.job_id]) for r in rows]
            cells = []
            for options in VARIANTS.values():
                fid = check(rows, CLUSTER, config, **{"start_latency_s": 2.5, **options})
                worst = min(worst, fid.share_within)
                cells.append(f"{fid.avg_error * 100:+.0f} % / {fid.share_within * 100:.0f} %")
            print(f"{name:>8} {seed:>4}  " + "  ".join(f"{c:>12}" for c in cells))
        print(f"{name:>8} lowest share within 20 %: {worst * 100:.0f} %")


if __name__ == "__main__":
    main()
