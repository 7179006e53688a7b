"""dlprio explain / status from a hand-built ledger (issue 5 (e) and `status --json` keys)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prioritizer.daemon import explain
from prioritizer.policy.config import PolicyConfig
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger


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


def test_explain_unknown_job(ledger: Ledger) -> None:
    with pytest.raises(explain.UnknownJob, match="job 5: not in the ledger"):
        explain.explain(5, ledger, DaemonConfig(), now=0)


def test_status_json_keys_exactly(ledger: Ledger) -> None:
    rows = explain.status_rows(ledger, now=100)
    assert json.loads(json.dumps(rows)) == [{
        "job_id": 42, "user": "alice", "state": "PENDING", "queue": 1, "attained_gpu_s": 60.0,
        "preemptions": 1, "promotions": 0, "restart_count": 1}]
    table = explain.status_table(rows).splitlines()
    assert table[0].split()[3:5] == ["QUEUE", "ATTAINED(GPU·s)"]   # the unit named, as in dlqueue
    assert table[1].split() == ["42", "alice", "PENDING", "Q1", "60.0", "1", "0", "1"]
