"""What the daemon reads of GPU sharing (prioritizer/daemon/sharing.py): a shard job is a unit
of one GPU whose attained service counts its share, the GPU its shards come from (squeue
--json ``gres_detail``) and its class (the marker), fed to the policy's sharing rules."""

from __future__ import annotations

from pathlib import Path

from prioritizer.daemon import sharing
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.observe import build_snapshot, record_units, units_from_jobs
from prioritizer.policy.sharing import Share
from slurm_plugin.slurm.records import Node
from slurm_plugin.slurm.shapes import job_from_json

NODE = Node("node1", "127.0.0.1", "mixed", (), ("gpu",), 16, 2, 8, 64000, 2, 0, "a100", shards_total=8)


def _job(job_id: int, tres: str, comment: str = "dl:v1;signal=USR2;grace=60", state: str = "RUNNING",
         detail: list[str] | None = None) -> object:
    return job_from_json({
        "job_id": job_id, "job_state": state, "user_name": "bob", "partition": "gpu",
        "tres_per_node": tres, "node_count": 1, "nodes": "node1" if state == "RUNNING" else "",
        "start_time": 100 if state == "RUNNING" else 0, "submit_time": 90, "requeue": True,
        "comment": comment, "gres_detail": detail or []})


def test_shard_jobs_are_units_with_their_share_gpu_and_class() -> None:
    jobs = [_job(1, "gres/shard:2", detail=["shard:2(IDX:1)"]),               # 2 of 4 shards: 0.5
            _job(2, "gres:shard:1", "dl:v1;signal=USR2;grace=60;class=opportunistic", "PENDING"),
            _job(3, "gres/gpu:1", "dl:v1;signal=USR2;grace=60;class=opportunistic"),
            _job(4, "gres/gpu:2")]
    units = sharing.with_shares(units_from_jobs(jobs, DaemonConfig()), [NODE])
    assert (units[1].shards, units[1].share, units[1].gpus, units[1].gpus_per_node) == (2, 0.5, 0.5, (1,))
    assert (units[2].share, units[4].share, units[4].gpus) == (0.25, 0.0, 2)
    assert sharing.needs_detail(units)
    assert sharing.shares(units, jobs) == {1: Share(0.5, gpu=1), 2: Share(0.25, opportunistic=True),
                                           3: Share(0.0, opportunistic=True)}


def test_a_shard_jobs_attained_service_is_its_share_times_its_run(tmp_path: Path) -> None:
    # a 0.5-GPU job that started at 100 s has 0.5 x (400 - 100) = 150 GPU·s at 400 s
    jobs = [_job(1, "gres/shard:2", detail=["shard:2(IDX:0)"])]
    units = sharing.with_shares(units_from_jobs(jobs, DaemonConfig()), [NODE])
    with Ledger(tmp_path / "ledger.db") as ledger:
        with ledger.transaction():
            record_units(None, ledger, units, 400.0)
        snap = build_snapshot(ledger, units, [NODE], [], DaemonConfig(), 400.0)
    (view,) = snap.jobs
    assert (view.attained_gpu_s, view.attained_s, view.gpus_per_node, view.nodes) == (150.0, 300.0, (1,), ("node1",))


def test_without_shards_per_gpu_a_shard_job_keeps_no_share() -> None:
    plain = Node("node1", "127.0.0.1", "mixed", (), ("gpu",), 16, 2, 8, 64000, 2, 0, "a100")
    units = sharing.with_shares(units_from_jobs([_job(1, "gres/shard:2")], DaemonConfig()), [plain])
    assert units[1].share == 0.0 and units[1].gpus == 1 and sharing.shares(units) == {}
