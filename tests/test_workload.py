"""Tests of prioritizer/sim/workload.py: the log-scale maps (values computed by hand), the sample
of the Philly excerpt (checked against the CSV rows themselves), the shipped sample file, and the
scaled trace written for ``dlprio simulate``."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prioritizer.sim import workload
from prioritizer.sim.traces import TraceJob, read_trace

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "examples" / "data" / "philly-sample.csv"
FULL = REPO / "data" / "traces" / "philly-15k" / "philly_data_training.csv"     # in the repository


def job(i: int, submit: float, gpus: int, duration: float) -> TraceJob:
    return TraceJob(i, f"j{i}", i + 2, submit, gpus, duration)


# ------------------------------------------------------------------ the maps
def test_log_scale_by_hand() -> None:
    # 1, 10, 100 sit at 0, 1/2, 1 of the log span; 20 * 12 ** 0.5 = sqrt(20 * 240) = 69.282...
    out = workload.log_scale([1.0, 10.0, 100.0], 20.0, 240.0)
    assert out[0] == pytest.approx(20.0)
    assert out[1] == pytest.approx(69.2820323)
    assert out[2] == pytest.approx(240.0)


def test_log_scale_equal_values_go_to_the_geometric_middle() -> None:
    assert workload.log_scale([5.0, 5.0], 20.0, 80.0) == pytest.approx([40.0, 40.0])


@pytest.mark.parametrize(("values", "lo", "hi"), [([0.0, 1.0], 20, 240), ([1.0, -2.0], 20, 240),
                                                  ([1.0], 0, 240), ([1.0], 50, 20)],
                         ids=["zero", "negative", "zero-lo", "reversed"])
def test_log_scale_rejects(values: list[float], lo: float, hi: float) -> None:
    with pytest.raises(ValueError):
        workload.log_scale(values, lo, hi)


def test_log1p_scale_by_hand() -> None:
    # ln(1 + (e-1)) = 1 and ln(1 + (e^2-1)) = 2: half way and all the way.
    out = workload.log1p_scale([0.0, math.e - 1, math.e ** 2 - 1], 0.0, 15.0)
    assert out == pytest.approx([0.0, 7.5, 15.0])
    assert workload.log1p_scale([0.0, 0.0], 1.0, 15.0) == [1.0, 1.0]


def test_scale_caps_gpus_and_maps_times_by_hand() -> None:
    jobs = [job(0, 100.0, 1, 10.0), job(1, 100.0, 16, 1000.0), job(2, 199.0, 4, 100.0)]
    out = workload.scale(jobs)
    assert [j.gpus for j in out] == [1, 8, 4]
    assert [j.trace_gpus for j in out] == [1, 16, 4]
    assert [j.duration_s for j in out] == [20.0, 240.0, 69.0]
    # gaps 0, 0, 99: ln(1 + 99) is the largest, so it becomes 15 s.
    assert [j.submit_s for j in out] == [0.0, 0.0, 15.0]
    assert [j.trace_gap_s for j in out] == [0.0, 0.0, 99.0]
    assert [j.index for j in out] == [0, 1, 2]


@given(st.lists(st.tuples(st.floats(0, 1e6), st.integers(1, 64), st.floats(1, 1e7)),
                min_size=1, max_size=40))
def test_scale_keeps_order_and_ranges(rows: list[tuple[float, int, float]]) -> None:
    submits = sorted(r[0] for r in rows)
    jobs = [job(i, s, g, d) for i, (s, (_, g, d)) in enumerate(zip(submits, rows))]
    out = workload.scale(jobs)
    assert all(1 <= j.gpus <= 8 and 20 <= j.duration_s <= 240 for j in out)
    assert all(a.submit_s <= b.submit_s for a, b in zip(out, out[1:]))
    assert out[-1].submit_s <= 15 * (len(out) - 1) + 0.05
    for a, b in zip(jobs, jobs[1:]):
        sa, sb = out[a.job_id], out[b.job_id]
        if a.duration < b.duration:
            assert sa.duration_s <= sb.duration_s
        if a.duration == b.duration:
            assert sa.duration_s == sb.duration_s


# ------------------------------------------------------------------ the Philly sample
def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_default_short_sample_is_the_rows_from_u_id_1660() -> None:
    rows = csv_rows(SAMPLE)
    start = next(i for i, r in enumerate(rows) if r["u_id"] == "1660")
    expected = rows[start:start + 6]
    out = workload.load(SAMPLE, 6)
    assert [j.name for j in out] == [r["u_id"] for r in expected]
    assert [j.trace_gpus for j in out] == [int(r["gpu_num"]) for r in expected]
    assert [j.trace_duration_s for j in out] == [float(r["run_time"]) for r in expected]
    assert [j.trace_gap_s for j in out[1:]] == [float(r["interval"]) for r in expected[1:]]
    # The claim in the docs: the first six jobs alone ask for more than the 32 GPUs.
    assert sum(j.gpus for j in out) == 1 + 1 + 8 + 8 + 8 + 8 == 34


def test_default_start_is_in_the_dense_window() -> None:
    assert workload.DEFAULT_START_S >= workload.DENSE_WINDOW_S == 4_147_200


@pytest.mark.parametrize("n", [1, 6, 24, 200])
def test_shipped_sample_gives_the_same_jobs_as_the_full_excerpt(n: int) -> None:
    assert workload.load(SAMPLE, n) == workload.load(FULL, n)


def test_too_many_jobs_names_the_file_and_the_fix() -> None:
    with pytest.raises(workload.WorkloadError, match=r"philly-sample.csv: --jobs 201: .* only 200"):
        workload.load(SAMPLE, 201)


def test_zero_jobs_is_refused() -> None:
    with pytest.raises(workload.WorkloadError, match="at least 1"):
        workload.load(SAMPLE, 0)


def test_custom_ranges() -> None:
    out = workload.load(SAMPLE, 6, durations_s=(10.0, 90.0), gaps_s=(0.0, 5.0))
    assert min(j.duration_s for j in out) == 10.0 and max(j.duration_s for j in out) == 90.0
    # the largest of the five gaps (157 s before u_id 1662) becomes exactly 5 s
    assert out[2].submit_s - out[1].submit_s == pytest.approx(5.0, abs=0.1)


def test_scaled_trace_round_trips_through_the_simulator_reader(tmp_path: Path) -> None:
    jobs = workload.load(SAMPLE, 24)
    path = tmp_path / "scaled.csv"
    workload.write_tiresias_csv(jobs, path)
    trace = read_trace(path)
    assert trace.format == "tiresias" and trace.skipped_jobs == 0
    assert [(t.name, t.num_gpus, t.submit, t.duration) for t in trace.jobs] == [
        (str(j.index), j.gpus, j.submit_s, j.duration_s) for j in jobs]
