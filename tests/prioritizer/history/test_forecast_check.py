"""``dlprio history check --forecasts`` on a trace whose forecasts are worked out by hand."""

from __future__ import annotations

import json

import pytest

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
    # one moment: no earlier forecast has an outcome, so every band is the draws' raw one
    assert got["calibrated"] == 0
    assert (got["raw_median_rel_error"], got["raw_coverage_p10_p90"]) == (0.0, 1.0)
    assert (got["before_p10"], got["after_p90"]) == (0.0, 0.0)
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
    assert "0 of the 14 jobs >= 10 min have a band calibrated" in out
    assert main(["history", "check", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--json"]) == 2
    assert capsys.readouterr().err == ("dlprio: --json applies only with --forecasts; add "
                                       "--forecasts or drop --json\n")
    assert main(["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--draws", "0"]) == 2


@pytest.mark.parametrize(("args", "line"), [
    pytest.param(["--moments", "3", "--draws", "5", "--arrivals", "none",
                  "--arrival-window-s", "60"],
                 "--moments, --draws, --arrivals, --arrival-window-s apply only with "
                 "--forecasts; add --forecasts or drop them", id="forecast-options-alone"),
    pytest.param(["--forecasts", "--baseline", "fifo"], "--baseline applies only without "
                 "--forecasts (the JCT check); drop --baseline", id="baseline-with-forecasts"),
    pytest.param(["--forecasts", "--window-jobs", "5", "--summary-only", "--ledger", "l.sqlite",
                  "--start-latency", "0", "--dispatch-latency", "0"],
                 "--start-latency, --dispatch-latency, --ledger, --window-jobs, --summary-only "
                 "apply only without --forecasts (the JCT check); drop them",
                 id="check-options-with-forecasts"),
    pytest.param(["--forecasts", "--arrival-window-s", "60"], "--arrival-window-s applies only "
                 "with --arrivals history; add --arrivals history or drop --arrival-window-s",
                 id="window-without-history-arrivals"),
    pytest.param(["--forecasts", "--arrivals", "none", "--arrival-window-s", "60"],
                 "--arrival-window-s applies only with --arrivals history; add --arrivals "
                 "history or drop --arrival-window-s", id="window-with-no-arrivals"),
])
def test_an_option_of_the_other_check_is_refused(tmp_path, capsys, args, line):
    """Each of the two checks refuses the options only the other one reads, given even at
    their defaults, rather than running without them: one line naming them and the fix."""
    trace = tmp_path / "fifo.csv"
    _fifo_trace(trace)
    assert main(["history", "check", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", *args]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"dlprio: {line}\n")


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


def test_bands_are_calibrated_only_with_earlier_moments_outcomes(tmp_path, capsys, monkeypatch):
    """Two bursts of the fifo queue above: jobs 0..119 at 0..119 s and 200..319 at
    20,000..20,119 s, one job at 40,000 s. Two moments, 10,000 and 30,000 s: at each, 19 jobs
    wait (101..119, 301..319), forecast exactly; 14 of each wait at least 10 minutes. At the
    first moment no outcome is known (raw bands); at the second the 19 of the first, all
    started by 11,900 s, are known, each of residual ln((w + 60) / (w + 60)) = 0: with at
    least 5 needed, the 14 bands are calibrated to the exact start."""
    import functools

    from prioritizer.forecast.calibrate import calibration
    from prioritizer.history import forecast_check

    monkeypatch.setattr(forecast_check, "calibration",
                        functools.partial(calibration, min_known=5))
    rows = ["job_id,num_gpu,submit_time,duration"]
    rows += [f"{i},1,{i},100" for i in range(120)]
    rows += [f"{200 + i},1,{20000 + i},100" for i in range(120)]
    rows.append("400,1,40000,100")
    trace = tmp_path / "bursts.csv"
    trace.write_text("\n".join(rows) + "\n")
    assert main(["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--policy", "fifo", "--moments", "2", "--draws", "3",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["forecasts"]
    assert (got["forecast_jobs"], got["jobs"], got["calibrated"]) == (38, 28, 14)
    assert got["coverage_p10_p90"] == 1.0 and got["median_rel_error"] == 0.0


def test_a_job_joins_the_residuals_once_per_record_gap_as_in_the_daemon(tmp_path, monkeypatch):
    """One GPU, fifo: jobs 0..29 of 100 s submitted at 0..29 s (job j runs from 100 j), job
    30 at 3,000 s. Six moments 500 s apart, 250 ... 2,750 s; at moment m jobs j with 100 j > m
    wait. A job's forecast is remembered unless one of the same wait is less than 900 s old:
    at 250 jobs 3..29 (27), at 750 none (250 is 500 s before), at 1,250 jobs 13..29 (17), at
    1,750 none, at 2,250 jobs 23..29 (7): the last moment calibrates on 51 remembered
    forecasts, not the 85 made before it; job 29 on three of them."""
    from prioritizer.forecast.calibrate import calibration
    from prioritizer.history import forecast_check

    seen: list[list] = []

    def spy(past, now, **kw):
        seen.append(list(past))
        return calibration(past, now, **kw)

    monkeypatch.setattr(forecast_check, "calibration", spy)
    rows = ["job_id,num_gpu,submit_time,duration"]
    rows += [f"{i},1,{i},100" for i in range(30)]
    rows.append("30,1,3000,100")
    trace = tmp_path / "close.csv"
    trace.write_text("\n".join(rows) + "\n")
    assert main(["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--policy", "fifo", "--moments", "6", "--draws", "2",
                 "--json"]) == 0
    last = seen[-1]
    assert len(last) == 51
    assert sorted(p.made_at for p in last if p.job_id == "29") == [250.0, 1250.0, 2250.0]


def test_naive_estimate_before_any_job_ended_takes_run_time_from_the_distribution(
        tmp_path, capsys, monkeypatch):
    """One node of 2 GPUs, fifo: jobs 0..9 of 2 GPUs and 100 s submitted at 0..9 s, job 10
    at 40 s; the one moment falls at 20 s, when no job has ended. The distribution (every job
    200 GPU·s) gives a mean run time of 200 / 2 GPUs = 100 s: the naive wait of job i
    (i - 1 jobs ahead, one running) is 100 i s against an actual 100 i - 20. Waits of at least
    600 s: jobs 7, 8, 9 (680, 780, 880 s), naive errors 20/680, 20/780, 20/880, median
    20/780; the forecast, drawing 200 GPU·s (100 s) for every job, is exact."""
    from prioritizer.history import forecast_check
    from prioritizer.policy.gittins import GittinsDistribution

    monkeypatch.setattr(forecast_check, "load_distribution",
                        lambda: GittinsDistribution([200.0]))
    rows = ["job_id,num_gpu,submit_time,duration"]
    rows += [f"{i},2,{i},100" for i in range(10)]
    rows.append("10,2,40,100")
    trace = tmp_path / "early.csv"
    trace.write_text("\n".join(rows) + "\n")
    assert main(["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "2", "--policy", "fifo", "--moments", "1", "--draws", "2",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["forecasts"]
    assert got["jobs"] == 3 and got["median_rel_error"] == 0.0
    assert abs(got["naive_median_rel_error"] - 20 / 780) < 1e-12


def test_run_times_are_learned_from_as_few_ended_jobs_as_the_daemon_config_says(tmp_path,
                                                                                 capsys):
    """One GPU, fifo: jobs 0..9 of 1,000 s submitted at 0..9 s, job 10 at 10,000 s; the one
    moment falls at 5,000 s, when jobs 0..4 have ended (five samples of 1,000 GPU·s) and job 5
    has just started; jobs 6..9 wait 1,000..4,000 s. With the config's
    ``gittins_min_samples: 3`` the forecast learns from those five and is exact; without it
    (100 needed) it draws from the packaged distribution, and misses."""
    rows = ["job_id,num_gpu,submit_time,duration"]
    rows += [f"{i},1,{i},1000" for i in range(10)]
    rows.append("10,1,10000,1000")
    trace = tmp_path / "few.csv"
    trace.write_text("\n".join(rows) + "\n")
    config = tmp_path / "dlprio.yaml"
    config.write_text("gittins_min_samples: 3\npolicy:\n  policy: fifo\n")
    base = ["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
            "--gpus-per-node", "1", "--moments", "1", "--draws", "5", "--json"]
    assert main([*base, "--config", str(config)]) == 0
    got = json.loads(capsys.readouterr().out)["forecasts"]
    assert got["jobs"] == 4 and got["median_rel_error"] == 0.0
    assert got["coverage_p10_p90"] == 1.0
    assert main([*base, "--policy", "fifo"]) == 0
    assert json.loads(capsys.readouterr().out)["forecasts"]["median_rel_error"] > 0.5


def test_a_trace_with_gpu_sharing_is_refused_not_replayed_as_whole_gpus(tmp_path, capsys):
    # the forecast's replay knows no shard job and no opportunistic class: each such job
    # would be forecast as a whole-GPU production job, so the check names them instead
    trace = tmp_path / "shared.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration,opportunistic\n"
                     "a,1,0,600,0\nb,0.5,10,600,0\nc,1,20,600,1\nd,1,30,600,0\n")
    assert main(["history", "check", "--forecasts", "--trace", str(trace), "--nodes", "1",
                 "--gpus-per-node", "1", "--moments", "2", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"dlprio: {trace}: 2 shard or opportunistic jobs: the forecast replays "
                   "whole-GPU production jobs only; check a trace without them\n")
