"""Who pays: each policy's JCTs compared with a baseline policy's, window by window.

A pure function of per-job results (``dlprio simulate`` with ``--compare``/``--baseline``,
``dlprio history check``); the replays themselves are ``prioritizer.sim.engine``'s. An
average JCT can drop while a stretch of the trace pays for it: here the jobs are taken in
the baseline's submit order (ties in the order given) and cut into consecutive windows of
``window_jobs`` jobs; a last window shorter than half of that is merged into the one before
(so every window holds from ``window_jobs / 2`` to ``1.5 × window_jobs`` jobs, unless the
whole trace is shorter). Every policy is measured on the same windows of the same jobs.
Units: seconds; ratios and shares are plain fractions.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

#: a window whose avg JCT is more than this many times the baseline's counts as worse
WORSE_RATIO = 1.03
#: a job is hurt when its JCT is more than HURT_FACTOR × the baseline's AND more than
#: HURT_EXTRA_S seconds longer than it
HURT_FACTOR, HURT_EXTRA_S = 2.0, 3600.0

WINDOW_KEYS = ("windows", "worst_window_ratio", "windows_over_1_03", "hurt_jobs_share",
               "avg_jct_ratio")
"""The keys :func:`compare_windows` gives each policy (``--json`` adds them to its summary)."""


def window_bounds(count: int, window_jobs: int) -> list[tuple[int, int]]:
    """``[start, stop)`` positions of the windows of ``count`` jobs in submit order: runs of
    ``window_jobs``, a last run shorter than ``window_jobs / 2`` merged into the one before.

    Raises:
        ValueError: ``window_jobs`` < 1.
    """
    if window_jobs < 1:
        raise ValueError(f"window_jobs must be >= 1, got {window_jobs}")
    bounds = [(i, min(i + window_jobs, count)) for i in range(0, count, window_jobs)]
    if len(bounds) > 1 and 2 * (bounds[-1][1] - bounds[-1][0]) < window_jobs:
        last = bounds.pop()
        bounds[-1] = (bounds[-1][0], last[1])
    return bounds


def ratio(value: float, base: float) -> float:
    """``value / base``; 1.0 when both are 0, infinity when only ``base`` is."""
    if base > 0:
        return value / base
    return 1.0 if value <= 0 else float("inf")


def compare_windows(jobs_by_policy: Mapping[str, Mapping[Hashable, tuple[float, float]]],
                    baseline: str, window_jobs: int) -> dict[str, dict[str, Any]]:
    """Per policy (baseline included, in the mapping's order), its JCTs against ``baseline``'s.

    Args:
        jobs_by_policy: policy name -> {job key: (submit_s, jct_s)}, the same job keys for
            every policy; the windows follow the baseline's submit times.
        baseline: the policy (a key of ``jobs_by_policy``) the others are measured against.
        window_jobs: jobs per window (module doc: the last window).
    Returns:
        policy -> ``windows`` (one ``{first_submit_s, jobs, baseline_avg_jct_s, avg_jct_s}``
        per window), ``worst_window_ratio`` (the largest avg_jct_s / baseline_avg_jct_s over
        the windows), ``windows_over_1_03`` (windows whose ratio is > :data:`WORSE_RATIO`),
        ``hurt_jobs_share`` (fraction of jobs whose JCT is > :data:`HURT_FACTOR` × AND >
        :data:`HURT_EXTRA_S` more than its baseline JCT), ``avg_jct_ratio`` (all jobs' avg
        JCT over the baseline's). With no job: no window, ratios 1.0, share 0.0.
    Raises:
        ValueError: ``baseline`` not among the policies, a policy with other jobs than the
            baseline's, or ``window_jobs`` < 1.
    """
    if baseline not in jobs_by_policy:
        raise ValueError(f"baseline {baseline!r} is not among the policies "
                         f"({', '.join(jobs_by_policy)})")
    base = jobs_by_policy[baseline]
    order = sorted(base, key=lambda key: base[key][0])   # stable: ties keep the given order
    bounds = window_bounds(len(order), window_jobs)
    out = {}
    for policy, jobs in jobs_by_policy.items():
        if jobs.keys() != base.keys():
            raise ValueError(f"policy {policy!r} has other jobs than the baseline {baseline!r} "
                             f"({len(jobs)} vs {len(base)})")
        windows = []
        for start, stop in bounds:
            keys = order[start:stop]
            windows.append({"first_submit_s": base[keys[0]][0], "jobs": len(keys),
                            "baseline_avg_jct_s": statistics.fmean(base[k][1] for k in keys),
                            "avg_jct_s": statistics.fmean(jobs[k][1] for k in keys)})
        ratios = window_ratios(windows)
        hurt = sum(1 for k in order
                   if jobs[k][1] > HURT_FACTOR * base[k][1]
                   and jobs[k][1] - base[k][1] > HURT_EXTRA_S)
        out[policy] = {
            "windows": windows,
            "worst_window_ratio": max(ratios, default=1.0),
            "windows_over_1_03": sum(1 for r in ratios if r > WORSE_RATIO),
            "hurt_jobs_share": hurt / len(order) if order else 0.0,
            "avg_jct_ratio": ratio(sum(j[1] for j in jobs.values()),
                                   sum(j[1] for j in base.values())),
        }
    return out


def window_ratios(windows: Sequence[Mapping[str, float]]) -> list[float]:
    """Each window's ``avg_jct_s / baseline_avg_jct_s`` (for tables and plots)."""
    return [ratio(w["avg_jct_s"], w["baseline_avg_jct_s"]) for w in windows]


#: ``max_hurt_share`` of the no-regret bars unless told: the share of hurt jobs a setting may
#: add against the baseline (a fraction; 0.0005 = 0.05 %, one job in 2,000)
DEFAULT_MAX_HURT_SHARE = 0.0005
#: ``max_worst_window`` of the no-regret bars unless told: the worst window of the oracle
#: ``srtf`` replayed on the same jobs (it knows every duration, so a window that fares worse
#: than under it is paying for the policy, not for reshuffling any good order must do), or
#: 1.0 where the oracle's is lower (a history of one window: no window worse than the
#: baseline's costs anyone anything)
ORACLE = "oracle"
#: a bar given as ``off``
OFF = "off"
ORACLE_POLICY: Final = "srtf"


@dataclass(frozen=True)
class Bars:
    """The no-regret bars a tuned setting must clear on the replayed history, against the
    baseline (:func:`compare_windows`): ``hurt_jobs_share <= max_hurt_share`` (a fraction)
    and ``worst_window_ratio <= max_worst_window`` (a ratio); ``None``: that bar is off."""

    max_hurt_share: float | None = None
    max_worst_window: float | None = None

    def clears(self, figures: Mapping[str, float]) -> bool:
        """Whether ``figures`` (with ``hurt_jobs_share`` and ``worst_window_ratio`` for every
        bar that is on) clear the bars."""
        return ((self.max_hurt_share is None
                 or figures["hurt_jobs_share"] <= self.max_hurt_share + 1e-12)
                and (self.max_worst_window is None
                     or figures["worst_window_ratio"] <= self.max_worst_window + 1e-9))

    def describe(self) -> str:
        """The bars in one phrase (``hurt <= 0.05 %, worst window <= 1.134``)."""
        parts = []
        if self.max_hurt_share is not None:
            parts.append(f"hurt <= {100 * self.max_hurt_share:g} %")
        if self.max_worst_window is not None:
            parts.append(f"worst window <= {self.max_worst_window:.3f}")
        return ", ".join(parts) or "no bar"


def least_regret(figures: Mapping[str, float]) -> tuple[float, float, float]:
    """Sort key of the fallback when no setting clears the bars: the least hurt share, then
    the least worst window, then the lowest avg JCT."""
    return figures["hurt_jobs_share"], figures["worst_window_ratio"], figures["avg_jct_s"]


def regret(figures: Mapping[str, float]) -> str:
    """A setting's figures against the bars in one phrase (``hurt 0.000 %, worst window
    1.200``), for the line that names the least-regret fallback."""
    return (f"hurt {100 * figures['hurt_jobs_share']:.3f} %, worst window "
            f"{figures['worst_window_ratio']:.3f}")


def window_figures(jobs: Sequence[Sequence[Sequence[float]]], baseline: int,
                   window_jobs: int) -> list[dict[str, float]]:
    """Per replay, its ``worst_window_ratio``, ``hurt_jobs_share`` and ``avg_jct_ratio``
    against replay number ``baseline`` (:func:`compare_windows`).

    Args:
        jobs: per replay of the same trace, ``[submit_s, jct_s]`` per job in trace order.
        baseline: index of the baseline's replay in ``jobs``.
        window_jobs: jobs per window.
    """
    compared = compare_windows({str(i): {k: (s, t) for k, (s, t) in enumerate(js)}
                                for i, js in enumerate(jobs)}, str(baseline), window_jobs)
    return [{key: compared[str(i)][key]
             for key in ("worst_window_ratio", "hurt_jobs_share", "avg_jct_ratio")}
            for i in range(len(jobs))]
