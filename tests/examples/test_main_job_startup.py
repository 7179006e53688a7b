"""The main job's prediction with the cluster's start-up costs (``examples/startup.py``), worked
out by hand: the trace of a run as it was submitted, and the simulated JCTs moved to what the
live run counts (``dlsubmit`` called to the trainer's ``end`` line). The probe jobs themselves
run in the live main job test (``tests/live/test_main_job_live.py``)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from main_job_helpers import EXAMPLES, load_example
from prioritizer.sim.workload import ScaledJob

replay = load_example("replay")
report = load_example("report")
startup = load_example("startup")

COSTS = startup.Startup(dispatch_s=1.0, launch_s=2.0, teardown_s=0.5, probes=3)


def _subs(tmp_path: Path) -> list:
    # submitted out of their scaled order on purpose: the trace follows the dlsubmit calls
    jobs = [ScaledJob(0, "a", 1, 0.0, 10.0, 1, 0.0, 10.0), ScaledJob(1, "b", 1, 0.0, 4.0, 1, 0.0, 4.0)]
    return [replay.Submitted(jobs[1], 8, 1000.5, tmp_path / "b.out", "b"),
            replay.Submitted(jobs[0], 7, 1000.0, tmp_path / "a.out", "a")]


def test_trace_is_the_run_as_submitted_with_the_start_up(tmp_path: Path) -> None:
    startup.write_trace(_subs(tmp_path), COSTS, tmp_path / "t.csv")
    with open(tmp_path / "t.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    # arrival: seconds after the run's first dlsubmit call + dispatch; work + launch + teardown
    assert [(r["job_id"], r["num_gpu"], float(r["submit_time"]), float(r["duration"]))
            for r in rows] == [("0", "1", 1.0, 12.5), ("1", "1", 1.5, 6.5)]


def test_prediction_on_one_gpu_by_hand(tmp_path: Path) -> None:
    """One GPU, two jobs. Live: a (10 s of work) is called at 1000, RUNNING at 1001, its
    trainer runs 1003-1013, the GPU is free at 1013.5; b (4 s), called at 1000.5, starts its
    launch at 1013.5 and its trainer runs 1015.5-1019.5. JCTs 13 and 19 s; queueing (JCT less
    the work) 3 and 15 s; makespan 1000 to 1019.5."""
    startup.write_trace(_subs(tmp_path), COSTS, tmp_path / "t.csv")
    (found,) = report.simulate(tmp_path / "t.csv", EXAMPLES / "dlprio-demo.yaml", 1, 1, tmp_path,
                               ["fifo-fit"])
    predicted = startup.shift_summary(found, COSTS)
    assert predicted["avg_jct_s"] == pytest.approx(16.0)
    assert predicted["median_jct_s"] == pytest.approx(16.0)
    assert predicted["p95_jct_s"] == pytest.approx(19.0)
    assert predicted["avg_queueing_delay_s"] == pytest.approx(9.0)
    assert predicted["makespan_s"] == pytest.approx(19.5)
    jcts = {i: v + COSTS.jct_shift_s
            for i, v in report.sim_jcts(tmp_path / "sim-jobs.csv", "fifo-fit").items()}
    assert jcts == pytest.approx({0: 13.0, 1: 19.0})


def test_no_start_up_changes_nothing(tmp_path: Path) -> None:
    summary = {"policy": "fifo-fit", "avg_jct_s": 5.0, "avg_queueing_delay_s": 1.0, "jobs": 2}
    assert startup.shift_summary(summary, startup.Startup()) == summary
    assert startup.Startup().jct_shift_s == 0.0
