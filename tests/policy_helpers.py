"""Small builders shared by the policy and simulator tests (not a conftest: plain imports)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from hypothesis import strategies as st

import prioritizer.policy.victim_search as search_module
from prioritizer.policy.model import JobPhase, JobView, NodeView, Snapshot

N = TypeVar("N", bound=Hashable)


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


def draw_placements(draw: st.DrawFn, free: dict[N, int], most: int = 40
                    ) -> list[tuple[tuple[N, ...], tuple[int, ...]]]:
    """The nodes and GPUs per node of up to ``most`` running jobs, drawn one after another on
    the GPUs still ``free`` (node -> free GPUs, lowered by what each takes) until none is
    left: 1-3 nodes each, a gang's entries may be 0 (a GPU-less component) but not all."""
    placed = []
    for _ in range(draw(st.integers(0, most))):
        names = [n for n, f in free.items() if f > 0]
        if not names:
            break
        width = draw(st.integers(1, min(3, len(names))))
        nodes = draw(st.permutations(names))[:width]
        gpus = []
        for node in nodes:
            g = draw(st.integers(0 if width > 1 else 1, free[node]))
            free[node] -= g
            gpus.append(g)
        if not any(gpus):
            gpus[0] = 1   # every entry was 0: give the first node one (it had one free)
            free[nodes[0]] -= 1
        placed.append((tuple(nodes), tuple(gpus)))
    return placed


@contextmanager
def index_after(searches: int) -> Iterator[None]:
    """``victim_search``'s per-node index built after ``searches`` victim searches of a
    decision (0: from the first; a huge number: never) for the duration of the block."""
    saved = search_module._INDEX_AFTER
    search_module._INDEX_AFTER = searches
    try:
        yield
    finally:
        search_module._INDEX_AFTER = saved
