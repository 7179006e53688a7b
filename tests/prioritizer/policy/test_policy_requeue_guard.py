"""``PolicyConfig.requeue_guard``: a running job is no victim while the seconds it spent
without GPUs since its first start exceed ``requeue_guard ×`` its run time so far
(``min_run_s`` still applies). Cases worked out by hand: the guard's end
(``victims.guard_start``), decisions on one 8-GPU node through ``decide``, and a replay by
the simulator on one 1-GPU node at zero cost (2D-LAS, thresholds 3250/7200 GPU·s)."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from prioritizer.cli import main
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.fast.incremental import Scheduler
from prioritizer.policy.model import Preemption
from prioritizer.policy.validation import ConfigError
from prioritizer.policy.victims import guard_start, lost_before
from prioritizer.sim.engine import Cluster, simulate, simulate_shared
from prioritizer.sim.traces import Trace, TraceJob
from tests.policy_helpers import pending, running, snapshot


@pytest.mark.parametrize(("wait_guard", "requeue_guard", "lost", "expected"), [
    # a run started at 3,000 after 1,000 s of run time and 2,000 s lost (min_run_s 60)
    (0.0, 0.0, 2_000.0, 3_000.0),    # off: the run's start
    (0.0, 0.5, 2_000.0, 5_940.0),    # spared until run time 1,000 + t >= 4,000: 3,000 s more
    (0.0, 1.0, 2_000.0, 3_940.0),    # until 2,000 of run time: 1,000 s more
    (0.0, 2.0, 2_000.0, 3_000.0),    # 1,000 s of run time repay 2,000 / 2 already
    (0.0, 0.5, 0.0, 3_000.0),        # nothing lost (a first run): only min_run_s
    (1.0, 0.5, 2_000.0, 5_940.0),    # the longer guard rules: 3,000 > wait_guard's 2,000
    (1.0, 1.0, 2_000.0, 4_940.0),    # 2,000 (wait_guard × the 2,000 s wait) > 1,000
])
def test_guard_start(wait_guard: float, requeue_guard: float, lost: float,
                     expected: float) -> None:
    assert guard_start(3_000.0, 2_000.0, 60.0, wait_guard, lost, 1_000.0,
                       requeue_guard) == expected


def test_lost_before_counts_from_the_first_start() -> None:
    # first start at 0, 1,000 s of run time, this run from 3,000: 2,000 s without GPUs
    assert lost_before(3_000.0, 0.0, 1_000.0) == 2_000.0
    assert lost_before(3_000.0, None, 0.0) == 0.0   # this run is the first


def _holder(now: float, first_start: float) -> Any:
    """8 GPUs on n0 in the last queue, running since 3,000 s; submitted at 0. Requeued
    (``first_start`` 0): it ran 0-1,000 s, lost 1,000-3,000 s. Fresh (``first_start``
    3,000): it waited 3,000 s for its first run."""
    before = 1_000.0 if first_start == 0.0 else 0.0
    ran = before + now - 3_000.0
    return running(1, (8,), ("n0",), queue=2, attained=8 * ran, run_start=3_000.0,
                   submit_time=0.0, first_start=first_start,
                   last_run_end=1_000.0 if before else None, last_run_s=before)


@pytest.mark.parametrize(("first_start", "requeue_guard", "now", "preempts"), [
    (0.0, 0.0, 4_000.0, True),      # off: past min_run_s
    (0.0, 0.5, 4_000.0, False),     # lost 2,000 > 0.5 × 2,000 s of run time
    (0.0, 0.5, 5_999.0, False),     # 3,999 s of run time: guard ends at 5,940 + 60
    (0.0, 0.5, 6_000.0, True),      # 4,000 s of run time repay 2,000 / 0.5
    (0.0, 1.0, 4_000.0, True),      # 2,000 s of run time repay 2,000 / 1
    (3_000.0, 0.5, 4_000.0, True),  # a first run: nothing lost, only min_run_s
])
def test_a_job_that_lost_more_than_its_share_is_no_victim(
        first_start: float, requeue_guard: float, now: float, preempts: bool) -> None:
    waiter = pending(2, (8,), submit=3_900.0)   # new: queue 0 outranks the last queue
    d = decide(snapshot({"n0": 8}, [_holder(now, first_start), waiter]),
               PolicyConfig(requeue_guard=requeue_guard), now)
    assert d.preemptions == ((Preemption(2, (1,)),) if preempts else ())


def test_a_negative_requeue_guard_is_refused() -> None:
    with pytest.raises(ConfigError, match="requeue_guard: must be >= 0"):
        PolicyConfig(requeue_guard=-0.5)


def _trace(*jobs: tuple[float, int, float]) -> Trace:
    """Jobs as (submit, GPUs, duration) in submit order."""
    return Trace("mem", "tiresias", tuple(TraceJob(i, str(i), i + 2, s, g, d)
                                          for i, (s, g, d) in enumerate(jobs)), 0)


@pytest.mark.parametrize("replay", [simulate, simulate_shared], ids=["engine", "shared"])
@pytest.mark.parametrize(("guard", "a_end", "a_preemptions", "c_start", "c_end"), [
    (0.0, 15_000.0, 2, 13_000.0, 14_000.0),    # C preempts A on arrival
    (0.5, 15_000.0, 2, 13_000.0, 14_000.0),    # 9,000 s of run time repay 4,000 / 0.5
    (0.25, 14_000.0, 1, 14_000.0, 15_000.0),   # spared until 16,000 s of run time
])
def test_replay_spares_a_job_that_lost_more_than_its_share(
        guard: float, a_end: float, a_preemptions: int, c_start: float, c_end: float,
        replay: Any) -> None:
    """One 1-GPU node, zero cost, 2D-LAS. A (0 s, 1 GPU, 10,000 s) starts at once; B
    (8,000 s, 1 GPU, 4,000 s) arrives in queue 0 while A is in the last queue (8,000 GPU·s)
    and preempts it: A's first run is never guarded. B ends at 12,000, A resumes having run
    8,000 s and lost 4,000 s. C (13,000 s, 1 GPU, 1,000 s) arrives in queue 0: A has run
    9,000 s. With ``requeue_guard`` 0 or 0.5 (4,000 <= 0.5 × 9,000) C preempts A, runs
    13,000-14,000, and A ends at 15,000; with 0.25 (4,000 > 0.25 × 9,000; spared until
    16,000 s of run time) A ends at 14,000 and C runs 14,000-15,000. Both replays (the
    incremental engine, and the one of shard jobs that calls ``decide`` at every event)."""
    config = dataclasses.replace(PolicyConfig().zero_cost(), requeue_guard=guard)
    result = replay(_trace((0.0, 1, 10_000.0), (8_000.0, 1, 4_000.0), (13_000.0, 1, 1_000.0)),
                    Cluster(1, 1), config)
    jobs = {j.job_id: j for j in result.jobs}
    assert (jobs[0].start, jobs[0].end, jobs[0].preemptions) == (0.0, a_end, a_preemptions)
    assert (jobs[1].start, jobs[1].end) == (8_000.0, 12_000.0)
    assert (jobs[2].start, jobs[2].end) == (c_start, c_end)


@pytest.mark.parametrize(("now", "victims"), [(4_000.0, ()), (5_999.0, ()), (6_000.0, (1,))])
def test_incremental_scheduler_keeps_the_guard_as_decide(now: float,
                                                         victims: tuple[int, ...]) -> None:
    """The incremental scheduler (``policy.fast``) gives ``decide``'s preemptions on the
    case above: A (8 GPUs) runs 0-1,000 s, is requeued, restarts at 3,000; B (8 GPUs)
    arrives at 3,900. With ``requeue_guard`` 0.5 A is spared until 6,000."""
    config = PolicyConfig(requeue_guard=0.5)
    sched = Scheduler(config, [8], ["n0"])
    sched.add(1, (8,), 0.0, 10_000.0)
    for t in (0.0, 3_000.0):
        sched.decide(t)
        assert [p.job_id for p in sched.plan_starts(t)] == [1]
        if t == 0.0:
            sched.signal(1, 1_000.0)
            sched.requeue(1, 1_000.0, None)
    sched.add(2, (8,), 3_900.0, 100.0)
    oracle = decide(sched.snapshot(now), config, now)
    expected = (Preemption(2, victims),) if victims else ()
    assert oracle.preemptions == expected
    assert sched.decide(now).preemptions == expected


def test_simulate_takes_the_requeue_guard_option(tmp_path: Path) -> None:
    """``dlprio simulate --requeue-guard 0.25`` replays the case above as the setting does:
    A ends at 14,000 s, C runs 14,000-15,000 s (per-job CSV)."""
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\n"
                     "a,1,0,10000\nb,1,8000,4000\nc,1,13000,1000\n")
    out = tmp_path / "jobs.csv"
    assert main(["simulate", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1",
                 "--zero-cost", "--requeue-guard", "0.25", "--jobs-csv", str(out)]) == 0
    rows = {r["job_id"]: r for r in csv.DictReader(out.read_text().splitlines())}
    assert [(float(rows[n]["start"]), float(rows[n]["end"])) for n in "abc"] == [
        (0.0, 14_000.0), (8_000.0, 12_000.0), (14_000.0, 15_000.0)]
