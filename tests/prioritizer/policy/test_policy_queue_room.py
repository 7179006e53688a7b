"""The queue policies' per-node counts (``policy.fast.queue_room``) and the victims read off
them (``policy.fast.queue_victims``), used from the first waiter on instead of from
``incremental.COUNTED_AFTER`` eligible pending jobs: the scheduler still decides exactly as
``decide()`` at every step (the drive of test_policy_scheduler.py: random clusters, queue
policies, gangs, the min-run guard, checkpoint grace, requeues, promotions)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import prioritizer.policy.fast.incremental as incremental
from prioritizer.policy.config import PolicyConfig
from test_policy_scheduler import _drive


@st.composite
def queue_setups(draw: st.DrawFn):
    """A queue policy that preempts, on 2-4 real nodes (where the scheduler keeps the
    counts)."""
    config = PolicyConfig(policy=draw(st.sampled_from(["tiresias-las", "las",
                                                       "tiresias-gittins"])),
                          thresholds_gpu_s=(300.0, 1200.0), thresholds_s=(100.0, 400.0),
                          starve_knob=draw(st.sampled_from([0.0, 1.0, 2.0])),
                          min_run_s=draw(st.sampled_from([0.0, 30.0])),
                          wait_guard=draw(st.sampled_from([0.0, 1.0])),
                          requeue_guard=draw(st.sampled_from([0.0, 0.5])),
                          preempt_gain=draw(st.sampled_from([0.0, 1.0])),
                          gittins_quantum_gpu_s=300.0,
                          promoted_preempts=draw(st.booleans()))
    totals = draw(st.lists(st.sampled_from([2, 4, 8]), min_size=2, max_size=4))
    return config, totals, [f"n{i}" for i in range(len(totals))]


@settings(max_examples=300, deadline=None)
@given(queue_setups(), st.data())
def test_counts_from_the_first_waiter_decide_as_decide(setup, data: st.DataObject) -> None:
    saved = incremental.COUNTED_AFTER
    incremental.COUNTED_AFTER = 0
    try:
        _drive(setup, data)
    finally:
        incremental.COUNTED_AFTER = saved
