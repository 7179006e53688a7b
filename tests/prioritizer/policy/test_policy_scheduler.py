"""The incremental scheduler (``policy.fast.incremental.Scheduler``) decides exactly as the
from-scratch ``policy.decide`` (the oracle): hypothesis drives both with the same random
event sequences (submissions, time passing, starts, checkpoint signals, requeues with and
without BeginTime, completions) on random clusters and configs, and every decision is
compared field by field: queue states that changed (with their reasons), promotions,
preemptions (waiters and victims), the full pending order, and which jobs start where."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prioritizer.policy.config import POLICY_NAMES, PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.fast.incremental import Scheduler
from prioritizer.policy.placement import FreeMap, consolidated_shape, plan_starts
from test_policy_properties import DIST


def _reference_starts(snapshot, decisions, grace_nodes, now):
    """Slurm's part on the oracle's order: ``plan_starts`` from the snapshot's free GPUs,
    GPUs of checkpointing jobs held as reservations (what the simulator always did)."""
    index = {node.name: i for i, node in enumerate(snapshot.nodes)}
    free = FreeMap([node.gpus_free for node in snapshot.nodes])
    soon = None
    views = {job.job_id: job for job in snapshot.jobs}
    for job_id in grace_nodes:
        soon = soon or free.copy()
        soon.add([index[n] for n in views[job_id].nodes], views[job_id].gpus_per_node)
    eligible = ((j, views[j].gpus_per_node) for j in decisions.order
                if views[j].eligible_time is None or views[j].eligible_time <= now)
    plan = plan_starts(eligible, free, soon, decisions.strict_order, complete=False)
    return [(p.job_id, p.nodes) for p in plan.starts]


@st.composite
def configs(draw: st.DrawFn) -> PolicyConfig:
    """A policy and its settings; the thresholds two queues or three, at other places, so
    a switch between two of them moves jobs up and down and past the last queue."""
    policy = draw(st.sampled_from(POLICY_NAMES))
    thresholds = draw(st.sampled_from([(300.0, 1200.0), (300.0, 1200.0), (100.0,),
                                       (50.0, 500.0, 2500.0)]))
    return PolicyConfig(policy=policy, thresholds_gpu_s=thresholds,
                        thresholds_s=tuple(t / 3 for t in thresholds),
                        starve_knob=draw(st.sampled_from([0.0, 1.0, 2.0])),
                        min_run_s=draw(st.sampled_from([0.0, 30.0])),
                        gittins_quantum_gpu_s=300.0,
                        promoted_preempts=draw(st.booleans()),
                        wait_guard=draw(st.sampled_from([0.0, 1.0])),
                        requeue_guard=draw(st.sampled_from([0.0, 0.5])),
                        preempt_gain=draw(st.sampled_from([0.0, 1.0])))


@st.composite
def setups(draw: st.DrawFn):
    config = draw(configs())
    if draw(st.booleans()):
        totals = [draw(st.sampled_from([4, 8, 16]))]          # GPU counting: one pool
        names = ["pool"]
    else:
        totals = draw(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=4))
        names = [f"n{i}" for i in range(len(totals))]
    return config, totals, names


@st.composite
def srtf_setups(draw: st.DrawFn):
    """srtf on one pool (GPU counting) or on 2-4 real nodes: the scheduler's bounds on
    victims (``Scheduler.victim_bound``), and its proofs of a due preemption from them
    (``Scheduler.due_proof``), apply; the min-run guard on or off; the gain rule
    (``preempt_gain``), which turns the proofs of a due preemption and the quiet proof off,
    on or off."""
    config = PolicyConfig(policy="srtf", min_run_s=draw(st.sampled_from([0.0, 30.0])),
                          preempt_gain=draw(st.sampled_from([0.0, 0.0, 1.0])))
    if draw(st.booleans()):
        return config, [draw(st.sampled_from([4, 8, 16]))], ["pool"]
    totals = draw(st.lists(st.sampled_from([2, 4, 8]), min_size=2, max_size=4))
    return config, totals, [f"n{i}" for i in range(len(totals))]


@settings(max_examples=200, deadline=None)
@given(setups(), st.data())
def test_scheduler_decides_as_decide(setup, data: st.DataObject) -> None:
    """Every decision equals the oracle's; a twin scheduler fed the same events but asked
    with ``victims=False`` (a simulator between daemon ticks) finds a preemption exactly
    when the oracle does, for the oracle's first waiter, with the oracle's victims or none
    (a preemption proved due without choosing them)."""
    _drive(setup, data)


@settings(max_examples=300, deadline=None)
@given(srtf_setups(), st.data())
def test_srtf_decides_as_decide(setup, data: st.DataObject) -> None:
    """The same check where the scheduler bounds victims and proves preemptions due (srtf)."""
    _drive(setup, data)


@settings(max_examples=200, deadline=None)
@given(setups(), st.data())
def test_a_switched_scheduler_decides_as_decide_under_the_new_settings(
        setup, data: st.DataObject) -> None:
    """Settings switched between decisions (``Scheduler.switched``: another policy, other
    thresholds, knob, guards; an ``auto_tune`` switch): from then on every decision equals
    the oracle's under the new settings, on the jobs as the old ones left them."""
    _drive(setup, data, switches=True)


def _drive(setup, data: st.DataObject, switches: bool = False) -> None:
    """Random events for a scheduler, its ``victims=False`` twin and the oracle;
    ``switches``: the settings may change between decisions."""
    config, totals, names = setup
    sched = Scheduler(config, totals, names, DIST)
    twin = Scheduler(config, totals, names, DIST)
    now, next_id = 0.0, 1
    for _ in range(data.draw(st.integers(1, 25), label="steps")):
        now += data.draw(st.sampled_from([0.0, 0.5, 10.0, 45.0, 150.0, 700.0]), label="dt")
        if switches and data.draw(st.booleans(), label="switch"):
            config = data.draw(configs(), label="new settings")
            sched, twin = sched.switched(config, DIST), twin.switched(config, DIST)
        both = (sched, twin)
        running = sorted(j for j, r in sched.holding.items() if r.phase == "running")
        grace = sorted(sched.grace)
        ops = data.draw(st.lists(st.sampled_from(
            ["submit", "submit", "finish", "signal", "requeue"]), max_size=4), label="ops")
        for op in ops:
            if op == "submit":
                gpus = data.draw(st.sampled_from([1, 2, 3, 4, 8]))
                shape = ((gpus,) if names == ["pool"]
                         else consolidated_shape(gpus, max(totals)))
                if len(shape) > len(totals) or (len(shape) == 1 and shape[0] > max(totals)):
                    continue   # can never fit: the simulator never submits such a job
                duration = data.draw(st.sampled_from([50.0, 400.0, 3000.0]))
                for s in both:
                    s.add(next_id, shape, now, duration)
                next_id += 1
            elif op == "finish" and running:
                job_id = running.pop(0)
                for s in both:
                    s.finish(job_id, now)
            elif op == "signal" and running:
                job_id = running.pop()
                for s in both:
                    s.signal(job_id, now)
                if data.draw(st.booleans()):   # zero checkpoint cost: released at once
                    eligible = data.draw(st.sampled_from([None, now + 60.0]))
                    for s in both:
                        s.requeue(job_id, now, eligible)
            elif op == "requeue" and grace:
                job_id = grace.pop()
                eligible = data.draw(st.sampled_from([None, now + 60.0]))
                for s in both:
                    s.requeue(job_id, now, eligible)
        snapshot = sched.snapshot(now)
        if not snapshot.jobs:
            continue
        oracle = decide(snapshot, config, now, distribution=DIST)
        step = sched.decide(now)
        assert dict(step.changed) == {j: oracle.states[j] for j in oracle.changed}
        assert step.promotions == oracle.promotions
        assert step.preemptions == oracle.preemptions
        assert step.pending == len(oracle.order)
        assert step.strict_order == oracle.strict_order
        assert sched.start_order(now) == oracle.order
        first = twin.decide(now, victims=False).preemptions
        assert len(first) == min(len(oracle.preemptions), 1)
        if first:
            assert first[0].waiter == oracle.preemptions[0].waiter
            assert first[0].victims in ((), oracle.preemptions[0].victims)
        expected = _reference_starts(snapshot, oracle, sorted(sched.grace), now)
        assert [(p.job_id, p.nodes) for p in sched.plan_starts(now)] == expected
        assert [(p.job_id, p.nodes) for p in twin.plan_starts(now)] == expected
        after = sched.snapshot(now)   # the states the oracle gave are the ones kept
        for job in after.jobs:
            state = oracle.states[job.job_id]
            assert (job.queue, job.queue_entry_time, job.service_base_gpu_s) == (
                state.queue, state.queue_entry_time, state.service_base_gpu_s)


def test_victims_false_reports_only_whether_a_preemption_is_due() -> None:
    """``victims=False`` (a driver between its preemption ticks) stops at the first
    preemption, here proved due without choosing its victims (one pool: 8 GPUs, both
    running jobs end after the waiter would, so preempting one makes room); ``victims=True``
    lists them all, as ``decide`` does."""
    config = PolicyConfig(policy="srtf").zero_cost()
    sched = Scheduler(config, [8], ["pool"])
    for job_id in (1, 2):
        sched.add(job_id, (4,), 0.0, 1000.0)
    sched.decide(0.0)
    sched.plan_starts(0.0)
    for job_id in (3, 4):
        sched.add(job_id, (4,), 10.0, 20.0)
    oracle = decide(sched.snapshot(10.0), config, 10.0)
    assert len(oracle.preemptions) == 2
    probe = Scheduler(config, [8], ["pool"])
    for job_id in (1, 2):
        probe.add(job_id, (4,), 0.0, 1000.0)
    probe.decide(0.0)
    probe.plan_starts(0.0)
    for job_id in (3, 4):
        probe.add(job_id, (4,), 10.0, 20.0)
    first = probe.decide(10.0, victims=False).preemptions
    assert [(p.waiter, p.victims) for p in first] == [(3, ())]
    assert oracle.preemptions[0].waiter == 3
    assert sched.decide(10.0).preemptions == oracle.preemptions


def test_tracked_view_equals_the_constructed_view() -> None:
    """``Tracked.view`` skips JobView's ``__init__``; it must give the very same view."""
    import dataclasses

    from prioritizer.policy.fast.records import Tracked
    from prioritizer.policy.model import JobPhase, JobView

    rec = Tracked(7, (8, 4), 10.0, 500.0, True)
    rec.queue, rec.entry, rec.base, rec.eligible = 1, 20.0, 30.0, 99.0
    rec.closed_gpu_s, rec.closed_s, rec.last_run_s, rec.last_run_end = 120.0, 10.0, 10.0, 40.0
    pending = rec.view(50.0)
    assert pending == JobView(7, JobPhase.PENDING, (8, 4), 10.0, 120.0, 10.0, 30.0, 1, 20.0,
                              None, 10.0, 40.0, True, 510.0, 99.0, (), False)
    rec.phase, rec.run_start, rec.names, rec.eligible = "grace", 60.0, ("a", "b"), None
    running = rec.view(70.0)
    assert running == JobView(7, JobPhase.RUNNING, (8, 4), 10.0, 240.0, 20.0, 30.0, 1, 20.0,
                              60.0, 10.0, 40.0, True, 520.0, None, ("a", "b"), True)
    assert [f.name for f in dataclasses.fields(JobView)] == list(running.__dict__)


@pytest.mark.parametrize("totals, names, shape", [
    ([8], ["pool"], (4, 4)),         # two entries on the one node: never placed
    ([4, 4], ["n0", "n1"], (8,)),    # more GPUs than any node has
])
def test_victims_false_proves_nothing_for_a_need_that_never_fits(totals, names, shape) -> None:
    """The scheduler's bound makes no claim for a need no victim set can place, so
    ``victims=False`` must not report a preemption due for it: the oracle finds none (jobs
    1 and 2 hold every GPU, end after the waiter and are past the min-run guard)."""
    config = PolicyConfig(policy="srtf")
    sched = Scheduler(config, totals, names)
    for job_id, job_shape in ((1, (totals[0],)), (2, (totals[-1],))):
        if names == ["pool"] and job_id == 2:
            continue
        sched.add(job_id, job_shape, 0.0, 10_000.0)
    sched.decide(0.0)
    sched.plan_starts(0.0)
    sched.add(3, shape, 100.0, 50.0)
    assert decide(sched.snapshot(100.0), config, 100.0).preemptions == ()
    assert sched.decide(100.0, victims=False).preemptions == ()
