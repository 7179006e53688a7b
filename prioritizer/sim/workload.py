"""The main job's workload: a real trace sample scaled to a few minutes, for both of its runs.

``examples/main_job.py`` replays a short real workload twice: on the live cluster (each job a
``dlsubmit`` spec running ``examples/trainer.py``) and in ``dlprio simulate``. Both take their
jobs from this module, so the two runs see exactly the same arrivals, GPUs and durations.
Traces are read by :func:`prioritizer.sim.traces.read_trace` (one CSV reader for the project).

Mapping rules, applied in this order:

1. **Window.** Keep the jobs submitted at or after ``start_s`` (trace seconds). The default,
   :data:`DEFAULT_START_S`, lies in the dense window of the Philly 15k excerpt (submit ≥ 48
   days, data/traces/philly-15k/SOURCE.md): it is the submit time of the 898th job of
   that window (u_id 1660, day 48.29), chosen because the following jobs hold a burst of
   8-GPU jobs among single-GPU ones, the load where scheduling matters. Any other start (or
   trace) can be named.
2. **Sample.** Take the first ``n`` jobs from there, in arrival order (ties keep file order):
   a contiguous piece of the real arrival process, not a thinned one, so ``--jobs 6`` is the
   head of the default 24-job run.
3. **GPUs.** ``min(gpus, 8)``: every job fits one 8-GPU node of the local cluster.
4. **Durations.** Monotone on a log scale onto [20, D] s: with ``u = ln(d/d_min) /
   ln(d_max/d_min)`` over the sample, ``d' = 20 · (D/20)^u`` (a power law: order and the
   heavy tail survive, the shortest job gets 20 s, the longest D); rounded to whole seconds
   (the trainer's 1 s steps). All-equal durations map to the geometric middle. The upper end
   follows the sample size (:func:`duration_range`): ``D = min(240, max(90, 10 · n))`` s, i.e.
   240 s for the default 24 jobs and 90 s for ``--jobs 6``; 10 s per job keeps the run's
   length in step with the arrival span, and the 90 s floor keeps a 4.5-fold spread (long
   8-GPU jobs outlive their 12.5 s in queue 0, so preemption still shows).
5. **Arrival gaps.** Monotone on a log scale onto [0, 15] s: ``g' = 15 · ln(1+g) /
   ln(1+g_max)``, so simultaneous submissions stay simultaneous and the longest gap of the
   sample becomes 15 s; arrival times are the running sums, rounded to 0.1 s. The range is
   narrower than the durations' so that 24 jobs arrive within about four minutes and the whole
   run ends within ten.

The scaled jobs are written for ``dlprio simulate`` in the Tiresias CSV format
(``job_id,num_gpu,submit_time,duration``) by :func:`write_tiresias_csv`.
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
from slurm_plugin.atomic import write_atomically

DENSE_WINDOW_S = 48 * 86400          # Philly 15k excerpt: dense arrivals from day 48 on
DEFAULT_START_S = 4_172_631.0        # submit time of u_id 1660 (898th job of the dense window)
DEFAULT_JOBS = 24
MAX_GPUS = 8
DURATION_RANGE_S = (20.0, 240.0)    # the widest range: 24 jobs or more (rule 4)
DURATION_S_PER_JOB, DURATION_FLOOR_S = 10.0, 90.0
GAP_RANGE_S = (0.0, 15.0)


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


def log_scale(values: Sequence[float], lo: float, hi: float) -> list[float]:
    """Map positive ``values`` monotonically onto [lo, hi] on log scales at both ends.

    ``min(values) -> lo``, ``max(values) -> hi``, ``v -> lo · (hi/lo)^(ln(v/min)/ln(max/min))``;
    all-equal values map to ``sqrt(lo · hi)``. Requires ``0 < lo <= hi``.

    Raises:
        ValueError: a value ``<= 0``, or a bad range.
    """
    if not 0 < lo <= hi:
        raise ValueError(f"range [{lo}, {hi}]: need 0 < lo <= hi")
    if any(v <= 0 or not math.isfinite(v) for v in values):
        raise ValueError(f"log_scale needs finite values > 0, got {list(values)}")
    if not values:
        return []
    vmin, vmax = min(values), max(values)
    if vmax == vmin:
        return [math.sqrt(lo * hi)] * len(values)
    span = math.log(vmax / vmin)
    return [lo * (hi / lo) ** (math.log(v / vmin) / span) for v in values]


def log1p_scale(values: Sequence[float], lo: float, hi: float) -> list[float]:
    """Map values ``>= 0`` monotonically onto [lo, hi] by ``ln(1+v)``: ``0 -> lo``, max -> hi.

    All-zero values map to ``lo``. Raises ValueError for a negative value or ``hi < lo``.
    """
    if hi < lo:
        raise ValueError(f"range [{lo}, {hi}]: need lo <= hi")
    if any(v < 0 or not math.isfinite(v) for v in values):
        raise ValueError(f"log1p_scale needs finite values >= 0, got {list(values)}")
    top = math.log1p(max(values, default=0.0))
    if top == 0:
        return [lo] * len(values)
    return [lo + (hi - lo) * math.log1p(v) / top for v in values]


def duration_range(n: int) -> tuple[float, float]:
    """Rule 4's target range of scaled durations (s) for a sample of ``n`` jobs:
    ``(20, min(240, max(90, 10 · n)))``; e.g. 6 -> (20, 90), 12 -> (20, 120), 24+ -> (20, 240)."""
    hi = min(DURATION_RANGE_S[1], max(DURATION_FLOOR_S, DURATION_S_PER_JOB * n))
    return DURATION_RANGE_S[0], hi


def sample(jobs: Sequence[TraceJob], n: int) -> list[TraceJob]:
    """The first ``n`` jobs of ``jobs`` (already in arrival order). Raises WorkloadError if fewer."""
    if n < 1:
        raise WorkloadError(f"--jobs {n}: must be at least 1")
    if len(jobs) < n:
        raise WorkloadError(f"--jobs {n}: the trace has only {len(jobs)} jobs from the start "
                            "time on; ask for fewer jobs or an earlier --start-at")
    return list(jobs[:n])


def scale(jobs: Sequence[TraceJob], durations_s: tuple[float, float] = DURATION_RANGE_S,
          gaps_s: tuple[float, float] = GAP_RANGE_S) -> list[ScaledJob]:
    """Apply rules 3-5 of the module doc to a sample in arrival order (submit in seconds).

    ``durations_s`` and ``gaps_s`` are the target ranges (defaults: the module's rules).
    """
    gaps = [0.0] + [b.submit - a.submit for a, b in zip(jobs, jobs[1:])]
    durations = log_scale([j.duration for j in jobs], *durations_s)
    scaled_gaps = log1p_scale(gaps, *gaps_s)
    out, clock = [], 0.0
    for i, (job, gap, dur, sgap) in enumerate(zip(jobs, gaps, durations, scaled_gaps)):
        clock += sgap
        out.append(ScaledJob(i, job.name, min(job.num_gpus, MAX_GPUS), round(clock, 1),
                             float(round(dur)), job.num_gpus, gap, job.duration))
    return out


def load(path: str | Path, n: int = DEFAULT_JOBS, start_s: float = DEFAULT_START_S,
         fmt: str | None = None, durations_s: tuple[float, float] | None = None,
         gaps_s: tuple[float, float] = GAP_RANGE_S) -> list[ScaledJob]:
    """Read ``path`` (any format :func:`read_trace` knows), then window, sample and scale
    (``durations_s``, ``gaps_s``: target ranges in seconds, see :func:`scale`; ``durations_s``
    None: :func:`duration_range` of ``n``).

    Raises:
        prioritizer.sim.traces.TraceError: the file cannot be read (names file and line).
        WorkloadError: fewer than ``n`` jobs at or after ``start_s``.
    """
    trace = read_trace(path, fmt=fmt, since=start_s)
    try:
        return scale(sample(trace.jobs, n), durations_s or duration_range(n), gaps_s)
    except WorkloadError as exc:
        raise WorkloadError(f"{path}: {exc}") from None


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
    dist = load_distribution() if policy.policy == "tiresias-gittins" else None

    def ratio(trace: Trace, config: PolicyConfig) -> float:
        def avg(c: PolicyConfig) -> float:
            return statistics.fmean(j.jct for j in simulate(trace, cluster, c, dist).jobs)
        return avg(config) / avg(dataclasses.replace(config, policy="fifo-fit"))

    return ratio(own, unscaled_policy(policy, k)), ratio(mapped, policy)
