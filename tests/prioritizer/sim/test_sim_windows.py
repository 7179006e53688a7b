"""``prioritizer.sim.windows``: per-window JCT against a baseline, on traces worked out by hand."""

from __future__ import annotations

import pytest

from prioritizer.sim.windows import compare_windows, window_bounds

# Six jobs submitted at 0, 10, ..., 50 (given out of order: the windows follow submit times).
SUBMITS = {"d": 30, "a": 0, "b": 10, "f": 50, "c": 20, "e": 40}
BASE_JCT = {"a": 100, "b": 200, "c": 300, "d": 400, "e": 500, "f": 600}
# c: 3× its baseline JCT but only 600 s more (not hurt); e: 10× and 4,500 s more (hurt)
X_JCT = {"a": 50, "b": 150, "c": 900, "d": 400, "e": 5000, "f": 300}


def _jobs(jcts: dict[str, float]) -> dict[str, tuple[float, float]]:
    return {k: (SUBMITS[k], jcts[k]) for k in SUBMITS}


JOBS = {"fifo-fit": _jobs(BASE_JCT), "x": _jobs(X_JCT)}


def test_windows_of_two() -> None:
    # windows a,b | c,d | e,f: baseline avgs 150, 350, 550; x avgs 100, 650, 2650
    out = compare_windows(JOBS, "fifo-fit", 2)
    assert list(out) == ["fifo-fit", "x"]
    assert out["x"]["windows"] == [
        {"first_submit_s": 0, "jobs": 2, "baseline_avg_jct_s": 150, "avg_jct_s": 100},
        {"first_submit_s": 20, "jobs": 2, "baseline_avg_jct_s": 350, "avg_jct_s": 650},
        {"first_submit_s": 40, "jobs": 2, "baseline_avg_jct_s": 550, "avg_jct_s": 2650}]
    assert out["x"]["worst_window_ratio"] == pytest.approx(2650 / 550)
    assert out["x"]["windows_over_1_03"] == 2          # 650/350 and 2650/550; not 100/150
    assert out["x"]["hurt_jobs_share"] == pytest.approx(1 / 6)   # e only
    assert out["x"]["avg_jct_ratio"] == pytest.approx(6800 / 2100)
    assert out["fifo-fit"]["worst_window_ratio"] == 1.0
    assert out["fifo-fit"]["windows_over_1_03"] == 0
    assert out["fifo-fit"]["hurt_jobs_share"] == 0.0 and out["fifo-fit"]["avg_jct_ratio"] == 1.0


def test_windows_of_three() -> None:
    # a,b,c | d,e,f: baseline 200, 500; x 1100/3, 5700/3
    out = compare_windows(JOBS, "fifo-fit", 3)["x"]
    assert [(w["first_submit_s"], w["jobs"]) for w in out["windows"]] == [(0, 3), (30, 3)]
    assert [w["avg_jct_s"] for w in out["windows"]] == pytest.approx([1100 / 3, 1900])
    assert out["worst_window_ratio"] == pytest.approx(3.8)
    assert out["windows_over_1_03"] == 2


@pytest.mark.parametrize(("count", "window_jobs", "bounds"), [
    pytest.param(6, 4, [(0, 4), (4, 6)], id="last-half-kept"),     # 2 is not < 4 / 2
    pytest.param(6, 5, [(0, 6)], id="last-short-merged"),           # 1 < 5 / 2
    pytest.param(7, 3, [(0, 3), (3, 7)], id="one-left-merged"),
    pytest.param(6, 2, [(0, 2), (2, 4), (4, 6)], id="even"),
    pytest.param(3, 200, [(0, 3)], id="shorter-than-one-window"),
    pytest.param(0, 200, [], id="no-job"),
])
def test_window_bounds(count: int, window_jobs: int, bounds: list[tuple[int, int]]) -> None:
    assert window_bounds(count, window_jobs) == bounds


def test_last_short_window_is_merged() -> None:
    out = compare_windows(JOBS, "fifo-fit", 5)["x"]
    assert out["windows"] == [{"first_submit_s": 0, "jobs": 6, "baseline_avg_jct_s": 350,
                               "avg_jct_s": pytest.approx(6800 / 6)}]


@pytest.mark.parametrize(("base", "jct", "hurt"), [
    pytest.param(3600, 7201, 1.0, id="over-2x-and-over-1h"),
    pytest.param(3600, 7200, 0.0, id="exactly-2x"),
    pytest.param(10, 3610, 0.0, id="exactly-1h-more"),
    pytest.param(10, 3611, 1.0, id="short-job-1h-later"),
])
def test_hurt_needs_twice_and_an_hour_more(base: float, jct: float, hurt: float) -> None:
    out = compare_windows({"b": {1: (0, base)}, "p": {1: (0, jct)}}, "b", 200)
    assert out["p"]["hurt_jobs_share"] == hurt


@pytest.mark.parametrize(("jct", "over"), [(103, 0), (104, 1)])
def test_a_window_counts_when_over_1_03(jct: float, over: int) -> None:
    out = compare_windows({"b": {1: (0, 100)}, "p": {1: (0, jct)}}, "b", 1)
    assert out["p"]["windows_over_1_03"] == over


def test_ties_in_submit_keep_the_given_order() -> None:
    jobs = {"b": {"y": (5, 10), "x": (5, 30)}, "p": {"x": (5, 30), "y": (5, 20)}}
    out = compare_windows(jobs, "b", 1)["p"]["windows"]
    assert [w["avg_jct_s"] for w in out] == [20, 30]     # y first, as the baseline lists it


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="baseline 'srtf' is not among"):
        compare_windows(JOBS, "srtf", 2)
    with pytest.raises(ValueError, match="other jobs"):
        compare_windows({"b": {1: (0, 1)}, "p": {2: (0, 1)}}, "b", 2)
    with pytest.raises(ValueError, match="window_jobs must be >= 1"):
        compare_windows(JOBS, "fifo-fit", 0)


def test_no_job() -> None:
    out = compare_windows({"b": {}, "p": {}}, "b", 200)["p"]
    assert out == {"windows": [], "worst_window_ratio": 1.0, "windows_over_1_03": 0,
                   "hurt_jobs_share": 0.0, "avg_jct_ratio": 1.0}


class _Axis:
    """What ``_minor_label`` reads of a matplotlib axis: its y limits."""

    def __init__(self, low: float, high: float) -> None:
        self.limits = (low, high)

    def get_ylim(self) -> tuple[float, float]:
        return self.limits


TICKS = [0.3, 0.4, 0.5, 0.6, 0.9, 2.0, 3.0, 4.0, 5.0, 7.0]


@pytest.mark.parametrize(("limits", "labelled"), [
    # log10(1.4 / 0.85) = 0.22 decades, under half a decade: every minor tick, written plainly
    ((0.85, 1.4), ["0.3", "0.4", "0.5", "0.6", "0.9", "2", "3", "4", "5", "7"]),
    # log10(6 / 0.3) = 1.3 decades: those at 2, 3 and 5 x a power of ten only
    ((0.3, 6.0), ["0.3", "0.5", "2", "3", "5"]),
    # log10(50 / 0.01) = 3.7 decades: none
    ((0.01, 50.0), []),
])
def test_window_panel_labels_minor_ticks_by_the_axis_range(
        limits: tuple[float, float], labelled: list[str]) -> None:
    from prioritizer.sim.report import _minor_label
    got = [_minor_label(_Axis(*limits), t) for t in TICKS]
    assert [x for x in got if x] == labelled
