"""Per-job start and finish forecasts from several seeded draws (pure; no clock, no I/O).

:func:`forecast` replays the :class:`~prioritizer.forecast.world.World` forward ``draws``
times (:class:`~prioritizer.forecast.replay.ForwardReplay`), each time with remaining run
times drawn by :func:`prioritizer.forecast.draws.remaining_s` from an RNG seeded with
``seed`` and the draw's number (the same inputs give the same forecast), and reports per job
the 10th, 50th and 90th percentiles of its start and finish time (linear interpolation
between the sorted draws) and the share of draws in which it was preempted before it ended.
When every job's remaining time is known and no arrival is drawn, one replay is the answer
(all draws agree). Without an ``arrivals`` model no arrival is invented
(``prioritizer.forecast.replay``); with one (:class:`prioritizer.forecast.arrivals.ArrivalModel`)
each draw also draws the jobs submitted after ``now``, from the same RNG after the remaining
run times, so the band spans both unknowns.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from math import inf

from prioritizer.forecast.arrivals import ArrivalModel
from prioritizer.forecast.draws import ServiceSurvival, needs_draw, remaining_s, survival_of
from prioritizer.forecast.replay import ForwardReplay, Outcome
from prioritizer.forecast.world import World
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution

#: draws of a forecast unless the caller says otherwise
DEFAULT_DRAWS = 20
#: ids of the jobs ahead kept per job (the first in the start order; all are counted)
AHEAD_SHOWN = 5

Band = tuple[float, float, float]


@dataclass(frozen=True)
class JobForecast:
    """One job's forecast (seconds, the world's clock).

    Attributes:
        job_id: as in the world.
        start: (p10, p50, p90) of its first start at or after ``now``; a running job has its
            run start three times; a job being preempted (``grace``) its next start, after
            the requeue (the run it is leaving is over). ``inf``: beyond the horizon. None:
            it fits on no node of the world.
        finish: (p10, p50, p90) of its end; None as ``start``.
        preempt_chance: share of draws (0-1) in which it is preempted before it ends (a
            ``grace`` job: preempted again after its next start).
        ahead: how many pending jobs are before it in the policy's start order at ``now``
            (0 for a job holding GPUs).
        first_ahead: the ids of the first :data:`AHEAD_SHOWN` of those, in start order.
        restart: a running job's next start after a preemption, (p10, p50, p90) over the
            draws in which it was preempted (``inf``: beyond the horizon); None for a job not
            running, or preempted in no draw. What a view shows once the job waits again.
    """

    job_id: str
    start: Band | None
    finish: Band | None
    preempt_chance: float
    ahead: int
    first_ahead: tuple[str, ...]
    restart: Band | None = None


@dataclass(frozen=True)
class Forecast:
    """A forecast made at ``now`` from ``draws`` replays; ``jobs`` in the world's order.
    ``reached_s``: how far past ``now`` it reaches when a CPU budget cut a draw short
    (``out_of_time``): every start or finish after it is ``inf``, as beyond the horizon;
    None when no draw was cut (it reaches the horizon asked for)."""

    now: float
    draws: int
    jobs: tuple[JobForecast, ...]
    reached_s: float | None = None

    def by_id(self) -> dict[str, JobForecast]:
        return {j.job_id: j for j in self.jobs}


def quantile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ascending ``sorted_values`` (non-empty), interpolated
    linearly between the closest ranks (numpy's default ``linear`` method); a value beyond
    the horizon (``inf``) makes every point above the rank below it ``inf``."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    low, high, frac = sorted_values[lo], sorted_values[hi], pos - lo
    if frac == 0 or low == high:
        return low
    if high == inf:
        return inf   # beyond the horizon: so is any point between
    return low + (high - low) * frac


def band(values: list[float]) -> Band:
    """(p10, p50, p90) of ``values`` (non-empty)."""
    ordered = sorted(values)
    return quantile(ordered, 0.1), quantile(ordered, 0.5), quantile(ordered, 0.9)


def draw(world: World, config: PolicyConfig, distribution: GittinsDistribution,
         survival: ServiceSurvival, seed: int, number: int, horizon_s: float | None = None,
         arrivals: ArrivalModel | None = None, out_of_time: Callable[[], bool] | None = None
         ) -> tuple[list[Outcome], tuple[str, ...], float | None]:
    """Draw ``number`` of a forecast: remaining run times from
    ``random.Random(seed * 1_000_003 + number)``, then (with ``arrivals``) the arrivals
    from the same RNG, then one replay (:class:`ForwardReplay`); its outcomes, the start
    order at ``now`` and, when ``out_of_time`` cut it short, the time it reached (else None).
    ``survival``: the distribution of total service the run times are drawn from
    (:func:`prioritizer.forecast.draws.survival_of`, built once for all the draws of a
    forecast); ``distribution`` is the policy's (the Gittins ranking)."""
    rng = random.Random(seed * 1_000_003 + number)
    left = [remaining_s(j, survival, world.now, rng) for j in world.jobs]
    stream = arrivals.stream(world.now, survival, rng) if arrivals else None
    replay = ForwardReplay(world, config, left, distribution, stream)
    outcomes, order = replay.outcomes(horizon_s, out_of_time)
    return outcomes, order, replay.cut_at


def needed_draws(world: World, draws: int, arrivals: ArrivalModel | None = None) -> int:
    """``draws``, or 1 when every remaining run time is known and no arrival is drawn (every
    draw is the same)."""
    drawn = arrivals is not None and bool(arrivals.shapes)
    return draws if drawn or any(needs_draw(j) for j in world.jobs) else 1


def summarize(world: World, per_draw: list[list[Outcome]], order: tuple[str, ...],
              cut_at: float | None = None) -> Forecast:
    """The :class:`Forecast` of the draws' outcomes (at least one draw) and the first draw's
    start order; ``cut_at``: the earliest time a cut draw reached (every draw's times after
    it become ``inf``: no draw says more than the shortest one saw)."""
    place = {job_id: k for k, job_id in enumerate(order)}
    out = []
    limit = inf if cut_at is None else cut_at

    def seen_by_all(t: float | None) -> float:
        return inf if t is None or t > limit else t

    for i, job in enumerate(world.jobs):
        seen = [d[i] for d in per_draw]
        if seen[0].start is None:
            out.append(JobForecast(job.job_id, None, None, 0.0, 0, ()))
            continue
        starts = [seen_by_all(o.start) for o in seen]
        ends = [seen_by_all(o.end) for o in seen]
        chance = sum(o.preempted for o in seen) / len(seen)
        ahead = place.get(job.job_id, 0)
        restarts = [seen_by_all(o.restart) for o in seen if o.restart is not None]
        out.append(JobForecast(job.job_id, band(starts), band(ends), chance, ahead,
                               order[:min(ahead, AHEAD_SHOWN)],
                               band(restarts) if restarts else None))
    return Forecast(world.now, len(per_draw), tuple(out),
                    None if cut_at is None else cut_at - world.now)


def forecast(world: World, config: PolicyConfig, distribution: GittinsDistribution,
             draws: int = DEFAULT_DRAWS, seed: int = 0,
             horizon_s: float | None = None, arrivals: ArrivalModel | None = None,
             enough: Callable[[], bool] | None = None,
             out_of_time: Callable[[], bool] | None = None,
             learned: bool = False) -> Forecast:
    """Forecast every job of ``world`` under ``config`` (see module doc).

    Args:
        world: the live state.
        config: the policy and costs in force.
        distribution: the duration distribution (its samples give the run times drawn,
            :mod:`prioritizer.forecast.draws`; also the Gittins policy's ranking).
        draws: replays to run (>= 1).
        seed: RNG seed; draw ``d`` uses ``random.Random(seed * 1_000_003 + d)``.
        horizon_s: replay only this far past ``now`` (s; None: to the last completion); a
            start or finish beyond it is ``inf`` (a band's point is ``inf`` when enough
            draws put it there).
        arrivals: the recent arrivals future ones are drawn from (None: none drawn).
        enough: asked after each draw; True stops the draws there (one at least: a caller's
            CPU budget, :func:`prioritizer.daemon.forecasts.run_forecast`).
        out_of_time: asked during each draw (:meth:`ForwardReplay.outcomes`); True ends that
            draw where it is and the draws there, a hard cap on their CPU. A first draw so
            ended is kept, and the forecast reaches only as far as it did
            (:attr:`Forecast.reached_s`); a later one is dropped (the draws before it reach
            the horizon).
        learned: ``distribution`` was learned from this cluster's ended jobs, so the jobs
            of ``world`` whose end is unknown are observations of the same population,
            right-censored at their attained service, and join the estimate the run times
            are drawn from (:func:`prioritizer.forecast.draws.survival_of`). False for
            samples from elsewhere (the packaged ones, a file): they say nothing of how long
            this cluster's jobs run beyond what they attained.

    Raises:
        ValueError: ``draws`` < 1, or as the scheduler (``srtf`` needs every duration).
    """
    if draws < 1:
        raise ValueError(f"draws: must be >= 1 (got {draws})")
    per_draw: list[list[Outcome]] = []
    order: tuple[str, ...] = ()
    cut_at = None
    survival = survival_of(distribution.samples, world.jobs if learned else ())
    for d in range(needed_draws(world, draws, arrivals)):
        outcomes, drawn_order, cut = draw(world, config, distribution, survival, seed, d,
                                          horizon_s, arrivals, out_of_time)
        if cut is not None and per_draw:
            break   # a later draw the budget ended: the whole draws made before it stand
        per_draw.append(outcomes)
        cut_at = cut
        if d == 0:
            order = drawn_order
        if cut is not None or (enough is not None and enough()):
            break
    return summarize(world, per_draw, order, cut_at)
