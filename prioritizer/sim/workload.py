"""The main job's workloads: real trace samples scaled to minutes, for both of their runs.

``examples/main_job.py`` replays short real workloads twice: on the live cluster (each job a
``dlsubmit`` spec running ``examples/trainer.py``) and in ``dlprio simulate``. Both take their
jobs from this module, so the two runs see exactly the same arrivals, GPUs and durations.
Traces are read by :func:`prioritizer.sim.traces.read_trace` (one CSV reader for the project);
which jobs form a workload is ``examples/pick.py``'s rule.

Mapping rules (:func:`scale_spread`):

1. **GPUs.** ``min(gpus, 8)``: every job fits one 8-GPU node of the local cluster.
2. **One time factor.** Every duration and every arrival gap is divided by the same ``k >= 1``
   (:func:`time_factor`): the sample's nearest-rank 90th-percentile duration over
   :func:`spread_p90_s` of the sample size (20 s for 6 jobs, 80 s for 12, 90 s from 13 on).
   Ratios survive: a 3,000:1 spread of durations stays 3,000:1, and a short job behind a long
   one waits as long, relative to its length, as in the trace: the contention Tiresias exists
   for. Durations are rounded to whole seconds (the trainer's 1 s steps), arrivals to 0.1 s.
3. **Floor and cap.** No scaled job is shorter than :data:`SPREAD_FLOOR_S` (2 s: Slurm's start
   latency and the trainer's steps) or longer than :data:`SPREAD_CAP_FACTOR` × the p90 target
   (a job of days would hold the live run for hours); the jobs between keep their ratios.

The map is checked by simulation (:func:`predicted_ratios`): ``dlprio/fifo-fit`` predicted for
the trace's own times (with every time setting × ``k``) and for the scaled jobs agree when the
map keeps what matters. The scaled jobs are written for ``dlprio simulate`` in the Tiresias CSV
format (``job_id,num_gpu,submit_time,duration``) by :func:`write_tiresias_csv`.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prioritizer.policy.config import PolicyConfig
from prioritizer.sim.traces import Trace, TraceJob, read_trace
from slurm_plugin.common.atomic import write_atomically

DENSE_WINDOW_S = 48 * 86400          # Philly 15k excerpt: dense arrivals from day 48 on
MAX_GPUS = 8


class WorkloadError(ValueError):
    """The trace cannot give the asked sample; the message names the file and the fix."""


@dataclass(frozen=True)
class ScaledJob:
    """One job of the scaled workload.

    Attributes:
        index: position in the sample, 0-based, in arrival order (the simulator's job id).
        name: the trace's own id (Philly ``u_id``).
        gpus: GPUs after the cap (1..8), all on one node.
        submit_s: arrival, seconds after the first job's arrival (scaled).
        duration_s: run time, whole seconds (scaled).
        trace_gpus, trace_gap_s, trace_duration_s: the trace's values (gap: seconds since the
            previous job of the sample, 0 for the first).
    """

    index: int
    name: str
    gpus: int
    submit_s: float
    duration_s: float
    trace_gpus: int
    trace_gap_s: float
    trace_duration_s: float


def sample(jobs: Sequence[TraceJob], n: int) -> list[TraceJob]:
    """The first ``n`` jobs of ``jobs`` (already in arrival order). Raises WorkloadError if fewer."""
    if n < 1:
        raise WorkloadError(f"--jobs {n}: must be at least 1")
    if len(jobs) < n:
        raise WorkloadError(f"--jobs {n}: the trace has only {len(jobs)} jobs from the start "
                            "time on; ask for fewer jobs or an earlier start")
    return list(jobs[:n])


def write_tiresias_csv(jobs: Sequence[ScaledJob], path: str | Path) -> None:
    """Write the scaled jobs as ``job_id,num_gpu,submit_time,duration`` (Tiresias CSV), the
    input ``dlprio simulate --trace`` reads; ``job_id`` is :attr:`ScaledJob.index`."""
    handle = io.StringIO()
    writer = csv.writer(handle)
    writer.writerow(["job_id", "num_gpu", "submit_time", "duration"])
    for job in jobs:
        writer.writerow([job.index, job.gpus, f"{job.submit_s:g}", f"{job.duration_s:g}"])
    write_atomically(path, handle.getvalue(), newline="")


# ---------------------------------------------------------------- one time factor for all
#: The sample's 90th-percentile duration maps to ``spread_p90_s(n)`` seconds; no scaled job is
#: shorter than :data:`SPREAD_FLOOR_S` (the trainer's 1 s steps and Slurm's start latency) or
#: longer than :data:`SPREAD_CAP_FACTOR` × that p90 (a job of days would hold the live run).
SPREAD_FLOOR_S = 2.0
SPREAD_CAP_FACTOR = 2.0
SPREAD_P90_S = (20.0, 90.0)


def spread_p90_s(n: int) -> float:
    """Seconds the 90th-percentile duration of an ``n``-job sample maps to:
    ``min(90, max(20, 10·n − 40))``; 6 -> 20, 8 -> 40, 12 or more -> 80..90."""
    return min(SPREAD_P90_S[1], max(SPREAD_P90_S[0], 10.0 * n - 40.0))


def time_factor(jobs: Sequence[TraceJob], p90_s: float) -> float:
    """The factor ``k >= 1`` every duration and arrival gap of ``jobs`` is divided by: their
    nearest-rank 90th-percentile duration over ``p90_s`` (1 when that is already shorter)."""
    durations = sorted(j.duration for j in jobs)
    rank = max(1, math.ceil(0.9 * len(durations)))
    return max(1.0, durations[rank - 1] / p90_s)


def scale_by(jobs: Sequence[TraceJob], k: float, floor_s: float = SPREAD_FLOOR_S,
             cap_s: float | None = None) -> list[ScaledJob]:
    """Jobs in arrival order with one time factor ``k``: submit ``(s − s₀)/k`` (0.1 s),
    duration ``d/k`` rounded to whole seconds and kept within ``[floor_s, cap_s]``, GPUs capped
    at :data:`MAX_GPUS`. Ratios of durations and gaps survive except at the floor and the
    cap: a 3,000:1 spread stays 3,000:1 up to them."""
    out = []
    first = jobs[0].submit if jobs else 0.0
    for i, job in enumerate(jobs):
        gap = job.submit - jobs[i - 1].submit if i else 0.0
        dur = max(floor_s, float(round(job.duration / k)))
        if cap_s is not None:
            dur = min(dur, cap_s)
        out.append(ScaledJob(i, job.name, min(job.num_gpus, MAX_GPUS),
                             round((job.submit - first) / k, 1), dur, job.num_gpus, gap,
                             job.duration))
    return out


def scale_spread(jobs: Sequence[TraceJob], n: int | None = None) -> tuple[list[ScaledJob], float]:
    """:func:`scale_by` with :func:`time_factor` for :func:`spread_p90_s` of ``n`` (default:
    ``len(jobs)``) and the cap :data:`SPREAD_CAP_FACTOR` × that; returns (jobs, k)."""
    p90 = spread_p90_s(n if n is not None else len(jobs))
    k = time_factor(jobs, p90)
    return scale_by(jobs, k, cap_s=SPREAD_CAP_FACTOR * p90), k


def unscaled_policy(policy: PolicyConfig, k: float) -> PolicyConfig:
    """The settings that mean on the trace's own time what ``policy`` means on jobs scaled by
    ``k``: thresholds (GPU·s and s), ``min_run_s`` and the modeled costs (checkpoint overhead,
    requeue delay, decision interval) times ``k``; the knob (a ratio) and Gittins quantum
    (GPU·s, also × ``k``) alike."""
    return dataclasses.replace(
        policy, thresholds_gpu_s=tuple(t * k for t in policy.thresholds_gpu_s),
        thresholds_s=tuple(t * k for t in policy.thresholds_s), min_run_s=policy.min_run_s * k,
        gittins_quantum_gpu_s=policy.gittins_quantum_gpu_s * k,
        checkpoint_overhead_s=policy.checkpoint_overhead_s * k,
        requeue_delay_s=policy.requeue_delay_s * k,
        decision_interval_s=policy.decision_interval_s * k)


def predicted_ratios(window: Sequence[TraceJob], scaled: Sequence[ScaledJob], k: float,
                     policy: PolicyConfig, nodes: int, gpus_per_node: int) -> tuple[float, float]:
    """The map's check: ``policy``'s avg JCT over ``fifo-fit``'s, predicted by
    ``prioritizer.sim.engine.simulate`` on ``nodes`` × ``gpus_per_node`` GPUs for the trace's
    own ``window`` (GPUs capped as the scaled jobs', :func:`unscaled_policy` of ``k``) and for
    the ``scaled`` jobs under ``policy``: (unscaled ratio, scaled ratio). A map that keeps the
    trace's spread gives two close ratios."""
    from prioritizer.policy.durations import load_distribution
    from prioritizer.sim.engine import Cluster, simulate
    cluster = Cluster(nodes, gpus_per_node)
    first = window[0].submit
    own = Trace("window", "tiresias", tuple(
        TraceJob(i, j.name, j.line, j.submit - first, min(j.num_gpus, MAX_GPUS), j.duration)
        for i, j in enumerate(window)), 0)
    mapped = Trace("scaled", "tiresias", tuple(
        TraceJob(j.index, j.name, 0, j.submit_s, j.gpus, j.duration_s) for j in scaled), 0)
    dist = load_distribution() if policy.uses_distribution else None

    def ratio(trace: Trace, config: PolicyConfig) -> float:
        def avg(c: PolicyConfig) -> float:
            return statistics.fmean(j.jct for j in simulate(trace, cluster, c, dist).jobs)
        return avg(config) / avg(dataclasses.replace(config, policy="fifo-fit"))

    return ratio(own, unscaled_policy(policy, k)), ratio(mapped, policy)
