"""Walk-forward tuning (``dlprio tune --walk-forward DAYS``): settings re-tuned every period on
the history before that point only, then judged on the jobs that came after it.

The trace (jobs submitted from ``--since`` on, re-based so that the first arrives at 0) is cut
at the re-tune points ``DAYS × 86,400 s``, ``2 × DAYS × 86,400 s``, ... up to the last
submission (:func:`retune_points`). Period 0, before the first point, has no history and runs
the current settings. At each point the grid is ranked (:func:`prioritizer.tune.rank.rank`,
as ``dlprio tune`` ranks it) on a replay of the jobs submitted before that point only: a job
submitted at or after it is never replayed for that choice. The best allowed setting is in
force from that point to the next.

How the walk is measured: one replay of the whole trace in which the setting chosen at a
point is in force from that point on for every job on the cluster, running or waiting
(``prioritizer.sim.engine.Switch``), as the daemon's ``auto_tune`` switches its settings: the
jobs keep their runs, attained service and queue states, and the next decision applies the
new rules to all of them. Units: seconds of trace time.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence

DAY_S = 86_400.0
#: the most re-tune points one walk may make: each ranks the whole grid on a replay of the
#: history before it, so 1,000 points are 1,000 × grid-size replays (days of CPU on a real
#: trace), and the point list itself must stay small (a period of 1e-9 days over a year of
#: trace would be 3.6·10¹¹ points)
MAX_RETUNE_POINTS = 1_000


class TooManyPoints(ValueError):
    """A period that cuts the trace at more than :data:`MAX_RETUNE_POINTS` points:
    ``count`` points, and ``least_period_s``, the shortest period that makes at most the cap
    (seconds)."""

    def __init__(self, count: int, least_period_s: float) -> None:
        super().__init__(f"{count:,} re-tune points, more than {MAX_RETUNE_POINTS:,}; give a "
                         f"period of at least {least_period_s:g} s")
        self.count, self.least_period_s = count, least_period_s


def retune_points(submits: Sequence[float], period_s: float) -> list[float]:
    """The re-tune points of a trace whose jobs are submitted at ``submits`` (seconds, the
    first at 0 or later): ``k × period_s`` for k = 1, 2, ... while the point is at or before
    the last submission (a point after it would choose for no job). At most
    :data:`MAX_RETUNE_POINTS`; their number is counted before any is made.

    Raises:
        TooManyPoints: more points than :data:`MAX_RETUNE_POINTS`.
        ValueError: ``period_s`` not a finite number > 0.
    """
    if not (period_s > 0 and math.isfinite(period_s)):
        raise ValueError(f"the walk-forward period must be > 0 seconds, got {period_s}")
    last = max(submits, default=0.0)
    count = int(last // period_s)
    if count > MAX_RETUNE_POINTS:
        raise TooManyPoints(count, last / MAX_RETUNE_POINTS)
    return [k * period_s for k in range(1, count + 1)]


def period_of(submit: float, points: Sequence[float]) -> int:
    """The period a job submitted at ``submit`` falls in: 0 before the first point, k from
    the k-th point on (a job submitted exactly at a point belongs to the period it opens)."""
    return bisect_right(points, submit)


def settings_per_window(windows: Sequence[Mapping[str, float]], points: Sequence[float],
                        labels: Sequence[str]) -> list[str]:
    """The setting in force (its label, one per period) at each window's first submission."""
    return [labels[period_of(w["first_submit_s"], points)] for w in windows]
