"""``dlprio history check --forecasts`` on a trace whose forecasts are worked out by hand."""

from __future__ import annotations

import json

from prioritizer.cli import main


def _fifo_trace(path):
    """One GPU; jobs 0..119 of 100 s each, submitted at 0, 1, ..., 119 s; job 120 at 20,000 s.
    Under fifo job i runs from 100 i to 100 (i + 1). With one moment it falls at 10,000 s
    (half way from the first arrival at 0 to the last at 20,000): jobs 0..99 have ended (100
    samples of 100 GPU·s: the learned distribution gives every job 100 s), job 100 has just
    started, jobs 101..119 wait; job 101 + k starts at 10,100 + 100 k, as forecast in every
    draw. Waits from the moment of at least 600 s: jobs 106..119 (600..1,900 s), twelve of
    them under 30 minutes and two (1,800 and 1,900 s) above."""
    rows = ["job_id,num_gpu,submit_time,duration"]
    rows += [f"{i},1,{i},100" for i in range(120)]
    rows.append("120,1,20000,100")
    path.write_text("\n".join(rows) + "\n")


def test_exact_forecasts_on_a_fifo_queue(tmp_path, capsys):
    trace = tmp_path / "fifo.csv"
    _fifo_trace(trace)
    assert main(["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--policy", "fifo", "--moments", "1", "--draws", "5",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["forecasts"]
    assert got["jobs"] == 14 and got["forecast_jobs"] == 19
    assert got["median_rel_error"] == 0.0
    assert got["coverage_p10_p90"] == 1.0
    # naive: (jobs ahead + 1) × 100 s mean run time / 1 running job: exact here too
    assert got["naive_median_rel_error"] == 0.0
    buckets = {b["wait"]: b["jobs"] for b in got["by_wait"]}
    assert buckets == {"10-30 min": 12, "30 min-2 h": 2, "2-8 h": 0, ">8 h": 0}


def test_text_report_and_option_errors(tmp_path, capsys):
    trace = tmp_path / "fifo.csv"
    _fifo_trace(trace)
    assert main(["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--policy", "fifo", "--moments", "1"]) == 0
    out = capsys.readouterr().out
    assert ">= 10 min" in out and "19 forecasts of waiting jobs at 1 moment(s)" in out
    assert main(["history", "check", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--json"]) == 2
    assert "--json only apply with --forecasts" in capsys.readouterr().err
    assert main(["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--draws", "0"]) == 2


def test_drawn_arrivals_queue_behind_waiting_jobs_under_fifo(tmp_path, capsys):
    # --arrivals history: the 120 jobs submitted in the 6 h before the moment (0..119 s)
    # give the rate; under fifo every drawn arrival comes after the jobs already waiting,
    # so jobs 101..119 start as without arrivals: still exact
    trace = tmp_path / "fifo.csv"
    _fifo_trace(trace)
    assert main(["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--policy", "fifo", "--moments", "1", "--draws", "5",
                 "--arrivals", "history", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["forecasts"]
    assert got["arrivals"] == "history" and got["draws"] == 5
    assert got["jobs"] == 14 and got["median_rel_error"] == 0.0
    assert got["coverage_p10_p90"] == 1.0
    assert main(["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--arrivals", "history",
                 "--arrival-window-s", "0"]) == 2
    assert "--arrival-window-s" in capsys.readouterr().err
