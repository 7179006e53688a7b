"""The victims of one-node waiters read off the per-node bound (``policy.fast.one_node``) are the
ones the walk over the candidates chooses: hypothesis fills 2-6 real nodes with running
jobs (one to sixteen GPUs, remaining times that often tie, within the min-run guard or
past it), files short one-node waiters and compares every decision at a daemon tick, all
preemptions with their victims, with the from-scratch ``decide``; then the victims are
released and the next tick is compared too."""

from __future__ import annotations

import collections
import random
from typing import Any, Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prioritizer.policy.fast import one_node
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.victims import DEFER
from prioritizer.policy.fast.incremental import Scheduler
from prioritizer.policy.placement import consolidated_shape

Choose = Callable[[Sequence[Any]], Any]


def _run(choose: Choose) -> None:
    config = PolicyConfig(policy="srtf", min_run_s=choose([0.0, 30.0])).zero_cost()
    totals = [choose([4, 8, 8]) for _ in range(choose([2, 3, 4, 6]))]
    sched = Scheduler(config, totals, [f"n{i}" for i in range(len(totals))])
    next_id = 1
    for now in (0.0, 0.0, 20.0, 40.0):   # fill the nodes: runs that start together
        for _ in range(choose([2, 4, 6])):
            shape = consolidated_shape(choose([1, 1, 2, 4, 8, 16]), max(totals))
            if len(shape) <= len(totals):
                sched.add(next_id, shape, now, choose([300.0, 300.0, 600.0, 900.0]))
                next_id += 1
        sched.decide(now, search=False)
        sched.plan_starts(now)
    now = 60.0
    for _ in range(choose([1, 2, 3])):   # ticks with short one-node waiters
        for _ in range(choose([1, 2, 4])):
            sched.add(next_id, (choose([1, 2, 3, 4, 8]),), now, choose([10.0, 50.0, 250.0]))
            next_id += 1
        oracle = decide(sched.snapshot(now), config, now)
        step = sched.decide(now)
        assert step.preemptions == oracle.preemptions
        for preemption in step.preemptions:
            for victim in preemption.victims:
                sched.signal(victim, now)
                sched.requeue(victim, now, None)
        sched.plan_starts(now)
        now += choose([0.5, 10.0, 30.0])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_one_node_victims_as_the_walk(data: st.DataObject) -> None:
    """Random clusters and waiters: every tick's preemptions equal the oracle's."""
    _run(lambda options: data.draw(st.sampled_from(list(options))))


def test_one_node_victims_cover_their_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same on 300 seeded runs, counting what the helper answered: victims found on
    one node and on several candidates, none, deferred to the walk, after victims were
    taken earlier in the decision (the property checks each path; the counts are not a
    timing)."""
    seen: collections.Counter[str] = collections.Counter()
    call = one_node.OneNodeVictims.__call__

    def counted(self: one_node.OneNodeVictims, level: float, gpus: int, soon: Any,
                taken: set[int], taken_on: dict[int, int]) -> Any:
        result = call(self, level, gpus, soon, taken, taken_on)
        seen["defer" if result is DEFER else "none" if result is None else
             "several" if len(result) > 1 else "one"] += 1
        seen["after victims taken"] += bool(taken_on) and result is not DEFER
        return result
    monkeypatch.setattr(one_node.OneNodeVictims, "__call__", counted)
    for seed in range(300):
        rng = random.Random(seed)
        _run(lambda options: rng.choice(list(options)))
    assert min(seen[k] for k in ("one", "several", "none", "defer",
                                 "after victims taken")) >= 20, seen


def test_a_node_where_victims_were_taken_is_read_first() -> None:
    """Victims taken earlier in a decision free GPUs beyond the per-node bound: the node
    where they were taken must be read whatever its bound says. Node 0 holds X (1 GPU,
    900 s left) and V (7 GPUs, 400 s left); node 1 holds Q (4 GPUs, 600 s left) and W
    (4 GPUs, 20 s left). Waiter 10 (6 GPUs, 100 s) can reach 6 only on node 0: walking
    X then V, V alone suffices, so it takes V and reserves 6 of node 0's 7 GPUs. Waiter 11
    (2 GPUs, 200 s) then walks X first (the longest remaining): node 0 has 1 free + 1 =
    2, so it takes X, although node 0's bound (V's end, 410 s) is below Q's (610 s)."""
    config = PolicyConfig(policy="srtf", min_run_s=0.0).zero_cost()
    sched = Scheduler(config, [8, 8], ["n0", "n1"])
    for job_id, gpus, duration, node in ((1, 1, 910.0, 0), (2, 7, 410.0, 0),
                                         (3, 4, 610.0, 1), (4, 4, 30.0, 1)):
        sched.add(job_id, (gpus,), 0.0, duration)
        sched.start(job_id, (node,), 0.0)
    sched.add(10, (6,), 10.0, 100.0)
    sched.add(11, (2,), 10.0, 200.0)
    oracle = decide(sched.snapshot(10.0), config, 10.0)
    step = sched.decide(10.0)
    assert [(p.waiter, p.victims) for p in step.preemptions] == [(10, (2,)), (11, (1,))]
    assert step.preemptions == oracle.preemptions


def test_a_candidate_on_two_nodes_hits_its_last_one() -> None:
    """A candidate that makes two nodes reach the need at once: the walk keeps the last
    of its nodes (in its own node order). Node 0 holds E (4 GPUs, 990 s left) and half of
    G (4 + 4 GPUs on nodes 1 then 0, 790 s left); node 1 holds G's other half, 4 GPUs
    free. An 8-GPU waiter walks E (node 0: 4), then G: node 1 reaches 8 (4 free + 4) and
    so does node 0 (4 + 4); node 0 comes last in G's nodes, so it hosts the waiter, and
    both E and G are needed there."""
    config = PolicyConfig(policy="srtf", min_run_s=0.0).zero_cost()
    sched = Scheduler(config, [8, 8], ["n0", "n1"])
    sched.add(1, (4,), 0.0, 1000.0)
    sched.start(1, (0,), 0.0)
    sched.add(2, (4, 4), 0.0, 800.0)
    sched.start(2, (1, 0), 0.0)
    sched.add(3, (8,), 10.0, 50.0)
    oracle = decide(sched.snapshot(10.0), config, 10.0)
    step = sched.decide(10.0)
    assert [(p.waiter, p.victims) for p in step.preemptions] == [(3, (1, 2))]
    assert step.preemptions == oracle.preemptions
