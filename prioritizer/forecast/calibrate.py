"""Calibrated start bands, learned from the site's own past forecasts (pure; no clock, no I/O).

The draws of :func:`prioritizer.forecast.forecast.forecast` vary only the remaining run times
(and the drawn arrivals); what the draws leave out (later submissions they do not draw, jobs
cancelled early, nodes going down) makes the real start miss their p10-p90 band far more often
than one time in five. Calibration fixes the band from outcomes instead: the distribution of
the ratio of actual to forecast wait over the site's earlier forecasts, estimated with the
Kaplan-Meier estimator so that forecasts whose job still waits count as right-censored
observations (their ratio is known to be at least what it is so far).

The rule, fixed (never tuned on an evaluation):

- The residual of one past forecast of a waiting job, made at ``m`` with median start ``p50``
  and actual start ``s``, is ``r = ln((s - m + c) / (p50 - m + c))``: the log ratio of the
  actual wait to the forecast's median wait, both from ``m``, with ``c`` =
  :data:`OFFSET_S` seconds so that a wait of 0 has a finite ratio. A forecast whose job has
  not started by ``now`` is censored: ``r >= ln((now - m + c) / (p50 - m + c))``.
- A forecast at ``now`` is calibrated with forecasts made before ``now`` (:func:`calibration`),
  each known (its job started at or before ``now``) or censored at ``now``: never an outcome
  that was not yet known. They are the forecasts made since the latest moment that leaves
  :data:`MAX_KNOWN` known outcomes among them (a cohort by the moment a forecast was made,
  whatever its outcome: a cohort by start would leave out the long waits of the latest
  forecasts, which have not started yet).
- The residuals are grouped by the forecast's median wait (:data:`WAIT_GROUPS`, the same
  boundaries for every site): a job forecast to start in minutes and one forecast to wait
  hours miss by different ratios. A group of at least :data:`MIN_KNOWN` known outcomes
  calibrates the forecasts of that group; a smaller group uses all residuals when they hold at
  least :data:`MIN_KNOWN` known outcomes; fewer than that and the draws' raw band stands
  (``calibrated`` 0).
- The residuals' Kaplan-Meier survival curve ``S(x)`` (the share of residuals above ``x``,
  :func:`km_quantile`) gives the quantiles ``q_p = min{r known: S(r) <= 1 - p}`` for ``p`` =
  0.1, 0.5, 0.9; without censoring they are the plain empirical quantiles (the lower one at a
  tie). A quantile the curve never reaches (``S`` still above ``1 - p`` at the largest known
  residual: the forecasts censored above it carry more than that share of the estimate) is
  ``inf``: that end of the band is open, beyond the horizon.
- A raw median wait ``w`` gives the calibrated p10 and p90 starts
  ``now + max((w + c)·e^q - c, 0)`` for ``q`` = ``q10``, ``q90``: where 80 % of the past
  ratios fell. The p50 is the draws' own median clipped into them (docs/forecasts.md, "The
  median": the job's own draws know its place in the queue, one median ratio per group moves
  the nearly exact forecasts off, and ``q50`` is open while half a group still waits); the
  median moved by ``q50`` the same way is what ``shift_median`` gives, for comparison. A
  median beyond the horizon (``inf``) keeps the raw band.

Times are seconds on one clock (epoch seconds on a cluster, trace seconds in a replay).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from prioritizer.forecast.forecast import Band

#: seconds added to both waits of a residual's ratio (a wait of 0 stays finite)
OFFSET_S = 60.0
#: known outcomes a group (or all of them) needs before it calibrates a band
MIN_KNOWN = 30
#: known outcomes in the cohort of forecasts a calibration keeps (module doc)
MAX_KNOWN = 2000
#: upper bounds (s) of the forecast's median wait of each residual group; the last is open
WAIT_GROUPS = (600.0, 3600.0, 6 * 3600.0)
#: the quantiles of a band (p10, p50, p90)
LEVELS = (0.1, 0.5, 0.9)


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

    def ratio_at(self, when: float) -> float:
        """``ln((when - made_at + c) / (median wait + c))``: the residual of a start at
        ``when`` (s)."""
        return math.log((max(when - self.made_at, 0.0) + OFFSET_S) / (self.wait_s + OFFSET_S))

    @property
    def residual(self) -> float:
        """``ln((actual wait + c) / (median wait + c))`` (module doc); needs ``start``."""
        assert self.start is not None
        return self.ratio_at(self.start)


def group_of(wait_s: float) -> int:
    """The :data:`WAIT_GROUPS` index of a median wait (s)."""
    return bisect.bisect_right(WAIT_GROUPS, wait_s)


def km_quantile(known: Sequence[float], censored: Sequence[float], p: float) -> float:
    """The ``p`` quantile (0-1) of the Kaplan-Meier estimate of a distribution from ``known``
    values and ``censored`` lower bounds (a censored value ``c`` says only "above ``c``"):
    the least known value ``r`` at which the survival ``S(r) = prod over known values
    r_i <= r of (1 - 1 / at risk at r_i)`` is at most ``1 - p`` (at risk: the values, known or
    censored, not below ``r_i``; a censored value equal to a known one is still at risk
    there). ``inf`` when ``S`` never gets that low (too many censored above the known ones)
    or nothing is known."""
    points = sorted([(r, 0) for r in known] + [(c, 1) for c in censored])
    at_risk, surviving = len(points), 1.0
    for value, is_censored in points:
        if not is_censored:
            surviving *= 1.0 - 1.0 / at_risk
            if surviving <= 1.0 - p + 1e-12:   # a tie of 1 - p is reached despite rounding
                return value
        at_risk -= 1
    return math.inf


@dataclass(frozen=True)
class Residuals:
    """The residuals of one group (or all): ``known`` (their jobs started) and ``censored``
    (lower bounds of those still waiting), each ascending."""

    known: tuple[float, ...] = ()
    censored: tuple[float, ...] = ()

    def __len__(self) -> int:
        return len(self.known) + len(self.censored)

    @cached_property
    def quantiles(self) -> tuple[float, float, float]:
        """``(q10, q50, q90)`` of the Kaplan-Meier estimate (:func:`km_quantile`; worked out
        once: a forecast calibrates every waiting job with the same few groups)."""
        low, mid, high = (km_quantile(self.known, self.censored, p) for p in LEVELS)
        return low, mid, high


def _residuals(known: Iterable[float], censored: Iterable[float]) -> Residuals:
    return Residuals(tuple(sorted(known)), tuple(sorted(censored)))


@dataclass(frozen=True)
class Calibration:
    """The residuals known at one moment, all of them and per wait group."""

    pooled: Residuals
    groups: tuple[Residuals, ...]
    min_known: int = MIN_KNOWN

    def residuals_for(self, wait_s: float) -> Residuals:
        """The residuals that calibrate a forecast of median wait ``wait_s`` (module doc);
        empty when too few outcomes are known (the raw band stands)."""
        own = self.groups[group_of(wait_s)]
        if len(own.known) >= self.min_known:
            return own
        return self.pooled if len(self.pooled.known) >= self.min_known else Residuals()

    def start_band(self, now: float, raw: Band, shift_median: bool = False
                   ) -> tuple[Band, int]:
        """The calibrated start band of a forecast made at ``now`` with raw band ``raw``
        (p10, p50, p90 start, s; ``inf`` where a quantile is open, module doc) and the count
        of residuals, known and censored, it rests on (0: ``raw`` as it is: too few known,
        or a median beyond the horizon). Its p50 is the draws' median clipped into the
        calibrated p10-p90; ``shift_median``: the draws' median moved by the residuals'
        median ratio instead (what ``benchmarks/forecast_accuracy.py`` sets beside it)."""
        if math.isinf(raw[1]):
            return raw, 0
        wait = max(raw[1] - now, 0.0)
        used = self.residuals_for(wait)
        if not used.known:
            return raw, 0
        low, mid, high = (now + max((wait + OFFSET_S) * math.exp(q) - OFFSET_S, 0.0)
                          for q in used.quantiles)
        if not shift_median:
            mid = min(max(raw[1], low), high)
        return (low, mid, high), len(used)


def cohort(past: Iterable[Past], now: float, max_known: int = MAX_KNOWN) -> list[Past]:
    """The forecasts a calibration at ``now`` rests on (module doc): those made before
    ``now``, latest first by moment (then job id), back to the one that makes ``max_known``
    of them known at ``now``."""
    return _back_to_known(sorted((p for p in past if p.made_at < now),
                                 key=lambda p: (p.made_at, p.job_id), reverse=True),
                          now, max_known)


def _back_to_known(latest_first: list[Past], now: float, max_known: int) -> list[Past]:
    """The head of ``latest_first`` up to the forecast that makes ``max_known`` of them
    known (started at or before ``now``); all of it when fewer are."""
    known = 0
    for k, p in enumerate(latest_first):
        if p.start is not None and p.start <= now:
            known += 1
            if known == max_known:
                return latest_first[:k + 1]
    return latest_first


def calibration(past: Iterable[Past], now: float, min_known: int = MIN_KNOWN,
                max_known: int = MAX_KNOWN) -> Calibration:
    """The :class:`Calibration` of a forecast made at ``now``: the residuals of the
    :func:`cohort` of ``now``, known for forecasts whose job started at or before ``now``,
    censored at ``now`` for the others (no later outcome is seen)."""
    known: list[list[float]] = [[] for _ in range(len(WAIT_GROUPS) + 1)]
    censored: list[list[float]] = [[] for _ in range(len(WAIT_GROUPS) + 1)]
    for p in cohort(past, now, max_known):
        group = group_of(p.wait_s)
        if p.start is not None and p.start <= now:
            known[group].append(p.ratio_at(p.start))
        else:
            censored[group].append(p.ratio_at(now))
    return Calibration(_residuals((r for g in known for r in g), (r for g in censored for r in g)),
                       tuple(_residuals(k, c) for k, c in zip(known, censored)), min_known)


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
    of a forecast made at ``now`` added, except for a job with a forecast less than ``gap_s``
    old, waiting or started (a forecast made while the job waited and taken in after its
    start was noted would otherwise count the same start twice); then what a later
    calibration can use: the forecasts made since the latest moment that leaves
    ``max_known`` known outcomes among them (:func:`cohort`), of which the ``max_waiting``
    latest waiting ones, ordered by moment (then job id). A forecast made
    after ``now``, or a start more than ``gap_s`` after it, is dropped: the clock went back
    since (left in, it would hold a place in the cohort, or block its job's next forecast,
    until the clock catches up)."""
    kept = [p for p in past
            if p.made_at <= now and (p.start is None or p.start <= now + gap_s)]
    latest: dict[str, float] = {}
    for p in kept:
        latest[p.job_id] = max(latest.get(p.job_id, -math.inf), p.made_at)
    for job_id, p50 in p50s.items():
        if math.isfinite(p50) and now - latest.get(job_id, -math.inf) >= gap_s:
            kept.append(Past(job_id, now, p50))
    # the cohort of a calibration after now: every start kept is known by then
    ordered = _back_to_known(sorted(kept, key=lambda p: (p.made_at, p.job_id), reverse=True),
                             math.inf, max_known)
    out, waiting = [], 0
    for p in ordered:
        waiting += p.start is None
        if p.start is not None or waiting <= max_waiting:
            out.append(p)
    return out[::-1]
