"""Future arrivals of one forecast draw, resampled from the recent history (pure; the caller
seeds the RNG).

``forecast.arrivals: history``: the jobs submitted in the ``window_s`` seconds before the
forecast moment give an arrival rate ``λ = count / window_s`` (jobs/s) and a pool of job
shapes (GPUs per node). Each draw adds a Poisson process of rate ``λ`` from ``now`` to
``now + window_s`` (as far ahead as the history looked back): inter-arrival times
exponential with mean ``1 / λ``, each arrival's shape drawn uniformly from the pool and its
total service (GPU·s) from the distribution of total service the remaining run times are
drawn from (:class:`prioritizer.forecast.draws.ServiceSurvival`, with nothing attained), so
its run time is ``service / GPUs`` seconds. With no job in the window, no arrival is drawn.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prioritizer.forecast.draws import ServiceSurvival

#: the history window of ``forecast.arrivals: history`` unless the caller says otherwise (s)
DEFAULT_WINDOW_S = 6 * 3600.0

#: one drawn arrival: (submit time s, GPUs per node, run time s)
Drawn = tuple[float, tuple[int, ...], float]


@dataclass(frozen=True)
class ArrivalModel:
    """Recent arrivals: the ``shapes`` (GPUs per node, one entry per job) of the jobs submitted
    in the ``window_s`` seconds before the moment."""

    window_s: float
    shapes: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if self.window_s <= 0:
            raise ValueError(f"arrival window_s: must be > 0 (got {self.window_s})")

    @property
    def rate_per_s(self) -> float:
        """λ, jobs per second."""
        return len(self.shapes) / self.window_s

    def stream(self, now: float, survival: ServiceSurvival, rng: random.Random
               ) -> Iterator[Drawn]:
        """The draw's arrivals in time order, from ``now`` to ``now + window_s`` (module doc).

        Args:
            now: the forecast moment, s.
            survival: the distribution of total service, GPU·s.
            rng: the draw's random source.
        """
        if not self.shapes:
            return
        rate, end, t = self.rate_per_s, now + self.window_s, now
        while True:
            t += rng.expovariate(rate)
            if t > end:
                return
            shape = self.shapes[rng.randrange(len(self.shapes))]
            service = survival.total(0.0, rng)
            yield t, shape, service / sum(shape)


def recent(submitted: Iterable[tuple[float, tuple[int, ...]]], now: float,
           window_s: float = DEFAULT_WINDOW_S) -> ArrivalModel:
    """The :class:`ArrivalModel` of the jobs ``(submit s, GPUs per node)`` submitted in
    ``(now - window_s, now]``."""
    return ArrivalModel(window_s, tuple(shape for submit, shape in submitted
                                        if now - window_s < submit <= now and sum(shape) > 0))
