"""Partitions in the policy: a job runs only on nodes of its partition (slurm.conf(5)
``Nodes=``), so a free GPU elsewhere does not let it start and a victim elsewhere does not make
room for it (prioritizer/policy/pools.py). Each case is worked out by hand: nodes ``a1`` (in
partition ``a``) and ``b1`` (in ``b``), 8 GPUs each."""

from __future__ import annotations

import dataclasses

import pytest

from policy_helpers import pending, running
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.model import JobView, NodeView, Snapshot
from prioritizer.policy.pools import pools

LAS = PolicyConfig(policy="tiresias-las", thresholds_gpu_s=(100.0, 10000.0), min_run_s=0)
NOW = 10_000.0


def _snap(nodes: dict[str, tuple[str, ...]], jobs: list[JobView]) -> Snapshot:
    """8-GPU nodes in the given partitions; free = 8 less what the running jobs hold."""
    used = {name: 0 for name in nodes}
    for job in jobs:
        for name, gpus in zip(job.nodes, job.gpus_per_node):
            used[name] += gpus
    return Snapshot(tuple(NodeView(n, 8, 8 - used[n], parts) for n, parts in nodes.items()),
                    tuple(jobs))


def _in(job: JobView, *partitions: str) -> JobView:
    return dataclasses.replace(job, partitions=partitions)


def _preempted(snap: Snapshot) -> list[tuple[int, tuple[int, ...]]]:
    return [(p.waiter, p.victims) for p in decide(snap, LAS, NOW).preemptions]


TWO = {"a1": ("a",), "b1": ("b",)}
LONG_IN_A = running(10, (8,), ("a1",), queue=1, attained=5000.0)   # queue 1: a victim


def test_a_free_node_of_another_partition_does_not_let_the_waiter_start() -> None:
    """W (queue 0, 8 GPUs, partition a) waits behind L (queue 1) on a1; b1 is idle. Without
    partitions W "fits" on b1 and preempts nobody; in partition a only L's GPUs make room."""
    waiter = pending(20, (8,), queue=0, queue_entry_time=1.0)
    assert _preempted(_snap(TWO, [LONG_IN_A, waiter])) == []   # partitions unknown: one pool
    jobs = [_in(LONG_IN_A, "a"), _in(waiter, "a")]
    assert _preempted(_snap(TWO, jobs)) == [(20, (10,))]


def test_no_victim_on_nodes_the_waiter_cannot_use() -> None:
    """W waits in b, where b1 runs H (queue 0, not preemptible by W's rank); L (queue 1) runs
    on a1. Without partitions L is W's victim, freeing a1 that W cannot use."""
    high_in_b = running(11, (8,), ("b1",), queue=0, attained=50.0)
    waiter = pending(20, (8,), queue=0, queue_entry_time=1.0)
    assert _preempted(_snap(TWO, [LONG_IN_A, high_in_b, waiter])) == [(20, (10,))]
    jobs = [_in(LONG_IN_A, "a"), _in(high_in_b, "b"), _in(waiter, "b")]
    assert _preempted(_snap(TWO, jobs)) == []


def test_each_partition_preempts_for_its_own_waiter_in_start_order() -> None:
    long_in_b = _in(running(11, (8,), ("b1",), queue=1, attained=4000.0), "b")
    first = _in(pending(20, (8,), queue=0, queue_entry_time=2.0), "b")
    second = _in(pending(21, (8,), queue=0, queue_entry_time=3.0), "a")
    assert _preempted(_snap(TWO, [_in(LONG_IN_A, "a"), long_in_b, second, first])) == [
        (20, (11,)), (21, (10,))]


@pytest.mark.parametrize(("nodes", "waiter_parts"), [
    ({"a1": ("a", "debug"), "b1": ("b", "debug")}, ("debug",)),   # debug spans both
    (TWO, ("a", "b")),                                         # the waiter's list links them
], ids=["overlapping-partitions", "pending-list"])
def test_linked_partitions_are_one_pool(nodes, waiter_parts) -> None:
    """Where partitions share a node, or a pending job lists both, the nodes are one pool:
    the waiter fits on idle b1 and preempts nobody, as without partitions."""
    jobs = [_in(LONG_IN_A, "a"), _in(pending(20, (8,), queue=0, queue_entry_time=1.0),
                                      *waiter_parts)]
    assert _preempted(_snap(nodes, jobs)) == []
    assert pools(_snap(nodes, jobs).nodes, jobs) == [((0, 1), frozenset({10, 20}))]


def test_pools_of_a_snapshot() -> None:
    nodes = {"a1": ("a",), "b1": ("b",), "a2": ("a",), "c1": ("c",)}
    jobs = [_in(LONG_IN_A, "a"), _in(pending(20, (8,)), "b"), _in(pending(21, (1,)), "a"),
            _in(pending(22, (1,)), "x")]   # x: a partition of no node here
    snap = _snap(nodes, jobs)
    # c1 holds no job: no pool; 22 has no node to run on
    assert pools(snap.nodes, jobs) == [((0, 2), frozenset({10, 21})), ((1,), frozenset({20})),
                                       ((), frozenset({22}))]
    # a partition no job asks for links nothing: debug on a1 and b1 leaves them apart
    both = {"a1": ("a", "debug"), "b1": ("b", "debug")}
    apart = [_in(LONG_IN_A, "a"), _in(pending(20, (8,)), "b")]
    assert pools(_snap(both, apart).nodes, apart) == [((0,), frozenset({10})),
                                                      ((1,), frozenset({20}))]
    # one pool of a single partition's nodes: the others are left out
    assert pools(snap.nodes, jobs[:1]) == [((0, 2), frozenset({10}))]
    # no job: no pool to place anything in
    assert pools(snap.nodes, []) is None
    # a node or job of no known partition: one pool, every node
    assert pools(snap.nodes, [*jobs, pending(23, (1,))]) is None
    assert pools((*snap.nodes, NodeView("z", 8, 8)), jobs) is None


GPU_AND_A = {"a1": ("gpu", "a"), "b1": ("gpu",), "c1": ("gpu",)}


def test_inside_a_pool_a_waiter_takes_victims_only_on_nodes_it_may_use() -> None:
    """gpu spans a1, b1, c1; partition a is a1 alone. W (partition a) waits behind P on a1,
    which it may not preempt (queue 0, older); G1 and G2 (gpu, queue 1) run on b1 and c1.
    Preempting them frees nodes W cannot use: no preemption. A waiter of gpu preempts G1."""
    keep = _in(running(11, (8,), ("a1",), queue=0, attained=50.0), "a")
    g1 = _in(running(12, (8,), ("b1",), queue=1, attained=5000.0), "gpu")
    g2 = _in(running(13, (8,), ("c1",), queue=1, attained=4000.0), "gpu")
    waiter = _in(pending(20, (8,), queue=0, queue_entry_time=1.0), "a")
    assert _preempted(_snap(GPU_AND_A, [keep, g1, g2, waiter])) == []
    anywhere = _in(pending(21, (8,), queue=0, queue_entry_time=1.0), "gpu")
    assert _preempted(_snap(GPU_AND_A, [keep, g1, g2, anywhere])) == [(21, (12,))]
    # W does not "start" on idle b1 either: with b1 free and L (queue 1) on a1, W preempts L
    long_a = _in(running(14, (8,), ("a1",), queue=1, attained=5000.0), "a")
    assert _preempted(_snap(GPU_AND_A, [long_a, g2, waiter])) == [(20, (14,))]


def test_a_gang_is_placed_on_the_nodes_of_its_partition_only() -> None:
    """Partition ab is a1 and b1; a 2 x 8 gang of ab waits. c1 (gpu only) is idle and b1
    runs G (queue 1): the gang needs G's node, not c1."""
    nodes = {"a1": ("gpu", "ab"), "b1": ("gpu", "ab"), "c1": ("gpu",)}
    g = _in(running(12, (8,), ("b1",), queue=1, attained=5000.0), "gpu")
    other = _in(running(13, (4,), ("c1",), queue=1, attained=9000.0), "gpu")
    gang = _in(pending(20, (8, 8), queue=0, queue_entry_time=1.0), "ab")
    assert _preempted(_snap(nodes, [g, other, gang])) == [(20, (12,))]


@pytest.mark.parametrize("running_job, nodes", [
    # a1 was taken out of partition a while J runs there (scontrol update ... Nodes=)
    (_in(running(11, (8,), ("a1",), queue=1, attained=5000.0), "a"),
     {"a1": ("gpu",), "b1": ("a",)}),
    # a hetjob whose components run in a (a1) and b (b1)
    (_in(running(11, (8, 8), ("a1", "b1"), queue=1, attained=5000.0), "a", "b"),
     {"a1": ("a",), "b1": ("b",)}),
], ids=["node-left-the-partition", "hetjob-across-partitions"])
def test_a_running_job_joins_the_pool_of_its_nodes(running_job, nodes) -> None:
    """Either way the job and its nodes are one pool with the waiter of partition a: the
    decision is made (no node outside the pool), and the waiter preempts it."""
    waiter = _in(pending(20, (8,), queue=0, queue_entry_time=1.0), "a")
    snap = _snap(nodes, [running_job, waiter])
    (pool,) = pools(snap.nodes, snap.jobs)
    assert pool == ((0, 1), frozenset({11, 20}))
    got = _preempted(snap)
    assert got == ([(20, (11,))] if len(running_job.nodes) == 2 else [])
