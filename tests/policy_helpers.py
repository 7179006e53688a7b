"""Small builders shared by the policy and simulator tests (not a conftest: plain imports)."""

from __future__ import annotations

from typing import Any

from prioritizer.policy.model import JobPhase, JobView, NodeView, Snapshot


def running(job_id: int, gpus: tuple[int, ...], nodes: tuple[str, ...], *, queue: int,
            attained: float, run_start: float = 0.0, **kw: Any) -> JobView:
    """A RUNNING job on ``nodes`` (aligned with ``gpus``) with attained GPU·s."""
    return JobView(job_id, JobPhase.RUNNING, gpus, submit_time=kw.pop("submit_time", 0.0),
                   attained_gpu_s=attained, attained_s=attained / sum(gpus), queue=queue,
                   queue_entry_time=kw.pop("queue_entry_time", 0.0), run_start=run_start,
                   nodes=nodes, **kw)


def pending(job_id: int, gpus: tuple[int, ...], *, submit: float = 0.0, **kw: Any) -> JobView:
    """A PENDING job (new unless ``queue`` is given)."""
    return JobView(job_id, JobPhase.PENDING, gpus, submit_time=submit, **kw)


def snapshot(node_totals: dict[str, int], jobs: list[JobView]) -> Snapshot:
    """Nodes with free GPUs = total minus what the RUNNING jobs in ``jobs`` hold there."""
    used = {name: 0 for name in node_totals}
    for job in jobs:
        for name, gpus in zip(job.nodes, job.gpus_per_node):
            used[name] += gpus
    nodes = tuple(NodeView(n, t, t - used[n]) for n, t in node_totals.items())
    return Snapshot(nodes, tuple(jobs))
