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
a cluster of its own (:func:`pools`). Inside a pool every job is placed on every node, as on
a cluster of one partition: a job of ``debug`` beside jobs of ``gpu`` is placed as if it
could use every node of ``gpu`` (exact where the partitions that jobs use share no node, as
with one partition per GPU type; an approximation where they overlap).

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
    only pools that hold a job. None when every node and job is one pool, or when some node
    or job names no partition (then there is one pool, every node).

    A running job belongs to the pool of its nodes (it runs in one partition, on nodes of
    it), a pending one to the pool of its partitions.
    """
    jobs = list(jobs)
    if not nodes or any(not n.partitions for n in nodes) or any(not j.partitions for j in jobs):
        return None
    linked = _Linked()
    for job in jobs:
        linked.link(job.partitions)
    used = frozenset(linked.parent)   # a partition no job asks for links nothing
    node_pool: list[str | None] = []
    for node in nodes:
        mine = [p for p in node.partitions if p in used]
        if mine:
            linked.link(mine)
        node_pool.append(mine[0] if mine else None)
    node_pool = [linked.find(p) if p is not None else None for p in node_pool]
    of_node = {n.name: p for n, p in zip(nodes, node_pool) if p is not None}
    members: dict[str, list[int]] = {}
    for job in jobs:
        where = {of_node[name] for name in job.nodes if name in of_node}
        # a running job's nodes name its pool; a pending one's partitions do (linked above,
        # so a job whose nodes and partition disagree still lands in one pool)
        pool = where.pop() if len(where) == 1 else linked.find(job.partitions[0])
        members.setdefault(pool, []).append(job.job_id)
    if len(members) == 1 and len(set(node_pool)) == 1 and None not in node_pool:
        return None
    out = []
    for key in dict.fromkeys(node_pool):
        if key is not None and key in members:
            out.append((tuple(i for i, p in enumerate(node_pool) if p == key),
                        frozenset(members.pop(key))))
    # jobs of a pool without a node (partitions of no node here): no node to place them on
    out += [((), frozenset(ids)) for ids in members.values()]
    return out
