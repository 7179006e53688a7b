"""What the daemon reads of GPU sharing: each shard job's share of a GPU, the GPU its shards
come from, and each job's class (production or opportunistic), for
:func:`prioritizer.policy.sharing.decide_shared` and the ledger's attained service.

Sources: a job's shards per node from ``tres_per_node`` (``gres:shard:2`` on 22.05,
``gres/shard:2`` from 23.02; :attr:`slurm_plugin.slurm.records.Job.shards_per_node`); shards per GPU
from the node's Gres (``gpu:a100:2,shard:a100:8`` is 4; :func:`slurm_plugin.shard.shards_per_gpu`);
the GPU of a running shard job from ``squeue --json``'s ``gres_detail`` (``shard:2(IDX:0)``),
read only while some shard job runs (the formatted read has no GPU indices); the class from the
checkpoint marker (``class=opportunistic``, slurm_plugin/marker.py). With no shard job and no
opportunistic job none of this changes the daemon's input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar

from prioritizer.policy.model import JobPhase
from prioritizer.policy.sharing import Share
from slurm_plugin.marker import CheckpointContract
from slurm_plugin.slurm.records import Job, Node
from slurm_plugin.shard import share_of, shards_per_gpu



class Unit(Protocol):
    """What the sharing rules read of a unit (:class:`prioritizer.daemon.observe.Unit`, a
    dataclass): a protocol, so observe imports this module and not the other way round."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def shards(self) -> int: ...
    @property
    def share(self) -> float: ...
    @property
    def nodes(self) -> tuple[str, ...]: ...
    @property
    def contract(self) -> CheckpointContract | None: ...
    @property
    def phase(self) -> JobPhase | None: ...


U = TypeVar("U", bound=Unit)


def with_shares(units: Mapping[int, U], nodes: Iterable[Node]) -> dict[int, U]:
    """``units`` with each shard unit's ``share`` set: its shards / the shards per GPU of the node
    it runs on (pending: the most shards per GPU of any node, the smallest share it can get).
    A unit whose shards per GPU are unknown keeps share 0 and counts as one GPU."""
    per_gpu = {n.name: shards_per_gpu(n.gpus_total, n.shards_total) for n in nodes}
    top = max(per_gpu.values(), default=0)
    out = dict(units)
    for job_id, unit in units.items():
        if unit.shards:
            where = per_gpu.get(unit.nodes[0], 0) if unit.nodes else top
            share = float(share_of(unit.shards, where)) if where else 0.0
            if 0 < share < 1 and share != unit.share:
                out[job_id] = dataclasses.replace(unit, share=share)
    return out


def needs_detail(units: Mapping[int, Unit]) -> bool:
    """Whether some shard unit runs: its GPU is read from ``squeue --json`` (costly)."""
    return any(u.shards and u.phase is JobPhase.RUNNING for u in units.values())


def shares(units: Mapping[int, Unit], detail: Iterable[Job] = ()) -> dict[int, Share]:
    """``{unit id: Share}`` for shard and opportunistic units (others: absent). ``detail``:
    jobs read with their ``gpu_indices`` (``SlurmClient.jobs(detail=True)``); a running shard
    unit without one gets no GPU, and is then no victim (its GPU is unknown)."""
    gpu = {j.job_id: j.gpu_indices[0][0] for j in detail
           if j.shards_per_node and j.gpu_indices and j.gpu_indices[0]}
    out: dict[int, Share] = {}
    for job_id, unit in units.items():
        opportunistic = unit.contract is not None and unit.contract.opportunistic
        if unit.share or opportunistic:
            running = unit.phase is JobPhase.RUNNING
            out[job_id] = Share(unit.share, gpu.get(job_id) if running and unit.share else None,
                                opportunistic)
    return out
