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

import heapq
import time
from dataclasses import dataclass, field
from typing import Any

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import Decisions, JobPhase, JobView, NodeView, Snapshot

from prioritizer.policy.placement import FreeMap, can_ever_fit, consolidated_shape, plan_starts
from prioritizer.policy.decide import decide, next_queue_change, promotion_time
from prioritizer.sim.traces import Trace, TraceJob


@dataclass(frozen=True)
class Arrival:
    job_id: int


@dataclass(frozen=True)
class Completion:
    job_id: int
    run: int


@dataclass(frozen=True)
class GraceEnd:
    job_id: int
    run: int


@dataclass(frozen=True)
class RequeueReady:
    job_id: int


@dataclass(frozen=True)
class ThresholdCrossing:
    job_id: int
    run: int


@dataclass(frozen=True)
class PromotionDeadline:
    job_id: int
    spell: int


@dataclass(frozen=True)
class DecisionTick:
    """A daemon cycle (preemptions allowed) or the end of a job's min-run guard."""

    preempt: bool


PENDING, RUNNING = JobPhase.PENDING, JobPhase.RUNNING
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

    def shape(self, num_gpus: int) -> tuple[int, ...]:
        if self.placement == "count":
            return (num_gpus,)
        return consolidated_shape(num_gpus, self.gpus_per_node)


@dataclass(slots=True)
class SimJob:
    """Mutable simulator state of one job (the simulator's stand-in for the ledger)."""

    trace: TraceJob
    shape: tuple[int, ...]
    work_left: float
    phase: str = "future"            # future | pending | running | grace | done
    run: int = 0
    run_start: float = 0.0
    gpus: int = 0
    nodes: tuple[int, ...] = ()
    node_names: tuple[str, ...] = ()
    closed_gpu_s: float = 0.0
    closed_s: float = 0.0
    last_run_s: float = 0.0
    last_run_end: float | None = None
    queue: int | None = None
    entry: float | None = None
    base: float = 0.0
    eligible: float | None = None
    spell: int = 0
    preemptions: int = 0
    promotions: int = 0
    first_start: float | None = None
    end: float | None = None
    view: JobView | None = None           # pending view (fixed until the job changes)
    running_view: JobView | None = None   # running view; others copy it with new service


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


class Simulator:
    """Replay ``trace`` on ``cluster`` under ``config`` (see module doc)."""

    def __init__(self, trace: Trace, cluster: Cluster, config: PolicyConfig,
                 distribution: GittinsDistribution | None = None) -> None:
        self.trace, self.cluster, self.config = trace, cluster, config
        self.distribution = distribution
        totals = cluster.node_totals()
        names = ["pool"] if cluster.placement == "count" else [
            f"n{i}" for i in range(cluster.nodes)]
        self.names = names
        self.free = list(totals)
        self.node_views = [NodeView(n, t, t) for n, t in zip(names, totals)]
        self.jobs: dict[int, SimJob] = {}
        self.unfittable = 0
        for job in trace.jobs:
            shape = cluster.shape(job.num_gpus)
            if can_ever_fit(shape, totals):
                self.jobs[job.job_id] = SimJob(job, shape, job.duration, gpus=sum(shape))
            else:
                self.unfittable += 1
        self.active: dict[int, SimJob] = {}
        self.heap: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        self.tick_at: float | None = None
        self.samples: list[tuple[float, int, int]] = []
        self.gpu_s_held = 0.0
        self.grace: set[int] = set()
        self.released: list[SimJob] = []
        self.last: Decisions | None = None   # the previous decision, passed back as a memo
        # The snapshot's views by job id, in arrival order, kept between decisions: pending
        # views are rebuilt only when ``touch``ed, running ones at every decision.
        self.views: dict[int, JobView | None] = {}
        self.dirty: set[int] = set()
        self.running: dict[int, SimJob] = {}   # holding GPUs (running or grace)

    def push(self, when: float, event: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (when, PRIORITY[type(event)], self.seq, event))

    def run(self) -> SimResult:
        """The event loop: pop every event of the next time, apply it, decide once."""
        started = time.perf_counter()
        for job in self.jobs.values():
            self.push(job.trace.submit, Arrival(job.trace.job_id))
        while self.heap:
            now = self.heap[0][0]
            changed, tick = False, False
            while self.heap and self.heap[0][0] == now:
                event = heapq.heappop(self.heap)[3]
                if isinstance(event, DecisionTick):
                    tick = tick or event.preempt
                    changed = True
                else:
                    changed = self.apply(event, now) or changed
            if changed and self.active:
                self.decide(now, tick)
        return self.result(time.perf_counter() - started)

    def apply(self, event: Any, now: float) -> bool:
        """Apply one event to the state; False if it is stale (nothing changed)."""
        job = self.jobs[event.job_id]
        if isinstance(event, Arrival):
            job.phase, job.spell = "pending", 1
            self.active[job.trace.job_id] = job
            self.views[job.trace.job_id] = None   # keeps the snapshot in arrival order
            self.touch(job)
            return True
        if isinstance(event, Completion):
            if job.phase != "running" or job.run != event.run:
                return False
            self.stop_run(job, now)
            job.phase, job.end, job.work_left = "done", now, 0.0
            del self.active[job.trace.job_id], self.views[job.trace.job_id]
            return True
        if isinstance(event, GraceEnd):
            if job.phase != "grace" or job.run != event.run:
                return False
            self.requeue(job, now)
            return True
        if isinstance(event, ThresholdCrossing):
            return job.phase == "running" and job.run == event.run
        if isinstance(event, PromotionDeadline):
            return job.phase == "pending" and job.spell == event.spell
        return job.phase == "pending"  # RequeueReady

    def decide(self, now: float, tick: bool) -> None:
        """Call the policy on the current state and apply its decisions at ``now``."""
        cfg = self.config
        views = self.views
        for job_id in self.dirty:
            if job_id in views:
                views[job_id] = self.view(self.jobs[job_id], now)
        self.dirty.clear()
        for job_id, job in self.running.items():   # their service moves with time
            base = job.running_view
            views[job_id] = (self.view(job, now) if base is None
                             else base.with_service(*service_at(job, now)))
        decisions = self.last = decide(Snapshot(tuple(self.node_views), tuple(views.values())),
                                       cfg, now,
                                       distribution=self.distribution, previous=self.last)
        for job_id in decisions.changed:
            state, job = decisions.states[job_id], self.jobs[job_id]
            job.queue, job.entry, job.base = state.queue, state.queue_entry_time, \
                state.service_base_gpu_s
            self.touch(job)
            if job.phase == "running":   # the next threshold is counted from here
                self.schedule_crossing(job, now)
        for job_id in decisions.promotions:
            self.jobs[job_id].promotions += 1
        if decisions.preemptions:
            if tick or cfg.decision_interval_s == 0:
                for preemption in decisions.preemptions:
                    for victim in preemption.victims:
                        self.signal(self.jobs[victim], now)
            else:
                self.schedule_tick(now)
        started = self.start_jobs(decisions.order, decisions.strict_order, now)
        for job in self.released:
            due = promotion_time(self.view(job, now), cfg)
            if due is not None:
                self.push(max(due, now), PromotionDeadline(job.trace.job_id, job.spell))
        self.released.clear()
        requeued = sum(1 for p in decisions.preemptions for victim in p.victims
                       if self.jobs[victim].phase == "pending")   # released at zero cost
        pending = len(decisions.order) - started + requeued
        self.samples.append((now, pending, len(self.active) - pending))

    def start_jobs(self, order: tuple[int, ...], strict: bool, now: float) -> int:
        """Slurm's part (placement.plan_starts): start jobs in ``order`` where they fit;
        returns how many started."""
        free = FreeMap(self.free)
        soon = None
        if self.grace:
            soon = free.copy()
            for job_id in self.grace:
                soon.add(self.jobs[job_id].nodes, self.jobs[job_id].shape)
        jobs = self.jobs
        eligible = ((job_id, job.shape) for job_id, job in zip(order, map(jobs.__getitem__, order))
                    if job.eligible is None or job.eligible <= now)
        starts = plan_starts(eligible, free, soon, strict, complete=False).starts
        for planned in starts:
            self.start(self.jobs[planned.job_id], planned.nodes, now)
        return len(starts)

    def start(self, job: SimJob, nodes: tuple[int, ...], now: float) -> None:
        job.phase, job.run, job.run_start, job.nodes = "running", job.run + 1, now, nodes
        job.node_names = tuple(self.names[n] for n in nodes)
        job.eligible = None
        self.touch(job)
        self.running[job.trace.job_id] = job
        if job.first_start is None:
            job.first_start = now
        self.take(nodes, job.shape, -1)
        self.push(now + job.work_left, Completion(job.trace.job_id, job.run))
        self.schedule_crossing(job, now)
        if self.config.min_run_s > 0 and self.config.preemption:
            self.push(now + self.config.min_run_s, DecisionTick(False))

    def schedule_crossing(self, job: SimJob, now: float) -> None:
        due = next_queue_change(self.view(job, now), self.config, now)
        if due is not None and due < now + job.work_left:
            self.push(due, ThresholdCrossing(job.trace.job_id, job.run))

    def schedule_tick(self, now: float) -> None:
        step = self.config.decision_interval_s
        due = (now // step + 1) * step
        if self.tick_at is None or self.tick_at <= now or self.tick_at > due:
            self.tick_at = due
            self.push(due, DecisionTick(True))

    def signal(self, job: SimJob, now: float) -> None:
        """Checkpoint signal: progress stops now; GPUs are held for the overhead."""
        job.preemptions += 1
        job.work_left -= now - job.run_start
        job.phase = "grace"
        self.touch(job)
        self.grace.add(job.trace.job_id)
        if self.config.checkpoint_overhead_s > 0:
            self.push(now + self.config.checkpoint_overhead_s, GraceEnd(job.trace.job_id, job.run))
        else:
            self.requeue(job, now)

    def requeue(self, job: SimJob, now: float) -> None:
        """End of grace: the run closes, GPUs are freed, the job waits out the delay."""
        self.grace.discard(job.trace.job_id)
        self.stop_run(job, now)
        job.phase, job.spell = "pending", job.spell + 1
        self.touch(job)
        delay = self.config.requeue_delay_s
        job.eligible = now + delay if delay > 0 else None
        if delay > 0:
            self.push(now + delay, RequeueReady(job.trace.job_id))
        self.released.append(job)

    def touch(self, job: SimJob) -> None:
        """The job's state changed: its view is rebuilt at the next decision."""
        job.view = job.running_view = None
        self.dirty.add(job.trace.job_id)

    def stop_run(self, job: SimJob, now: float) -> None:
        del self.running[job.trace.job_id]
        length = now - job.run_start
        gpus = job.gpus
        job.closed_gpu_s += length * gpus
        job.closed_s += length
        job.last_run_s, job.last_run_end = length, now
        self.gpu_s_held += length * gpus
        self.take(job.nodes, job.shape, +1)
        job.nodes, job.node_names = (), ()

    def take(self, nodes: tuple[int, ...], shape: tuple[int, ...], sign: int) -> None:
        for node, gpus in zip(nodes, shape):
            self.free[node] += sign * gpus
            old = self.node_views[node]
            self.node_views[node] = NodeView(old.name, old.gpus_total, self.free[node])

    def view(self, job: SimJob, now: float) -> JobView:
        """The policy's view of ``job`` at ``now`` (cached while it does not change)."""
        if job.view is not None:
            return job.view
        if job.phase == "pending":
            job.view = JobView(job.trace.job_id, PENDING, job.shape, job.trace.submit,
                               job.closed_gpu_s, job.closed_s, job.base, job.queue, job.entry,
                               None, job.last_run_s, job.last_run_end, True,
                               job.closed_s + job.work_left, job.eligible, (), False)
            return job.view
        if job.running_view is not None:   # only the service (and oracle duration) moved
            return job.running_view.with_service(*service_at(job, now))
        gpu_s, run_s, duration = service_at(job, now)
        job.running_view = JobView(
            job.trace.job_id, RUNNING, job.shape, job.trace.submit, gpu_s, run_s, job.base,
            job.queue, job.entry, job.run_start, job.last_run_s, job.last_run_end, True,
            duration, None, job.node_names, job.phase == "grace")
        return job.running_view

    def result(self, wall_s: float) -> SimResult:
        out = []
        for job in self.jobs.values():
            if job.end is None or job.first_start is None:
                raise RuntimeError(f"job {job.trace.name} never finished (simulator bug)")
            jct = job.end - job.trace.submit
            out.append(JobResult(job.trace.job_id, job.trace.name, job.trace.num_gpus,
                                 job.trace.submit, job.first_start, job.end, jct,
                                 jct - job.closed_s, job.preemptions, job.promotions))
        return SimResult(self.config.policy, tuple(out), self.trace.skipped_jobs,
                         self.unfittable, self.gpu_s_held, self.cluster.total_gpus, wall_s,
                         self.samples)


def service_at(job: SimJob, now: float) -> tuple[float, float, float]:
    """A job holding GPUs at ``now``: attained GPU·s, attained s, oracle duration s (its
    run time so far plus what is left; progress stops during a checkpoint's grace)."""
    ran = now - job.run_start
    left = job.work_left if job.phase == "grace" else job.work_left - ran
    return job.closed_gpu_s + ran * job.gpus, job.closed_s + ran, job.closed_s + ran + left


def simulate(trace: Trace, cluster: Cluster, config: PolicyConfig,
             distribution: GittinsDistribution | None = None) -> SimResult:
    """Replay ``trace`` on ``cluster`` under ``config``; see :class:`Simulator`."""
    return Simulator(trace, cluster, config, distribution).run()
