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
    assert pools(_snap(nodes, jobs).nodes, jobs) is None


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
    # a node or job of no known partition: one pool, every node
    assert pools(snap.nodes, [*jobs, pending(23, (1,))]) is None
    assert pools((*snap.nodes, NodeView("z", 8, 8)), jobs) is None
