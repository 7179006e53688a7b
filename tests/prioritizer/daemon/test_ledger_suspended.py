"""Time a run spends suspended (``scontrol suspend``: SUSPENDED; SIGSTOP: STOPPED) is no
attained service: the ledger's runs, the policy's snapshot, ``dlprio explain``/``status`` and the
rebuild from sacct leave it out, from Slurm's own time used where Slurm gives it.

Every expected figure is worked out by hand in the comment above it. squeue's ``TimeUsed`` of
a run is the seconds it ran, time suspended not counted (squeue(1)); Slurm counts a STOPPED
job's time as used.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from daemon_unit_helpers import unit
from prioritizer.daemon import explain
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import MIGRATIONS, SCHEMA_VERSION, Ledger
from prioritizer.daemon.observe import Unit, build_snapshot, record_units
from prioritizer.daemon.rebuild import rebuild_stale_runs
from slurm_plugin.slurm.accounting import record_from_json
from slurm_plugin.slurm.records import Node


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger.sqlite")


def _seen(state: str, used: float | None, *, start: float = 100.0, gpus: int = 2,
          end: float | None = None, restart: int = 0) -> Unit:
    """Job 9 as squeue shows it: ``state`` and TimeUsed ``used`` seconds."""
    return dataclasses.replace(unit(9, state, start=start, gpus=gpus, end=end, restart=restart),
                               time_used_s=used)


def _record(ledger: Ledger, now: float, *units: Unit) -> None:
    with ledger.transaction():
        record_units(None, ledger, {u.job_id: u for u in units}, now)


def test_a_run_suspended_35_s_attains_its_run_less_35_s_times_its_gpus(ledger: Ledger) -> None:
    # 2 GPUs from 100; suspended at 155, resumed at 190 (35 s); ends at 210
    _record(ledger, 150, _seen("RUNNING", 50))
    assert ledger.service(9, 150) == (100.0, 50.0)             # 50 s x 2, nothing suspended
    _record(ledger, 160, _seen("SUSPENDED", 55))               # used stands at 55 s
    # while suspended the service stands still: (155 - 100) x 2 at any time
    assert ledger.service(9, 160) == ledger.service(9, 185) == (110.0, 55.0)
    _record(ledger, 200, _seen("RUNNING", 65))                 # 200 - 100 - 35 = 65 s used
    # (200 - 100 - 35) x 2 = 130 GPU·s, and on: at 205, (205 - 100 - 35) x 2 = 140
    assert ledger.service(9, 200) == (130.0, 65.0)
    assert ledger.service(9, 205) == (140.0, 70.0)
    _record(ledger, 215, _seen("COMPLETED", 75, end=210))      # 210 - 100 - 35 = 75 s
    run, = ledger.runs(9)
    assert (run.end, run.end_source, run.suspended_s, run.suspended_at) == (210, "slurm", 35, None)
    # (210 - 100 - 35) x 2 = 150 GPU·s, well below the 220 of its wall time
    assert ledger.service(9, 1000) == (150.0, 75.0)


def test_a_suspension_the_daemon_never_saw_is_left_out_from_slurms_time_used(
        ledger: Ledger) -> None:
    # the daemon sees it at 110, is down while it is suspended 80 s, sees it running at 300
    _record(ledger, 110, _seen("RUNNING", 10))
    _record(ledger, 300, _seen("RUNNING", 120))
    # 300 - 100 - 120 = 80 s suspended: (300 - 100 - 80) x 2 = 240 GPU·s
    assert ledger.service(9, 300) == (240.0, 120.0)
    assert ledger.runs(9)[0].suspended_s == 80


def test_a_job_first_seen_suspended_counts_only_the_time_it_ran(ledger: Ledger) -> None:
    # started at 100, ran 30 s, suspended since 130; the daemon (new ledger) first sees it at 400
    _record(ledger, 400, _seen("SUSPENDED", 30))
    assert ledger.service(9, 400) == ledger.service(9, 500) == (60.0, 30.0)   # 30 s x 2


def test_a_run_that_began_and_ended_unseen_leaves_out_its_time_suspended(ledger: Ledger) -> None:
    # pending at 100; ran 101..161 between two cycles, 40 s of it used: 20 s suspended
    _record(ledger, 100, _seen("PENDING", 0, start=None))
    _record(ledger, 170, _seen("COMPLETED", 40, start=101, end=161))
    # (161 - 101 - 20) x 2 = 80 GPU·s
    assert ledger.service(9, 1000) == (80.0, 40.0)


def test_time_stopped_is_the_daemons_sighting_as_slurm_counts_it_used(ledger: Ledger) -> None:
    # SIGSTOP: Slurm's time used goes on (STOPPED), so the daemon counts the time it saw it so
    _record(ledger, 150, _seen("RUNNING", 50))
    _record(ledger, 160, _seen("STOPPED", 60))
    _record(ledger, 190, _seen("STOPPED", 90))
    _record(ledger, 200, _seen("RUNNING", 100))
    # seen stopped by the cycles from 160 to 190: 30 s not counted: (200 - 100 - 30) x 2
    assert ledger.service(9, 200) == (140.0, 70.0)
    # later suspended 20 s (Slurm's figure: 240 - 100 - 120 = 20) and stopped 30 s: 50 s
    _record(ledger, 240, _seen("RUNNING", 120))
    assert ledger.service(9, 240) == ((240 - 100 - 50) * 2, 90.0)


def test_a_stop_that_ended_while_the_daemon_was_down_counts_to_its_last_sighting(
        ledger: Ledger) -> None:
    """Stopped when seen at 160 and 170; the next cycle, after an outage, is at 3,600: the job
    may have run again at any time in between, so only 160..170 is not counted."""
    _record(ledger, 150, _seen("RUNNING", 50))
    _record(ledger, 160, _seen("STOPPED", 60))
    _record(ledger, 170, _seen("STOPPED", 70))
    _record(ledger, 3600, _seen("RUNNING", 3500))
    assert ledger.service(9, 3600) == ((3600 - 100 - 10) * 2, 3600 - 100 - 10)


def test_without_slurms_time_used_the_daemons_sightings_count(ledger: Ledger) -> None:
    # squeue's TimeUsed INVALID: suspended from the cycle at 160 to the one at 200
    _record(ledger, 150, _seen("RUNNING", None))
    _record(ledger, 160, _seen("SUSPENDED", None))
    _record(ledger, 180, _seen("SUSPENDED", None))
    _record(ledger, 200, _seen("RUNNING", None))
    # seen suspended by the cycles from 160 to 180: (200 - 100 - 20) x 2 = 160 GPU·s
    assert ledger.service(9, 200) == (160.0, 80.0)


def test_snapshot_and_views_agree_and_explain_says_it_is_suspended(ledger: Ledger) -> None:
    _record(ledger, 150, _seen("RUNNING", 50))
    _record(ledger, 160, _seen("SUSPENDED", 55))   # suspended at 155
    units = {9: _seen("SUSPENDED", 55)}
    node = Node("node1", "node1", "allocated", (), ("gpu",), 16, 2, 8, 64000, 8, 2, "")
    snap = build_snapshot(ledger, units, [node], [], DaemonConfig(), now=180)
    view, = snap.jobs
    # (155 - 100) x 2 = 110 GPU·s at 180 as at 160: the 25 s suspended since are not counted
    assert (view.attained_gpu_s, view.attained_s) == (110.0, 55.0)
    assert explain.seen_service(ledger.runs(9)) == (110.0, 55.0)
    text = explain.explain(9, ledger, DaemonConfig(), now=180).splitlines()
    assert ("suspended by Slurm (SUSPENDED since 1970-01-01 00:02:35 UTC): it keeps its GPUs "
            "but does not run; the time suspended is not counted as attained service") in text
    assert "attained service: 110 GPU·s over 1 run(s)" in text
    # last seen at 160: 60 s from its start, 55 s run, 5 s suspended
    assert text[-1] == ("  run 1970-01-01 00:01:40 UTC -> running when last seen 1970-01-01 "
                        "00:02:40 UTC: 55 s x 2 GPUs (and 5 s suspended, not counted)")
    status, = explain.status_rows(ledger, now=180)
    assert status["attained_gpu_s"] == 110.0


class _Sacct:
    """sacct's answer: job 9's first run 100..300, suspended 50 s of it."""

    def accounting_jobs(self, job_ids: list[int]) -> list:
        return [record_from_json({
            "job_id": 9, "state": {"current": "REQUEUED"},
            "time": {"start": 100, "end": 300, "suspended": 50},
            "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]}})]


def test_rebuild_from_sacct_leaves_out_the_time_suspended(ledger: Ledger) -> None:
    # the ledger was lost; the job runs again from 400 after a requeue
    now_seen = _seen("RUNNING", 10, start=400, restart=1)
    _record(ledger, 410, now_seen)
    with ledger.transaction():
        rebuilt = rebuild_stale_runs(_Sacct(), ledger, {9: now_seen}, 410)  # type: ignore[arg-type]
    assert rebuilt.runs == 1
    # first run (300 - 100 - 50) x 2 = 300 GPU·s; the open one (410 - 400) x 2 = 20
    assert ledger.service(9, 410) == (320.0, 160.0)


def _schema_6_ledger(path: Path) -> None:
    """A ledger as a schema-6 dlprio left it: one job, one closed and one open run."""
    conn = sqlite3.connect(path, isolation_level=None)
    for version, statements in MIGRATIONS:
        if version > 6:
            break
        for stmt in statements:
            conn.execute(stmt)
    conn.execute("PRAGMA user_version = 6")
    conn.execute("INSERT INTO jobs(job_id, user, state, gpus, last_seen) "
                 "VALUES(9, 'alice', 'RUNNING', 2, 500)")
    conn.execute("INSERT INTO runs(job_id, start, end_time, gpus, last_seen, end_source) "
                 "VALUES(9, 100, 200, 2, 200, 'slurm'), (9, 300, NULL, 2, 500, NULL)")
    conn.close()


def test_a_schema_6_ledger_upgrades_in_place_keeping_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _schema_6_ledger(path)
    with Ledger(path, readonly=True) as old:        # read as it is, never migrated
        # (200 - 100) x 2 + (500 - 300) x 2 = 600 GPU·s, nothing suspended
        assert old.service(9, 500) == (600.0, 300.0)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 6
    with Ledger(path) as led:
        assert led.migrated == [7, 8, 9] and SCHEMA_VERSION == 9
        assert [(r.start, r.end, r.gpus, r.suspended_s, r.suspended_at, r.stopped_s)
                for r in led.runs(9)] == [(100, 200, 2, 0, None, 0), (300, None, 2, 0, None, 0)]
        assert led.service(9, 500) == (600.0, 300.0)
        assert led.job(9).user == "alice"  # type: ignore[union-attr]


class _SacctRuns:
    """sacct's answer for the runs of job 9: one run 100..220, nothing SUSPENDED in it."""

    def accounting_runs(self, job_id: int) -> list:
        return [record_from_json({
            "job_id": 9, "state": {"current": "CANCELLED"},
            "time": {"start": 100, "end": 220, "suspended": 0},
            "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]}})]


def test_a_run_gone_while_stopped_keeps_its_stop_when_sacct_closes_it(ledger: Ledger) -> None:
    """Seen STOPPED at 160 and 190, then gone from squeue; sacct ends it at 220 with no time
    SUSPENDED (Slurm counts a stop as used): the stop the daemon saw, 160..190, stays out."""
    _record(ledger, 150, _seen("RUNNING", 50))
    _record(ledger, 160, _seen("STOPPED", 60))
    _record(ledger, 190, _seen("STOPPED", 90))
    with ledger.transaction():
        record_units(_SacctRuns(), ledger, {}, 250)  # type: ignore[arg-type]
    run, = ledger.runs(9)
    assert (run.end, run.end_source) == (220, "sacct")
    assert ledger.service(9, 1000) == ((220 - 100 - 30) * 2, 220 - 100 - 30)


@pytest.mark.parametrize("start", [100.0, None], ids=["start-kept", "start-cleared"])
def test_a_job_requeued_then_cancelled_between_two_cycles_keeps_its_run(
        ledger: Ledger, start: float | None) -> None:
    """Running from 100 (seen at 150); the daemon requeues it at 200 and its user cancels it
    at 283, before the next cycle, which sees it CANCELLED with one restart and no time used
    (it ended pending). Its run ended at the requeue: 100 s x 2 GPUs, none of it suspended."""
    _record(ledger, 150, _seen("RUNNING", 50))
    intent = ledger.add_intent(9, None, None, 0.0, 0, 160)
    ledger.mark_requeue(intent, 200)
    cancelled = dataclasses.replace(_seen("CANCELLED", 0, end=283, restart=1), start_time=start)
    _record(ledger, 290, cancelled)
    run, = ledger.runs(9)
    assert (run.start, run.end, run.end_source, run.suspended(1000)) == (100, 200, "requeue", 0)
    assert ledger.service(9, 1000) == (200.0, 100.0)
