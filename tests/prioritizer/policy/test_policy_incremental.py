"""The incremental path of ``policy.decide`` (``previous=``) gives exactly the result of the
plain path: on random snapshots where some jobs keep their very ``JobView`` object, some
change, some leave, and time moves (starvation promotions fall due). (The simulator now
drives ``policy.fast.incremental.Scheduler``: tests/prioritizer/policy/test_policy_scheduler.py.)"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.model import Decisions, Snapshot
from prioritizer.policy.decide import decide
from policy_helpers import pending
from test_policy_properties import DIST, NOW, worlds


def same(a: Decisions, b: Decisions) -> None:
    """Field by field, including the reason strings and the ``changed`` shortcut."""
    assert a == b
    assert a.states == b.states and list(a.states) == list(b.states)
    assert a.changed == b.changed
    assert a.changed == tuple(j for j, s in a.states.items() if s.changed)


@settings(max_examples=150)
@given(worlds(), st.data())
def test_previous_gives_the_plain_result(world, data: st.DataObject) -> None:
    snap, config = world
    first = decide(snap, config, NOW, distribution=DIST)
    jobs = []
    for job in snap.jobs:
        fate = data.draw(st.sampled_from(["keep", "keep", "drop", "queue", "service"]))
        if fate == "drop":
            continue
        if fate == "queue":     # the driver persisted a new state
            job = dataclasses.replace(job, queue=data.draw(st.integers(0, 2)),
                                      queue_entry_time=NOW)
        elif fate == "service":
            job = dataclasses.replace(job, attained_gpu_s=job.attained_gpu_s + 5000.0)
        jobs.append(job)
    later = Snapshot(snap.nodes, tuple(jobs))
    now = NOW + data.draw(st.sampled_from([-50.0, 0.0, 1.0, 100.0, 2000.0, 50000.0]))
    plain = decide(later, config, now, distribution=DIST)
    same(decide(later, config, now, distribution=DIST, previous=first), plain)
    # a memo made under another config or distribution is ignored, not misused
    other = PolicyConfig(policy="fifo" if config.policy != "fifo" else "srtf")
    stale = decide(snap, other, NOW, distribution=DIST)
    same(decide(later, config, now, distribution=DIST, previous=stale), plain)


def test_promotion_falls_due_on_a_reused_view() -> None:
    """A pending job in queue 1 that ran 100 s and stopped at t=0 is promoted at
    t = 8 × 100 = 800 s (knob 8) even though its view object is reused from t=500."""
    job = pending(7, (1,), queue=1, queue_entry_time=0.0, attained_gpu_s=4000.0,
                  last_run_s=100.0, last_run_end=0.0)
    config = PolicyConfig(policy="tiresias-las", starve_knob=8.0)
    snap = Snapshot((), (job,))
    early = decide(snap, config, 500.0)
    assert early.promotions == () and early.states[7].queue == 1
    due = decide(snap, config, 800.0, previous=early)
    assert due.promotions == (7,) and due.states[7].queue == 0
    assert due.states[7].queue_entry_time == 800.0
