"""Trace-driven simulator: one event loop that drives the pure policy (``policy.decide``).

``dlprio simulate`` replays a job trace (``prioritizer.sim.traces``) on N nodes × G GPUs
(docs/design.md, code rule 9: a single ``run`` loop over a heap of frozen events keyed
``(time, priority, seq)``). At every event time it asks ``decide`` for the order, the queue
states and the preemptions, exactly as the daemon does on a cluster, then applies them; it
keeps no scheduling rule of its own. Which pending jobs start is Slurm's part, modeled by
``placement.plan_starts`` (start in target order wherever they fit; strict FIFO stops at the
first misfit). Costs the real system has (``PolicyConfig``): a preempted job keeps its GPUs
``checkpoint_overhead_s`` without progress (checkpoint + restore), may not restart before
``requeue_delay_s`` (Slurm BeginTime), and preemptions happen only on the daemon's
``decision_interval_s`` ticks. Equal times: completions, grace ends, arrivals, requeue ends,
threshold crossings, promotion deadlines, ticks; then trace row order. Deterministic.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.fast.incremental import Scheduler
from prioritizer.policy.fast.records import Tracked
from prioritizer.policy.placement import consolidated_shape, fits_consolidated
from prioritizer.policy.tenants import SHARED, Tenancy
from prioritizer.sim.traces import Trace, TraceJob

if TYPE_CHECKING:
    from prioritizer.sim.shared import SharingFigures


#: ``gc.set_threshold`` values while a replay's event loop runs (Python's defaults: 700, 10, 10).
REPLAY_GC_THRESHOLDS = (5_000, 50, 1_000)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the block with the cyclic garbage collector's thresholds set to
    :data:`REPLAY_GC_THRESHOLDS`, then put the previous ones back (also on an exception).

    A replay allocates small objects at every event and keeps most of them until it ends (job
    records, heap entries, queue states), so with Python's default thresholds the collector
    traverses the ever larger set of survivors again and again (``gc`` module docs,
    ``set_threshold``). Measured on ITP cluster04, ``las`` on real nodes with costs: 2.00-2.05
    CPU s with the defaults, 1.84-1.93 s with these, the same peak RSS (65 MiB): the loop makes
    little cyclic garbage. Results cannot change: collection only frees unreachable objects.
    """
    old = gc.get_threshold()
    gc.set_threshold(*REPLAY_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*old)


# Events are immutable named tuples (cheaper to build than frozen dataclasses; a replay
# pushes about a hundred thousand). Heap entries never compare two events: ``seq`` is unique.
class Arrival(NamedTuple):
    job_id: int


class Completion(NamedTuple):
    job_id: int
    run: int


class GraceEnd(NamedTuple):
    job_id: int
    run: int


class RequeueReady(NamedTuple):
    job_id: int


class ThresholdCrossing(NamedTuple):
    job_id: int
    run: int


class PromotionDeadline(NamedTuple):
    job_id: int
    spell: int


class DecisionTick(NamedTuple):
    """A daemon cycle (preemptions allowed) or the end of a job's min-run guard."""

    preempt: bool


class Switch(NamedTuple):
    """New policy settings in force from ``at`` (seconds of trace time) on, for every job on
    the cluster: what a daemon does when ``auto_tune`` switches (or its ``policy:`` section
    is edited); ``distribution``: the one the new settings decide with, if they read one."""

    at: float
    config: PolicyConfig
    distribution: GittinsDistribution | None = None


#: Seconds within which a decision time counts as a tick time (``tick_on_time``).
TICK_EPS = 1e-6

PRIORITY = {Completion: 0, GraceEnd: 1, Arrival: 2, RequeueReady: 3, ThresholdCrossing: 4,
            PromotionDeadline: 5, DecisionTick: 6}


@dataclass(frozen=True)
class Cluster:
    """``nodes`` × ``gpus_per_node``; ``placement`` is ``consolidate`` (real nodes, fewest
    nodes per job) or ``count`` (one pooled node: GPU counting only)."""

    nodes: int
    gpus_per_node: int
    placement: str = "consolidate"

    def __post_init__(self) -> None:
        if self.nodes <= 0 or self.gpus_per_node <= 0:
            raise ValueError("cluster: nodes and gpus_per_node must be > 0")
        if self.placement not in ("consolidate", "count"):
            raise ValueError(f"placement: {self.placement!r}; valid: consolidate, count")

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_totals(self) -> list[int]:
        if self.placement == "count":
            return [self.total_gpus]
        return [self.gpus_per_node] * self.nodes

    def can_ever_fit(self, num_gpus: int) -> bool:
        """Whether a job of ``num_gpus`` fits the empty cluster (O(1): decided before its
        :meth:`shape` is made, which for a job of more GPUs than the cluster has could be
        gigabytes; :func:`~prioritizer.policy.placement.fits_consolidated`)."""
        return fits_consolidated(num_gpus, self.nodes, self.gpus_per_node)

    def none_fits(self, gpu_counts: Sequence[int], of: str) -> str | None:
        """The line that refuses a replay of jobs asking for ``gpu_counts`` GPUs each (not
        empty) when none of them fits the empty cluster, else None; ``of``: what holds them
        (``trace``, ``history``)."""
        if any(self.can_ever_fit(g) for g in gpu_counts):
            return None
        return (f"no job of the {of} fits the cluster ({self.nodes:,} × "
                f"{self.gpus_per_node:,} GPUs): the smallest asks for {min(gpu_counts):,} "
                "GPUs; give a larger cluster")

    def shape(self, num_gpus: int) -> tuple[int, ...]:
        if self.placement == "count":
            return (num_gpus,)
        return consolidated_shape(num_gpus, self.gpus_per_node)


@dataclass(slots=True)
class SimJob:
    """Simulator bookkeeping of one job; its policy state is ``rec`` (the scheduler's)."""

    trace: TraceJob
    shape: tuple[int, ...]
    rec: Tracked | None = None
    run: int = 0
    spell: int = 0
    preemptions: int = 0
    promotions: int = 0
    first_start: float | None = None
    end: float | None = None


@dataclass(frozen=True)
class JobResult:
    """Per-job outcome (seconds). ``queueing_delay`` = time not holding GPUs."""

    job_id: int
    name: str
    num_gpus: int
    submit: float
    start: float
    end: float
    jct: float
    queueing_delay: float
    preemptions: int
    promotions: int


@dataclass(frozen=True)
class SimResult:
    """Outcome of one replay. ``queue_samples``: (time, pending, running) per decision."""

    policy: str
    jobs: tuple[JobResult, ...]
    skipped_jobs: int
    unfittable_jobs: int
    gpu_s_held: float
    total_gpus: int
    wall_s: float
    queue_samples: list[tuple[float, int, int]] = field(default_factory=list)
    #: with ``--tenants``: per job id its tenant, and the per-tenant GPUs at each decision
    tenant_of: dict[int, str] = field(default_factory=dict)
    tenant_samples: list[Any] = field(default_factory=list)
    #: a replay with shard or opportunistic jobs: which jobs are opportunistic and the GPU·s
    #: held in the arrival window (``prioritizer.sim.shared``); None for any other replay
    sharing: SharingFigures | None = None


class Simulator:
    """Replay ``trace`` on ``cluster`` under ``config`` (see module doc)."""

    def __init__(self, trace: Trace, cluster: Cluster, config: PolicyConfig,
                 distribution: GittinsDistribution | None = None,
                 tick_on_time: bool = False, tenancy: Tenancy | None = None,
                 switches: Sequence[Switch] = ()) -> None:
        self.trace, self.cluster, self.config = trace, cluster, config
        if switches and tenancy is not None:
            raise ValueError("settings switched during a replay apply without tenants")
        #: the switches still to come, latest first (:meth:`switch`)
        self.switches = sorted(switches, key=lambda s: s.at, reverse=True)
        self.tick_on_time = tick_on_time
        totals = cluster.node_totals()
        names = ["pool"] if cluster.placement == "count" else [
            f"n{i}" for i in range(cluster.nodes)]
        self.tenant_of: dict[int, str] = {}
        if tenancy is None:
            self.sched = Scheduler(config, totals, names, distribution)
        else:   # the tenant rules (prioritizer.sim.tenant_sched)
            from prioritizer.sim.tenant_sched import TenantScheduler
            owners = {job.job_id: (trace_tenant(tenancy, job), job.user) for job in trace.jobs}
            self.tenant_of = {job_id: owner[0] for job_id, owner in owners.items()}
            self.sched = TenantScheduler(config, totals, names, distribution, tenancy, owners)
        self.jobs: dict[int, SimJob] = {}
        self.unfittable = 0
        shapes: dict[int, tuple[int, ...] | None] = {}   # per GPU count; None: never fits
        for job in trace.jobs:
            if job.num_gpus not in shapes:
                shapes[job.num_gpus] = (cluster.shape(job.num_gpus)
                                        if cluster.can_ever_fit(job.num_gpus) else None)
            shape = shapes[job.num_gpus]
            if shape is not None and (tenancy is None or within_caps(tenancy, job, self.tenant_of)):
                self.jobs[job.job_id] = SimJob(job, shape)
            else:
                self.unfittable += 1
        self.active = 0
        self.heap: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        self.tick_at: float | None = None
        #: the time of the last min-run guard's end put on the heap (see :meth:`start`)
        self.guard_at: float | None = None
        self.samples: list[tuple[float, int, int]] = []
        self.gpu_s_held = 0.0
        self.released: list[SimJob] = []

    def push(self, when: float, event: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (when, PRIORITY[type(event)], self.seq, event))

    def run(self) -> SimResult:
        """The event loop: pop every event of the next time, apply it, decide once. The loop
        runs with the garbage collector's thresholds raised (:func:`fewer_collections`)."""
        started = time.perf_counter()
        for job in self.jobs.values():
            self.push(job.trace.submit, Arrival(job.trace.job_id))
        heap = self.heap
        switches = self.switches
        with fewer_collections():
            while heap:
                if switches and heap[0][0] >= switches[-1].at:
                    self.switch(switches.pop())
                    continue
                self.step()
        return self.result(time.perf_counter() - started)

    def switch(self, switch: Switch) -> None:
        """New settings from ``switch.at`` on (before the events of that time: a job
        submitted then is the new settings' from its arrival): the scheduler carries every
        job over (``Scheduler.switched``) and decides at once under the new settings; each
        running job's next threshold crossing and each waiting job's promotion deadline are
        those of the new settings. Events the old settings scheduled stay on the heap: at
        worst a decision that changes nothing."""
        now = switch.at
        self.config = switch.config
        self.sched = self.sched.switched(switch.config, switch.distribution)  # type: ignore[union-attr]  # no switches with tenants (__init__)
        if not self.active:
            return
        self.decide(now, False)
        for job in self.jobs.values():
            phase = job.rec.phase if job.rec is not None else "future"
            if phase == "running":
                self.schedule_crossing(job, now)
            elif phase == "pending":
                due = self.sched.promotion_due(job.trace.job_id, now)
                if due is not None:
                    self.push(max(due, now), PromotionDeadline(job.trace.job_id, job.spell))

    def step(self) -> float:
        """One step of the event loop: every event at the earliest time on the heap is applied,
        then the policy decides once if anything changed (with preemption on a decision tick).
        Returns that time (seconds). The heap must not be empty."""
        heap = self.heap
        now = heap[0][0]
        changed, tick = False, False
        while heap and heap[0][0] == now:
            event = heapq.heappop(heap)[3]
            if type(event) is DecisionTick:
                tick = tick or event.preempt
                changed = True
            else:
                changed = self.apply(event, now) or changed
        if changed and self.active:
            self.decide(now, tick)
        return now

    def apply(self, event: Any, now: float) -> bool:
        """Apply one event to the state; False if it is stale (nothing changed)."""
        job = self.jobs[event.job_id]
        kind = type(event)
        if kind is Arrival:
            job.spell = 1
            job.rec = self.sched.add(job.trace.job_id, job.shape, job.trace.submit,
                                     job.trace.duration)
            self.active += 1
            return True
        phase = job.rec.phase if job.rec is not None else "future"
        if kind is Completion:
            if phase != "running" or job.run != event.run:
                return False
            self.gpu_s_held += (now - job.rec.run_start) * job.rec.gpus  # type: ignore[union-attr]  # rec is set from the job's arrival on
            self.sched.finish(job.trace.job_id, now)
            job.end = now
            self.active -= 1
            return True
        if kind is GraceEnd:
            if phase != "grace" or job.run != event.run:
                return False
            self.requeue(job, now)
            return True
        if kind is ThresholdCrossing:
            return phase == "running" and job.run == event.run
        if kind is PromotionDeadline:
            return phase == "pending" and job.spell == event.spell
        return phase == "pending"  # RequeueReady

    def decide(self, now: float, tick: bool) -> None:
        """Ask the policy (the incremental scheduler) and apply its decisions at ``now``."""
        cfg = self.config
        act = tick or cfg.decision_interval_s == 0
        # between ticks a preemption found only schedules the next tick: none to look
        # for while that tick is already due
        step = self.sched.decide(now, victims=act, search=act or not self.tick_pending(now))
        jobs = self.jobs
        for job_id, _ in step.changed:
            job = jobs[job_id]
            if job.rec.phase == "running":  # type: ignore[union-attr]  # rec is set from the job's arrival on; the next threshold is counted from here
                self.schedule_crossing(job, now)
        for job_id in step.promotions:
            jobs[job_id].promotions += 1
        requeued = 0
        if step.preemptions:
            if act:
                for preemption in step.preemptions:
                    for victim in preemption.victims:
                        self.signal(jobs[victim], now)
                requeued = sum(1 for p in step.preemptions for victim in p.victims  # type: ignore[union-attr, misc]  # rec is set from the job's arrival on
                               if jobs[victim].rec.phase == "pending")  # type: ignore[union-attr]  # rec is set from the job's arrival on; zero-cost release
            else:
                self.schedule_tick(now)
        starts = self.sched.plan_starts(now)
        for planned in starts:
            self.start(jobs[planned.job_id], now)
        for job in self.released:
            due = self.sched.promotion_due(job.trace.job_id, now)
            if due is not None:
                self.push(max(due, now), PromotionDeadline(job.trace.job_id, job.spell))
        self.released.clear()
        pending = step.pending - len(starts) + requeued
        self.samples.append((now, pending, self.active - pending))

    def start(self, job: SimJob, now: float) -> None:
        """Bookkeeping of a start the scheduler made: the run's events."""
        job.run += 1
        if job.first_start is None:
            job.first_start = now
        self.push(now + job.rec.work_left, Completion(job.trace.job_id, job.run))  # type: ignore[union-attr, operator]  # rec is set from the job's arrival on
        self.schedule_crossing(job, now)
        guarded = job.rec.guard + self.config.min_run_s  # type: ignore[union-attr]  # rec is set from the job's arrival on
        if guarded > now and self.config.preemption:   # a decision when the run's guard ends
            if guarded == self.guard_at:
                # the runs started together end their guards together: one event decides
                # there (it is still on the heap, being later than ``now``); the sequence
                # number moves on as for a push, so every later event keeps its own
                self.seq += 1
            else:
                self.guard_at = guarded
                self.push(guarded, DecisionTick(False))

    def schedule_crossing(self, job: SimJob, now: float) -> None:
        due = self.sched.crossing_time(job.trace.job_id, now)
        if due is not None and due < now + job.rec.work_left:  # type: ignore[union-attr, operator]  # rec is set from the job's arrival on
            self.push(due, ThresholdCrossing(job.trace.job_id, job.run))

    def next_tick(self, now: float) -> float:
        """The daemon tick a decision wanted at ``now`` waits for: the next multiple of
        ``decision_interval_s`` (``now`` itself when it is one and ``tick_on_time`` is set)."""
        step = self.config.decision_interval_s
        due = (now // step + 1) * step
        if self.tick_on_time and min(now - due + step, due - now) < TICK_EPS:
            due = now                 # ``now`` is a tick time itself: act on this tick
        return due

    def tick_pending(self, now: float) -> bool:
        """Whether the next daemon tick after ``now`` is already on the heap."""
        return self.tick_at is not None and now < self.tick_at <= self.next_tick(now)

    def schedule_tick(self, now: float) -> None:
        if not self.tick_pending(now):
            due = self.next_tick(now)
            self.tick_at = due
            self.push(due, DecisionTick(True))

    def signal(self, job: SimJob, now: float) -> None:
        """Checkpoint signal: progress stops now; GPUs are held for the overhead."""
        job.preemptions += 1
        self.sched.signal(job.trace.job_id, now)
        if self.config.checkpoint_overhead_s > 0:
            self.push(now + self.config.checkpoint_overhead_s, GraceEnd(job.trace.job_id, job.run))
        else:
            self.requeue(job, now)

    def requeue(self, job: SimJob, now: float) -> None:
        """End of grace: the run closes, GPUs are freed, the job waits out the delay."""
        self.gpu_s_held += (now - job.rec.run_start) * job.rec.gpus  # type: ignore[union-attr]  # rec is set from the job's arrival on
        delay = self.config.requeue_delay_s
        self.sched.requeue(job.trace.job_id, now, now + delay if delay > 0 else None)
        job.spell += 1
        if delay > 0:
            self.push(now + delay, RequeueReady(job.trace.job_id))
        self.released.append(job)

    def result(self, wall_s: float) -> SimResult:
        out = []
        for job in self.jobs.values():
            if job.end is None or job.first_start is None or job.rec is None:
                raise RuntimeError(f"job {job.trace.name} never finished (simulator bug)")
            jct = job.end - job.trace.submit
            out.append(JobResult(job.trace.job_id, job.trace.name, job.trace.num_gpus,
                                 job.trace.submit, job.first_start, job.end, jct,
                                 jct - job.rec.closed_s, job.preemptions, job.promotions))
        return SimResult(self.config.policy, tuple(out), self.trace.skipped_jobs,
                         self.unfittable, self.gpu_s_held, self.cluster.total_gpus, wall_s,
                         self.samples, self.tenant_of,
                         getattr(self.sched, "samples", []))


def within_caps(tenancy: Tenancy, job: TraceJob, tenant_of: dict[int, str]) -> bool:
    """Whether ``job`` may ever start under its tenant's ``max_gpus`` and user limit (a job
    above either waits for ever: counted with the jobs that can never fit)."""
    spec = tenancy.by_name.get(tenant_of.get(job.job_id, SHARED))
    if spec is None:
        return True
    cap = spec.user_cap()
    return ((spec.max_gpus is None or job.num_gpus <= spec.max_gpus)
            and (cap is None or job.num_gpus <= cap))


def trace_tenant(tenancy: Tenancy, job: TraceJob) -> str:
    """A trace job's tenant: the virtual cluster whose ``users:`` list names its user, else
    the one its account and partition match (history traces), else ``SHARED``."""
    name = tenancy.tenant_of_user(job.user)
    if name == SHARED and (job.account or job.partition):
        name = tenancy.tenant_of(job.account or None, job.partition or None, None)
    return name


def simulate(trace: Trace, cluster: Cluster, config: PolicyConfig,
             distribution: GittinsDistribution | None = None,
             tick_on_time: bool = False, tenancy: Tenancy | None = None,
             switches: Sequence[Switch] = ()) -> SimResult:
    """Replay ``trace`` on ``cluster`` under ``config``, then each of ``switches`` from its
    time on (:meth:`Simulator.switch`); see :class:`Simulator`.

    ``tenancy``: the tenants of a shared cluster (``--tenants``): the tenant rules decide
    (``prioritizer.sim.tenant_sched``). ``tick_on_time``: a preemption wanted at a moment that is itself a tick time (a multiple
    of ``decision_interval_s``, e.g. a threshold crossing exactly on it) is made on that tick,
    as the daemon's cycle at that moment makes it; by default the next tick makes it (the
    published replays and their regression fixtures). ``dlprio history check`` sets it."""
    from prioritizer.sim.shared import is_shared
    if is_shared(trace):
        if tenancy is not None:
            raise ValueError("--tenants: a trace with shard or opportunistic jobs replays "
                             "without tenants (drop --tenants or the sharing columns)")
        if switches:
            raise ValueError("settings switched during a replay apply to a trace without "
                             "shard or opportunistic jobs")
        return simulate_shared(trace, cluster, config, distribution)
    return Simulator(trace, cluster, config, distribution, tick_on_time, tenancy,
                     switches).run()


def simulate_shared(trace: Trace, cluster: Cluster, config: PolicyConfig,
                    distribution: GittinsDistribution | None = None) -> SimResult:
    """Replay a trace with shard or opportunistic jobs (``prioritizer.sim.shared``: the
    reference rules of ``decide_shared`` at every event, slower than :class:`Simulator`).
    ``gpu_s_held`` counts a shard job's share of a GPU (0.5-GPU job, 100 s: 50 GPU·s)."""
    from prioritizer.sim.shared import replay_shared
    totals = cluster.node_totals()
    shapes: dict[int, tuple[int, ...]] = {}
    for job in trace.jobs:
        if job.share > 0:
            shapes[job.job_id] = (1,)
        elif cluster.can_ever_fit(job.num_gpus):
            shapes[job.job_id] = cluster.shape(job.num_gpus)
    replay, wall_s = replay_shared(trace, len(totals), totals[0], config, distribution, shapes)
    out = []
    for done in replay.jobs.values():
        if done.end is None or done.first_start is None:
            raise RuntimeError(f"job {done.trace.name} never finished (simulator bug)")
        jct = done.end - done.trace.submit
        out.append(JobResult(done.trace.job_id, done.trace.name, done.trace.num_gpus,
                             done.trace.submit, done.first_start, done.end, jct,
                             jct - done.held_s, done.preemptions, done.promotions))
    return SimResult(config.policy, tuple(out), trace.skipped_jobs, len(trace.jobs) - len(shapes),
                     replay.gpu_s_held, cluster.total_gpus, wall_s, replay.samples,
                     sharing=replay.figures())
