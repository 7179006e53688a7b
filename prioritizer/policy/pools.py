"""Node pools: the nodes a job may be placed on, by partition (pure).

Slurm runs a job on nodes of its partition only (slurm.conf(5) ``PartitionName ... Nodes=``;
a pending job submitted with a list, ``-p a,b``, runs in one of them, sbatch(1)
``--partition``). A site with one partition per GPU type (``a100`` on some nodes, ``v100`` on
the others) has a waiter in ``a100`` that no free GPU of a ``v100`` node helps and that no
victim there makes room for. A *pool* is a set of nodes and the jobs that may use them, joined
wherever the jobs' partitions link them: the partitions of one pending job's list are one
pool, and so are partitions that share a node once jobs ask for both (jobs in ``gpu`` over
every node and in ``debug`` over two of them); a partition no job asks for links nothing, and
a node in none of the jobs' partitions is in no pool. Each pool is placed and preempted on as
a cluster of its own (:func:`pools`), and inside a pool a job that may use only some of its
nodes (``debug`` on two of the nodes of ``gpu``) starts, reserves and takes victims only on
those (:func:`allowed_nodes`; ``policy.preemption.find_preemptions``'s ``allowed``). A job
named by several partitions may use the nodes of each (a hetjob's components are not told
apart: each may land on any of them).

Where nodes or jobs name no partition (the simulator's traces, a test's snapshot) there is
one pool, every node: the rule is then the paper's own, unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prioritizer.policy.model import JobView, NodeView


class _Linked:
    """Union-find over partition names."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        parent = self.parent.setdefault(name, name)
        while parent != name:
            grand = self.parent[parent]
            self.parent[name] = grand
            name, parent = parent, grand
        return name

    def link(self, names: Sequence[str]) -> None:
        first = self.find(names[0])
        for other in names[1:]:
            root = self.find(other)
            if root != first:
                self.parent[root] = first


def pools(nodes: Sequence[NodeView], jobs: Iterable[JobView]
          ) -> list[tuple[tuple[int, ...], frozenset[int]]] | None:
    """The pools of a snapshot: per pool, the indices into ``nodes`` of its nodes and the
    ids of its jobs (each job in exactly one pool), in the order of each pool's first node;
    only pools that hold a job. None when there is no job, or when some node or job names no
    partition (then there is one pool, every node).

    A running job joins the pool of its partitions with the pools of the nodes it runs on
    (a hetjob whose components run in two partitions; a node taken out of the job's partition
    since it started is in its pool while it runs there); a pending job is in the pool of its
    partitions.
    """
    jobs = list(jobs)
    if not jobs or not nodes or any(not n.partitions for n in nodes) \
            or any(not j.partitions for j in jobs):
        return None
    linked = _Linked()
    for job in jobs:
        linked.link(job.partitions)
    used = frozenset(linked.parent)   # a partition no job asks for links nothing
    node_part: dict[str, str | None] = {}
    for node in nodes:
        mine = [p for p in node.partitions if p in used]
        if mine:
            linked.link(mine)
        node_part[node.name] = mine[0] if mine else None
    for job in jobs:
        for name in job.nodes:
            if name not in node_part:
                continue
            here = node_part[name]
            if here is None:
                node_part[name] = job.partitions[0]
            else:
                linked.link([job.partitions[0], here])
    node_pool = [None if node_part[n.name] is None else linked.find(node_part[n.name] or "")
                 for n in nodes]
    members: dict[str, list[int]] = {}
    for job in jobs:
        members.setdefault(linked.find(job.partitions[0]), []).append(job.job_id)
    out = []
    for key in dict.fromkeys(node_pool):
        if key is not None and key in members:
            out.append((tuple(i for i, p in enumerate(node_pool) if p == key),
                        frozenset(members.pop(key))))
    # jobs of a pool without a node (partitions of no node here): no node to place them on
    out += [((), frozenset(ids)) for ids in members.values()]
    return out


def allowed_nodes(nodes: Sequence[NodeView], jobs: Iterable[JobView]
                  ) -> dict[int, frozenset[int]]:
    """Per job of ``jobs`` that may use only some of ``nodes`` (one pool's), the indices into
    ``nodes`` of those it may use: the nodes of its partitions. A job that may use every one
    of them is left out (no restriction); so is one that names no partition."""
    parts = [frozenset(n.partitions) for n in nodes]
    by_parts: dict[tuple[str, ...], frozenset[int] | None] = {}
    out: dict[int, frozenset[int]] = {}
    for job in jobs:
        if not job.partitions:
            continue
        if job.partitions not in by_parts:
            mine = frozenset(i for i, ps in enumerate(parts) if not ps.isdisjoint(job.partitions))
            by_parts[job.partitions] = None if len(mine) == len(nodes) else mine
        mask = by_parts[job.partitions]
        if mask is not None:
            out[job.job_id] = mask
    return out
