"""The kept "no preemption due" proof of the incremental scheduler (``policy.fast.quiet``):
driven as the simulator drives it between daemon ticks (``decide(victims=False)`` after
every change, ``plan_starts`` after every decision, preemptions acted on now and then,
their victims checkpointing for a while or released at once),
the scheduler finds a preemption exactly when the from-scratch ``decide`` does, for the
same first waiter (and at a tick, every preemption with its victims), whether or not a
kept proof let it skip the search. srtf on 2-4 real nodes (where the proof applies) or
one pool (where it does not: the search decides), the min-run guard on and off."""

from __future__ import annotations

import random
from typing import Any, Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prioritizer.policy.fast import quiet
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.fast.incremental import Scheduler
from prioritizer.policy.placement import consolidated_shape
from test_policy_scheduler import _reference_starts

Choose = Callable[[Sequence[Any]], Any]

#: time steps (s): 0 and 0.0005 (below the proof's SLACK_S: no proof used), the min-run
#: guard's 30 s, and longer
STEPS = [0.0, 0.0005, 0.5, 1.0, 10.0, 30.0, 45.0, 150.0, 700.0]


def _run(choose: Choose, steps: int) -> None:
    config = PolicyConfig(policy="srtf", min_run_s=choose([0.0, 30.0]))
    if choose([False, False, True]):   # GPU counting: one pool
        totals, names = [choose([8, 16])], ["pool"]
    else:
        totals = [choose([4, 8]) for _ in range(choose([2, 3, 4]))]
        names = [f"n{i}" for i in range(len(totals))]
    sched = Scheduler(config, totals, names)
    now, next_id = 0.0, 1
    for _ in range(steps):
        now += choose(STEPS)
        ops = [choose(["submit", "submit", "finish", "release", "none"])
               for _ in range(choose([0, 1, 2]))]
        for op in ops:
            running = sorted(j for j, r in sched.holding.items() if r.phase == "running")
            if op == "release" and sched.grace:   # a checkpoint's grace time is over
                sched.requeue(choose(sorted(sched.grace)), now, choose([None, now + 60.0]))
            if op == "submit":
                gpus = choose([1, 2, 3, 4, 8, 12])
                shape = ((gpus,) if names == ["pool"]
                         else consolidated_shape(gpus, max(totals)))
                if len(shape) == 1 and gpus > max(totals):
                    continue
                if len(shape) > len(totals):
                    continue   # can never fit: the simulator never submits such a job
                sched.add(next_id, shape, now, choose([20.0, 50.0, 53.0, 400.0, 3000.0]))
                next_id += 1
            elif op == "finish" and running:
                sched.finish(choose(running), now)
        snapshot = sched.snapshot(now)
        if not snapshot.jobs:
            continue
        oracle = decide(snapshot, config, now)
        if choose([False, False, True]):   # a daemon tick: every preemption, victims chosen
            assert sched.decide(now).preemptions == oracle.preemptions
            first = oracle.preemptions[:1]
        else:
            first = sched.decide(now, victims=False).preemptions
        assert len(first) == min(len(oracle.preemptions), 1)
        if first:
            assert first[0].waiter == oracle.preemptions[0].waiter
            assert first[0].victims in ((), oracle.preemptions[0].victims)
            if choose([True, False]):   # a daemon tick acts on it: checkpoint signals,
                for preemption in oracle.preemptions:   # the GPUs released now (zero
                    for victim in preemption.victims:   # cost) or after a grace time
                        sched.signal(victim, now)
                        if choose([True, False]):
                            sched.requeue(victim, now, choose([None, now + 60.0]))
                continue   # the next decision (maybe at this very time) starts jobs
        expected = _reference_starts(snapshot, oracle, sorted(sched.grace), now)
        assert [(p.job_id, p.nodes) for p in sched.plan_starts(now)] == expected


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_kept_proof_decides_as_decide(data: st.DataObject) -> None:
    """Random sequences: every decision between ticks agrees with the oracle."""
    _run(lambda options: data.draw(st.sampled_from(list(options))), 40)


def test_kept_proof_is_used_and_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same on 150 seeded sequences of 60 steps, counting how often the proof let a
    decision skip its search: the property above checks the path it is meant to check
    (the count only has to be large; it is not a timing)."""
    used = [0, 0, 0]   # no search (none due, one due), search
    answer = quiet.QuietProof.answer

    def counted(self: quiet.QuietProof, sched: Scheduler, now: float, first_only: bool
                ) -> Any:
        result = answer(self, sched, now, first_only)
        used[2 if result is None else len(result)] += 1
        return result
    monkeypatch.setattr(quiet.QuietProof, "answer", counted)
    for seed in range(150):
        rng = random.Random(seed)
        _run(lambda options: rng.choice(list(options)), 60)
    assert used[0] >= 500 and used[1] >= 50 and used[2] >= 500, used
