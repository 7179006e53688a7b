"""Tests of prioritizer/sim/workload.py: the one-time-factor map's properties, the sample of the
Philly excerpt (checked against the CSV rows themselves), the shipped sample file, and the scaled
trace written for ``dlprio simulate``."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prioritizer.sim import workload
from prioritizer.sim.traces import TraceJob, read_trace

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "examples" / "data" / "philly-sample.csv"
FULL = REPO / "data" / "traces" / "philly-15k" / "philly_data_training.csv"     # in the repository


def job(i: int, submit: float, gpus: int, duration: float) -> TraceJob:
    return TraceJob(i, f"j{i}", i + 2, submit, gpus, duration)


# ------------------------------------------------------------------ the map
# (hand-worked cases of one time factor: tests/examples/test_main_job_spread.py)


@given(st.lists(st.tuples(st.floats(0, 1e6), st.integers(1, 64), st.floats(1, 1e7)),
                min_size=1, max_size=40))
def test_scale_spread_keeps_order_ranges_and_ratios(rows: list[tuple[float, int, float]]) -> None:
    submits = sorted(r[0] for r in rows)
    jobs = [job(i, s, g, d) for i, (s, (_, g, d)) in enumerate(zip(submits, rows))]
    out, k = workload.scale_spread(jobs)
    cap = workload.SPREAD_CAP_FACTOR * workload.spread_p90_s(len(jobs))
    assert k >= 1
    assert all(1 <= j.gpus <= 8 and workload.SPREAD_FLOOR_S <= j.duration_s <= cap for j in out)
    assert all(a.submit_s <= b.submit_s for a, b in zip(out, out[1:]))
    for a, b in zip(jobs, jobs[1:]):
        sa, sb = out[a.job_id], out[b.job_id]
        if a.duration <= b.duration:
            assert sa.duration_s <= sb.duration_s
        assert sb.submit_s - sa.submit_s == pytest.approx((b.submit - a.submit) / k, abs=0.1)
    for j, s in zip(jobs, out):   # between the floor and the cap: the trace's duration / k
        if workload.SPREAD_FLOOR_S < s.duration_s < cap:
            assert abs(s.duration_s - j.duration / k) <= 0.5


# ------------------------------------------------------------------ the Philly sample
def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _from_1660(path: Path, n: int) -> list[TraceJob]:
    return workload.sample(read_trace(path, since=4_172_631).jobs, n)


def test_the_short_sample_is_the_rows_from_u_id_1660() -> None:
    rows = csv_rows(SAMPLE)
    start = next(i for i, r in enumerate(rows) if r["u_id"] == "1660")
    expected = rows[start:start + 6]
    out = _from_1660(SAMPLE, 6)
    assert [j.name for j in out] == [r["u_id"] for r in expected]
    assert [j.num_gpus for j in out] == [int(r["gpu_num"]) for r in expected]
    assert [j.duration for j in out] == [float(r["run_time"]) for r in expected]
    # the first six jobs alone ask for more than the 32 GPUs
    assert sum(min(j.num_gpus, 8) for j in out) == 1 + 1 + 8 + 8 + 8 + 8 == 34


@pytest.mark.parametrize("n", [1, 6, 24, 200])
def test_shipped_sample_gives_the_same_jobs_as_the_full_excerpt(n: int) -> None:
    assert ([(j.name, j.submit, j.num_gpus, j.duration) for j in _from_1660(SAMPLE, n)]
            == [(j.name, j.submit, j.num_gpus, j.duration) for j in _from_1660(FULL, n)])


def test_too_many_jobs_names_the_fix() -> None:
    with pytest.raises(workload.WorkloadError, match=r"--jobs 201: .* only 200"):
        _from_1660(SAMPLE, 201)


def test_zero_jobs_is_refused() -> None:
    with pytest.raises(workload.WorkloadError, match="at least 1"):
        _from_1660(SAMPLE, 0)


def test_scaled_trace_round_trips_through_the_simulator_reader(tmp_path: Path) -> None:
    jobs, _ = workload.scale_spread(_from_1660(SAMPLE, 24))
    path = tmp_path / "scaled.csv"
    workload.write_tiresias_csv(jobs, path)
    trace = read_trace(path)
    assert trace.format == "tiresias" and trace.skipped_jobs == 0
    assert [(t.name, t.num_gpus, t.submit, t.duration) for t in trace.jobs] == [
        (str(j.index), j.gpus, j.submit_s, j.duration_s) for j in jobs]
