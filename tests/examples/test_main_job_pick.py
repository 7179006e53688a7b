"""The main job's workload rule (examples/pick.py): the window of N consecutive jobs with
the highest offered load, judged on the scaled jobs and never on an outcome."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from main_job_helpers import REPO, load_example
from prioritizer.sim import workload
from prioritizer.sim.traces import TraceJob, read_trace

pick = load_example("pick")


def _job(i: int, submit: float, gpus: int, duration: float) -> TraceJob:
    return TraceJob(i, str(100 + i), i + 2, submit, gpus, duration)


def test_offered_load_by_hand() -> None:
    jobs = [workload.ScaledJob(0, "a", 8, 0.0, 60.0, 8, 0, 1), workload.ScaledJob(1, "b", 1, 10.0, 20.0, 1, 5, 1),
            workload.ScaledJob(2, "c", 4, 15.0, 30.0, 4, 5, 1)]
    # (8*60 + 1*20 + 4*30) / (15 s * 32 GPUs) = 620 / 480
    assert pick.offered_load(jobs, 32) == pytest.approx(620 / 480)
    same_time = [workload.ScaledJob(i, "x", 8, 0.0, 60.0, 8, 0, 1) for i in range(3)]
    assert pick.offered_load(same_time, 32) is None


def test_pick_takes_the_densest_window_and_skips_spanless_ones() -> None:
    # Scaled per window by k = (longest of two) / 20 s, durations at least 2 s.
    trace = [_job(0, 0, 1, 100), _job(1, 1000, 1, 100), _job(2, 1010, 8, 1000),
             _job(3, 1010, 8, 1000), _job(4, 1010, 8, 10), _job(5, 5000, 1, 100)]
    found = pick.pick(trace, 2, 32)
    # windows of two: (0,1) k=5: 20+20 GPU·s over 1000/5 = 200 s: 40/6400;
    # (1,2) k=50: 1*2 + 8*20 = 162 GPU·s over 10/50 = 0.2 s: 162/6.4;
    # (2,3) and (3,4) arrive together (no span); (4,5) k=5: 8*2 + 1*20 = 36 over 798 s.
    assert (found.first, found.first_name, found.k) == (1, "101", 50.0)
    assert found.load == pytest.approx(162 / (0.2 * 32))
    assert [j.name for j in found.jobs] == ["101", "102"]
    assert [j.duration_s for j in found.jobs] == [2.0, 20.0]
    assert [j.name for j in found.before] == ["100"]


def test_pick_breaks_ties_by_the_earliest_window() -> None:
    trace = [_job(i, 10.0 * i, 8, 100) for i in range(6)]
    assert pick.pick(trace, 3, 32).first == 0


def test_pick_refuses_what_it_cannot_give() -> None:
    with pytest.raises(workload.WorkloadError, match="only 2 jobs"):
        pick.pick([_job(0, 0, 1, 10), _job(1, 5, 1, 10)], 3, 32)
    with pytest.raises(workload.WorkloadError, match="arrives at once"):
        pick.pick([_job(i, 7.0, 1, 10) for i in range(4)], 2, 32)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 500), st.integers(1, 16), st.floats(1, 1e5)), min_size=3,
                max_size=12), st.integers(2, 3))
def test_no_window_has_more_load_than_the_pick(rows: list[tuple[float, int, float]], n: int) -> None:
    submit, trace = 0.0, []
    for i, (gap, gpus, duration) in enumerate(rows):
        submit += gap
        trace.append(_job(i, submit, gpus, duration))
    if len(trace) < n:
        return
    try:
        found = pick.pick(trace, n, 32)
    except workload.WorkloadError:
        for i in range(len(trace) - n + 1):     # every window arrives at once once scaled
            scaled, _ = workload.scale_spread(trace[i:i + n])
            assert scaled[-1].submit_s == scaled[0].submit_s
        return
    for i in range(len(trace) - n + 1):
        scaled, _ = workload.scale_spread(trace[i:i + n])
        span = scaled[-1].submit_s - scaled[0].submit_s
        if span > 0:
            load = sum(j.gpus * j.duration_s for j in scaled) / span / 32
            assert load <= found.load + 1e-9
            if i < found.first:
                assert load < found.load          # an earlier equal window would have won


def test_default_workload_comes_from_the_repository_trace() -> None:
    assert pick.DEFAULT_TRACE == REPO / "data" / "traces" / "philly-15k" / "philly_data_training.csv"
    found = pick.load(pick.DEFAULT_TRACE, 12, 32)
    trace = read_trace(pick.DEFAULT_TRACE).jobs
    rows = trace[found.first:found.first + 12]
    assert rows[0].submit >= workload.DENSE_WINDOW_S                      # in the dense window
    assert [j.name for j in found.jobs] == [r.name for r in rows]          # consecutive rows
    assert [j.gpus for j in found.jobs] == [min(r.num_gpus, 8) for r in rows]
    # 12 jobs: the 11th shortest (nearest-rank p90) maps to 80 s, none over the cap of 160 s
    durations = sorted(j.duration_s for j in found.jobs)
    assert durations[10] == 80 and durations[-1] <= 160
    assert found.load > 1.0                  # more work than 32 GPUs can do while jobs arrive
