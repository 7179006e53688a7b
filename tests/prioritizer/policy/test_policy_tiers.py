"""Partition PriorityTier in the policy: Slurm orders pending jobs by the
tier of their partition before their priority (slurm.conf(5) PriorityTier; SLURM-NOTES
"Scheduling order"), so the daemon must not free GPUs that a higher tier will take."""

from __future__ import annotations

from policy_helpers import pending, running, snapshot
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide

LAS = PolicyConfig(policy="tiresias-las", thresholds_gpu_s=(100.0, 10000.0), min_run_s=0)
NOW = 10_000.0


def test_pending_order_is_tier_first_then_policy() -> None:
    jobs = [pending(1, (1,), queue=0, queue_entry_time=5.0),
            pending(2, (1,), queue=1, queue_entry_time=1.0, tier=1),
            pending(3, (1,), queue=0, queue_entry_time=9.0, tier=1)]
    assert decide(snapshot({"n1": 8}, jobs), LAS, NOW).order == (3, 2, 1)


def _blocked_high_tier_case(high_tier: int) -> list:
    """n1 runs R (queue 1, 8 GPUs). H (tier ``high_tier``, queue 2) cannot preempt R; W (tier
    0, queue 0) could. H comes first in Slurm's order when its tier is higher."""
    return [running(10, (8,), ("n1",), queue=1, attained=500.0),
            pending(20, (8,), queue=2, queue_entry_time=1.0, tier=high_tier,
                    attained_gpu_s=20000.0),
            pending(30, (8,), queue=0, queue_entry_time=2.0)]


def test_no_preemption_for_a_low_tier_waiter_while_a_higher_tier_job_is_blocked() -> None:
    snap = snapshot({"n1": 8}, _blocked_high_tier_case(high_tier=1))
    assert decide(snap, LAS, NOW).preemptions == ()
    # the same jobs in one tier: W outranks R and preempts it (the rule is the tier)
    same = snapshot({"n1": 8}, _blocked_high_tier_case(high_tier=0))
    assert [(p.waiter, p.victims) for p in decide(same, LAS, NOW).preemptions] == [(30, (10,))]


def test_victims_come_only_from_the_waiters_tier_or_lower() -> None:
    high = [running(10, (8,), ("n1",), queue=1, attained=500.0, tier=1),
            pending(30, (8,), queue=0, queue_entry_time=2.0)]
    assert decide(snapshot({"n1": 8}, high), LAS, NOW).preemptions == ()
    low = [running(10, (8,), ("n1",), queue=1, attained=500.0),
           pending(30, (8,), queue=0, queue_entry_time=2.0, tier=1)]
    assert [p.victims for p in decide(snapshot({"n1": 8}, low), LAS, NOW).preemptions] == [(10,)]


def test_a_high_tier_waiter_that_gets_victims_does_not_stop_lower_tiers() -> None:
    jobs = [running(10, (8,), ("n1",), queue=1, attained=500.0),
            running(11, (8,), ("n2",), queue=1, attained=400.0),
            pending(20, (8,), queue=0, queue_entry_time=1.0, tier=1),
            pending(30, (8,), queue=0, queue_entry_time=2.0)]
    got = [(p.waiter, p.victims) for p in decide(snapshot({"n1": 8, "n2": 8}, jobs), LAS,
                                                 NOW).preemptions]
    assert got == [(20, (10,)), (30, (11,))]
