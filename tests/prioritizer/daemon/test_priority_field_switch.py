"""``priority_field: priority`` switched back to ``site_factor``: a priority set with ``scontrol
update priority=`` stays fixed until the job ends (SLURM-NOTES: multifactor stops computing
it), so the jobs that carry one get no SiteFactor update and are not read back, instead of a
``readback_mismatch`` and a resend every cycle; the daemon says how many once."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from daemon_unit_helpers import FakeSlurm, sinfo_node
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.loop import Daemon
from slurm_plugin.slurm.shapes import job_from_json

T0 = 10_000.0


def _pending(job_id: int, priority: int) -> object:
    return job_from_json({
        "job_id": job_id, "job_state": "PENDING", "user_name": "alice", "partition": "gpu",
        "tres_per_node": "gres:gpu:8", "node_count": 1, "nodes": "", "submit_time": 10,
        "requeue": True, "state_reason": "Resources", "priority": priority,
        "comment": "dl:v1;signal=USR2;grace=60"})


def _events(caplog: pytest.LogCaptureFixture, name: str) -> list[tuple[int | None, dict]]:
    return [(r.job_id, r.fields) for r in caplog.records  # type: ignore[attr-defined]
            if getattr(r, "event", None) == name]


def test_jobs_with_a_fixed_priority_keep_it_after_the_switch_to_site_factor(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Job 5 got ``priority:2999999`` under the old setting; job 6 was never updated. The
    daemon now writes SiteFactors: job 6 gets one, job 5 none, in both cycles, and job 5 is
    not read back; once it has left squeue it is forgotten."""
    cfg = DaemonConfig(ledger_path=str(tmp_path / "l.sqlite"),
                       snapshot_path=str(tmp_path / "s.json"))
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8)])
    client.squeue = [_pending(5, 2_999_999), _pending(6, 1_000)]
    with Ledger(cfg.ledger_path) as ledger:
        ledger.set_meta("priority_field", "priority")
        with ledger.transaction():
            for job_id in (5, 6):
                ledger.upsert_job(job_id, user="alice", account="a", partition="gpu",
                                  state="PENDING", gpus=8, submit_time=10, restart_count=0,
                                  now=T0 - 30)
        ledger.set_applied([5], "priority:2999999")
        daemon = Daemon(cfg, client, ledger, CycleAdapter(), clock=lambda: T0)  # type: ignore[arg-type]
        with caplog.at_level(logging.INFO, logger="dlprio"):
            daemon.cycle()
            daemon.clock = lambda: T0 + 30
            daemon.cycle()
        updated = [ids for kind, ids, _ in (c for c in client.calls if len(c) == 3)
                   if kind in ("site_factor", "priority")]
        assert [5 in ids for ids in updated] == [False] * len(updated) and updated
        assert any(6 in ids for ids in updated)
        assert [(e["was"], e["now"], e["fixed_jobs"])
                for _, e in _events(caplog, "priority_field_changed")] == [
            ("priority", "site_factor", 1)]
        # (the fake Slurm does not apply job 6's SiteFactor: its read-back mismatches)
        assert [j for j, _ in _events(caplog, "readback_mismatch")] == [6]
        assert json.loads(ledger.meta("fixed_priority_jobs") or "") == [5]
        assert ledger.meta("priority_field") == "site_factor"
        client.squeue = [_pending(6, 1_000)]
        daemon.clock = lambda: T0 + 60
        daemon.cycle()
        assert json.loads(ledger.meta("fixed_priority_jobs") or "") == []
