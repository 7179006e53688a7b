"""``dlprio tune --walk-forward``: re-tune points and periods worked out by hand, the tuner's
replays limited to the history before each point, the JSON of a small trace (the settings
switched at the point) computed by hand, and the bad-input paths (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import prioritizer.tune.cli as tune_cli
from prioritizer.cli import main
from prioritizer.sim.traces import read_trace
from prioritizer.tune.rank import window
from prioritizer.tune.walk import (DAY_S, MAX_RETUNE_POINTS, TooManyPoints, period_of,
                                   retune_points, settings_per_window)


@pytest.mark.parametrize(("submits", "period", "points"), [
    ([0.0, 10.0, 1.5 * DAY_S, 2 * DAY_S], DAY_S, [DAY_S, 2 * DAY_S]),   # last on a point
    ([0.0, 1.5 * DAY_S], DAY_S, [DAY_S]),
    ([0.0, 1.5 * DAY_S], 2 * DAY_S, []),                               # none inside
    ([0.0, 100.0, 250.0], 100.0, [100.0, 200.0]),
])
def test_retune_points(submits: list[float], period: float, points: list[float]) -> None:
    assert retune_points(submits, period) == points


def test_retune_points_refuses_a_period_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        retune_points([0.0], 0.0)


def test_retune_points_are_counted_before_they_are_made() -> None:
    """A period of 1e-9 days over a year of submissions would be 3.6·10^11 points (the list
    alone is terabytes): refused with the count and the shortest period within the cap."""
    with pytest.raises(TooManyPoints):   # a small case first
        retune_points([0.0, 1001.0], 1.0)
    assert len(retune_points([0.0, 1000.0], 1.0)) == MAX_RETUNE_POINTS
    year = 365 * DAY_S
    with pytest.raises(TooManyPoints) as exc:
        retune_points([0.0, year], 1e-9 * DAY_S)
    assert exc.value.count == 365_000_000_000
    assert exc.value.least_period_s == year / MAX_RETUNE_POINTS
    assert len(retune_points([0.0, year], exc.value.least_period_s)) == MAX_RETUNE_POINTS


def test_walk_forward_with_too_many_points_is_refused(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    trace = tmp_path / "wf.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\na,1,0,5\nb,1,100,5\nc,2,300,5\n")
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "4",
               "--workers", "1", "--grid", "knob=4,16", "--walk-forward", "1e-9"])
    assert (rc, capsys.readouterr()) == (2, ("", (
        "dlprio: --walk-forward 1e-09: the trace spans 0.003472 day(s) of submissions (300 s), "
        "which this period cuts at 3,472,222 re-tune points, more than 1,000 (each ranks the "
        "whole grid); give at least 3.473e-06 days\n")))


def test_period_of_and_the_settings_per_window() -> None:
    points = [100.0, 200.0]
    # a job submitted exactly at a point belongs to the period it opens
    assert [period_of(t, points) for t in (0.0, 99.9, 100.0, 199.0, 200.0, 900.0)] == \
        [0, 0, 1, 1, 2, 2]
    windows = [{"first_submit_s": 0.0}, {"first_submit_s": 150.0}, {"first_submit_s": 200.0}]
    assert settings_per_window(windows, points, ["cur", "x", "y"]) == ["cur", "x", "y"]


# Four 1-GPU jobs on one GPU, no modeled cost. Walk-forward every 0.01 day (864 s): the one
# re-tune point is 864 s (the last submission is 910 s). History before it: j0 and j1 only.
TRACE = ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
         "j0,1,0,1,m,1000,0\n"
         "j1,1,10,1,m,100,0\n"
         "j2,1,900,1,m,1000,0\n"
         "j3,1,910,1,m,100,0\n")
CONFIG = ("policy:\n  policy: fifo-fit\n  checkpoint_overhead_s: 0\n  requeue_delay_s: 0\n"
          "  decision_interval_s: 0\n  min_run_s: 0\n")


def _files(tmp_path: Path) -> tuple[Path, Path]:
    trace, config = tmp_path / "t.csv", tmp_path / "dlprio.yaml"
    trace.write_text(TRACE)
    config.write_text(CONFIG)
    return trace, config


def test_walk_forward_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    trace, config = _files(tmp_path)
    seen = []
    real = tune_cli._execute

    def recording(args, tasks):   # the tuner's replays, as the executors get them
        seen.extend(tasks)
        return real(args, tasks)

    monkeypatch.setattr(tune_cli, "_execute", recording)
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1",
               "--config", str(config), "--grid", "policy=fifo-fit,srtf",
               "--walk-forward", "0.01", "--window-jobs", "2", "--workers", "1", "--json"])
    assert rc == 0
    runs = {r["policy"]: r for r in json.loads(capsys.readouterr().out)}
    # the tuner replayed the jobs submitted before 864 s only: two grid points + current,
    # then the bars' baseline (fifo-fit) and oracle (srtf), each job's JCT kept
    assert len(seen) == 5 and {(t.lo, t.hi) for t in seen} == {(None, 864.0)}
    assert [t.config["policy"] for t in seen[3:]] == ["fifo-fit", "srtf"]
    assert seen[4].config["requeue_guard"] == seen[4].config["wait_guard"] == 0.0
    assert all(t.per_job for t in seen)
    for task in seen:
        assert [j.name for j in window(read_trace(task.trace), task.lo, task.hi).jobs] == \
            ["j0", "j1"]
    # on that history: fifo-fit JCTs 1000, 1090 (avg 1045); srtf runs j1 first at 10 s
    # (100 s) and j0 ends at 1100 s (avg 600): srtf is in force from 864 s on. Bars: one
    # window of 2 jobs; the oracle's worst window is 600 / 1045 < 1, so the bar is 1.0, which
    # all clear; no job is hurt (j0 1100 s is not > 2 x 1000 s)
    periods = runs["walk-forward"]["periods"]
    assert [(p["from_s"], p["history_jobs"], p["settings"]) for p in periods] == \
        [(0.0, 0, "(current config)"), (864.0, 2, "policy=srtf")]
    assert periods[1]["bars"] == {"max_hurt_share": 0.0005, "max_worst_window": 1.0}
    assert periods[1]["fallback"] is None and periods[0]["bars"] is None
    assert periods[1]["history"]["worst_window_ratio"] == pytest.approx(600 / 1045)
    assert periods[1]["history"]["hurt_jobs_share"] == 0.0
    # fifo-fit on the whole trace: 0-1000, 1000-1100, 1100-2100, 2100-2200 ->
    # JCTs 1000, 1090, 1200, 1290. The walk: fifo-fit until 864 s (j0 running since 0 with
    # 136 s left, j1 waiting), then srtf for every job: j1 (100 s left) preempts j0 at once
    # (no costs) and runs 864-964; j3 (submitted 910, 100 s) goes ahead of j0 (136 s left)
    # 964-1064; j0 1064-1200; j2 1200-2200 -> JCTs 1200, 954, 1300, 154.
    walk = runs["walk-forward"]
    assert walk["avg_jct_s"] == pytest.approx((1200 + 954 + 1300 + 154) / 4)
    assert walk["avg_jct_ratio"] == pytest.approx(902 / 1145)
    assert walk["preemptions"] == 1
    assert [(w["first_submit_s"], w["jobs"], w["baseline_avg_jct_s"], w["avg_jct_s"],
             w["settings"]) for w in walk["windows"]] == [
        (0.0, 2, 1045.0, 1077.0, "(current config)"), (900.0, 2, 1245.0, 727.0, "policy=srtf")]
    # j0's window pays for the switch: 1077 / 1045; no job is hurt (j0 1200 s is not > 2 x
    # 1000 s)
    assert walk["worst_window_ratio"] == pytest.approx(1077 / 1045)
    assert walk["hurt_jobs_share"] == 0.0
    assert walk["baseline"] == "fifo-fit"
    fixed = runs["fixed"]      # the current config (fifo-fit) held fixed: the baseline's JCTs
    assert fixed["avg_jct_s"] == 1145.0 and fixed["avg_jct_ratio"] == 1.0


@pytest.mark.parametrize(("extra", "message"), [
    (["--walk-forward", "1"], "no re-tune point falls inside it"),
    (["--walk-forward", "0"], "--walk-forward: "),
    (["--walk-forward", "0.01", "--validate-from", "100"], "drop --validate-from"),
    (["--json"], "dlprio: --json applies only with --walk-forward DAYS; add it or drop --json\n"),
    (["--walk-forward", "0.01", "--baseline", "nope"], "--baseline: unknown policy 'nope'"),
    (["--walk-forward", "0.01", "--max-hurt-share", "2"], "--max-hurt-share: "),
    (["--walk-forward", "0.01", "--max-worst-window", "worst"], "(or off/oracle)"),
    # a ratio of 0 no window can clear (as auto_tune.max_worst_window: a ratio > 0)
    (["--walk-forward", "0.01", "--max-worst-window", "0"], "dlprio: --max-worst-window: "
     "expected a number > 0 and <= 1e+06, got 0 (or off/oracle)\n"),
    (["--walk-forward", "0.01", "--max-hurt-share", "1.5"], "dlprio: --max-hurt-share: "
     "expected a number >= 0 and <= 1, got 1.5 (or off)\n"),
    (["--max-hurt-share", "0.01"], "dlprio: --max-hurt-share applies only with --walk-forward "
     "DAYS; add it or drop --max-hurt-share\n"),
    (["--window-jobs", "5", "--max-worst-window", "off"], "dlprio: --window-jobs, "
     "--max-worst-window apply only with --walk-forward DAYS; add it or drop them\n"),
])
def test_walk_forward_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture,
                                extra: list[str], message: str) -> None:
    trace, _ = _files(tmp_path)
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1",
               "--grid", "knob=4", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_trace_shorter_than_the_period_names_the_most_days(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """TRACE's last submission is 910 s = 0.010532 day: --walk-forward 0.01053 or less would
    place a point inside it."""
    trace, _ = _files(tmp_path)
    assert main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1",
                 "--grid", "knob=4", "--walk-forward", "1"]) == 2
    assert capsys.readouterr().err == (
        "dlprio: --walk-forward 1: the trace spans 0.01 day(s) of submissions (910 s), so no "
        "re-tune point falls inside it; give at most 0.01053 days\n")


@pytest.mark.parametrize("rows", ["j0,1,0,1,m,100,0\n", "j0,1,5,1,m,100,0\nj1,1,5,1,m,50,0\n"],
                         ids=["one-job", "one-time"])
def test_a_trace_submitted_at_one_time_has_no_period_to_give(
        tmp_path: Path, capsys: pytest.CaptureFixture, rows: str) -> None:
    """No number of days puts a point inside a trace whose jobs all came at one time."""
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE.splitlines(keepends=True)[0] + rows)
    assert main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1",
                 "--grid", "knob=4", "--walk-forward", "0.5"]) == 2
    assert capsys.readouterr().err == (
        "dlprio: --walk-forward 0.5: every job of the trace is submitted at one time, so no "
        "re-tune point can fall inside it; walk-forward needs submissions spread over time\n")


def test_each_point_gets_its_own_work_directory(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Every 0.005 day (432 s): points 432 and 864 s; each point's replays (one Slurm job
    array with --executor slurm) get ``point-K`` under --workdir and only the jobs before it."""
    trace, config = _files(tmp_path)
    calls = []

    def fake(args, tasks):
        calls.append((args.workdir, {t.hi for t in tasks}, len(tasks)))
        return [{"jobs": 1.0, "avg_jct_s": 1.0, "p95_jct_s": 1.0, "max_wait_s": 0.0,
                 "jobs_s": [[0.0, 1.0], [10.0, 1.0]]}] * len(tasks)

    monkeypatch.setattr(tune_cli, "_execute", fake)
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1",
               "--config", str(config), "--grid", "knob=2,4", "--walk-forward", "0.005",
               "--executor", "slurm", "--workdir", str(tmp_path / "w"), "--json"])
    assert rc == 0
    # two grid points, current, and the bars' baseline and oracle
    assert calls == [(str(tmp_path / "w" / "point-1"), {432.0}, 5),
                     (str(tmp_path / "w" / "point-2"), {864.0}, 5)]
    periods = json.loads(capsys.readouterr().out)[2]["periods"]
    # all tie at 1.0 s: the ranking breaks ties by p95, then label, and "(" sorts before "k"
    assert [(p["history_jobs"], p["settings"]) for p in periods] == [
        (0, "(current config)"), (2, "(current config)"), (2, "(current config)")]


# One GPU, no modeled cost. j0 (3,700 s) at 0 s, then forty 100-s jobs at 1, 2, ..., 40 s;
# one more job at 9,000 s so that the re-tune point 8,640 s (0.1 day) falls inside the trace.
HURT_TRACE = ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
              "j0,1,0,1,m,3700,0\n"
              + "".join(f"s{k},1,{k},1,m,100,0\n" for k in range(1, 41))
              + "late,1,9000,1,m,100,0\n")


FALLBACK = ("no setting clears the bars (hurt <= 0.05 %, worst window <= 0.500); least "
            "regret: (current config) (hurt 0.000 %, worst window 1.000)")


@pytest.mark.parametrize(("bars", "worst_bar", "chosen", "fallback"), [
    (["--max-worst-window", "off"], None, "(current config)", None),
    ([], 1.0, "(current config)", None),
    (["--max-worst-window", "0.5"], 0.5, "(current config)", FALLBACK),
    (["--max-hurt-share", "off", "--max-worst-window", "off"], None, "policy=srtf", None)])
def test_a_lower_avg_jct_with_a_hurt_job_is_dropped(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                   bars: list[str], worst_bar: float | None,
                                                   chosen: str, fallback: str | None) -> None:
    """History before 8,640 s: fifo-fit runs j0 0-3,700 s, then short k ends at 3,700 + 100k
    (JCT 3,700 + 99k): avg (3,700 + 40 × 3,700 + 99 × 820) / 41 = 232,880 / 41 s. srtf
    preempts j0 at 1 s for the shorts (short k: 1 + 100(k-1) to 1 + 100k, JCT 1 + 99k) and
    ends it at 4,001 + 3,699 = 7,700 s: avg (7,700 + 40 + 81,180) / 41 = 88,920 / 41 s, far
    lower, but j0's 7,700 s is > 2 × 3,700 s and 4,000 s (> 1 h) later: one hurt job in 41,
    above the 0.05 % bar. With the hurt bar alone srtf is dropped and fifo-fit (the current
    config, first on the label among equal figures) stays. With the default bars, the same:
    the oracle (srtf) has 88,920 / 232,880 = 0.382 on the one window of 41 jobs, below 1, so
    the worst window bar is 1.0, which fifo-fit clears. With a worst window bar of 0.5
    fifo-fit (1.0) does not clear it either: no setting clears both, and the fallback (least
    hurt, then least worst window) is the current config. By avg JCT alone: srtf."""
    trace, config = tmp_path / "t.csv", tmp_path / "dlprio.yaml"
    trace.write_text(HURT_TRACE)
    config.write_text(CONFIG)
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1",
               "--config", str(config), "--grid", "policy=fifo-fit,srtf",
               "--walk-forward", "0.1", "--workers", "1", "--json", *bars])
    assert rc == 0
    period = json.loads(capsys.readouterr().out)[2]["periods"][1]
    assert (period["history_jobs"], period["settings"]) == (41, chosen)
    assert period["fallback"] == fallback
    history = period["history"]
    if chosen == "policy=srtf":
        assert period["bars"] is None
        assert history["avg_jct_s"] == pytest.approx(88_920 / 41)
        return
    assert history["avg_jct_s"] == pytest.approx(232_880 / 41)
    assert history["hurt_jobs_share"] == 0.0 and history["worst_window_ratio"] == 1.0
    assert period["bars"]["max_hurt_share"] == 0.0005
    assert period["bars"]["max_worst_window"] == worst_bar


def test_the_table_names_the_bars_and_the_fallback(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    """The history of test_a_lower_avg_jct_with_a_hurt_job_is_dropped with a worst window bar
    of 0.5: the bars' line, the chosen setting's worst window 1.000 and hurt 0.000 % on its
    41-job history, and the fallback's line at day 0.1."""
    trace, config = tmp_path / "t.csv", tmp_path / "dlprio.yaml"
    trace.write_text(HURT_TRACE)
    config.write_text(CONFIG)
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1",
               "--config", str(config), "--grid", "policy=fifo-fit,srtf",
               "--walk-forward", "0.1", "--workers", "1", "--max-worst-window", "0.5"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[1] == ("bars on each history against fifo-fit (windows of 200 jobs): hurt <= "
                      "0.05 %, worst window <= 0.5; the lowest avg JCT among the settings that "
                      "clear them")
    assert out[4].split() == ["0.1", "41", "1.000", "0.000", "(current", "config)"]
    assert f"day 0.1: {FALLBACK}" in out
