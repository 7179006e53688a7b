"""Builders shared by the dlqueue tests: a :class:`Job` with defaults and snapshot entries."""

from __future__ import annotations

from typing import Any

from prioritizer.daemon.snapshot import PublicJob, PublicSnapshot
from slurm_plugin.slurm.records import Job


def make_job(job_id: int, **kw: Any) -> Job:
    """A pending 1-node, 2-GPU job of alice submitted at t=1000; override any field."""
    base: dict[str, Any] = dict(
        job_id=job_id, name=f"job{job_id}", user="alice", partition="gpu", state="PENDING",
        reason="Priority", gpus_per_node=2, gpus=2, gpu_indices=(), nodes="", node_list=(),
        node_count=1, submit_time=1000, start_time=None, end_time=None, eligible_time=1000,
        time_limit_s=None, restart_count=0, requeue=True, het_job_id=None, het_job_offset=0,
        array_job_id=None, array_task_id=None, comment="", admin_comment="", priority=100)
    base.update(kw)
    return Job(**base)


def pub(job_id: int, queue: int, attained_gpu_s: float, *, rank: int | None = None,
        preemptions: int = 0, reason: str = "", user: str = "alice",
        state: str = "PENDING") -> PublicJob:
    """One public snapshot entry."""
    return PublicJob(job_id=job_id, user=user, state=state, queue=queue,
                     attained_gpu_s=attained_gpu_s, preemptions=preemptions, promotions=0,
                     restart_count=0, rank=rank, reason=reason)


def snapshot(*jobs: PublicJob, generated_at: float = 0.0) -> PublicSnapshot:
    """A snapshot holding ``jobs`` (thresholds of the reference simulator: 3250, 7200 GPU·s)."""
    return PublicSnapshot(generated_at=generated_at, cycle=7, mode="priority",
                          thresholds_gpu_s=(3250.0, 7200.0), jobs=tuple(jobs))
