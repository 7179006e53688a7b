"""Property tests (hypothesis) of the policy's invariants (docs/design.md):
strict queue precedence, victims only from strictly lower priority, victims' GPUs make the
waiter fit, the promotion bound, no job both started and preempted, determinism; plus the
placement search against brute force."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from policy_helpers import pending, running, snapshot
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import Decisions, JobPhase, JobView, Snapshot
from prioritizer.policy.placement import FreeMap, plan_starts
from prioritizer.policy.decide import decide

NOW = 1000.0
QUEUE_SERVICE = {0: (0, 3249), 1: (3250, 7199), 2: (7200, 30000)}
DIST = GittinsDistribution([100, 900, 2500, 5000, 12000, 40000])
QUEUED = ("tiresias-las", "tiresias-gittins", "las")


@st.composite
def worlds(draw: st.DrawFn) -> tuple[Snapshot, PolicyConfig]:
    sizes = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4))
    totals = {f"n{i}": s for i, s in enumerate(sizes)}
    free = dict(totals)
    jobs: list[JobView] = []
    for job_id in range(draw(st.integers(0, 6))):
        names = [n for n, f in free.items() if f > 0]
        if not names:
            break
        node = draw(st.sampled_from(names))
        gpus = draw(st.integers(1, free[node]))
        free[node] -= gpus
        queue = draw(st.integers(0, 2))
        lo, hi = QUEUE_SERVICE[queue]
        attained = float(draw(st.integers(lo, hi)))
        jobs.append(running(
            job_id, (gpus,), (node,), queue=queue, attained=attained,
            run_start=draw(st.sampled_from([0.0, 950.0, 990.0])),
            preemptible=draw(st.booleans()), releasing=draw(st.booleans()),
            duration_s=attained / gpus + draw(st.integers(1, 5000))))
    for job_id in range(100, 100 + draw(st.integers(0, 6))):
        size = draw(st.sampled_from(sizes))
        gpus = (draw(st.integers(1, size)),) if draw(st.booleans()) else (size, size)
        queue = draw(st.integers(0, 2))
        lo, hi = QUEUE_SERVICE[queue]
        attained = float(draw(st.integers(lo, hi))) if queue else 0.0
        ran = draw(st.sampled_from([0.0, 10.0, 100.0])) if queue else 0.0
        jobs.append(pending(
            job_id, gpus, submit=float(draw(st.integers(0, 900))),
            queue=queue if queue or draw(st.booleans()) else None,
            queue_entry_time=float(draw(st.integers(0, 900))), attained_gpu_s=attained,
            attained_s=attained / sum(gpus), last_run_s=ran,
            last_run_end=float(draw(st.integers(0, 999))) if ran else None,
            eligible_time=draw(st.sampled_from([None, 500.0, 1500.0])),
            duration_s=attained / sum(gpus) + draw(st.integers(1, 5000))))
    policy = draw(st.sampled_from(["tiresias-las", "tiresias-gittins", "las", "srtf",
                                   "fifo", "fifo-fit"]))
    config = PolicyConfig(policy=policy, min_run_s=draw(st.sampled_from([0.0, 30.0])),
                          starve_knob=draw(st.sampled_from([0.0, 2.0, 8.0])),
                          promoted_preempts=draw(st.booleans()))
    return snapshot(totals, jobs), config


def run(snap: Snapshot, config: PolicyConfig) -> Decisions:
    return decide(snap, config, NOW, distribution=DIST)


@given(worlds())
def test_strict_queue_precedence(world: tuple[Snapshot, PolicyConfig]) -> None:
    snap, config = world
    d = run(snap, config)
    queues = [d.states[j].queue for j in d.order]
    assert queues == sorted(queues)
    assert sorted(d.order) == sorted(j.job_id for j in snap.jobs if j.phase is JobPhase.PENDING)


@given(worlds())
def test_victims_are_lower_priority_and_allowed(world: tuple[Snapshot, PolicyConfig]) -> None:
    snap, config = world
    d = run(snap, config)
    jobs = {j.job_id: j for j in snap.jobs}
    victims = [v for p in d.preemptions for v in p.victims]
    assert len(victims) == len(set(victims))                  # nobody preempted twice
    assert len({p.waiter for p in d.preemptions}) == len(d.preemptions)
    for p in d.preemptions:
        waiter = jobs[p.waiter]
        assert waiter.phase is JobPhase.PENDING and p.waiter in d.order
        assert waiter.eligible_time is None or waiter.eligible_time <= NOW
        for v in p.victims:
            victim = jobs[v]
            assert victim.phase is JobPhase.RUNNING and v not in d.order
            assert victim.preemptible and not victim.releasing
            assert NOW - victim.run_start >= config.min_run_s
            if config.policy == "srtf":
                assert victim.duration_s - victim.attained_s > waiter.duration_s - waiter.attained_s
            else:
                assert d.states[v].queue > d.states[p.waiter].queue
    if config.policy in ("fifo", "fifo-fit"):
        assert d.preemptions == ()


@given(worlds())
def test_freed_gpus_make_the_waiter_fit(world: tuple[Snapshot, PolicyConfig]) -> None:
    """Walk the target order through Slurm's start model (placement.plan_starts: jobs start where
    they fit now, or reserve what the jobs being preempted will free): each waiter fits neither,
    and fits once its victims' GPUs are added."""
    snap, config = world
    d = run(snap, config)
    index = {n.name: i for i, n in enumerate(snap.nodes)}
    jobs = {j.job_id: j for j in snap.jobs}
    victims_of = {p.waiter: p.victims for p in d.preemptions}
    now_map = FreeMap([n.gpus_free for n in snap.nodes])
    soon: FreeMap | None = None
    for job in snap.jobs:
        if job.releasing:
            soon = soon or now_map.copy()
            soon.add([index[n] for n in job.nodes], job.gpus_per_node)
    served: list[int] = []

    def on_blocked(job_id: int, need: tuple[int, ...], soon_map: FreeMap) -> bool:
        if job_id not in victims_of:
            return False
        assert soon_map.place(need) is None                    # it did not fit before
        for v in victims_of[job_id]:
            soon_map.add([index[n] for n in jobs[v].nodes], jobs[v].gpus_per_node)
        assert soon_map.place(need) is not None                # the freed GPUs make it fit
        served.append(job_id)
        return True

    eligible = [(j, jobs[j].gpus_per_node) for j in d.order
                if jobs[j].eligible_time is None or jobs[j].eligible_time <= NOW]
    plan_starts(eligible, now_map, soon, strict=config.policy == "fifo", on_blocked=on_blocked)
    assert served == [p.waiter for p in d.preemptions]


@given(worlds())
def test_promotion_bound(world: tuple[Snapshot, PolicyConfig]) -> None:
    snap, config = world
    d = run(snap, config)
    if config.policy not in QUEUED or config.starve_knob == 0:
        assert d.promotions == ()
        return
    for job in snap.jobs:
        due = (job.phase is JobPhase.PENDING and job.queue and job.last_run_end is not None
               and job.last_run_s > 0
               and NOW - job.last_run_end >= config.starve_knob * job.last_run_s)
        assert (job.job_id in d.promotions) == bool(due)
        if due:
            assert d.states[job.job_id].queue == 0


@given(worlds(), st.randoms(use_true_random=False))
def test_deterministic_and_independent_of_input_order(world: tuple[Snapshot, PolicyConfig],
                                                      rng) -> None:
    snap, config = world
    jobs = list(snap.jobs)
    rng.shuffle(jobs)
    assert run(Snapshot(snap.nodes, tuple(jobs)), config) == run(snap, config)


@given(st.lists(st.integers(0, 8), min_size=1, max_size=5),
       st.lists(st.integers(1, 8), min_size=1, max_size=3))
def test_place_agrees_with_brute_force(free: list[int], need: list[int]) -> None:
    nodes = FreeMap(free).place(need)
    exists = any(all(free[n] >= g for n, g in zip(perm, need))
                 for perm in itertools.permutations(range(len(free)), len(need)))
    assert (nodes is not None) == exists
    if nodes is not None:
        assert len(set(nodes)) == len(need)
        assert all(free[n] >= g for n, g in zip(nodes, need))
