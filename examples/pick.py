"""Which jobs the main job replays: a rule on offered load that never looks at the outcome.

The main job runs one workload twice on the live cluster (Slurm alone, then under ``dlprio
run``). The workload is the window of ``n`` consecutive jobs of the Philly dense window (submit
>= 48 days of the 15k excerpt, ``data/traces/philly-15k``) with the **highest offered load** on
the cluster: the GPU·seconds its jobs demand per second of their submit span, divided by the
cluster's GPUs (dimensionless; 1.0 = the arrivals alone would keep every GPU busy). Load is
measured on the *scaled* jobs (:func:`prioritizer.sim.workload.scale`: GPUs capped at 8,
durations log-mapped onto ``[20, D]`` s, gaps onto ``[0, 15]`` s), i.e. on what the live cluster
is actually given. A window whose jobs all arrive at once has no span and is skipped; ties go to
the earliest window. Nothing here reads a schedule, a JCT or a simulation: the rule picks
contention, not winners (docs/main_job.md).

``D`` follows the sample size (:func:`duration_range`) so that both live runs fit the demo's time
budget: ``D = min(120, max(40, 10·n − 20))`` s (40 s for 6 jobs, 100 s for 12).
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
DURATION_MIN_S, DURATION_MAX_S, DURATION_FLOOR_S = 20.0, 120.0, 40.0


@dataclass(frozen=True)
class Pick:
    """The chosen window: its first job's position in the dense window (0-based) and trace id
    (Philly ``u_id``), its offered load on ``gpus_total`` GPUs, and the scaled jobs."""

    first: int
    first_name: str
    load: float
    jobs: list[workload.ScaledJob]


def duration_range(n: int) -> tuple[float, float]:
    """Target range (s) of the scaled durations for ``n`` jobs: ``(20, min(120, max(40, 10·n − 20)))``;
    e.g. 6 -> (20, 40), 12 -> (20, 100), 14 or more -> (20, 120)."""
    return DURATION_MIN_S, min(DURATION_MAX_S, max(DURATION_FLOOR_S, 10.0 * n - 20.0))


def offered_load(jobs: Sequence[workload.ScaledJob], gpus_total: int) -> float | None:
    """Σ gpus·duration_s / (submit span s · ``gpus_total``) of scaled jobs in arrival order;
    None when they all arrive at the same second (no span)."""
    span = jobs[-1].submit_s - jobs[0].submit_s
    if span <= 0:
        return None
    return sum(j.gpus * j.duration_s for j in jobs) / (span * gpus_total)


def pick(trace: Sequence[TraceJob], n: int, gpus_total: int,
         durations_s: tuple[float, float], gaps_s: tuple[float, float] = workload.GAP_RANGE_S) -> Pick:
    """The window of ``n`` consecutive ``trace`` jobs (arrival order) with the highest
    :func:`offered_load` after scaling; the earliest one on a tie.

    Raises:
        workload.WorkloadError: fewer than ``n`` jobs, or no window with a submit span.
    """
    workload.sample(trace, n)                          # raises for n < 1 or a short trace
    best: Pick | None = None
    for i in range(len(trace) - n + 1):
        scaled = workload.scale(trace[i:i + n], durations_s, gaps_s)
        load = offered_load(scaled, gpus_total)
        if load is not None and (best is None or load > best.load):
            best = Pick(i, trace[i].name, load, scaled)
    if best is None:
        raise workload.WorkloadError(f"--jobs {n}: every window of {n} jobs arrives at once; "
                                     "ask for more jobs")
    return best


def load(path: str | Path, n: int, gpus_total: int, fmt: str | None = None,
         since_s: float = workload.DENSE_WINDOW_S, durations_s: tuple[float, float] | None = None,
         gaps_s: tuple[float, float] = workload.GAP_RANGE_S) -> Pick:
    """Read ``path`` from ``since_s`` on (trace seconds; default: the Philly dense window) and
    :func:`pick` the window (``durations_s`` None: :func:`duration_range` of ``n``).

    Raises:
        prioritizer.sim.traces.TraceError: the file cannot be read.
        workload.WorkloadError: the trace cannot give the window (names the file).
    """
    trace = read_trace(path, fmt=fmt, since=since_s)
    try:
        return pick(trace.jobs, n, gpus_total, durations_s or duration_range(n), gaps_s)
    except workload.WorkloadError as exc:
        raise workload.WorkloadError(f"{path}: {exc}") from None
