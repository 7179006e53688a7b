"""The no-regret bars of the tuner's ranking (``prioritizer.tune.rank.with_windows``,
``rank``, ``pick``; ``prioritizer.sim.windows.Bars``), on per-job figures worked out by hand.

Four jobs submitted at 0, 1, 2, 3 s, windows of 2 jobs: (j0, j1) and (j2, j3). The baseline
runs each in 1,000 s. Candidates (JCTs of j0..j3, s):

* ``A`` 10, 10, 10, 4,700: avg 1,182.5; windows 10 / 1,000 = 0.01 and 2,355 / 1,000 =
  2.355; j3 is hurt (4,700 > 2 × 1,000 and 3,700 s > 1 h later): hurt share 1/4.
* ``C`` (current) 1,200 each: avg 1,200; worst window 1.2; no job hurt.
* ``D`` 1,300, 1,300, 1,050, 1,050: avg 1,175; worst window 1.3; no job hurt.
* the oracle 500, 500, 1,500, 1,500: worst window 1.5.
"""

from __future__ import annotations

import pytest

from prioritizer.sim.windows import Bars
from prioritizer.policy.config import PolicyConfig
from prioritizer.tune.rank import bar_configs, pick, rank, with_windows

SUBMITS = [0.0, 1.0, 2.0, 3.0]
JCTS = {"A": [10, 10, 10, 4700], "D": [1300, 1300, 1050, 1050], "C": [1200] * 4,
        "baseline": [1000] * 4, "oracle": [500, 500, 1500, 1500]}
LABELS = ["A", "D", "C"]


def _results() -> list[dict]:
    return [{"jobs": 4.0, "avg_jct_s": sum(JCTS[n]) / 4, "p95_jct_s": max(JCTS[n]),
             "max_wait_s": 0.0, "jobs_s": [[s, float(t)] for s, t in zip(SUBMITS, JCTS[n])]}
            for n in [*LABELS, "baseline", "oracle"]]


def _ranked(hurt: float | None, worst: float | str | None):
    figures, bars = with_windows(_results(), 3, 2, hurt, worst)
    return figures, bars, rank(LABELS, figures, 2, None, bars)


def test_window_figures_against_the_baseline() -> None:
    figures, bars, _ = _ranked(0.0005, "oracle")
    assert bars == Bars(0.0005, 1.5)          # the oracle's worst window
    assert [(f["worst_window_ratio"], f["hurt_jobs_share"]) for f in figures] == [
        (pytest.approx(2.355), 0.25), (pytest.approx(1.3), 0.0), (pytest.approx(1.2), 0.0)]
    assert all("jobs_s" not in f for f in figures)


def test_a_lower_avg_jct_with_a_hurt_job_is_dropped() -> None:
    """A (1,182.5 s) beats C (1,200 s) on avg JCT but hurts j3 and its worst window is
    2.355 > 1.5: dropped. D (1,175 s) clears both bars and is picked."""
    _, bars, ranked = _ranked(0.0005, "oracle")
    assert [(r.label, r.allowed) for r in ranked] == [("D", True), ("A", False), ("C", True)]
    assert pick(ranked, bars) == (ranked[0], None)
    # hurt <= 0.3 and worst window <= 2.4 let A in; D's avg 1,175 s is still the lowest
    _, bars, ranked = _ranked(0.3, 2.4)
    assert [(r.label, r.allowed) for r in ranked] == [("D", True), ("A", True), ("C", True)]
    assert pick(ranked, bars)[0].label == "D"
    # hurt <= 0.0005 with the worst window bar off: only A is dropped
    _, bars, ranked = _ranked(0.0005, None)
    assert bars == Bars(0.0005, None)
    assert [(r.label, r.allowed) for r in ranked] == [("D", True), ("A", False), ("C", True)]


def test_none_clears_the_bars_then_least_regret() -> None:
    """Worst window <= 1.1: C (1.2), D (1.3) and A (2.355) all fail. Least hurt first (C and
    D: 0), then least worst window: C, though D's avg JCT is lower."""
    _, bars, ranked = _ranked(0.0005, 1.1)
    assert not any(r.allowed for r in ranked)
    best, why = pick(ranked, bars)
    assert best is not None and best.label == "C" and best.current
    assert why == ("no setting clears the bars (hurt <= 0.05 %, worst window <= 1.100); least "
                   "regret: C (hurt 0.000 %, worst window 1.200)")


def test_without_bars_the_ranking_is_by_avg_jct_alone() -> None:
    figures = [{k: v for k, v in r.items() if k != "jobs_s"} for r in _results()[:3]]
    ranked = rank(LABELS, figures, 2)
    assert [r.label for r in ranked] == ["D", "A", "C"] and all(r.allowed for r in ranked)
    assert pick(ranked) == (ranked[0], None)


def test_an_oracle_better_than_the_baseline_everywhere_sets_the_bar_at_one() -> None:
    """An oracle of 100 s per job has worst window 0.1; the bar is 1.0 (a window no worse
    than the baseline's costs no one anything): C (1.2) and D (1.3) fail it, A fails the hurt
    bar too, and the fallback is C."""
    results = _results()
    results[4]["jobs_s"] = [[s, 100.0] for s in SUBMITS]
    figures, bars = with_windows(results, 3, 2, 0.0005, "oracle")
    assert bars == Bars(0.0005, 1.0)
    best, why = pick(rank(LABELS, figures, 2, None, bars), bars)
    assert best is not None and best.label == "C" and why is not None


def test_the_bars_replay_the_baseline_and_an_unguarded_oracle_with_the_current_costs() -> None:
    current = PolicyConfig(requeue_guard=0.1, wait_guard=1.0, requeue_delay_s=120.0)
    base, oracle = bar_configs(current, "fifo-fit", True)
    assert (base.policy, base.requeue_guard, base.requeue_delay_s) == ("fifo-fit", 0.1, 120.0)
    assert (oracle.policy, oracle.requeue_guard, oracle.wait_guard, oracle.requeue_delay_s) == \
        ("srtf", 0.0, 0.0, 120.0)
    assert bar_configs(current, "fifo-fit", False) == [base]
