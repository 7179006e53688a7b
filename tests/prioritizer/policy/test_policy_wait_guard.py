"""``PolicyConfig.wait_guard``: a running job is no victim before it has run ``wait_guard ×``
as long as it waited before this run (``min_run_s`` still applies when longer). Cases worked
out by hand: on one 8-GPU node through ``decide``, and replayed by the simulator on one
1-GPU node at zero cost (thresholds 3250/7200 GPU·s)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.durations import load_distribution
from prioritizer.policy.model import Preemption
from prioritizer.policy.victims import guard_start, waited_before
from prioritizer.sim.engine import Cluster, simulate, simulate_shared
from prioritizer.sim.traces import Trace, TraceJob
from tests.policy_helpers import pending, running, snapshot

NOW = 10_000.0


@pytest.mark.parametrize(("run_start", "waited", "min_run", "guard", "expected"), [
    (9_000.0, 4_000.0, 60.0, 0.0, 9_000.0),     # off: the run's start
    (9_000.0, 4_000.0, 60.0, 1.0, 12_940.0),    # spared until 9,000 + 4,000 = 13,000
    (9_000.0, 4_000.0, 60.0, 0.5, 10_940.0),    # until 9,000 + 2,000
    (9_000.0, 30.0, 60.0, 1.0, 9_000.0),        # 30 s waited < min_run_s: min_run_s rules
    (9_000.0, 4_000.0, 0.0, 1.0, 13_000.0),
])
def test_guard_start(run_start: float, waited: float, min_run: float, guard: float,
                     expected: float) -> None:
    assert guard_start(run_start, waited, min_run, guard) == expected


def test_waited_before_counts_from_last_run_end_else_submission() -> None:
    assert waited_before(9_000.0, 5_000.0, 0.0) == 4_000.0
    assert waited_before(9_000.0, None, 8_000.0) == 1_000.0


def _holder(run_start: float, last_run_end: float | None, submit: float) -> object:
    """8 GPUs in the last queue (80,000 GPU·s attained) since ``run_start``."""
    return running(1, (8,), ("n0",), queue=2, attained=80_000.0, run_start=run_start,
                   submit_time=submit, last_run_end=last_run_end,
                   last_run_s=1_000.0 if last_run_end is not None else 0.0)


@pytest.mark.parametrize(("holder", "config", "now", "preempts"), [
    # ran 1,000 s after a wait of 4,000 s (requeued at 5,000, restarted at 9,000)
    ("requeued", PolicyConfig(), NOW, True),                       # off: past min_run_s
    ("requeued", PolicyConfig(wait_guard=1.0), NOW, False),        # 1,000 < 4,000
    ("requeued", PolicyConfig(wait_guard=0.2), NOW, True),         # 1,000 >= 800
    ("requeued", PolicyConfig(wait_guard=1.0), 13_000.0, True),    # 4,000 >= 4,000
    # first run, after 1,000 s queued since submission at 8,000
    ("fresh", PolicyConfig(wait_guard=1.0), NOW, True),            # 1,000 >= 1,000
    ("fresh", PolicyConfig(wait_guard=1.5), NOW, False),           # 1,000 < 1,500
    ("fresh", PolicyConfig(wait_guard=1.0, min_run_s=3_600.0), NOW, False),  # min_run_s
], ids=lambda v: v if isinstance(v, str) else str(getattr(v, "wait_guard", v)))
def test_guarded_run_is_no_victim(holder: str, config: PolicyConfig, now: float,
                                  preempts: bool) -> None:
    job = (_holder(9_000.0, 5_000.0, 0.0) if holder == "requeued"
           else _holder(9_000.0, None, 8_000.0))
    waiter = pending(2, (8,), submit=9_500.0)   # new: queue 0 outranks the last queue
    for policy in ("tiresias-las", "tiresias-gittins", "las"):
        d = decide(snapshot({"n0": 8}, [job, waiter]),  # type: ignore[list-item]
                   dataclasses.replace(config, policy=policy), now,  # type: ignore[arg-type]
                   distribution=load_distribution())
        assert d.preemptions == ((Preemption(2, (1,)),) if preempts else ()), policy


def _trace(*jobs: tuple[float, int, float]) -> Trace:
    """Jobs as (submit, GPUs, duration) in submit order."""
    return Trace("mem", "tiresias", tuple(TraceJob(i, str(i), i + 2, s, g, d)
                                          for i, (s, g, d) in enumerate(jobs)), 0)


@pytest.mark.parametrize("replay", [simulate, simulate_shared], ids=["engine", "shared"])
@pytest.mark.parametrize(("guard", "b_start", "b_end"), [
    (0.0, 5_000.0, 5_100.0),    # B preempts A on arrival
    (1.0, 6_000.0, 6_100.0),    # A waited 3,000 s: no victim before 3,000 + 3,000
])
def test_replay_spares_a_run_as_long_as_its_wait(guard: float, b_start: float,
                                                 b_end: float, replay: Any) -> None:
    """One 2-GPU node, zero cost, 2D-LAS. X (0 s, 1 GPU, 3,000 s) starts first and stays
    in queue 0 (3,000 < 3,250 GPU·s), so A (0 s, 2 GPUs, 4,000 s) cannot preempt it: A
    waits 3,000 s and runs from 3,000. At 5,000 A has 4,000 GPU·s (queue 1) when B (5,000 s,
    2 GPUs, 100 s) arrives in queue 0. Without the guard B preempts A at once; with
    ``wait_guard: 1`` A is spared until 6,000. A resumes when B ends and finishes at 7,100
    either way (zero cost): only B's JCT moves, 100 s -> 1,100 s. Both replays (the
    incremental engine, and the one of shard jobs that calls ``decide`` at every event)."""
    config = dataclasses.replace(PolicyConfig().zero_cost(), wait_guard=guard)
    result = replay(_trace((0.0, 1, 3_000.0), (0.0, 2, 4_000.0), (5_000.0, 2, 100.0)),
                    Cluster(1, 2), config)
    jobs = {j.job_id: j for j in result.jobs}
    assert (jobs[0].start, jobs[0].end) == (0.0, 3_000.0)
    assert (jobs[1].start, jobs[1].end, jobs[1].preemptions) == (3_000.0, 7_100.0, 1)
    assert (jobs[2].start, jobs[2].end) == (b_start, b_end)
