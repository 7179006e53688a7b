"""``dlprio history check``: replay a cluster's exported history under the policy that ran and
compare, job by job, with what really happened (fidelity of the simulator on *this* cluster).

Pure apart from the replay (``prioritizer.sim.engine.simulate``, through its public function):
rows in, a :class:`Fidelity` out, and a plain-text table. JCT here is ``end - eligible_time``
on both sides (the replay's arrival is the job's first eligible time, so a ``--begin`` or a
dependency is not counted as queueing delay). Percentiles are nearest-rank, as in
``prioritizer.sim.report``.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from prioritizer import tables
from prioritizer.history.trace import HistoryRow
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.sim.engine import Cluster, simulate
from prioritizer.sim.report import nearest_rank
from prioritizer.sim.traces import Trace, TraceJob
from prioritizer.sim.windows import compare_windows

#: The targets: avg JCT within 10 %, per-job JCT within 20 % for >= 80 % of jobs.
AVG_TARGET, JOB_TARGET, SHARE_TARGET = 0.10, 0.20, 0.80


@dataclass(frozen=True)
class JobFidelity:
    """One job: real and replayed JCT (seconds) and their relative difference; ``eligible_s``:
    its eligible time in the replay's seconds (0 = the replay's start)."""

    job_id: str
    num_gpu: int
    real_jct: float
    replay_jct: float
    eligible_s: float = 0.0

    @property
    def error(self) -> float:
        """(replay - real) / real; 0 when both are 0."""
        if self.real_jct <= 0:
            return 0.0 if self.replay_jct <= 0 else float("inf")
        return (self.replay_jct - self.real_jct) / self.real_jct


@dataclass(frozen=True)
class Fidelity:
    """Per-job comparison and the summary figures (seconds)."""

    policy: str
    jobs: tuple[JobFidelity, ...]
    skipped: int
    start_latency_s: float = 0.0
    dispatch_s: float = 0.0
    cycle_phased: bool = False

    def _side(self, real: bool) -> list[float]:
        return [j.real_jct if real else j.replay_jct for j in self.jobs]

    def avg(self, real: bool) -> float:
        values = self._side(real)
        return statistics.fmean(values) if values else 0.0

    def p95(self, real: bool) -> float:
        return nearest_rank(self._side(real), 95)

    @property
    def avg_error(self) -> float:
        real = self.avg(True)
        return (self.avg(False) - real) / real if real else 0.0

    @property
    def p95_error(self) -> float:
        real = self.p95(True)
        return (self.p95(False) - real) / real if real else 0.0

    @property
    def share_within(self) -> float:
        """Share of jobs whose replayed JCT is within :data:`JOB_TARGET` of the real one."""
        if not self.jobs:
            return 0.0
        return sum(1 for j in self.jobs if abs(j.error) <= JOB_TARGET) / len(self.jobs)

    @property
    def meets_targets(self) -> bool:
        return abs(self.avg_error) <= AVG_TARGET and self.share_within >= SHARE_TARGET


def trace_of(rows: Sequence[HistoryRow], path: str = "history", hold_s: float = 0.0,
             dispatch_s: float = 0.0, base: float | None = None) -> Trace:
    """The simulator's trace of history rows: arrival = eligible time + ``dispatch_s``, re-based
    to ``base`` (default: the first eligible time), duration = ``duration + hold_s`` (seconds at
    ``num_gpu``; see :func:`check`); rows with no GPUs or no work are counted as skipped, like
    the trace readers do.

    Raises:
        ValueError: ``base`` later than the first eligible time (an arrival before 0).
    """
    kept = sorted((r for r in rows if r.num_gpu > 0 and r.duration > 0),
                  key=lambda r: r.eligible_time)
    first = kept[0].eligible_time if kept else 0.0
    if base is None:
        base = first
    elif base > first:
        raise ValueError(f"replay base {base} is after the first eligible time {first}")
    jobs = tuple(TraceJob(i, r.job_id, i + 2, r.eligible_time + dispatch_s - base, r.num_gpu,
                          r.duration + hold_s)
                 for i, r in enumerate(kept))
    return Trace(path, "history", jobs, len(rows) - len(kept))


def phased(cycle_at: float | None, config: PolicyConfig) -> bool:
    """Whether a daemon cycle time moves the replay's decision ticks: only with one and with
    ticks at all (``decision_interval_s`` > 0; fifo-fit for Slurm alone and ``zero_cost``
    decide at every event, so there is no phase)."""
    return cycle_at is not None and config.decision_interval_s > 0


def tick_base(first_eligible: float, cycle_at: float | None, interval_s: float) -> float:
    """The replay's time 0 (epoch s): the latest moment at or before ``first_eligible`` that is
    a whole number of ``interval_s`` away from ``cycle_at``, one of the daemon's cycle times.
    The simulator ticks at multiples of ``decision_interval_s`` from its time 0, so from this
    base its preemption ticks fall where the daemon's cycles fell. Without a cycle time (or an
    interval of 0) the base is ``first_eligible``."""
    if cycle_at is None or interval_s <= 0:
        return first_eligible
    return first_eligible - (first_eligible - cycle_at) % interval_s


def dispatch_latency_of(rows: Sequence[HistoryRow]) -> float:
    """Slurm's dispatch latency seen in the history (seconds >= 0): the shortest time from
    eligible to start of a job that ran once (``jct - duration``; such a job ran without a
    break, so ``end - duration`` is its start). A job that found free GPUs still starts only
    when slurmctld has scheduled and launched it. 0 when no job ran exactly once."""
    waits = [r.jct - r.duration for r in rows
             if r.attempts == 1 and r.num_gpu > 0 and r.duration > 0]
    return max(min(waits), 0.0) if waits else 0.0


def check(rows: Sequence[HistoryRow], cluster: Cluster, config: PolicyConfig,
          distribution: GittinsDistribution | None = None,
          start_latency_s: float = 0.0, dispatch_s: float = 0.0,
          cycle_at: float | None = None) -> Fidelity:
    """Replay ``rows`` on ``cluster`` under ``config`` and pair each job with its real JCT.

    ``start_latency_s`` models Slurm's own start latency: a job that had to wait starts on
    the next backfill pass after GPUs free up, not at once (the main scheduler stops at the
    first pending job that does not fit; the others start only on backfill passes every
    ``bf_interval`` seconds, slurm.conf(5) SchedulerParameters), on average ``bf_interval / 2``
    later. The replay keeps each job's GPUs ``start_latency_s`` past its end, for the waiters
    only: the job's own replayed JCT does not include it.

    ``dispatch_s`` (seconds, :func:`dispatch_latency_of`) is the time from eligible to start
    of a job that finds free GPUs: each replayed arrival is that much after the job's eligible
    time, and its JCT still counts from the eligible time.

    ``cycle_at`` (epoch s) is one of the daemon's cycle times (its ledger): the replay's
    decision ticks are put in phase with the daemon's cycles (:func:`tick_base`). Without it
    they are in phase with the first arrival. Preemptions only happen on ticks, so with a
    cycle of a few seconds the phase decides which job is a victim first and when the GPUs
    free up. A preemption due exactly on a tick is made on that tick (``simulate``'s
    ``tick_on_time``), as the daemon's cycle makes it: its thresholds are tested with ``>=``.

    Raises:
        ValueError: no GPU job to replay, none that fits ``cluster``, or a negative latency.
    """
    if start_latency_s < 0 or dispatch_s < 0:
        raise ValueError(f"latencies must be >= 0 s, got start {start_latency_s}, "
                         f"dispatch {dispatch_s}")
    kept = [r.eligible_time for r in rows if r.num_gpu > 0 and r.duration > 0]
    if not kept:
        raise ValueError("the history has no GPU job with work to replay")
    gpus = [r.num_gpu for r in rows if r.num_gpu > 0 and r.duration > 0]
    line = cluster.none_fits(gpus, "history")
    if line is not None:
        raise ValueError(line)
    base = tick_base(min(kept), cycle_at, config.decision_interval_s)
    trace = trace_of(rows, hold_s=start_latency_s, dispatch_s=dispatch_s, base=base)
    result = simulate(trace, cluster, config, distribution, tick_on_time=True)
    real = {r.job_id: r for r in rows}
    jobs = tuple(JobFidelity(j.name, j.num_gpus, real[j.name].jct,
                             j.jct + dispatch_s - start_latency_s, j.submit - dispatch_s)
                 for j in sorted(result.jobs, key=lambda j: j.submit))
    return Fidelity(config.policy, jobs, trace.skipped_jobs + result.unfittable_jobs,
                    start_latency_s, dispatch_s, phased(cycle_at, config))


def against_baseline(fid: Fidelity, base: Fidelity,
                     window_jobs: int) -> dict[str, dict[str, Any]]:
    """The real JCTs and ``fid``'s replay (left out when it is ``base`` itself: the same
    policy) against ``base``, a replay of the same history under the baseline policy, window by
    window of eligible order (:func:`prioritizer.sim.windows.compare_windows`); keys ``real``,
    ``fid.policy``, ``base.policy``."""
    def side(f: Fidelity, real: bool) -> dict[Hashable, tuple[float, float]]:
        return {j.job_id: (j.eligible_s, j.real_jct if real else j.replay_jct) for j in f.jobs}

    jobs = {"real": side(fid, True)}
    if fid.policy != base.policy:
        jobs[fid.policy] = side(fid, False)
    jobs[base.policy] = side(base, False)
    return compare_windows(jobs, base.policy, window_jobs)


def start_latency_from(scheduler_parameters: str, scheduler_type: str = "sched/backfill") -> float:
    """Half the backfill interval (seconds) from slurm.conf's ``SchedulerParameters`` value
    (``bf_interval=N``, default 30 s per slurm.conf(5)); 0 when the scheduler is not backfill
    (``sched/builtin`` starts strictly in order, at once)."""
    if "backfill" not in scheduler_type:
        return 0.0
    for item in (scheduler_parameters or "").split(","):
        key, _, value = item.strip().partition("=")
        if key == "bf_interval":
            try:
                return max(float(value), 0.0) / 2
            except ValueError:
                break
    return 30.0 / 2


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


#: what the skipped rows of a check are
_SKIPPED = " (no GPU or no work, e.g. CPU-only rows, or fitting no node)"


def format_fidelity(fid: Fidelity, per_job: bool = True, *, styled: bool = False) -> str:
    """The fidelity tables: one line per job (optional; JCTs in s, diff the replay's error in
    %), then avg/p95 JCT real vs replay, then the target verdict. Tables are laid out by
    :mod:`prioritizer.tables` (``styled``: for a terminal; otherwise plain, never cropped)."""
    lines = []
    head: tuple[str, ...]
    rows: list[tuple[str, ...]]
    if per_job:
        head = ("job", "GPUs", "real JCT s", "replay JCT s", "diff")
        rows = [(str(j.job_id), str(j.num_gpu), f"{j.real_jct:.1f}", f"{j.replay_jct:.1f}",
                 _pct(j.error)) for j in fid.jobs]
        lines.append(tables.render(head, rows, head, styled=styled))
    head = ("", "real", "replay", "diff")
    rows = [("avg JCT s", f"{fid.avg(True):.1f}", f"{fid.avg(False):.1f}", _pct(fid.avg_error)),
            ("p95 JCT s", f"{fid.p95(True):.1f}", f"{fid.p95(False):.1f}", _pct(fid.p95_error))]
    lines.append(tables.render(head, rows, head[1:], styled=styled).rstrip("\n"))
    within = sum(1 for j in fid.jobs if abs(j.error) <= JOB_TARGET)
    phase = "; ticks in phase with the daemon cycles" if fid.cycle_phased else ""
    why = _SKIPPED if fid.skipped else ""
    lines.append(f"policy {fid.policy}; start latency {fid.start_latency_s:g} s; "
                 f"dispatch {fid.dispatch_s:g} s{phase}; "
                 f"{len(fid.jobs)} jobs replayed, {fid.skipped} skipped{why}; "
                 f"{within}/{len(fid.jobs)} ({fid.share_within * 100:.0f} %) within "
                 f"{JOB_TARGET * 100:.0f} % of their real JCT")
    verdict = "met" if fid.meets_targets else "MISSED"
    lines.append(f"targets (avg within {AVG_TARGET * 100:.0f} %, >= {SHARE_TARGET * 100:.0f} % "
                 f"of jobs within {JOB_TARGET * 100:.0f} %): {verdict}")
    return "\n".join(lines)
