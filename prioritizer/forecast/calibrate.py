"""Calibrated start bands, learned from the site's own past forecasts (pure; no clock, no I/O).

The draws of :func:`prioritizer.forecast.forecast.forecast` vary only the remaining run times
(and the drawn arrivals); what the draws leave out (later submissions they do not draw, jobs
cancelled early, nodes going down) makes the real start miss their p10-p90 band far more often
than one time in five. Calibration fixes the band from outcomes instead: split-conformal
(empirical quantile) calibration on the forecasts whose job has started since.

The rule, fixed (never tuned on an evaluation):

- The residual of one past forecast of a waiting job, made at ``m`` with median start ``p50``
  and actual start ``s``, is ``r = ln((s - m + c) / (p50 - m + c))``: the log ratio of the
  actual wait to the forecast's median wait, both from ``m``, with ``c`` =
  :data:`OFFSET_S` seconds so that a wait of 0 has a finite ratio.
- A forecast at ``now`` is calibrated only with forecasts made before ``now`` whose job
  started at or before ``now`` (:func:`calibration`: never an outcome that was not yet known);
  of those the :data:`MAX_KNOWN` latest starts.
- The residuals are grouped by the forecast's median wait (:data:`WAIT_GROUPS`, the same
  boundaries for every site): a job forecast to start in minutes and one forecast to wait
  hours miss by different ratios. A group of at least :data:`MIN_KNOWN` residuals calibrates
  the forecasts of that group; a smaller group uses all residuals when they are at least
  :data:`MIN_KNOWN`; fewer than that and the draws' raw band stands (``calibrated`` 0).
- With the residuals' 10th, 50th and 90th percentiles ``q10 ≤ q50 ≤ q90`` (linear
  interpolation, :func:`prioritizer.forecast.forecast.quantile`), a raw median wait ``w`` gives
  the calibrated start band ``now + max((w + c)·e^q - c, 0)`` for ``q`` = ``q10``, ``q50``,
  ``q90``: the p50 moves by the median ratio, p10 and p90 are where 80 % of the past ratios
  fell. A median beyond the horizon (``inf``) keeps the raw band.

Times are seconds on one clock (epoch seconds on a cluster, trace seconds in a replay).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prioritizer.forecast.forecast import Band, quantile

#: seconds added to both waits of a residual's ratio (a wait of 0 stays finite)
OFFSET_S = 60.0
#: known outcomes a group (or all of them) needs before it calibrates a band
MIN_KNOWN = 30
#: the latest known outcomes (by actual start) a calibration keeps
MAX_KNOWN = 2000
#: upper bounds (s) of the forecast's median wait of each residual group; the last is open
WAIT_GROUPS = (600.0, 3600.0, 6 * 3600.0)


@dataclass(frozen=True)
class Past:
    """One past forecast of a waiting job.

    Attributes:
        job_id: the job's id.
        made_at: the forecast's moment, s.
        p50: its median start, s (same clock; finite).
        start: the job's first start after ``made_at``, s; None while it has not started.
    """

    job_id: str
    made_at: float
    p50: float
    start: float | None = None

    @property
    def wait_s(self) -> float:
        """The forecast's median wait from its moment, s."""
        return max(self.p50 - self.made_at, 0.0)

    @property
    def residual(self) -> float:
        """``ln((actual wait + c) / (median wait + c))`` (module doc); needs ``start``."""
        assert self.start is not None
        actual = max(self.start - self.made_at, 0.0)
        return math.log((actual + OFFSET_S) / (self.wait_s + OFFSET_S))


def group_of(wait_s: float) -> int:
    """The :data:`WAIT_GROUPS` index of a median wait (s)."""
    return bisect.bisect_right(WAIT_GROUPS, wait_s)


@dataclass(frozen=True)
class Calibration:
    """The residuals known at one moment, sorted, all of them and per wait group."""

    pooled: tuple[float, ...]
    groups: tuple[tuple[float, ...], ...]
    min_known: int = MIN_KNOWN

    def residuals_for(self, wait_s: float) -> tuple[float, ...]:
        """The residuals that calibrate a forecast of median wait ``wait_s`` (module doc);
        empty when too few are known (the raw band stands)."""
        own = self.groups[group_of(wait_s)]
        if len(own) >= self.min_known:
            return own
        return self.pooled if len(self.pooled) >= self.min_known else ()

    def start_band(self, now: float, raw: Band) -> tuple[Band, int]:
        """The calibrated start band of a forecast made at ``now`` with raw band ``raw``
        (p10, p50, p90 start, s) and the count of residuals it rests on (0: ``raw`` as it is:
        too few known, or a median beyond the horizon)."""
        if math.isinf(raw[1]):
            return raw, 0
        wait = max(raw[1] - now, 0.0)
        used = self.residuals_for(wait)
        if not used:
            return raw, 0
        ordered = list(used)
        low, mid, high = (now + max((wait + OFFSET_S) * math.exp(quantile(ordered, q)) - OFFSET_S,
                                    0.0) for q in (0.1, 0.5, 0.9))
        return (low, mid, high), len(used)


def calibration(past: Iterable[Past], now: float, min_known: int = MIN_KNOWN,
                max_known: int = MAX_KNOWN) -> Calibration:
    """The :class:`Calibration` of a forecast made at ``now``: the residuals of the forecasts
    made before ``now`` whose job started at or before ``now`` (no later outcome is seen),
    the ``max_known`` latest starts of them."""
    known = sorted((p for p in past
                    if p.made_at < now and p.start is not None and p.start <= now),
                   key=lambda p: p.start if p.start is not None else 0.0)[-max_known:]
    groups: list[list[float]] = [[] for _ in range(len(WAIT_GROUPS) + 1)]
    for p in known:
        groups[group_of(p.wait_s)].append(p.residual)
    return Calibration(tuple(sorted(p.residual for p in known)),
                       tuple(tuple(sorted(g)) for g in groups), min_known)


def note_starts(past: Iterable[Past], starts: Mapping[str, float], present: Iterable[str]
                ) -> list[Past]:
    """``past`` with the outcomes a driver sees now: a waiting forecast whose job's run start
    ``starts[job]`` (s) is at or after its moment gets that start; one whose job is no longer
    ``present`` without a start seen (cancelled, or ended between two looks) is dropped;
    known ones are kept."""
    here = set(present)
    out = []
    for p in past:
        if p.start is not None:
            out.append(p)
            continue
        began = starts.get(p.job_id)
        if began is not None and began >= p.made_at:
            out.append(Past(p.job_id, p.made_at, p.p50, began))
        elif p.job_id in here:
            out.append(p)
    return out


#: the least time (s) between two remembered forecasts of one job (a daemon forecasting every
#: few minutes would otherwise let its longest waits outweigh every other job)
RECORD_GAP_S = 900.0
#: waiting (not yet started) forecasts remembered at most; the oldest go first
MAX_WAITING = 20000


def remember(past: Iterable[Past], now: float, p50s: Mapping[str, float],
             gap_s: float = RECORD_GAP_S, max_known: int = MAX_KNOWN,
             max_waiting: int = MAX_WAITING) -> list[Past]:
    """``past`` with the raw median starts ``p50s`` (job id → s; finite) of the waiting jobs
    of a forecast made at ``now`` added, except for a job with a waiting forecast less than
    ``gap_s`` old; then the ``max_known`` latest known outcomes and the ``max_waiting`` latest
    waiting forecasts, in that order. A forecast made after ``now``, or a start more than
    ``gap_s`` after it, is dropped: the clock went back since (left in, it would hold a slot
    of the latest outcomes, or block its job's next forecast, until the clock catches up)."""
    kept = [p for p in past
            if p.made_at <= now and (p.start is None or p.start <= now + gap_s)]
    latest: dict[str, float] = {}
    for p in kept:
        if p.start is None:
            latest[p.job_id] = max(latest.get(p.job_id, -math.inf), p.made_at)
    for job_id, p50 in p50s.items():
        if math.isfinite(p50) and now - latest.get(job_id, -math.inf) >= gap_s:
            kept.append(Past(job_id, now, p50))
    known = sorted((p for p in kept if p.start is not None),
                   key=lambda p: p.start if p.start is not None else 0.0)[-max_known:]
    waiting = sorted((p for p in kept if p.start is None), key=lambda p: p.made_at)
    return known + waiting[-max_waiting:]
