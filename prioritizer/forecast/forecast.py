"""Per-job start and finish forecasts from several seeded draws (pure; no clock, no I/O).

:func:`forecast` replays the :class:`~prioritizer.forecast.world.World` forward ``draws``
times (:class:`~prioritizer.forecast.replay.ForwardReplay`), each time with remaining run
times drawn by :func:`prioritizer.forecast.draws.remaining_s` from an RNG seeded with
``seed`` and the draw's number (the same inputs give the same forecast), and reports per job
the 10th, 50th and 90th percentiles of its start and finish time (linear interpolation
between the sorted draws) and the share of draws in which it was preempted before it ended.
When every job's remaining time is known, one replay is the answer (all draws agree).
No arrival is invented (``prioritizer.forecast.replay``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from prioritizer.forecast.draws import needs_draw, remaining_s
from prioritizer.forecast.replay import ForwardReplay, Outcome
from prioritizer.forecast.world import World
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution

#: draws of a forecast unless the caller says otherwise
DEFAULT_DRAWS = 20

Band = tuple[float, float, float]


@dataclass(frozen=True)
class JobForecast:
    """One job's forecast (seconds, the world's clock).

    Attributes:
        job_id: as in the world.
        start: (p10, p50, p90) of its first start at or after ``now``; a job already holding
            GPUs has its run start three times. None: it fits on no node of the world.
        finish: (p10, p50, p90) of its end; None as ``start``.
        preempt_chance: share of draws (0-1) in which it is preempted before it ends.
        ahead: ids of the pending jobs before it in the policy's start order at ``now``
            (empty for a job holding GPUs).
    """

    job_id: str
    start: Band | None
    finish: Band | None
    preempt_chance: float
    ahead: tuple[str, ...]


@dataclass(frozen=True)
class Forecast:
    """A forecast made at ``now`` from ``draws`` replays; ``jobs`` in the world's order."""

    now: float
    draws: int
    jobs: tuple[JobForecast, ...]

    def by_id(self) -> dict[str, JobForecast]:
        return {j.job_id: j for j in self.jobs}


def quantile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ascending ``sorted_values`` (non-empty), interpolated
    linearly between the closest ranks (numpy's default ``linear`` method)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def band(values: list[float]) -> Band:
    """(p10, p50, p90) of ``values`` (non-empty)."""
    ordered = sorted(values)
    return quantile(ordered, 0.1), quantile(ordered, 0.5), quantile(ordered, 0.9)


def forecast(world: World, config: PolicyConfig, distribution: GittinsDistribution,
             draws: int = DEFAULT_DRAWS, seed: int = 0) -> Forecast:
    """Forecast every job of ``world`` under ``config`` (see module doc).

    Args:
        world: the live state.
        config: the policy and costs in force.
        distribution: the learned duration distribution (its samples are drawn from; also the
            Gittins policy's ranking).
        draws: replays to run (>= 1).
        seed: RNG seed; draw ``d`` uses ``random.Random(seed * 1_000_003 + d)``.

    Raises:
        ValueError: ``draws`` < 1, or as the scheduler (``srtf`` needs every duration).
    """
    if draws < 1:
        raise ValueError(f"draws: must be >= 1 (got {draws})")
    samples = distribution.samples
    runs = draws if any(needs_draw(j) for j in world.jobs) else 1
    per_draw: list[list[Outcome]] = []
    order: tuple[str, ...] = ()
    for d in range(runs):
        rng = random.Random(seed * 1_000_003 + d)
        left = [remaining_s(j, samples, world.now, rng) for j in world.jobs]
        outcomes, drawn_order = ForwardReplay(world, config, left, distribution).outcomes()
        per_draw.append(outcomes)
        if d == 0:
            order = drawn_order
    place = {job_id: k for k, job_id in enumerate(order)}
    out = []
    for i, job in enumerate(world.jobs):
        seen = [draw[i] for draw in per_draw]
        if seen[0].start is None:
            out.append(JobForecast(job.job_id, None, None, 0.0, ()))
            continue
        starts = [o.start for o in seen if o.start is not None]
        ends = [o.end for o in seen if o.end is not None]
        chance = sum(o.preempted for o in seen) / len(seen)
        ahead = order[:place[job.job_id]] if job.job_id in place else ()
        out.append(JobForecast(job.job_id, band(starts), band(ends), chance, ahead))
    return Forecast(world.now, runs, tuple(out))
