"""How dlqueue and dlprio explain show the snapshot's start-time forecast
(``prioritizer.daemon.forecast_text``, ``submit.queue_view``): START cells, ``--json``,
the ``-j`` lines, and a stale forecast never shown as current."""

from __future__ import annotations

import dataclasses
import os

from prioritizer.daemon import forecast_text as ft
from submit import queue_view as qv
from queue_helpers import make_job, pub, snapshot

NOW = 100_000.0
#: made 60 s ago, stale after 900 s; job 102 waits (3 jobs ahead), 101 runs, 105 fits nowhere,
#: 106 starts beyond the 24 h horizon in the median draw
FORECAST = {
    "made_at": NOW - 60, "draws": 20, "horizon_s": 86400.0, "stale_after_s": 900.0,
    "cpu_s": 0.4,
    "jobs": {
        "101": {"start": [NOW - 600] * 3, "finish": [NOW + 1200, NOW + 3600, NOW + 7200],
                "preempt_chance": 0.25, "ahead": 0, "first_ahead": []},
        "102": {"start": [NOW + 600, NOW + 1500, NOW + 4 * 3600],
                "finish": [NOW + 3600, NOW + 5 * 3600, None],
                "preempt_chance": 0.1, "ahead": 3, "first_ahead": [107, 108, 109]},
        "105": {"start": None, "finish": None, "preempt_chance": 0.0, "ahead": 0,
                "first_ahead": []},
        "106": {"start": [NOW + 3600, None, None], "finish": [None] * 3,
                "preempt_chance": 0.0, "ahead": 40, "first_ahead": [1, 2, 3, 4, 5]},
    }}


def test_spans_as_the_column_writes_them():
    assert [ft.span(s) for s in (10, 25 * 60, 89 * 60, 3 * 3600, 47 * 3600, 3 * 86400)] == \
        ["1m", "25m", "89m", "3h", "47h", "3d"]
    assert ft.when(None, NOW, 6 * 3600) == ">6h"
    assert ft.when(NOW + 30, NOW, 86400) == "now"


def test_the_age_of_a_forecast_made_seconds_ago_is_in_seconds():
    assert [ft.age(s) for s in (-2, 0, 7.9, 59.9, 60, 25 * 60)] == ["0s", "0s", "7s", "59s", "1m",
                                                                   "25m"]
    fresh = {**FORECAST, "made_at": NOW - 7}
    assert ft.detail_lines(fresh, 102, NOW, running=False)[0] == (
        "forecast: made at 03:46:33 UTC (7s ago) from 20 duration draws; no job submitted "
        "later is counted")
    stale = {**FORECAST, "made_at": NOW - 30, "stale_after_s": 17.0}
    assert ft.detail_lines(stale, 102, NOW, running=False) == [
        "forecast: STALE (made at 03:46:10 UTC, 30s ago; the daemon is stopped or late): "
        "not shown"]


def test_a_band_whose_ends_read_the_same_is_shown_once():
    # start p10 = p50 = p90 = NOW - 60 (made 1 min ago, due then): "now", not "now to now";
    # finish NOW + 1500, + 1510, + 1520 s: all "~25m"
    due = {**FORECAST, "jobs": {"7": {**FORECAST["jobs"]["102"],
                                      "start": [NOW - 60] * 3,
                                      "finish": [NOW + 1500, NOW + 1510, NOW + 1520]}}}
    assert ft.detail_lines(due, 7, NOW, running=False)[1:3] == ["  start: now",
                                                                 "  finish: ~25m"]


def test_start_cells_of_waiting_jobs_only():
    assert ft.start_cell(FORECAST, 102, NOW, waiting=True) == "~25m"
    assert ft.start_cell(FORECAST, 101, NOW, waiting=False) == ""
    assert ft.start_cell(FORECAST, 105, NOW, waiting=True) == "never"
    assert ft.start_cell(FORECAST, 106, NOW, waiting=True) == ">24h"
    assert ft.start_cell(FORECAST, 999, NOW, waiting=True) == ""      # newer than the forecast


def test_a_stale_forecast_is_not_shown():
    later = NOW - 60 + 901
    assert not ft.is_fresh(FORECAST, later)
    assert ft.start_cell(FORECAST, 102, later, waiting=True) == ""
    assert ft.json_field(FORECAST, 102, later) is None
    lines = ft.detail_lines(FORECAST, 102, later, running=False)
    assert lines == ["forecast: STALE (made at 03:45:40 UTC, 15m ago; the daemon is stopped "
                     "or late): not shown"]
    assert ft.detail_lines(None, 102, NOW, running=False, daemon_known=False) == [
        "forecast: none (no daemon snapshot)"]


def test_detail_lines_of_a_waiting_and_a_running_job():
    assert ft.detail_lines(FORECAST, 102, NOW, running=False) == [
        "forecast: made at 03:45:40 UTC (1m ago) from 20 duration draws; no job submitted "
        "later is counted",
        "  start: ~10m to ~4h (median ~25m)",
        "  finish: ~60m to >24h (median ~5h)",
        "  jobs ahead in the start order: 3 (107, 108, 109)",
        "  preempted before it ends: 10 % of draws"]
    assert ft.detail_lines(FORECAST, 101, NOW, running=True)[1:] == [
        "  finish: ~20m to ~2h (median ~60m)",
        "  preempted before it ends: 25 % of draws"]
    assert ft.detail_lines(FORECAST, 106, NOW, running=False)[3] == \
        "  jobs ahead in the start order: 40 (1, 2, 3, 4, 5, ...)"


def test_dlqueue_rows_carry_the_start_column_and_json():
    jobs = [make_job(101, state="RUNNING", reason="None", nodes="n1", node_list=("n1",),
                     submit_time=int(NOW) - 900, start_time=int(NOW) - 600),
            make_job(102, submit_time=int(NOW) - 300)]
    snap = dataclasses.replace(snapshot(pub(101, 0, 100, state="RUNNING"),
                                        pub(102, 0, 0, rank=0), generated_at=NOW - 10),
                               forecast=FORECAST)
    rows = qv.build_rows(jobs, snap, int(NOW))
    text = qv.render_text(rows, show_service=True, show_start=True).splitlines()
    assert text[0].split() == ["JOBID", "USER", "NAME", "STATE", "QUEUE", "ATTAINED(GPU·s)",
                               "GPUS", "NODES", "WAIT", "START", "PREEMPTS", "REASON"]
    assert text[2].split()[:10] == ["102", "alice", "job102", "PENDING", "Q0", "0", "2", "1",
                                    "5:00", "~25m"]
    got = qv.json_rows(rows)
    assert got[0]["forecast"]["finish"] == [NOW + 1200, NOW + 3600, NOW + 7200]
    assert got[1]["forecast"] == {"made_at": NOW - 60, "start": FORECAST["jobs"]["102"]["start"],
                                  "finish": FORECAST["jobs"]["102"]["finish"],
                                  "calibrated": 0, "preempt_chance": 0.1, "ahead": 3,
                                  "horizon_s": 86400.0, "sharing": None, "restart": None,
                                  "waits_for": None}


def test_the_snapshot_keeps_the_forecast_and_names_a_bad_field(tmp_path):
    from prioritizer.daemon.snapshot import SnapshotError, read_snapshot, write_snapshot
    import json

    import pytest

    path = tmp_path / "snapshot.json"
    write_snapshot(path, dataclasses.replace(snapshot(pub(102, 0, 0, rank=0)),
                                             forecast=FORECAST, cluster="c"))
    assert read_snapshot(path).forecast == json.loads(json.dumps(FORECAST))
    data = json.loads(path.read_text())
    data["forecast"]["jobs"]["102"]["start"] = [1, 2]
    path.write_text(json.dumps(data))
    with pytest.raises(SnapshotError, match=r"forecast\.jobs\.102\.start: expected "
                                            r"\[p10, p50, p90\] or null"):
        read_snapshot(path)
    data["forecast"]["jobs"]["102"]["start"] = [1, 2, 3]
    data["forecast"]["jobs"]["102"]["calibrated"] = "40"
    path.write_text(json.dumps(data))
    with pytest.raises(SnapshotError, match=r"forecast\.jobs\.102\.calibrated: expected a count"):
        read_snapshot(path)


def test_the_detail_lines_say_whether_the_start_band_is_calibrated():
    # job 102's band rests on 40 past outcomes; with 12 known and none used, the raw band
    calibrated = {**FORECAST, "known_outcomes": 40,
                  "jobs": {"102": {**FORECAST["jobs"]["102"], "calibrated": 40}}}
    assert ft.detail_lines(calibrated, 102, NOW, running=False)[1:3] == [
        "  start: ~10m to ~4h (median ~25m)",
        "    band calibrated on 40 earlier forecasts (jobs started or still waiting)"]
    raw = {**FORECAST, "known_outcomes": 12,
           "jobs": {"102": {**FORECAST["jobs"]["102"], "calibrated": 0}}}
    assert ft.detail_lines(raw, 102, NOW, running=False)[2] == (
        "    raw band of the draws (too narrow as a rule): 12 earlier forecasts' outcomes "
        "known, 30 needed to calibrate it")
    assert ft.json_field(calibrated, 102, NOW)["calibrated"] == 40
    # a calibrated p90 the past outcomes do not reach (raw p90 4 h): shown beyond the
    # horizon (24 h), and the note says why
    open_ = {**FORECAST, "known_outcomes": 40,
             "jobs": {"102": {**FORECAST["jobs"]["102"], "calibrated": 40,
                              "start": [NOW + 600, NOW + 1500, None],
                              "raw_start": [NOW + 600, NOW + 1500, NOW + 4 * 3600]}}}
    assert ft.detail_lines(open_, 102, NOW, running=False)[1:3] == [
        "  start: ~10m to >24h (median ~25m)",
        "    band calibrated on 40 earlier forecasts (jobs started or still waiting); p90 open "
        "(shown beyond the horizon): too many of those jobs still wait to place it"]


def test_explain_adds_the_forecast_of_an_active_job(tmp_path):
    from prioritizer.daemon import explain
    from prioritizer.daemon.ledger import Ledger
    from prioritizer.daemon.snapshot import write_snapshot

    led = Ledger(tmp_path / "l.sqlite")
    with led.transaction():
        led.upsert_job(102, user="alice", account="a", partition="gpu", state="PENDING",
                       gpus=2, submit_time=0, restart_count=0, now=0)
    path = tmp_path / "snapshot.json"
    assert explain.forecast_lines(102, led, str(path), NOW) == [
        f"forecast: none (no snapshot at {path}: is the daemon running?)"]
    write_snapshot(path, dataclasses.replace(snapshot(pub(102, 0, 0, rank=0),
                                                      generated_at=NOW - 10),
                                             forecast=FORECAST, cluster="c"))
    got = explain.forecast_lines(102, led, str(path), NOW)
    assert got == ft.detail_lines(FORECAST, 102, NOW, running=False)
    assert got[1] == "  start: ~10m to ~4h (median ~25m)"
    assert explain.forecast_lines(7, led, str(path), NOW) == []   # not in the ledger
    # the snapshot is 91 s old with 30 s cycles (stale past 3 intervals): the daemon stopped
    assert explain.forecast_lines(102, led, str(path), NOW + 81)[0].startswith(
        "forecast: STALE (made at 03:45:40 UTC")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)   # opened without blocking and refused: no writer ever comes
    assert explain.forecast_lines(102, led, str(fifo), NOW) == [
        f"forecast: none (snapshot {fifo}: cannot read (a FIFO; give a regular file))"]


def test_a_raw_band_says_why_it_is_raw_when_enough_outcomes_are_known():
    # 40 outcomes known: job 106's median start is beyond the horizon (None), job 101 was
    # running when the forecast was made (its start, its run start, is never calibrated) and
    # is pending now, e.g. preempted since
    known = {**FORECAST, "known_outcomes": 40,
             "jobs": {k: {**v, "calibrated": 0} for k, v in FORECAST["jobs"].items()}}
    assert ft.detail_lines(known, 106, NOW, running=False)[2] == (
        "    raw band of the draws: its median is beyond the horizon")
    assert ft.detail_lines(known, 101, NOW, running=False)[2] == (
        "    raw band of the draws: the job was not waiting when the forecast was made")


def test_a_job_that_ran_at_the_forecast_and_waits_now_shows_its_restart():
    # job 101 ran when the forecast was made (start: its run start, 10 minutes before NOW);
    # it has been preempted and requeued since. Its START is its restart's median, 25
    # minutes from NOW, never "now" from its old run's start; with no draw preempting it the
    # forecast knows no start for this wait and says so
    ran = {**FORECAST, "jobs": {**FORECAST["jobs"], "101": {
        **FORECAST["jobs"]["101"], "restart": [NOW + 900, NOW + 1500, NOW + 2400]}}}
    assert ft.start_cell(FORECAST, 101, NOW, waiting=True) == "now"   # without the restart
    assert ft.start_cell(ran, 101, NOW, waiting=True) == "~25m"
    assert ft.json_field(ran, 101, NOW)["restart"] == [NOW + 900, NOW + 1500, NOW + 2400]
    lines = ft.detail_lines(ran, 101, NOW, running=False)
    assert lines[1] == ("  start: ~15m to ~40m (median ~25m): its restart after the preemption, "
                        "in the 25 % of draws that preempted it (the forecast was made while "
                        "it ran)")
    assert not any("jobs ahead" in line for line in lines)
    never = {**FORECAST, "jobs": {**FORECAST["jobs"], "101": {
        **FORECAST["jobs"]["101"], "restart": None}}}
    assert ft.start_cell(never, 101, NOW, waiting=True) == ""
    assert ft.detail_lines(never, 101, NOW, running=False)[1] == (
        "  start: not forecast (the forecast was made while the job ran and no draw preempted "
        "it; the next forecast gives it)")
