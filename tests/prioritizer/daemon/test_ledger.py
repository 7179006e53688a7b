"""The ledger: file mode, attained service from runs, run bookkeeping across requeues and
restarts of the daemon, and recovery of preemption intents."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from daemon_unit_helpers import RecordingClient, observation, unit
from prioritizer.daemon.config import DaemonConfig
from log_helpers import captured
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.ledger import Ledger
from prioritizer.policy.model import Preemption
from prioritizer.daemon.observe import record_units
from prioritizer.daemon.preempt import Preemptor


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "sub" / "ledger.sqlite")


def _record(ledger: Ledger, now: float, *units) -> None:
    with ledger.transaction():
        record_units(None, ledger, {u.job_id: u for u in units}, now)


def test_ledger_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    old = os.umask(0o022)
    try:
        with Ledger(path) as ledger:
            ledger.set_meta("k", "v")
            for suffix in ("", "-wal", "-shm"):
                assert stat.S_IMODE(os.stat(f"{path}{suffix}").st_mode) == 0o600, suffix
    finally:
        os.umask(old)


def test_service_sums_closed_runs_and_open_run_from_slurm_start(ledger: Ledger) -> None:
    with ledger.transaction():
        ledger.upsert_job(1, user="u", account="a", partition="p", state="RUNNING", gpus=4,
                          submit_time=0, restart_count=0, now=100)
        ledger.start_run(1, 100, 4, now=100)
        ledger.close_run(1, 100, 160, "slurm")
        ledger.start_run(1, 300, 4, now=300)
    # (160-100) x 4 + (350-300) x 4 = 240 + 200 GPU·s; 60 + 50 s
    assert ledger.service(1, 350) == (440.0, 110.0)


def test_open_run_counts_from_slurm_start_time_not_from_cycles(ledger: Ledger) -> None:
    # the daemon first sees the job at t=500, but Slurm says it started at 400 (daemon was down)
    _record(ledger, 500, unit(7, start=400, gpus=2))
    assert ledger.service(7, 510) == (220.0, 110.0)


def test_requeue_by_anyone_keeps_service_and_opens_a_new_run(ledger: Ledger) -> None:
    _record(ledger, 110, unit(3, start=100, gpus=8))
    _record(ledger, 130, unit(3, start=100, gpus=8))          # last seen running at 130
    _record(ledger, 140, unit(3, "PENDING", start=151, restart=1))  # user requeued it
    assert [(r.start, r.end, r.end_source) for r in ledger.runs(3)] == [(100, 130, "last_seen")]
    _record(ledger, 160, unit(3, start=155, gpus=8, restart=1))
    _record(ledger, 170, unit(3, "COMPLETED", start=155, end=168, restart=1))
    # (130-100) x 8 + (168-155) x 8
    assert ledger.service(3, 1000)[0] == 30 * 8 + 13 * 8
    row = ledger.job(3)
    assert row is not None and row.state == "COMPLETED" and row.ended_at == 170


def test_job_that_ran_between_two_cycles_gets_its_run(ledger: Ledger) -> None:
    _record(ledger, 100, unit(8, "PENDING", start=None, gpus=8))
    _record(ledger, 105, unit(8, "COMPLETED", start=101, end=104, gpus=8))
    _record(ledger, 110, unit(8, "COMPLETED", start=101, end=104, gpus=8))   # not twice
    assert [(r.start, r.end) for r in ledger.runs(8)] == [(101, 104)]
    assert ledger.service(8, 200) == (24.0, 3.0)


def test_restart_seen_only_as_new_start_closes_old_run_at_last_seen(ledger: Ledger) -> None:
    _record(ledger, 110, unit(4, start=100, gpus=1))
    _record(ledger, 200, unit(4, start=180, gpus=1, restart=1))  # requeued and restarted unseen
    assert [(r.start, r.end) for r in ledger.runs(4)] == [(100, 110), (180, None)]


def test_run_requeued_by_daemon_ends_at_its_requeue_time(ledger: Ledger) -> None:
    _record(ledger, 110, unit(5, start=100, gpus=2))
    iid = ledger.add_intent(5, 9, None, 0, 0, now=120)
    ledger.mark_requeue(iid, 121)
    _record(ledger, 130, unit(5, "PENDING", start=None, restart=1))
    assert [(r.start, r.end, r.end_source) for r in ledger.runs(5)] == [(100, 121, "requeue")]
    assert ledger.job(5).preemptions == 1  # type: ignore[union-attr]


def test_job_gone_from_squeue_is_closed_and_marked(ledger: Ledger) -> None:
    _record(ledger, 110, unit(6, start=100, gpus=2))
    _record(ledger, 200)
    assert [(r.start, r.end) for r in ledger.runs(6)] == [(100, 110)]
    assert ledger.job(6).state == "GONE"  # type: ignore[union-attr]
    assert ledger.jobs(active_only=True) == []


def test_cycle_counter_persists(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as a:
        assert [a.next_cycle(), a.next_cycle()] == [1, 2]
    with Ledger(path) as b:
        assert b.next_cycle() == 3


def test_readonly_open_of_missing_ledger_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no ledger"):
        Ledger(tmp_path / "none.sqlite", readonly=True)


# ---------------------------------------------------------------- intents and recovery
def _preemptor(ledger: Ledger, client: RecordingClient) -> Preemptor:
    cfg = DaemonConfig(max_grace_s=20)
    return Preemptor(client, ledger, cfg, CycleAdapter())  # type: ignore[arg-type]


def test_marked_job_signal_then_requeue_at_capped_deadline(ledger: Ledger) -> None:
    client = RecordingClient()
    p = _preemptor(ledger, client)
    victim = unit(1, restart=0)                     # declares USR2 with 30 s grace
    waiter = unit(9, "PENDING", start=None)         # still waiting when the requeue is due
    assert p.start((Preemption(9, (1,)),), observation(100, victim, waiter)) == [1]
    p.progress(observation(100, victim, waiter))
    assert client.calls == [("signal", 1, "USR2")]
    p.progress(observation(119, victim, waiter))    # grace capped at max_grace_s = 20
    assert client.calls == [("signal", 1, "USR2")]
    assert p.progress(observation(120, victim, waiter)) == [1]
    assert client.calls == [("signal", 1, "USR2"), ("requeue", 1)]
    p.progress(observation(125, unit(1, "PENDING", start=None, restart=1)))
    assert len(client.calls) == 2 and ledger.open_intents() == []
    assert [i.outcome for i in ledger.intents(1)] == ["requeued"]


def test_the_array_task_that_carries_its_arrays_id_is_signalled_and_requeued_alone(
        ledger: Ledger) -> None:
    """Array 192's task 1 runs under the array's own id (the last task Slurm starts keeps it);
    ``scancel 192`` or ``scontrol requeue 192`` would signal or requeue every task of the
    array (scancel(1), scontrol(1)): the victim is named ``192_1``, its lowered value too. A
    task under a new id (193, task 0) keeps its id."""
    import dataclasses
    client = RecordingClient()
    p = _preemptor(ledger, client)
    last = dataclasses.replace(unit(192), element="192_1")
    other = unit(193)
    waiter = unit(9, "PENDING", start=None)
    assert last.update_target == "192_1" and other.update_target == 193
    p.start((Preemption(9, (192, 193)),), observation(100, last, other, waiter))
    p.progress(observation(100, last, other, waiter))
    assert client.calls == [("signal", "192_1", "USR2"), ("signal", 193, "USR2")]
    p.progress(observation(120, last, other, waiter), lowered={192: "site_factor:1"})
    assert client.calls[2:] == [("site_factor", ["192_1"], 1), ("requeue", "192_1"),
                                ("requeue", 193)]


def test_job_without_marker_is_requeued_at_once_without_signal(ledger: Ledger) -> None:
    client = RecordingClient()
    p = _preemptor(ledger, client)
    victim = unit(2, marker=False)
    p.start((Preemption(9, (2,)),), observation(100, victim))
    p.progress(observation(100, victim))
    assert client.calls == [("requeue", 2)]


def test_job_ending_in_grace_is_not_requeued(ledger: Ledger) -> None:
    client = RecordingClient()
    p = _preemptor(ledger, client)
    p.start((Preemption(9, (3,)),), observation(100, unit(3)))
    p.progress(observation(100, unit(3)))
    p.progress(observation(110, unit(3, "COMPLETED", end=108)))
    assert client.calls == [("signal", 3, "USR2")]
    assert [i.outcome for i in ledger.intents(3)] == ["ended in grace"]


@pytest.mark.parametrize(("waiter_then", "outcome"), [
    ("running", "waiter started"), ("completed", "waiter ended"), ("gone", "waiter ended"),
    ("pending", "requeued")])
def test_a_victim_is_requeued_only_while_its_waiter_still_waits(
        ledger: Ledger, waiter_then: str, outcome: str) -> None:
    """Waiter 9 needs job 1's GPUs; job 1 is signalled at 100 (grace to 120). Another job ends
    in the grace time and 9 starts on its node at 110: at 120 job 1 is not requeued (that would
    idle its GPUs and lose its work since the checkpoint), not counted, and runs on; the same
    when 9 has ended by then (squeue shows it COMPLETED, or no longer lists it). A waiter still
    pending gets its victim."""
    client = RecordingClient()
    p = _preemptor(ledger, client)
    ledger.upsert_job(1, user="u", account="a", partition="gpu", state="RUNNING", gpus=8,
                      submit_time=0.0, restart_count=0, now=90.0)
    waiter = unit(9, "PENDING", start=None)
    p.start((Preemption(9, (1,)),), observation(100, unit(1), waiter))
    p.progress(observation(100, unit(1), waiter))
    later = {"running": (unit(1), unit(9, start=110)),
             "completed": (unit(1), unit(9, "COMPLETED", start=105, end=115)),
             "gone": (unit(1),), "pending": (unit(1), waiter)}[waiter_then]
    requeued = p.progress(observation(120, *later))
    assert [i.outcome for i in ledger.intents(1)] == [outcome]
    if outcome == "requeued":
        assert requeued == [1]
        assert client.calls == [("signal", 1, "USR2"), ("requeue", 1)]
        assert ledger.job(1).preemptions == 1   # type: ignore[union-attr]
    else:
        assert requeued == [] and client.calls == [("signal", 1, "USR2")]
        assert ledger.job(1).preemptions == 0   # type: ignore[union-attr]
        assert ledger.open_intents() == []


@pytest.mark.parametrize("gone_from_squeue", [False, True], ids=["squeue-end", "ledger-end"])
def test_a_victim_ending_by_itself_after_its_grace_was_not_preempted(
        ledger: Ledger, gone_from_squeue: bool) -> None:
    """Signalled at 100 with its grace to 120; Slurm did not answer (or the daemon was down)
    when the requeue was due and the job completed by itself at 125: it ended before the
    requeue, not in grace, and is not counted as a preemption. Its end comes from squeue
    while Slurm shows the job, else from the ledger's run (closed by the observe step)."""
    client = RecordingClient()
    p = _preemptor(ledger, client)
    ledger.upsert_job(3, user="u", account="a", partition="gpu", state="RUNNING", gpus=8,
                      submit_time=0.0, restart_count=0, now=90.0)
    p.start((Preemption(9, (3,)),), observation(100, unit(3)))
    p.progress(observation(100, unit(3)))
    assert ledger.job(3).preemptions == 1   # type: ignore[union-attr]
    if gone_from_squeue:
        ledger.start_run(3, 90.0, 8, 90.0)
        ledger.close_run(3, 90.0, 125.0, "sacct")
        p.progress(observation(130))
    else:
        p.progress(observation(130, unit(3, "COMPLETED", end=125)))
    assert client.calls == [("signal", 3, "USR2")]
    assert [i.outcome for i in ledger.intents(3)] == ["ended before requeue"]
    assert ledger.job(3).preemptions == 0   # type: ignore[union-attr]


@pytest.mark.parametrize("state", ["SUSPENDED", "STOPPED"])
@pytest.mark.parametrize("when", [100, 120], ids=["before-signal", "in-grace"])
def test_a_victim_suspended_before_an_act_is_due_is_no_longer_preempted(
        ledger: Ledger, state: str, when: float) -> None:
    """``scontrol suspend`` (or SIGSTOP) of a victim before its signal, or in its grace: no
    signal or requeue goes out after (a suspended job requeued stays held, JobHeldAdmin, with no
    one to release it)."""
    client = RecordingClient()
    p = _preemptor(ledger, client)
    p.start((Preemption(9, (3,)),), observation(100, unit(3)))
    if when > 100:
        p.progress(observation(100, unit(3)))       # signalled, requeue due at 120
    p.progress(observation(when, unit(3, state)))
    p.progress(observation(when + 30, unit(3, state)))
    assert client.calls == ([("signal", 3, "USR2")] if when > 100 else [])
    assert [i.outcome for i in ledger.intents(3)] == ["suspended"]
    assert ledger.open_intents() == []


def test_second_preemption_of_same_victim_while_open_is_ignored(ledger: Ledger) -> None:
    p = _preemptor(ledger, RecordingClient())
    obs = observation(100, unit(4))
    p.start((Preemption(8, (4,)),), obs)
    assert p.start((Preemption(9, (4,)),), obs) == []
    assert len(ledger.intents(4)) == 1


@pytest.mark.parametrize("crash_after", ["intent", "signal", "requeue-mark", "requeue"])
def test_restarted_daemon_finishes_open_intent_exactly_once(tmp_path: Path, crash_after: str) -> None:
    """Replay the ledger a daemon killed after each step leaves, then recover with a new one."""
    path = tmp_path / "l.sqlite"
    with Ledger(path) as first:
        iid = first.add_intent(5, 9, "USR2", 10, restart_count=0, now=100)
        if crash_after != "intent":
            first.mark_signal(iid, 100, 110)        # the signal went out
        if crash_after in ("requeue-mark", "requeue"):
            first.mark_requeue(iid, 110)
    requeued_in_slurm = crash_after == "requeue"
    seen = (unit(5, "PENDING", start=None, restart=1) if requeued_in_slurm else unit(5, restart=0))
    client = RecordingClient()
    with Ledger(path) as second:
        p = _preemptor(second, client)
        for now in (111, 116, 121, 126):   # waiter 9 waits throughout
            p.progress(observation(now, seen, unit(9, "PENDING", start=None)))
            if client.calls and client.calls[-1][0] == "requeue":
                seen = unit(5, "PENDING", start=None, restart=1)
        expected = {"intent": [("signal", 5, "USR2"), ("requeue", 5)],
                    "signal": [("requeue", 5)], "requeue-mark": [("requeue", 5)],
                    "requeue": []}[crash_after]
        assert client.calls == expected
        assert [i.outcome for i in second.intents(5)] == ["requeued"]


def test_unreachable_requeue_is_rolled_back_and_retried(ledger: Ledger) -> None:
    from slurm_plugin.slurm.client import SlurmUnreachable
    client = RecordingClient(unreachable=True)
    p = _preemptor(ledger, client)
    victim = unit(6, marker=False)
    p.start((Preemption(9, (6,)),), observation(100, victim))
    with pytest.raises(SlurmUnreachable):
        p.progress(observation(100, victim))
    assert ledger.open_intents()[0].requeue_at is None
    client.unreachable = False
    p.progress(observation(105, victim))
    assert [c[0] for c in client.calls] == ["requeue", "requeue"]
    assert [i.outcome for i in ledger.intents(6)] == ["requeued"]


def test_active_rows_are_fresh_after_every_write_and_rollback(tmp_path) -> None:
    """The remembered active rows never hide a write, committed or rolled back."""
    from prioritizer.daemon.ledger import Ledger as L
    with L(tmp_path / "c.sqlite") as led:
        kw = dict(user="u", account="a", partition="gpu", gpus=1, submit_time=1.0,
                  restart_count=0, now=5.0)
        with led.transaction():
            led.upsert_job(1, state="PENDING", **kw)
        assert [r.state for r in led.jobs(active_only=True)] == ["PENDING"]
        with led.transaction():
            led.upsert_job(1, state="RUNNING", **kw)
        assert [r.state for r in led.jobs(active_only=True)] == ["RUNNING"]
        try:
            with led.transaction():
                led.mark_ended(1, "COMPLETED", 9.0)
                assert led.jobs(active_only=True) == []
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        assert [r.state for r in led.jobs(active_only=True)] == ["RUNNING"]
        with led.transaction():
            led.mark_ended(1, "COMPLETED", 9.0)
        assert led.jobs(active_only=True) == [] and led.jobs()[0].state == "COMPLETED"


# ---------------------------------------------------------------- victims: lowered first, refused, ended before requeue
def test_victim_is_lowered_before_its_requeue_in_the_same_act(ledger: Ledger) -> None:
    """The lower value goes to Slurm before ``scontrol requeue``, not a cycle later."""
    client = RecordingClient()
    p = _preemptor(ledger, client)
    _record(ledger, 100, unit(2, marker=False))
    p.start((Preemption(9, (2,)),), observation(100, unit(2, marker=False)))
    p.progress(observation(100, unit(2, marker=False)), {2: "site_factor:17"})
    assert client.calls == [("site_factor", [2], 17), ("requeue", 2)]
    assert client.requeue_flags == [(True, False)]          # requeue incomplete, no hold
    assert ledger.job(2).applied == "site_factor:17"        # next cycle sends nothing again


def test_partition_mode_victim_is_held_moved_then_released(ledger: Ledger) -> None:
    client = RecordingClient()
    p = _preemptor(ledger, client)
    p.start((Preemption(9, (2,)),), observation(100, unit(2, marker=False)))
    p.progress(observation(100, unit(2, marker=False)), {2: "partition:q1"})
    assert client.calls == [("requeue", 2), ("partition", [2], "q1"), ("release", [2])]
    assert client.requeue_flags == [(True, True)]           # requeuehold incomplete


def test_refused_requeue_is_an_event_not_a_preemption_and_not_retried(tmp_path: Path) -> None:
    """Slurm refuses (``--no-requeue``): logged with its reason, the counter goes
    back down, and the job is not a victim again during this run."""
    from prioritizer.daemon.observe import build_snapshot
    with Ledger(tmp_path / "l.sqlite") as ledger, captured() as (log, stream):
        client = RecordingClient(refuse={3})
        p = Preemptor(client, ledger, DaemonConfig(), log)  # type: ignore[arg-type]
        victim = unit(3, marker=False)
        _record(ledger, 100, victim)
        p.start((Preemption(9, (3,)),), observation(100, victim))
        assert ledger.job(3).preemptions == 1
        assert p.progress(observation(100, victim)) == []
        assert ledger.job(3).preemptions == 0
        assert [i.outcome for i in ledger.intents(3)] == [
            "requeue refused: Job is no longer pending execution"]
        assert "preempt_refused" in stream.getvalue()
        snap = build_snapshot(ledger, {3: victim}, [], [], DaemonConfig(), now=101)
        assert [v.preemptible for v in snap.jobs] == [False]
        # a later run of the job (restarted by someone else) may be a victim again
        later = unit(3, marker=False, restart=1)
        _record(ledger, 200, later)
        snap = build_snapshot(ledger, {3: later}, [], [], DaemonConfig(), now=201)
        assert [v.preemptible for v in snap.jobs] == [True]


def test_job_completed_just_before_the_requeue_is_not_counted_as_requeued(ledger: Ledger) -> None:
    """Squeue showed it running; it completed before ``requeue incomplete``, which
    then did nothing. The live proof is tests/live/test_preempt_live.py."""
    client = RecordingClient(completed={4})
    p = _preemptor(ledger, client)
    _record(ledger, 100, unit(4, marker=False))
    p.start((Preemption(9, (4,)),), observation(100, unit(4, marker=False)))
    assert p.progress(observation(100, unit(4, marker=False))) == []
    assert client.requeue_flags == [(True, False)]
    assert [i.outcome for i in ledger.intents(4)] == ["ended before requeue"]
    assert ledger.job(4).preemptions == 0


@pytest.mark.parametrize("later", [unit(5, "COMPLETING", end=110),
                                   unit(5, "PENDING", start=None, restart=1),
                                   unit(5, "COMPLETED", end=110), None],
                         ids=["completing", "requeued-by-someone-else", "ended", "gone"])
def test_victim_not_running_when_its_signal_was_due_is_no_preemption(
        ledger: Ledger, later) -> None:
    """The intent was written while it ran; by the next step nothing was sent to it."""
    client = RecordingClient()
    p = _preemptor(ledger, client)
    _record(ledger, 100, unit(5))
    p.start((Preemption(9, (5,)),), observation(100, unit(5)))
    assert ledger.job(5).preemptions == 1                 # counted while in flight
    p.progress(observation(130, *([later] if later else [])))
    assert client.calls == [] and ledger.open_intents() == []
    assert [i.outcome for i in ledger.intents(5)] == ["not running"]
    assert ledger.job(5).preemptions == 0
    p.progress(observation(160, unit(5)))                 # running again: nothing more happens
    assert client.calls == [] and ledger.job(5).preemptions == 0


def test_a_ledger_that_counted_not_running_intents_is_recounted_once(tmp_path: Path) -> None:
    """Earlier daemons counted an intent that ended ``not running``; opening their ledger
    (schema version 3) for writing takes those out of the count, the others stay."""
    import sqlite3
    from prioritizer.daemon.ledger import MIGRATIONS
    path = tmp_path / "l.sqlite"
    conn = sqlite3.connect(path)
    for version, statements in MIGRATIONS[:3]:
        for stmt in statements:
            conn.execute(stmt)
    conn.execute("PRAGMA user_version = 3")
    conn.executemany("INSERT INTO jobs(job_id, preemptions) VALUES(?, ?)", [(5, 3), (6, 1)])
    conn.executemany("INSERT INTO intents(job_id, created, done_at, outcome) VALUES(?, 100, 110, ?)",
                     [(5, "not running"), (5, "requeued"), (5, "not running"), (6, "requeued")])
    conn.commit()
    conn.close()
    with Ledger(path, readonly=True) as old:               # read-only: read as it is
        assert (old.job(5).preemptions, old.job(6).preemptions) == (3, 1)
    with Ledger(path) as led:
        assert led.migrated[0] == 4
        assert (led.job(5).preemptions, led.job(6).preemptions) == (1, 1)
    with Ledger(path) as again:
        assert again.migrated == [] and again.job(5).preemptions == 1


def test_the_last_cycle_that_saw_a_job_held_and_an_array_record_are_kept(ledger: Ledger) -> None:
    """Job 4 is pending at 1,000 s, held (JobHeldUser) at 1,030 s and 1,060 s, released at
    1,090 s: held_seen is 1,060, the last cycle that saw the hold, and stays so once released.
    Job 40 is a job array's pending record (tasks 3-10): array_record 1; job 4 has 0."""
    import dataclasses
    pending = unit(4, "PENDING", start=None, reason="Priority")
    held = dataclasses.replace(pending, reason="JobHeldUser")
    array = dataclasses.replace(unit(40, "PENDING", start=None, reason="Priority"),
                                array_tasks="3-10", tasks=8)
    seen = []
    for now, waiter in ((1000.0, pending), (1030.0, held), (1060.0, held), (1090.0, pending)):
        _record(ledger, now, waiter, array)
        row = ledger.job(4)
        assert row is not None
        seen.append((row.held, row.held_seen))
    assert seen == [(None, None), ("JobHeldUser", 1030.0), ("JobHeldUser", 1060.0),
                    (None, 1060.0)]
    rows = {r.job_id: r for r in ledger.jobs(active_only=True)}
    assert (rows[4].array_record, rows[40].array_record, rows[40].held_seen) == (0, 1, None)


def test_the_next_act_due_is_the_earliest_grace_end_not_yet_requeued(ledger: Ledger) -> None:
    """Victims 1 and 3 signalled at 100 and 104 with grace capped at 20 s: the next act is due
    at 120, then (1 requeued) at 124; none once both are requeued."""
    client = RecordingClient()
    p = _preemptor(ledger, client)
    assert p.next_due() is None
    p.start((Preemption(9, (1,)),), observation(100, unit(1), unit(3)))
    p.progress(observation(100, unit(1), unit(3)))
    p.start((Preemption(8, (3,)),), observation(104, unit(1), unit(3)))
    p.progress(observation(104, unit(1), unit(3)))
    assert p.next_due() == 120
    p.progress(observation(120, unit(1), unit(3)))
    assert p.next_due() == 124
    p.progress(observation(124, unit(1, "PENDING", start=None, restart=1), unit(3)))
    assert p.next_due() is None
