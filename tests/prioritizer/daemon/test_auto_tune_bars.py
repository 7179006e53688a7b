"""``auto_tune``'s no-regret bars: the switching decision with hand-worked window figures,
the ``auto_tune:`` keys that set the bars, and the replay child's figures against ``fifo-fit``
on a small history worked out by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from prioritizer.config_file import ConfigError, from_mapping
from prioritizer.daemon.auto_tune import choose
from prioritizer.history.trace import HistoryRow, write_rows
from prioritizer.policy.config import PolicyConfig
from prioritizer.sim.windows import Bars
from prioritizer.tune import daemon_replay

CURRENT = {"avg_jct_s": 100.0, "p95_jct_s": 200.0}
#: A saves 10 % but hurts 1 % of the jobs; B saves 6 %, hurts none, worst window 1.1
A = {"avg_jct_s": 90.0, "p95_jct_s": 200.0, "hurt_jobs_share": 0.01, "worst_window_ratio": 1.0}
B = {"avg_jct_s": 94.0, "p95_jct_s": 200.0, "hurt_jobs_share": 0.0, "worst_window_ratio": 1.1}


def test_a_point_that_hurts_jobs_is_not_adopted_however_fast() -> None:
    v = choose(CURRENT, [A, B], min_gain=0.05, max_p95_rise=0.0, bars=Bars(0.0005, 1.2))
    assert (v.switch, v.index) == (True, 1) and v.gain == pytest.approx(0.06)
    # without bars A (10 % saved) is adopted
    assert choose(CURRENT, [A, B], min_gain=0.05, max_p95_rise=0.0).index == 0


def test_no_point_clears_the_bars_keeps_the_settings() -> None:
    v = choose(CURRENT, [A, B], min_gain=0.05, max_p95_rise=0.0, bars=Bars(0.0005, 1.05))
    assert (v.switch, v.index) == (False, None)
    assert v.reason == ("no grid point within the p95 bar clears the no-regret bars (hurt <= "
                        "0.05 %, worst window <= 1.050); the least regret has hurt 0.000 %, "
                        "worst window 1.100")


def test_the_bars_are_on_by_default_and_can_be_set_or_turned_off() -> None:
    at = from_mapping({}).auto_tune
    assert (at.max_hurt_share, at.max_worst_window) == (0.0005, "oracle")
    at = from_mapping({"auto_tune": {"max_hurt_share": "off", "max_worst_window": 1.2}}).auto_tune
    assert (at.max_hurt_share, at.max_worst_window) == ("off", 1.2)


@pytest.mark.parametrize(("section", "line"), [
    ({"max_hurt_share": 2}, "auto_tune.max_hurt_share: a fraction from 0 to 1 (0.0005 = 0.05 % "
                            "of the jobs), or off (got 2)"),
    ({"max_worst_window": "best"}, "auto_tune.max_worst_window: a ratio > 0 and <= 1e6 (1.1: 10 % worse "
                                   "than fifo-fit), oracle or off (got 'best')"),
    ({"max_worst_window": 1e7}, "auto_tune.max_worst_window: a ratio > 0 and <= 1e6 (1.1: 10 % "
                                "worse than fifo-fit), oracle or off (got 10000000.0)"),
    ({"max_worst_window": 0}, "auto_tune.max_worst_window: a ratio > 0 and <= 1e6 (1.1: 10 % "
                              "worse than fifo-fit), oracle or off (got 0)"),
])
def test_a_bad_bar_is_one_line(section: dict, line: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_mapping({"auto_tune": section})
    assert str(err.value) == line


def _history(path: Path) -> None:
    """j0 (3,700 s) at 0 s, then forty 100-s jobs at 1, 2, ..., 40 s, one GPU each."""
    specs = [(0.0, 3700.0)] + [(float(k), 100.0) for k in range(1, 41)]
    with open(path, "w", newline="") as handle:
        write_rows((HistoryRow(str(i + 1), "u", "a", "gpu", 1000 + t, 1000 + t, 1, 1, d, d,
                               1000 + t + d, d, "COMPLETED", 1, "self")
                    for i, (t, d) in enumerate(specs)), handle)


@pytest.mark.parametrize("bars", [True, False])
def test_the_replay_child_measures_each_point_against_fifo_fit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bars: bool) -> None:
    """On one GPU with no modeled cost, fifo-fit (in force) gives avg 232,880 / 41 s and srtf
    88,920 / 41 s but j0 waits 4,000 s more (7,700 s > 2 × 3,700 s): one job in 41 hurt
    (worked out in tests/prioritizer/tune/test_tune_walk.py). The oracle's worst window (the
    one window of 41 jobs) is 0.382 < 1: the bar is 1.0. srtf saves 62 % but is not adopted."""
    history = tmp_path / "history.csv"
    _history(history)
    monkeypatch.setattr(daemon_replay, "shape_from_slurm", lambda client: (1, 1))
    request = {"history": str(history), "since": 0.0, "until": 1e9, "grid": "policy=srtf",
               "policy": dataclasses.asdict(PolicyConfig(policy="fifo-fit").zero_cost()),
               "min_jobs": 10, "slurm_timeout_s": 5.0,
               "max_hurt_share": 0.0005 if bars else "off",
               "max_worst_window": "oracle" if bars else "off"}
    result = daemon_replay.replay(request, tmp_path)
    cand = result["candidates"][0]["figures"]
    assert result["jobs"] == 41
    assert cand["avg_jct_s"] == pytest.approx(88_920 / 41)
    assert result["current"]["avg_jct_s"] == pytest.approx(232_880 / 41)
    v = choose(result["current"], [cand], 0.05, 1.0,
               Bars(**result["bars"]) if result["bars"] else None)
    if not bars:
        assert result["bars"] is None and "hurt_jobs_share" not in cand and v.switch
        return
    assert result["bars"] == {"max_hurt_share": 0.0005, "max_worst_window": 1.0}
    assert cand["hurt_jobs_share"] == pytest.approx(1 / 41)
    assert cand["worst_window_ratio"] == pytest.approx(88_920 / 232_880)
    assert result["current"]["hurt_jobs_share"] == 0.0
    assert not v.switch and "hurt 2.439 %" in v.reason
