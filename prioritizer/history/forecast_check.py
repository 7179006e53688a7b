"""``dlprio history check --forecasts``: how good the start-time forecasts are on a history.

The history (any trace ``dlprio simulate`` reads, a ``dlprio history export`` included) is
replayed once under the policy (``prioritizer.sim.engine``), with its arrivals: that replay
gives each job's actual starts. At ``moments`` evenly spaced times (the k-th at
``first + (k + 0.5) / moments`` of the span from the first to the last arrival) the replay's
live state is taken as the daemon sees it (running jobs with their attained service and
nodes, pending jobs with their queue state, BeginTimes) and every pending job (new, or
requeued after a preemption) is forecast as the daemon forecasts (:func:`prioritizer.forecast.forecast.forecast`,
remaining run times unknown and drawn). The duration distribution is learned, as the daemon
learns it, from the jobs that ended before the moment (GPU·s = GPUs × run time; below
``min_samples`` jobs, the daemon's ``gittins_min_samples``, default
:data:`prioritizer.sim.learned.MIN_SAMPLES`, the packaged distribution).
With ``arrivals="history"`` each draw also draws later submissions
(:mod:`prioritizer.forecast.arrivals`) from the trace's jobs submitted in the window before the
moment, as the daemon's ``forecast.arrivals: history`` does.

Each forecast's start band is calibrated walk-forward
(:mod:`prioritizer.forecast.calibrate`): with the residuals of the forecasts made at earlier
moments, known for those whose job had started by this moment and censored at this moment for
those whose job still waited (never a later outcome), once at least
:data:`prioritizer.forecast.calibrate.MIN_KNOWN` are known; before that the draws' raw band
stands. A job that never starts in the replay is not scored and does not enter the residuals
(in the daemon its forecasts are censored while it waits and dropped once it is gone). The
report gives both, the calibrated figures as the answer. As in the daemon
(:func:`prioritizer.forecast.calibrate.remember`), a job's forecast joins the residuals only
when the job has no other forecast of the same wait less than
:data:`~prioritizer.forecast.calibrate.RECORD_GAP_S` older; every forecast is scored.

The moments stand for the daemon's refreshes (every ``forecast.every_cycles`` cycles, 5
minutes by default): each is scored as the forecast a refresh at that moment would publish,
with every one of its ``draws`` made (the daemon's ``forecast.cpu_budget_s`` may stop its
draws sooner on a large site); how long it stays shown until the next refresh is not
measured.

Per forecast job: the wait still ahead ``actual start - moment`` (s; its next start in the
replay) and the forecast's (calibrated) p10/p50/p90 of it, beside the raw ones; the relative error ``|p50 - actual| / actual`` (waits from the moment);
whether ``p10 <= actual <= p90`` (coverage of the 80 % band). Beside it the naive estimate
"position × mean duration": ``(jobs ahead + 1) × mean run time / running jobs`` (the queue
drains one job per ``mean run time / running jobs`` seconds; mean run time of the jobs ended
before the moment, or while none has, the distribution's mean GPU·s over the mean GPUs of the
jobs present). Summaries count jobs whose actual wait from the moment is at least
:data:`MIN_WAIT_S`, and split them by wait length (:data:`WAIT_BUCKETS`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prioritizer import tables
from prioritizer.forecast.arrivals import DEFAULT_WINDOW_S, recent
from prioritizer.forecast.calibrate import MIN_KNOWN, RECORD_GAP_S, Past, calibration
from prioritizer.forecast.forecast import DEFAULT_DRAWS, forecast
from prioritizer.forecast.world import ForecastJob, World
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.durations import load_distribution
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.sim.engine import (Arrival, Cluster, GraceEnd, SimJob, Simulator,
                                    fewer_collections)
from prioritizer.sim.learned import MIN_SAMPLES
from prioritizer.sim.traces import Trace

#: the shortest wait (s, from the forecast moment) a job needs to enter the summaries
MIN_WAIT_S = 600.0
#: the wait-length groups of the report: (label, from s, to s)
WAIT_BUCKETS = (("10-30 min", 600.0, 1800.0), ("30 min-2 h", 1800.0, 7200.0),
                ("2-8 h", 7200.0, 28800.0), (">8 h", 28800.0, float("inf")))
DEFAULT_MOMENTS = 12
#: the values of ``--arrivals`` (and the daemon's ``forecast.arrivals``)
ARRIVALS = ("none", "history")
#: ``--arrivals`` unless given (the daemon's ``forecast.arrivals`` default is the same)
DEFAULT_ARRIVALS = "none"


@dataclass(frozen=True)
class JobCheck:
    """One forecast against the replay: waits in seconds from ``moment``; ``p10``-``p90`` the
    calibrated band (the raw one when ``calibrated`` is 0), ``raw_p10``-``raw_p90`` the
    draws' own; ``calibrated``: residuals the band rests on; ``shifted_p50``: the raw p50
    moved by the residuals' median ratio, the other candidate median
    (:meth:`prioritizer.forecast.calibrate.Calibration.start_band`; the raw one when
    ``calibrated`` is 0)."""

    job: str
    moment: float
    actual: float
    p10: float
    p50: float
    p90: float
    naive: float
    raw_p10: float
    raw_p50: float
    raw_p90: float
    calibrated: int
    shifted_p50: float

    @property
    def error(self) -> float:
        return abs(self.p50 - self.actual) / self.actual if self.actual > 0 else 0.0

    @property
    def naive_error(self) -> float:
        return abs(self.naive - self.actual) / self.actual if self.actual > 0 else 0.0

    @property
    def covered(self) -> bool:
        return self.p10 <= self.actual <= self.p90

    @property
    def raw_error(self) -> float:
        return abs(self.raw_p50 - self.actual) / self.actual if self.actual > 0 else 0.0

    @property
    def raw_covered(self) -> bool:
        return self.raw_p10 <= self.actual <= self.raw_p90


@dataclass(frozen=True)
class Snapshot:
    """The replay's state at one moment: the world, the samples learned so far, the mean run
    time of the ended jobs (s; None when none ended) and the waiting jobs' ids."""

    world: World
    samples: tuple[float, ...]
    mean_run_s: float | None
    waiting: tuple[str, ...]


class Observed(Simulator):
    """The simulator, stopping at each of ``moments`` (sorted times) to take a
    :class:`Snapshot` before the events of later times."""

    def __init__(self, trace: Trace, cluster: Cluster, config: PolicyConfig,
                 moments: Sequence[float], distribution: GittinsDistribution | None = None
                 ) -> None:
        super().__init__(trace, cluster, config, distribution, tick_on_time=True)
        self.moments = list(moments)
        self.snapshots: list[Snapshot] = []
        #: per job id, the start time of each of its runs in order
        self.starts: dict[int, list[float]] = {}

    def start(self, job: SimJob, now: float) -> None:
        self.starts.setdefault(job.trace.job_id, []).append(now)
        super().start(job, now)

    def observe(self) -> None:
        """Run the replay to its end, taking the snapshots on the way."""
        for job in self.jobs.values():
            self.push(job.trace.submit, Arrival(job.trace.job_id))
        heap = self.heap
        pending_moments = list(reversed(self.moments))
        with fewer_collections():
            while heap:
                now = heap[0][0]
                while pending_moments and pending_moments[-1] < now:
                    self.snapshots.append(self.snapshot_at(pending_moments.pop()))
                self.step()

    def snapshot_at(self, t: float) -> Snapshot:
        grace_end = {event.job_id: when for when, _, _, event in self.heap
                     if type(event) is GraceEnd}
        names = ["pool"] if self.cluster.placement == "count" else [
            f"n{i}" for i in range(self.cluster.nodes)]
        nodes = tuple(zip(names, self.cluster.node_totals()))
        jobs, waiting = [], []
        ended: list[float] = []
        run_s: list[float] = []
        for sim in self.jobs.values():
            if sim.end is not None:
                if sim.end <= t:
                    ended.append(sim.trace.num_gpus * sim.trace.duration)
                    run_s.append(sim.trace.duration)
                continue
            rec = sim.rec
            if rec is None:
                continue
            gpu_s, ran_s, _ = rec.service(t)
            holding = rec.phase != "pending"
            jobs.append(ForecastJob(
                str(sim.trace.job_id), rec.phase, sim.shape, sim.trace.submit,
                attained_gpu_s=gpu_s, attained_s=ran_s,
                run_start=rec.run_start if holding else None,
                nodes=rec.names if holding else (), queue=rec.queue,
                queue_entry_time=rec.entry, service_base_gpu_s=rec.base,
                last_run_s=rec.last_run_s, last_run_end=rec.last_run_end,
                eligible=rec.eligible if not holding else None,
                preemptible=rec.preemptible, grace_end=grace_end.get(sim.trace.job_id),
                first_start=rec.first_start))
            if not holding:
                waiting.append(str(sim.trace.job_id))
        return Snapshot(World(t, nodes, tuple(jobs)), tuple(ended),
                        statistics.fmean(run_s) if run_s else None, tuple(waiting))


def moments_of(trace: Trace, count: int) -> list[float]:
    """``count`` moments evenly spaced over the arrivals (see module doc)."""
    first, last = trace.jobs[0].submit, trace.jobs[-1].submit
    return [first + (k + 0.5) / count * (last - first) for k in range(count)]


def check_forecasts(trace: Trace, cluster: Cluster, config: PolicyConfig,
                    moments: int = DEFAULT_MOMENTS, draws: int = DEFAULT_DRAWS,
                    seed: int = 0, arrivals: str = DEFAULT_ARRIVALS,
                    arrival_window_s: float = DEFAULT_WINDOW_S,
                    min_samples: int = MIN_SAMPLES) -> list[JobCheck]:
    """Every forecast of a waiting job at each moment, against the replay (module doc).
    ``arrivals``: ``none`` (no arrival drawn) or ``history`` (arrivals drawn from the trace's
    jobs submitted in the ``arrival_window_s`` seconds before the moment:
    :mod:`prioritizer.forecast.arrivals`). ``min_samples``: the fewest ended jobs the
    distribution is learned from (the daemon's ``gittins_min_samples``; fewer: the packaged
    one).

    Raises:
        ValueError: an empty trace, ``moments`` or ``draws`` < 1.
    """
    if not trace.jobs:
        raise ValueError("the trace has no job to replay")
    if moments < 1:
        raise ValueError(f"moments: must be >= 1 (got {moments})")
    if arrivals not in ARRIVALS:
        raise ValueError(f"arrivals: {arrivals!r}; valid: {', '.join(ARRIVALS)}")
    packaged = load_distribution()
    observed = Observed(trace, cluster, config, moments_of(trace, moments),
                        packaged if config.policy == "tiresias-gittins" else None)
    observed.observe()
    starts = {str(i): runs for i, runs in observed.starts.items()}
    out: list[JobCheck] = []
    past: list[Past] = []   # the remembered forecasts with their outcomes; calibration() filters
    last: dict[str, Past] = {}   # per job, its latest remembered forecast
    for snap in observed.snapshots:
        if not snap.waiting:
            continue
        samples = snap.samples
        learned = len(samples) >= min_samples
        dist = GittinsDistribution(samples) if learned else packaged
        t = snap.world.now
        model = recent(((j.submit, observed.jobs[j.job_id].shape) for j in trace.jobs
                        if j.job_id in observed.jobs), t, arrival_window_s) \
            if arrivals == "history" else None
        made = forecast(snap.world, config, dist, draws, seed, arrivals=model,
                        learned=learned).by_id()
        known = calibration(past, t)
        running = sum(1 for j in snap.world.jobs if j.phase != "pending")
        mean_s = snap.mean_run_s if snap.mean_run_s is not None else statistics.fmean(
            dist.samples) / statistics.fmean(j.gpus for j in snap.world.jobs)
        for job in snap.waiting:
            got = made[job]
            actual = next((s for s in starts.get(job, ()) if s > t), None)
            if got.start is None or actual is None:
                continue
            naive = (got.ahead + 1) * mean_s / max(running, 1)
            (low, mid, high), used = known.start_band(t, got.start)
            shifted = known.start_band(t, got.start, shift_median=True)[0][1]
            out.append(JobCheck(job, t, actual - t, low - t, mid - t, high - t, naive,
                                got.start[0] - t, got.start[1] - t, got.start[2] - t, used,
                                shifted - t))
            before = last.get(job)
            if got.start[1] != float("inf") and (
                    before is None or t - before.made_at >= RECORD_GAP_S
                    or (before.start is not None and before.start <= t)):
                last[job] = Past(job, t, got.start[1], actual)
                past.append(last[job])
    return out


#: the figures of :func:`summary` besides ``jobs``
FIGURES = ("median_rel_error", "coverage_p10_p90", "before_p10", "after_p90",
           "raw_median_rel_error", "raw_coverage_p10_p90", "raw_before_p10", "raw_after_p90",
           "naive_median_rel_error")


def summary(checks: Sequence[JobCheck], low: float = MIN_WAIT_S,
            high: float = float("inf")) -> dict[str, Any]:
    """The figures of the checks whose actual wait is in ``[low, high)``: ``jobs``,
    ``calibrated`` (those whose band was calibrated), ``median_rel_error``,
    ``coverage_p10_p90`` (share inside p10-p90), ``before_p10`` and ``after_p90`` (shares
    outside it), each also ``raw_`` (the draws' own band), and ``naive_median_rel_error``
    (None figures when there are none)."""
    kept = [c for c in checks if low <= c.actual < high]
    if not kept:
        return {"jobs": 0, "calibrated": 0, **{name: None for name in FIGURES}}
    n = len(kept)
    return {"jobs": n, "calibrated": sum(c.calibrated > 0 for c in kept),
            "median_rel_error": statistics.median(c.error for c in kept),
            "coverage_p10_p90": sum(c.covered for c in kept) / n,
            "before_p10": sum(c.actual < c.p10 for c in kept) / n,
            "after_p90": sum(c.actual > c.p90 for c in kept) / n,
            "raw_median_rel_error": statistics.median(c.raw_error for c in kept),
            "raw_coverage_p10_p90": sum(c.raw_covered for c in kept) / n,
            "raw_before_p10": sum(c.actual < c.raw_p10 for c in kept) / n,
            "raw_after_p90": sum(c.actual > c.raw_p90 for c in kept) / n,
            "naive_median_rel_error": statistics.median(c.naive_error for c in kept)}


def report(checks: Sequence[JobCheck], moments: int, draws: int,
           arrivals: str = DEFAULT_ARRIVALS) -> dict[str, Any]:
    """The ``--json`` object: ``forecasts`` = the summary of jobs that waited at least
    :data:`MIN_WAIT_S`, with ``moments``, ``draws``, ``arrivals``, ``forecast_jobs`` (every
    forecast made) and ``by_wait`` (one summary per :data:`WAIT_BUCKETS` group, with its
    ``wait``)."""
    head = summary(checks)
    head.update(moments=moments, draws=draws, arrivals=arrivals, forecast_jobs=len(checks),
                by_wait=[{"wait": label, **summary(checks, lo, hi)}
                         for label, lo, hi in WAIT_BUCKETS])
    return {"forecasts": head}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.0f} %"


def format_report(data: dict[str, Any], *, styled: bool = False) -> str:
    """The text report: one line per wait group and one for all (calibrated figures, then the
    draws' raw ones), then note lines."""
    f = data["forecasts"]
    head = ("wait from the moment", "jobs", "median |p50-actual|/wait", "in p10-p90",
            "raw median error", "raw in p10-p90", "naive median error")
    rows = [(b["wait"], str(b["jobs"]), _pct(b["median_rel_error"]),
             _pct(b["coverage_p10_p90"]), _pct(b["raw_median_rel_error"]),
             _pct(b["raw_coverage_p10_p90"]), _pct(b["naive_median_rel_error"]))
            for b in f["by_wait"]]
    rows.append((">= 10 min", str(f["jobs"]), _pct(f["median_rel_error"]),
                 _pct(f["coverage_p10_p90"]), _pct(f["raw_median_rel_error"]),
                 _pct(f["raw_coverage_p10_p90"]), _pct(f["naive_median_rel_error"])))
    text = tables.render(head, rows, head[1:], styled=styled).rstrip("\n")
    note = ("later arrivals drawn from the history's recent ones"
            if f.get("arrivals") == "history" else
            "no arrival after a moment is invented, so a forecast is the start if nothing else "
            "were submitted")
    calibrated = (f"{f['calibrated']} of the {f['jobs']} jobs >= 10 min have a band calibrated on "
                  f"earlier moments' outcomes (at least {MIN_KNOWN} known); the others, the raw "
                  "band of the draws")
    return (f"{text}\n{f['forecast_jobs']} forecasts of waiting jobs at {f['moments']} moment(s), "
            f"{f['draws']} draws each; {note}\n{calibrated}")
