"""Walk-forward tuning (``dlprio tune --walk-forward DAYS``): settings re-tuned every period on
the history before that point only, then judged on the jobs that came after it.

The trace (jobs submitted from ``--since`` on, re-based so that the first arrives at 0) is cut
at the re-tune points ``DAYS × 86,400 s``, ``2 × DAYS × 86,400 s``, ... up to the last
submission (:func:`retune_points`). Period 0, before the first point, has no history and runs
the current settings. At each point the grid is ranked (:func:`prioritizer.tune.rank.rank`,
as ``dlprio tune`` ranks it) on a replay of the jobs submitted before that point only: a job
submitted at or after it is never replayed for that choice. The best allowed setting is in
force for the jobs submitted in the period that starts there.

How a period's jobs are measured: the whole trace is replayed once per distinct chosen setting
(``prioritizer.sim.engine`` takes one config per replay), and each job's result is taken from
the replay of the setting in force at its submission (:func:`stitch`). The cluster state a
period starts from is therefore the one its own setting would have left, not the previous
period's; on traces whose busy spells are shorter than a period this changes little. Units:
seconds of trace time.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import TypeVar

DAY_S = 86_400.0
#: the most re-tune points one walk may make: each ranks the whole grid on a replay of the
#: history before it, so 1,000 points are 1,000 × grid-size replays (days of CPU on a real
#: trace), and the point list itself must stay small (a period of 1e-9 days over a year of
#: trace would be 3.6·10¹¹ points)
MAX_RETUNE_POINTS = 1_000

T = TypeVar("T")


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


def stitch(per_period: Sequence[Mapping[int, T]], submits: Mapping[int, float],
           points: Sequence[float]) -> dict[int, T]:
    """Each job's result from the replay of the setting in force at its submission.

    Args:
        per_period: one mapping job id -> result per period (``len(points) + 1`` of them),
            each from a replay of the whole trace under that period's setting.
        submits: job id -> submit time (s).
        points: the re-tune points (:func:`retune_points`).
    Raises:
        ValueError: not one result mapping per period.
    """
    if len(per_period) != len(points) + 1:
        raise ValueError(f"{len(points)} re-tune point(s) need {len(points) + 1} replays, "
                         f"got {len(per_period)}")
    return {job: per_period[period_of(t, points)][job] for job, t in submits.items()}


def settings_per_window(windows: Sequence[Mapping[str, float]], points: Sequence[float],
                        labels: Sequence[str]) -> list[str]:
    """The setting in force (its label, one per period) at each window's first submission."""
    return [labels[period_of(w["first_submit_s"], points)] for w in windows]
