"""Worked examples of the GPU sharing rules (prioritizer/policy/sharing.py): a shard job's
attained service, the victim set of a shared GPU, and opportunistic jobs that never delay a
production job. Settings: tiresias-las, thresholds 3250 / 7200 GPU·s (queue 0 below 3250 GPU·s,
queue 1 up to 7200, queue 2 above), min_run 60 s, now = 10,000 s."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.model import JobPhase, JobView, NodeView, Preemption, Snapshot
from prioritizer.policy.sharing import Share, decide_shared, service_gpus

CFG = PolicyConfig()
NOW = 10_000.0
R, P = JobPhase.RUNNING, JobPhase.PENDING


def running(job_id: int, attained: float, node: str = "n1", gpus: int = 1, start: float = 5_000.0) -> JobView:
    return JobView(job_id, R, (gpus,), submit_time=1_000.0 + job_id, attained_gpu_s=attained,
                   attained_s=attained, run_start=start, nodes=(node,))


def pending(job_id: int, gpus: int = 1, attained: float = 0.0) -> JobView:
    return JobView(job_id, P, (gpus,), submit_time=2_000.0 + job_id, attained_gpu_s=attained,
                   attained_s=attained)


def test_attained_service_of_a_shard_job_is_its_share_times_time() -> None:
    # 0.5 GPU for 100 s: 50 GPU·s; a 0.25 GPU job for 400 s: 100 GPU·s; 4 whole GPUs: 4 per s
    assert service_gpus(1, 0.5) * 100 == 50.0
    assert service_gpus(1, 0.25) * 400 == 100.0
    assert service_gpus(4, 0.0) == 4.0


ONE_GPU = (NodeView("n1", 1, 1),)   # Slurm: GresUsed counts no whole GPU, the shards use it


def test_a_whole_gpu_waiter_preempts_every_shard_job_of_the_gpu_together() -> None:
    # shard jobs 1 and 2 (0.5 each) on GPU 0 of n1: 5000 and 4000 GPU·s, both queue 1;
    # waiter 3 (1 GPU, queue 0) needs that GPU: victims are both, as one set
    snap = Snapshot(ONE_GPU, (running(1, 5000), running(2, 4000), pending(3)))
    shares = {1: Share(0.5, gpu=0), 2: Share(0.5, gpu=0)}
    d = decide_shared(snap, CFG, NOW, shares)
    assert d.preemptions == (Preemption(3, (1, 2)),)
    assert d.order == (3,) and set(d.states) == {1, 2, 3}
    assert (d.states[1].queue, d.states[2].queue, d.states[3].queue) == (1, 1, 0)
    # without the shard rules the GPU looks free to the policy and nobody is preempted
    assert decide(snap, CFG, NOW).preemptions == ()


def test_a_shared_gpu_is_as_protected_as_its_least_served_shard_job() -> None:
    # shard job 2 has 1000 GPU·s (queue 0, like the waiter): the GPU is no victim
    snap = Snapshot(ONE_GPU, (running(1, 5000), running(2, 1000), pending(3)))
    d = decide_shared(snap, CFG, NOW, {1: Share(0.5, gpu=0), 2: Share(0.5, gpu=0)})
    assert d.preemptions == ()
    # ... and the one started 30 s ago keeps the whole GPU in its thrash guard (min_run 60 s)
    snap = Snapshot(ONE_GPU, (running(1, 5000), running(2, 4000, start=NOW - 30), pending(3)))
    assert decide_shared(snap, CFG, NOW, {1: Share(0.5, gpu=0), 2: Share(0.5, gpu=0)}).preemptions == ()


def test_a_pending_shard_job_neither_fits_nor_preempts() -> None:
    # a 0.5-GPU waiter in queue 0 against a whole-GPU job in queue 1: Slurm gives it free
    # shards when there are any; it preempts nothing
    snap = Snapshot((NodeView("n1", 1, 0),), (running(1, 5000), pending(2)))
    d = decide_shared(snap, CFG, NOW, {2: Share(0.5)})
    assert d.preemptions == () and d.order == (2,)
    assert decide(snap, CFG, NOW).preemptions == (Preemption(2, (1,)),)   # as a whole-GPU job


def test_a_production_waiter_takes_an_opportunistic_jobs_gpu_at_once() -> None:
    # opportunistic job 1 started 5 s ago in queue 0; production waiter 2 in queue 0 too:
    # neither thresholds nor the thrash guard keep the opportunistic job
    snap = Snapshot((NodeView("n1", 1, 0),),
                    (running(1, 5, start=NOW - 5), pending(2)))
    d = decide_shared(snap, CFG, NOW, {1: Share(opportunistic=True)})
    assert d.preemptions == (Preemption(2, (1,)),)
    assert decide(snap, CFG, NOW).preemptions == ()   # as production: same queue, no victim


def test_opportunistic_jobs_start_after_production_and_never_preempt_it() -> None:
    # job 2 (opportunistic, submitted first) and job 3 (production) wait; production first
    snap = Snapshot((NodeView("n1", 2, 0),), (running(1, 5000, gpus=2), pending(2), pending(3)))
    d = decide_shared(snap, CFG, NOW, {2: Share(opportunistic=True)})
    assert d.order == (3, 2)
    # the production waiter 3 preempts job 1 (queue 1); job 2 (queue 0 as well) does not
    assert d.preemptions == (Preemption(3, (1,)),)
    only_opp = Snapshot(snap.nodes, (running(1, 5000, gpus=2), pending(2)))
    assert decide_shared(only_opp, CFG, NOW, {2: Share(opportunistic=True)}).preemptions == ()


def test_opportunistic_victims_come_before_production_ones() -> None:
    # n1: production job 1 in queue 2 (8000 GPU·s); n2: opportunistic job 2 in queue 0.
    # Waiter 3 (1 GPU, queue 0) takes the opportunistic job's GPU, not job 1's
    snap = Snapshot((NodeView("n1", 1, 0), NodeView("n2", 1, 0)),
                    (running(1, 8000), running(2, 100, node="n2"), pending(3)))
    d = decide_shared(snap, CFG, NOW, {2: Share(opportunistic=True)})
    assert d.preemptions == (Preemption(3, (2,)),)


def test_no_sharing_is_decide_itself() -> None:
    snap = Snapshot((NodeView("n1", 2, 0),), (running(1, 5000, gpus=2), pending(2), pending(3)))
    assert decide_shared(snap, CFG, NOW, {}) == decide(snap, CFG, NOW)


def test_only_the_opportunistic_victims_the_waiter_needs_are_taken() -> None:
    # waiter 4 needs 2 GPUs on one node. n1: opportunistic job 1 (most served, taken first)
    # and production job 5 (queue 0, no victim); n2: 1 GPU free and opportunistic job 2; n3:
    # opportunistic job 3. Taking job 1 frees 1 GPU of n1: no fit; adding job 2 frees n2
    # whole: fit. Job 1 is then not needed: the victim set is job 2 alone.
    snap = Snapshot((NodeView("n1", 2, 0), NodeView("n2", 2, 1), NodeView("n3", 1, 0)),
                    (running(1, 900, node="n1"), running(5, 100, node="n1"), running(2, 500, node="n2"),
                     running(3, 100, node="n3"), pending(4, gpus=2)))
    shares = {j: Share(opportunistic=True) for j in (1, 2, 3)}
    assert decide_shared(snap, CFG, NOW, shares).preemptions == (Preemption(4, (2,)),)


@st.composite
def _shared_snapshots(draw: st.DrawFn) -> tuple[Snapshot, dict[int, Share]]:
    """1-3 nodes of 1-4 GPUs, each filled by whole-GPU jobs, and pending jobs; any job may be
    opportunistic, a 1-GPU pending job a 0.5 shard job."""
    nodes, jobs, shares = [], [], {}
    next_id = iter(range(1, 100))
    for n in range(draw(st.integers(1, 3))):
        total = draw(st.integers(1, 4))
        used = 0
        while used < total and draw(st.booleans()):
            gpus = draw(st.integers(1, total - used))
            job_id = next(next_id)
            jobs.append(running(job_id, draw(st.sampled_from([10, 5000, 9000])), node=f"n{n}", gpus=gpus,
                                start=draw(st.sampled_from([NOW - 30, 5_000.0]))))
            used += gpus
            if draw(st.booleans()):
                shares[job_id] = Share(opportunistic=True)
        nodes.append(NodeView(f"n{n}", total, total - used))
    for _ in range(draw(st.integers(1, 3))):
        job_id = next(next_id)
        jobs.append(pending(job_id, gpus=draw(st.integers(1, 2)), attained=draw(st.sampled_from([0, 5000]))))
        kind = draw(st.sampled_from(["production", "opportunistic", "shard"]))
        if kind != "production":
            shares[job_id] = Share(0.5 if kind == "shard" else 0.0, opportunistic=kind == "opportunistic")
    return Snapshot(tuple(nodes), tuple(jobs)), shares


@settings(max_examples=300, deadline=None)
@given(_shared_snapshots())
def test_opportunistic_and_shard_invariants(case: tuple[Snapshot, dict[int, Share]]) -> None:
    snap, shares = case
    d = decide_shared(snap, CFG, NOW, shares)
    phase = {j.job_id: j.phase for j in snap.jobs}
    opp = {j for j, s in shares.items() if s.opportunistic}
    assert set(d.states) == set(phase)                     # every real job, no proxy
    assert set(d.order) == {j for j, p in phase.items() if p is P}
    order = list(d.order)
    for a in order:                                        # production before opportunistic
        for b in order[order.index(a) + 1:]:
            assert not (a in opp and b not in opp)
    for p in d.preemptions:
        assert all(phase[v] is R for v in p.victims)
        assert not (shares.get(p.waiter, Share()).share > 0)   # shard waiters preempt nothing
        if p.waiter in opp:                                # opportunistic never preempts production
            assert set(p.victims) <= opp
