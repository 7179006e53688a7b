"""Which jobs the main job replays: rules on load or position that never look at the outcome.

The main job runs two workloads, each twice on the live cluster (Slurm alone, then under
``dlprio run``). The **burst** (:func:`load`) is the window of ``n`` consecutive jobs of the
Philly dense window (submit >= 48 days of the 15k excerpt, ``data/traces/philly-15k``) with the
**highest offered load** on the cluster: the GPU·seconds its jobs demand per second of their
submit span, divided by the cluster's GPUs (dimensionless; 1.0 = the arrivals alone would keep
every GPU busy). Load is measured on the *scaled* jobs
(:func:`prioritizer.sim.workload.scale_spread`: GPUs capped at 8, durations and gaps divided by
one time factor per window, durations kept within a floor and a cap), i.e. on what the live
cluster is actually given. A window whose jobs all arrive within 0.1 s once scaled has no span
and is skipped; ties go to the earliest window. Nothing here reads a schedule, a JCT or a
simulation: the rule picks contention, not winners (docs/main_job.md).

The **mixed** workload (:func:`mixed`) is picked by position alone: the ``n`` jobs submitted
from :data:`MIXED_START_S` on (day 50 of the excerpt, two days into the dense window), whatever
they are, so it keeps the trace's own mix of sizes and lengths.

Each :class:`Pick` also carries the jobs before its window: the history ``examples/tuned.py``
tunes the dlprio run's settings on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prioritizer.sim import workload
from prioritizer.sim.traces import TraceJob, read_trace

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = REPO / "data" / "traces" / "philly-15k" / "philly_data_training.csv"
DEFAULT_JOBS = 12
CLUSTER_GPUS = 32                    # the local cluster (4 x 8); the ranking does not depend on it
MIXED_JOBS = 40
MIXED_START_S = 50 * 86400.0         # a fixed offset: day 50 of the excerpt


@dataclass(frozen=True)
class Pick:
    """The chosen window: its first job's position in the trace read (0-based) and trace id
    (Philly ``u_id``), its offered load on ``gpus_total`` GPUs (None: not ranked by load), the
    scaled jobs, the time factor ``k`` they were scaled by, and the trace's jobs: the window
    itself and every job before it (the history an admin would tune on)."""

    first: int
    first_name: str
    load: float | None
    jobs: list[workload.ScaledJob]
    k: float
    window: list[TraceJob]
    before: list[TraceJob]


def offered_load(jobs: Sequence[workload.ScaledJob], gpus_total: int) -> float | None:
    """Σ gpus·duration_s / (submit span s · ``gpus_total``) of scaled jobs in arrival order;
    None when they all arrive at the same scaled time (0.1 s resolution: no span)."""
    span = jobs[-1].submit_s - jobs[0].submit_s
    if span <= 0:
        return None
    return sum(j.gpus * j.duration_s for j in jobs) / (span * gpus_total)


def pick(trace: Sequence[TraceJob], n: int, gpus_total: int, since_s: float = 0.0) -> Pick:
    """The window of ``n`` consecutive ``trace`` jobs (arrival order) submitted at or after
    ``since_s`` with the highest :func:`offered_load` after
    :func:`~prioritizer.sim.workload.scale_spread`; the earliest one on a tie.

    Raises:
        workload.WorkloadError: fewer than ``n`` jobs, or no window with a submit span.
    """
    start = next((i for i, j in enumerate(trace) if j.submit >= since_s), len(trace))
    workload.sample(trace[start:], n)                  # raises for n < 1 or a short trace
    best: Pick | None = None
    for i in range(start, len(trace) - n + 1):
        scaled, k = workload.scale_spread(trace[i:i + n])
        load = offered_load(scaled, gpus_total)
        if load is not None and (best is None or best.load is None or load > best.load):
            best = Pick(i, trace[i].name, load, scaled, k, list(trace[i:i + n]), list(trace[:i]))
    if best is None:
        raise workload.WorkloadError(f"--jobs {n}: every window of {n} jobs arrives at once "
                                     "once scaled (within 0.1 s); ask for more jobs")
    return best


def at(trace: Sequence[TraceJob], n: int, since_s: float) -> Pick:
    """The ``n`` jobs submitted from ``since_s`` on (trace seconds), scaled as :func:`pick`
    scales. Raises workload.WorkloadError for too few jobs."""
    start = next((i for i, j in enumerate(trace) if j.submit >= since_s), len(trace))
    window = workload.sample(trace[start:], n)
    scaled, k = workload.scale_spread(window)
    return Pick(start, trace[start].name, None, scaled, k, window, list(trace[:start]))


def load(path: str | Path, n: int, gpus_total: int, fmt: str | None = None,
         since_s: float = workload.DENSE_WINDOW_S) -> Pick:
    """Read ``path`` and :func:`pick` the window from ``since_s`` on (trace seconds; default:
    the Philly dense window).

    Raises:
        prioritizer.sim.traces.TraceError: the file cannot be read.
        workload.WorkloadError: the trace cannot give the window (names the file).
    """
    trace = read_trace(path, fmt=fmt)
    try:
        return pick(trace.jobs, n, gpus_total, since_s)
    except workload.WorkloadError as exc:
        raise workload.WorkloadError(f"{path}: {exc}") from None


def mixed(path: str | Path, n: int = MIXED_JOBS, fmt: str | None = None,
          since_s: float = MIXED_START_S) -> Pick:
    """Read ``path`` and take the ``n`` jobs from ``since_s`` on (:func:`at`).

    Raises:
        prioritizer.sim.traces.TraceError: the file cannot be read.
        workload.WorkloadError: too few jobs from there (names the file).
    """
    trace = read_trace(path, fmt=fmt)
    try:
        return at(trace.jobs, n, since_s)
    except workload.WorkloadError as exc:
        raise workload.WorkloadError(f"{path}: {exc}") from None
