"""dlprio explain / status from a hand-built ledger (why a job sits where it sits, and the `status --json` keys)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from daemon_unit_helpers import unit
from prioritizer.daemon import explain
from prioritizer.policy.config import PolicyConfig
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.observe import record_units


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    led = Ledger(tmp_path / "l.sqlite")
    with led.transaction():
        led.upsert_job(42, user="alice", account="a", partition="gpu", state="PENDING", gpus=4,
                       submit_time=0, restart_count=1, now=0)
        led.start_run(42, 0, 4, now=0)
        led.close_run(42, 0, 15, "requeue")          # 60 GPU·s
        led.set_queue(42, 1, 10, 0.0, "demoted: 40 >= 40", now=10, promoted=False)
    led.add_intent(42, 7, "USR2", 5, 0, now=12)
    led.finish_intent(led.open_intents()[0].id, 15, "requeued")
    return led


def test_explain_shows_queue_service_thresholds_and_reason(ledger: Ledger) -> None:
    cfg = DaemonConfig(policy=PolicyConfig(thresholds_gpu_s=(40.0, 100.0), starve_knob=2))
    text = explain.explain(42, ledger, cfg, now=100)
    assert text.splitlines() == [
        "job 42 (alice, gpu): PENDING",
        "ledger: no cycle recorded yet (STALE: start the daemon)",
        "queue: 1 of 0..2 (policy tiresias-las); queue range [40, 100) GPU·s",
        "in queue since: 1970-01-01 00:00:10 UTC",
        "attained service: 60 GPU·s over 1 run(s)",
        "thresholds: 40, 100 GPU·s (service alone places it in queue 1)",
        "promotion: back to queue 0 after waiting >= 2 x its last run",
        "last change at 1970-01-01 00:00:10 UTC: demoted: 40 >= 40",
        "promotions: 0, preemptions: 1, restarts: 1",
        "  run 1970-01-01 00:00:00 UTC -> 1970-01-01 00:00:15 UTC: 15 s x 4 GPUs",
        "  preemption for job 7: signal USR2, requeued",
    ]


def test_an_ended_job_shows_its_queue_as_last_decided_beside_its_full_service(
        ledger: Ledger) -> None:
    """Job 42 was last placed in queue 1 (60 GPU·s) and then ran 15 s × 4 GPUs more, unseen
    by any cycle (the daemon was down), before it ended: its queue is the one last decided,
    said so, while its service (120 GPU·s) alone would place it in queue 2."""
    with ledger.transaction():
        ledger.start_run(42, 20, 4, now=20)
        ledger.close_run(42, 20, 35, "end")
        ledger.mark_ended(42, "COMPLETED", 35)
    cfg = DaemonConfig(policy=PolicyConfig(thresholds_gpu_s=(40.0, 100.0)))
    lines = explain.explain(42, ledger, cfg, now=100).splitlines()
    assert ("queue: 1 of 0..2 (policy tiresias-las) as last decided while it ran; queue range "
            "[40, 100) GPU·s") in lines
    assert "attained service: 120 GPU·s over 2 run(s)" in lines
    assert "thresholds: 40, 100 GPU·s (service alone places it in queue 2)" in lines


def test_explain_a_shard_job_shows_its_share_and_runs_at_it(tmp_path: Path) -> None:
    # 0.5 GPU for 120 s: 60 GPU·s
    with Ledger(tmp_path / "s.sqlite") as led:
        with led.transaction():
            led.upsert_job(7, user="bob", account="a", partition="gpu", state="PENDING", gpus=0.5,
                           submit_time=0, restart_count=0, now=0)
            led.start_run(7, 0, 0.5, now=0)
            led.close_run(7, 0, 120, "slurm")
        text = explain.explain(7, led, DaemonConfig(), now=200).splitlines()
    assert text[3:5] == [
        "share: 0.5 of one GPU (GPU shards): its attained service counts 0.5 GPU·s per second; "
        "a whole-GPU job may preempt it together with every shard job of its GPU",
        "attained service: 60 GPU·s over 1 run(s)"]
    assert text[-1] == "  run 1970-01-01 00:00:00 UTC -> 1970-01-01 00:02:00 UTC: 120 s x 0.5 GPUs"


def test_explain_says_a_held_job_waits_for_a_release_with_its_service_kept(
        ledger: Ledger) -> None:
    with ledger.transaction():
        ledger.upsert_job(42, user="alice", account="a", partition="gpu", state="REQUEUE_HOLD",
                          gpus=4, submit_time=0, restart_count=1, now=20)
    text = explain.explain(42, ledger, DaemonConfig(), now=100).splitlines()
    assert text[0] == "job 42 (alice, gpu): REQUEUE_HOLD"
    assert text[2] == ("held by Slurm (REQUEUE_HOLD): not ordered until someone releases it "
                       "('scontrol release 42'); its attained service is kept")
    assert "attained service: 60 GPU·s over 1 run(s)" in text


@pytest.mark.parametrize("reason", ["JobHeldAdmin", "JobHeldUser", "job requeued in held state"])
def test_explain_says_a_job_held_pending_waits_for_a_release(tmp_path: Path, reason: str) -> None:
    """24.11 and 26.05: after ``scontrol hold`` squeue shows PENDING (JobHeldAdmin), after
    ``scontrol requeuehold`` PENDING, priority 0, "job requeued in held state": no held state
    word. The cycle records the hold; once released the line goes."""
    held = dataclasses.replace(unit(42, "PENDING", start=None, reason=reason), priority=0)
    released = dataclasses.replace(held, reason="Priority", priority=100)
    with Ledger(tmp_path / "l.sqlite") as led:
        with led.transaction():
            record_units(None, led, {42: held}, now=20)
        text = explain.explain(42, led, DaemonConfig(), now=30).splitlines()
        assert text[0] == "job 42 (alice, gpu): PENDING"
        assert text[2] == (f"held by Slurm ({reason}): not ordered until someone releases it "
                           "('scontrol release 42'); its attained service is kept")
        with led.transaction():
            record_units(None, led, {42: released}, now=50)
        assert not any(line.startswith("held by") for line in
                       explain.explain(42, led, DaemonConfig(), now=60).splitlines())


def test_explain_says_a_waiter_that_did_not_start_after_its_victims_preempts_no_more(
        ledger: Ledger) -> None:
    ledger.finish_intent(ledger.add_intent(50, 42, "USR2", 5, 0, now=16), 40, "requeued")
    text = explain.explain(42, ledger, DaemonConfig(), now=300).splitlines()
    assert text[2] == ("victims were requeued for it at 1970-01-01 00:00:40 UTC and it has not "
                       "started in 120 s: Slurm lacks something else for it (CPUs, memory, the "
                       "nodes it named or excluded), so it preempts no more until it starts")


def test_explain_gives_a_waiter_four_intervals_after_its_victims_when_that_is_longer(
        ledger: Ledger) -> None:
    # requeued at 40 s; interval 60 s: the daemon waits 4 x 60 = 240 s, to 280 s (00:04:40)
    ledger.finish_intent(ledger.add_intent(50, 42, "USR2", 5, 0, now=16), 40, "requeued")
    cfg = DaemonConfig(interval_s=60)
    assert explain.explain(42, ledger, cfg, now=250).splitlines()[2] == (
        "victims were requeued for it at 1970-01-01 00:00:40 UTC; Slurm should start it by "
        "1970-01-01 00:04:40 UTC, else it preempts no more until it starts")
    assert explain.explain(42, ledger, cfg, now=280).splitlines()[2].endswith(
        "has not started in 240 s: Slurm lacks something else for it (CPUs, memory, the nodes "
        "it named or excluded), so it preempts no more until it starts")


def test_explain_unknown_job(ledger: Ledger) -> None:
    with pytest.raises(explain.UnknownJob, match="job 5: not in the ledger"):
        explain.explain(5, ledger, DaemonConfig(), now=0)


def test_status_json_keys_exactly(ledger: Ledger) -> None:
    rows = explain.status_rows(ledger, now=100)
    assert json.loads(json.dumps(rows)) == [{
        "job_id": 42, "user": "alice", "state": "PENDING", "held": None, "queue": 1,
        "attained_gpu_s": 60.0,
        "preemptions": 1, "promotions": 0, "restart_count": 1, "last_seen": 0.0,
        "update_refusals": 0}]
    table = explain.status_table(rows).splitlines()
    assert table[0].split()[3:5] == ["QUEUE", "ATTAINED(GPU·s)"]   # the unit named, as in dlqueue
    assert table[1].split() == ["42", "alice", "PENDING", "Q1", "60.0", "1", "0", "1", "0"]


def test_status_shows_a_held_job_as_held_and_a_released_one_as_pending(tmp_path: Path) -> None:
    """Job 42 is pending with reason JobHeldAdmin (``scontrol hold``: priority 0), job 43 in
    the held state REQUEUE_HOLD, job 44 pending (Priority). STATE says HELD for 42 (squeue
    shows PD and the reason), REQUEUE_HOLD for 43; JSON keeps Slurm's state and names the
    hold. Once 42 is released it is PENDING again, held null."""
    held = dataclasses.replace(unit(42, "PENDING", start=None, reason="JobHeldAdmin"), priority=0)
    units = {42: held, 43: unit(43, "REQUEUE_HOLD", start=None),
             44: unit(44, "PENDING", start=None, reason="Priority")}
    with Ledger(tmp_path / "l.sqlite") as led:
        with led.transaction():
            record_units(None, led, units, now=20)
        rows = explain.status_rows(led, 30, active_only=True)
        assert [(r["state"], r["held"]) for r in rows] == [
            ("PENDING", "JobHeldAdmin"), ("REQUEUE_HOLD", "REQUEUE_HOLD"), ("PENDING", None)]
        assert [line.split()[:3] for line in explain.status_table(rows).splitlines()[1:]] == [
            ["42", "alice", "HELD"], ["43", "alice", "REQUEUE_HOLD"], ["44", "alice", "PENDING"]]
        released = dataclasses.replace(held, reason="Priority", priority=100)
        with led.transaction():
            record_units(None, led, {**units, 42: released}, now=50)
        rows = explain.status_rows(led, 60, active_only=True)
    assert (rows[0]["state"], rows[0]["held"]) == ("PENDING", None)
    assert explain.status_table(rows).splitlines()[1].split()[2] == "PENDING"


# ---------------------------------------------------------------- a stopped daemon's ledger
def _stopped_daemon_ledger(tmp_path: Path) -> Ledger:
    """The daemon saw a 2-GPU job running from t=1000 at its cycles up to t=1020, then was
    stopped (SIGTERM); the job ended afterwards, unseen. Another job ended long ago."""
    led = Ledger(tmp_path / "stale.sqlite")
    with led.transaction():
        for now in (1000.0, 1010.0, 1020.0):
            led.upsert_job(7, user="bob", account="a", partition="gpu", state="RUNNING", gpus=2,
                           submit_time=990, restart_count=0, now=now)
            led.start_run(7, 1000.0, 2, now)
            led.note_observed(now)
        led.upsert_job(8, user="eve", account="a", partition="gpu", state="COMPLETED", gpus=1,
                       submit_time=0, restart_count=0, now=10)
        led.mark_ended(8, "COMPLETED", 20)
    return led


def test_views_of_a_stopped_daemon_do_not_extrapolate_and_say_how_old(tmp_path: Path) -> None:
    led = _stopped_daemon_ledger(tmp_path)
    for now in (1100.0, 5000.0):      # long after the stop: the same figures
        (row,) = explain.status_rows(led, now, active_only=True)
        assert row["attained_gpu_s"] == 40.0 and row["last_seen"] == 1020.0
        text = explain.explain(7, led, DaemonConfig(interval_s=30), now)
        assert "attained service: 40 GPU·s over 1 run(s)" in text
        assert "running when last seen 1970-01-01 00:17:00 UTC: 20 s x 2 GPUs" in text
    fresh = explain.freshness(led, 5000.0, interval_s=30)
    assert fresh.startswith("ledger as of 1970-01-01 00:17:00 UTC (3980 s ago); STALE")
    assert "STALE" not in explain.freshness(led, 1050.0, interval_s=30)


def test_status_shows_active_jobs_unless_all(tmp_path: Path) -> None:
    led = _stopped_daemon_ledger(tmp_path)
    assert [r["job_id"] for r in explain.status_rows(led, 2000, active_only=True)] == [7]
    assert [r["job_id"] for r in explain.status_rows(led, 2000)] == [7, 8]


def test_cli_status_prints_age_first_and_all_on_request(tmp_path: Path) -> None:
    import subprocess
    import sys
    import yaml
    led = _stopped_daemon_ledger(tmp_path)
    led.close()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"ledger_path": str(led.path), "metrics_port": 0}))
    run = [sys.executable, "-m", "prioritizer.cli", "status", "--config", str(cfg)]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout.splitlines()
    assert "STALE" in out[0] and [line.split()[0] for line in out[2:]] == ["7"]
    out = subprocess.run(run + ["--all"], capture_output=True, text=True, check=True).stdout
    assert [line.split()[0] for line in out.splitlines()[2:]] == ["7", "8"]
    proc = subprocess.run(run + ["--json"], capture_output=True, text=True, check=True)
    assert [r["job_id"] for r in json.loads(proc.stdout)] == [7] and "STALE" in proc.stderr


def test_retention_prunes_finished_jobs_only(tmp_path: Path) -> None:
    led = _stopped_daemon_ledger(tmp_path)
    assert led.prune(before=10) == 0          # job 8 ended at 20
    assert led.prune(before=30) == 1
    assert [r.job_id for r in led.jobs()] == [7] and led.runs(7)


def test_daemon_prunes_once_an_hour_after_retention(tmp_path: Path) -> None:
    from log_helpers import captured
    from prioritizer.daemon.loop import Daemon
    led = _stopped_daemon_ledger(tmp_path)
    with captured() as (log, stream):
        d = Daemon(DaemonConfig(retention_days=1), None, led, log)  # type: ignore[arg-type]
        assert d.prune(now=20 + 86400 - 1) == 0                    # not yet past retention
        assert d.prune(now=20 + 86400 + 10) == 0                   # within the hour: no scan
        assert d.prune(now=20 + 86400 + 3600) == 1 and "ledger_pruned" in stream.getvalue()
    assert Daemon(DaemonConfig(retention_days=0), None, led, log).prune(
        now=1e9) == 0  # type: ignore[arg-type]


def test_explain_shows_an_intent_that_preempted_nothing_as_not_made(ledger: Ledger) -> None:
    ledger.finish_intent(ledger.add_intent(42, 8, "USR2", 5, 1, now=20), 40, "not running",
                         uncount=True)
    text = explain.explain(42, ledger, DaemonConfig(), now=100).splitlines()
    assert "promotions: 0, preemptions: 1, restarts: 1" in text
    assert text[-2:] == ["  preemption for job 7: signal USR2, requeued",
                         "  preemption for job 8 not made: signal USR2, not running (not counted)"]


def test_a_running_job_under_scontrol_hold_shows_as_running(tmp_path: Path) -> None:
    """26.05: ``scontrol hold 106`` on a running job: squeue shows it RUNNING on node1 with
    priority 0 and reason JobHeldAdmin. status says RUNNING (held null) and explain has no
    "held by" line; requeued and pending under that hold, it is HELD again."""
    running = unit(106, "RUNNING", start=100, reason="JobHeldAdmin")
    with Ledger(tmp_path / "l.sqlite") as led:
        with led.transaction():
            record_units(None, led, {106: running}, now=120)
        rows = explain.status_rows(led, 130, active_only=True)
        assert [(r["state"], r["held"]) for r in rows] == [("RUNNING", None)]
        assert explain.status_table(rows).splitlines()[1].split()[:3] == ["106", "alice", "RUNNING"]
        text = explain.explain(106, led, DaemonConfig(), now=130).splitlines()
        assert text[0] == "job 106 (alice, gpu): RUNNING"
        assert not any(line.startswith("held by") for line in text)
        requeued = unit(106, "PENDING", start=None, reason="JobHeldAdmin")
        with led.transaction():
            record_units(None, led, {106: requeued}, now=150)
        rows = explain.status_rows(led, 160, active_only=True)
    assert [(r["state"], r["held"]) for r in rows] == [("PENDING", "JobHeldAdmin")]
    assert explain.status_table(rows).splitlines()[1].split()[2] == "HELD"


def test_a_ledger_that_named_the_hold_of_a_running_job_shows_it_running(tmp_path: Path) -> None:
    """A ledger written before running jobs were kept apart may hold ``held`` JobHeldAdmin
    for a RUNNING job: status and explain still show it running."""
    with Ledger(tmp_path / "l.sqlite") as led:
        with led.transaction():
            led.upsert_job(106, user="root", account="a", partition="gpu", state="RUNNING",
                           gpus=1, submit_time=0, restart_count=0, held="JobHeldAdmin", now=10)
        rows = explain.status_rows(led, 20)
        assert [(r["state"], r["held"]) for r in rows] == [("RUNNING", None)]
        assert not any(line.startswith("held by") for line in
                       explain.explain(106, led, DaemonConfig(), now=20).splitlines())


def test_the_tenant_rule_of_a_preemption_is_kept_and_named_for_victim_and_waiter(
        ledger: Ledger) -> None:
    """The rule that chose a victim (written with its intent) still shows after the cycle that
    made it: in the victim's explain and, with its victims, in the waiter's."""
    from daemon_unit_helpers import RecordingClient, observation
    from log_helpers import captured
    from prioritizer.daemon.preempt import Preemptor
    from prioritizer.policy.model import Preemption
    rule = "reclaim: vision at 0 of 8 guaranteed GPUs takes back from nlp at 32 of 16"
    with ledger.transaction():
        ledger.upsert_job(23, user="bob", account="vision", partition="gpu", state="PENDING",
                          gpus=8, submit_time=50, restart_count=0, now=50)
    with captured() as (log, stream):
        p = Preemptor(RecordingClient(), ledger, DaemonConfig(), log)   # type: ignore[arg-type]
        assert p.start((Preemption(23, (42,)),), observation(100, unit(42)),
                       {23: rule}) == [42]
    assert "preempt_intent" in stream.getvalue() and rule in stream.getvalue()
    assert [i.rule for i in ledger.intents(42)] == [None, rule]
    victim = explain.explain(42, ledger, DaemonConfig(), now=200).splitlines()
    assert victim[-1] == f"  preemption for job 23 ({rule}): signal USR2, in progress"
    waiter = explain.explain(23, ledger, DaemonConfig(), now=200).splitlines()
    assert waiter[-1] == f"  preempted job 42 for it ({rule}): in progress"
