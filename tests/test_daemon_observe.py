"""observe's pure parts: hetjob components become one unit; what the policy is told about
held, exempt and non-requeueable jobs (issue 5, "Each cycle" and "Preemption")."""

from __future__ import annotations

import math
from pathlib import Path

from daemon_unit_helpers import unit
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.policy.model import JobPhase
from prioritizer.daemon.observe import build_snapshot, record_units, units_from_jobs
from slurm_plugin.records import Node, job_from_json


def _job(**kw: object) -> dict:
    base = {"job_id": 10, "job_state": "RUNNING", "user_name": "bob", "partition": "gpu",
            "tres_per_node": "gres:gpu:8", "node_count": 1, "nodes": "node1", "start_time": 100,
            "submit_time": 90, "requeue": True, "comment": "dl:v1;signal=USR2;grace=60"}
    base.update(kw)
    return base


def test_hetjob_is_one_unit_keyed_by_leader_with_every_component_node() -> None:
    jobs = [job_from_json(_job(job_id=11, het_job_id=10, het_job_offset=1, node_count=2,
                               nodes="node[2-3]", tres_per_node="gres:gpu:2", comment="")),
            job_from_json(_job(job_id=10, het_job_id=10, het_job_offset=0)),
            job_from_json(_job(job_id=12, tres_per_node=None, comment=""))]   # CPU-only job
    units = units_from_jobs(jobs, DaemonConfig())
    assert list(units) == [10]
    u = units[10]
    assert u.gpus_per_node == (8, 2, 2) and u.nodes == ("node1", "node2", "node3")
    assert u.gpus == 12 and u.contract is not None and u.contract.grace_s == 60


def test_partitions_filter_and_malformed_marker() -> None:
    jobs = [job_from_json(_job(job_id=1, partition="cpu")),
            job_from_json(_job(job_id=2, comment="dl:v1;signal=KILL;grace=5"))]
    units = units_from_jobs(jobs, DaemonConfig(partitions=("gpu",)))
    assert list(units) == [2] and units[2].contract is None


def _node(name: str, used: int) -> Node:
    return Node(name, "127.0.0.1", "mixed", (), ("gpu",), 16, 2, 8, 64000, 8, used, "a100")


def test_snapshot_marks_exempt_held_and_unrequeueable_jobs(tmp_path: Path) -> None:
    cfg = DaemonConfig(exempt_accounts=("vip",))
    units = {u.job_id: u for u in (
        unit(1, gpus=8), unit(2, gpus=8, account="vip"),
        unit(3, "PENDING", start=None, reason="JobHeldUser"),
        unit(4, "PENDING", start=None, reason="Resources"))}
    units[5] = unit(5, gpus=8).__class__(**{**unit(5, gpus=8).__dict__, "requeue": False})
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            record_units(None, ledger, units, now=130)
        snap = build_snapshot(ledger, units, [_node("node1", 8)], [], cfg, now=130)
    views = {v.job_id: v for v in snap.jobs}
    assert [views[j].preemptible for j in (1, 2, 5)] == [True, False, False]
    assert views[1].phase is JobPhase.RUNNING and views[1].run_start == 100
    assert views[1].attained_gpu_s == 8 * 30 and views[1].nodes == ("node1",)
    assert views[3].eligible_time == math.inf and views[4].eligible_time is None
