"""The simulator's replay of a trace with GPU sharing: shard jobs and opportunistic jobs.

A trace job with ``share`` > 0 asks a fraction of one GPU (Slurm's ``--gres=shard:K``); one
with ``opportunistic`` set runs only on GPU time production leaves free
(``prioritizer.policy.sharing``). :func:`replay_shared` replays such a trace with the
reference rules: at every event time it builds a :class:`~prioritizer.policy.model.Snapshot`
and asks :func:`~prioritizer.policy.sharing.decide_shared`, the function the daemon calls. It
walks every job at each decision (none of the incremental scheduler's shortcuts), so it is
slower than a replay without sharing (docs/simulator.md, "GPU sharing").

The model of Slurm's part, per GPU (a node has ``gpus_per_node`` of them):

* a GPU serves one whole-GPU job or shard jobs whose shares add up to at most 1, never both;
* a whole-GPU job starts on GPUs with nothing on them (fewest nodes, as
  ``placement.FreeMap``); a shard job starts on the fullest GPU its share still fits on, else
  on the first empty GPU;
* starts follow the policy's order wherever jobs fit (strict FIFO stops at the first misfit);
* a preempted job keeps its GPUs ``checkpoint_overhead_s`` without progress, then waits
  ``requeue_delay_s``; preemptions happen on the daemon's ``decision_interval_s`` ticks, and
  while a job waits and preemption is on a tick is due every interval (the daemon's cycle).

A shard job runs at full speed on its share (its trace duration is its wall time) and attains
``share`` GPU·s per second (``sharing.service_gpus``). ``SimResult.gpu_s_held`` counts held
GPU·s the same way: a 0.5-GPU job holding its shards 100 s counts 50 GPU·s.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import JobPhase, JobView, NodeView, Snapshot
from prioritizer.policy.placement import FreeMap
from prioritizer.policy.sharing import Share, decide_shared, service_gpus
from prioritizer.policy.victims import guard_start, lost_before, waited_before
from prioritizer.sim.traces import Trace, TraceJob

#: event kinds, in their order at equal times (as ``engine.PRIORITY``)
_COMPLETION, _GRACE_END, _ARRIVAL, _READY, _TICK = range(5)
#: slack when adding shares on one GPU (0.25 + 0.25 + 0.5 fits)
_EPS = 1e-9


@dataclass(frozen=True)
class SharingFigures:
    """What a summary of a sharing replay needs beyond the per-job results.

    ``opportunistic``: ids of the opportunistic jobs replayed. ``window_s``: the arrival
    window's length, last submit − first submit of the replayed jobs (s). ``window_gpu_s``:
    GPU·s held inside that window, a shard job counting its share
    (``sharing.service_gpus``; checkpoint grace included, as ``gpu_s_held``)."""

    opportunistic: frozenset[int]
    window_s: float
    window_gpu_s: float


def is_shared(trace: Trace) -> bool:
    """Whether ``trace`` has a shard job or an opportunistic job (then ``simulate`` replays it
    with :func:`replay_shared`)."""
    return any(job.share > 0 or job.opportunistic for job in trace.jobs)


@dataclass(slots=True)
class _Job:
    trace: TraceJob
    shape: tuple[int, ...]
    phase: str = "future"            # pending, running, grace, done
    base_gpu_s: float = 0.0          # attained GPU·s over closed runs
    base_s: float = 0.0              # run seconds over closed runs
    held_s: float = 0.0              # seconds holding GPUs over closed runs (grace included)
    run_start: float = 0.0
    work_left: float = 0.0
    last_run_s: float = 0.0
    last_run_end: float | None = None
    queue: int | None = None
    entry: float | None = None
    service_base: float = 0.0
    eligible: float | None = None
    gpus: list[tuple[int, int]] = field(default_factory=list)   # (node, GPU index) held
    run: int = 0
    signaled_at: float = 0.0
    first_start: float | None = None
    end: float | None = None
    preemptions: int = 0
    promotions: int = 0

    @property
    def rate(self) -> float:
        """GPU·s attained per second of run."""
        return service_gpus(self.trace.num_gpus, self.trace.share)


class SharedReplay:
    """One replay (module doc). ``nodes`` × ``gpus_per_node`` GPUs."""

    def __init__(self, trace: Trace, nodes: int, gpus_per_node: int, config: PolicyConfig,
                 distribution: GittinsDistribution | None, shapes: dict[int, tuple[int, ...]]
                 ) -> None:
        self.config, self.distribution = config, distribution
        self.names = [f"n{i}" for i in range(nodes)]
        self.per_node = gpus_per_node
        #: per node, per GPU: the whole-GPU job on it, or the shard jobs and their shares
        self.whole: list[list[int | None]] = [[None] * gpus_per_node for _ in range(nodes)]
        self.shards: list[list[dict[int, float]]] = [
            [{} for _ in range(gpus_per_node)] for _ in range(nodes)]
        self.jobs = {j.job_id: _Job(j, shapes[j.job_id]) for j in trace.jobs
                     if j.job_id in shapes}
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.tick_at: float | None = None
        self.gpu_s_held = 0.0
        #: (job id, start, end, GPUs counted) of every closed run (``sharing.service_gpus``)
        self.spells: list[tuple[int, float, float, float]] = []
        self.samples: list[tuple[float, int, int]] = []

    def figures(self) -> SharingFigures:
        """:class:`SharingFigures` of the finished replay (its closed runs, ``spells``)."""
        submits = [j.trace.submit for j in self.jobs.values()]
        first, last = (min(submits), max(submits)) if submits else (0.0, 0.0)
        held = sum(rate * max(0.0, min(end, last) - max(start, first))
                   for _, start, end, rate in self.spells)
        return SharingFigures(frozenset(i for i, j in self.jobs.items() if j.trace.opportunistic),
                              last - first, held)

    # -- events ----------------------------------------------------------------------------
    def push(self, when: float, kind: int, job_id: int = -1, run: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (when, kind, self.seq, job_id, run))

    def run(self) -> None:
        for known in self.jobs.values():
            self.push(known.trace.submit, _ARRIVAL, known.trace.job_id)
        active = 0
        while self.heap:
            now = self.heap[0][0]
            tick = False
            while self.heap and self.heap[0][0] == now:
                _, kind, _, job_id, run = heapq.heappop(self.heap)
                job = self.jobs.get(job_id)
                if kind == _TICK:
                    tick = True
                elif kind == _ARRIVAL and job is not None:
                    job.phase, job.work_left = "pending", job.trace.duration
                    active += 1
                elif kind == _COMPLETION and job is not None and job.phase == "running" \
                        and job.run == run:
                    self.close(job, now)
                    job.phase, job.end = "done", now
                    active -= 1
                elif kind == _GRACE_END and job is not None and job.phase == "grace" \
                        and job.run == run:
                    self.close(job, now)
                    delay = self.config.requeue_delay_s
                    job.phase = "pending"
                    job.eligible = now + delay if delay > 0 else None
                    if delay > 0:
                        self.push(now + delay, _READY, job_id)
            if active:
                self.decide(now, tick)

    def close(self, job: _Job, now: float) -> None:
        """End of a run (completion or end of grace): its service counted, its GPUs freed."""
        end = job.signaled_at if job.phase == "grace" else now
        ran = end - job.run_start
        job.base_s += ran
        job.base_gpu_s += ran * job.rate
        job.work_left -= ran
        job.held_s += now - job.run_start
        job.last_run_s, job.last_run_end = ran, now
        self.gpu_s_held += (now - job.run_start) * job.rate
        self.spells.append((job.trace.job_id, job.run_start, now, job.rate))
        for node, gpu in job.gpus:
            if self.whole[node][gpu] == job.trace.job_id:
                self.whole[node][gpu] = None
            self.shards[node][gpu].pop(job.trace.job_id, None)
        job.gpus = []

    # -- the decision ----------------------------------------------------------------------
    def snapshot(self, now: float) -> tuple[Snapshot, dict[int, Share]]:
        """The cluster as the daemon would see it: free GPUs count GPUs with no whole-GPU job
        (Slurm's GresUsed; ``decide_shared`` takes shared GPUs out itself)."""
        nodes = tuple(NodeView(name, self.per_node, sum(1 for w in self.whole[i] if w is None))
                      for i, name in enumerate(self.names))
        views: list[JobView] = []
        shares: dict[int, Share] = {}
        for job in self.jobs.values():
            if job.phase in ("future", "done"):
                continue
            t = job.trace
            running = job.phase in ("running", "grace")
            ran = (now - job.run_start) if job.phase == "running" else (
                job.signaled_at - job.run_start if job.phase == "grace" else 0.0)
            names: tuple[str, ...] = ()
            if running:
                names = tuple(dict.fromkeys(self.names[n] for n, _ in job.gpus))
            views.append(JobView(
                job_id=t.job_id, phase=JobPhase.RUNNING if running else JobPhase.PENDING,
                gpus_per_node=job.shape, submit_time=t.submit,
                attained_gpu_s=job.base_gpu_s + ran * job.rate, attained_s=job.base_s + ran,
                service_base_gpu_s=job.service_base, queue=job.queue,
                queue_entry_time=job.entry, run_start=job.run_start if running else None,
                last_run_s=job.last_run_s, last_run_end=job.last_run_end,
                duration_s=t.duration, eligible_time=None if running else job.eligible,
                nodes=names, releasing=job.phase == "grace", first_start=job.first_start))
            if t.share > 0 or t.opportunistic:
                gpu = job.gpus[0][1] if running and t.share > 0 else None
                shares[t.job_id] = Share(t.share, gpu, t.opportunistic)
        return Snapshot(nodes=nodes, jobs=tuple(views)), shares

    def decide(self, now: float, tick: bool) -> None:
        cfg = self.config
        snap, shares = self.snapshot(now)
        d = decide_shared(snap, cfg, now, shares, distribution=self.distribution)
        jobs = self.jobs
        for job_id, st in d.states.items():
            job = jobs[job_id]
            job.queue, job.entry, job.service_base = (st.queue, st.queue_entry_time,
                                                      st.service_base_gpu_s)
        for job_id in d.promotions:
            jobs[job_id].promotions += 1
        act = tick or cfg.decision_interval_s == 0
        if d.preemptions and act:
            for p in d.preemptions:
                for victim in p.victims:
                    self.signal(jobs[victim], now)
        for job_id in d.order:
            job = jobs[job_id]
            if job.phase != "pending" or (job.eligible is not None and job.eligible > now):
                continue
            if not self.start(job, now) and d.strict_order:
                break
        waiting = sum(1 for j in jobs.values() if j.phase == "pending")
        if cfg.preemption and cfg.decision_interval_s > 0 and (waiting or d.preemptions):
            self.schedule_tick(now)
        running = sum(1 for j in jobs.values() if j.phase in ("running", "grace"))
        self.samples.append((now, waiting, running))

    def signal(self, job: _Job, now: float) -> None:
        """Checkpoint signal: progress stops now, the GPUs are held for the overhead."""
        if job.phase != "running":
            return
        job.preemptions += 1
        job.phase, job.signaled_at = "grace", now
        self.push(now + self.config.checkpoint_overhead_s, _GRACE_END, job.trace.job_id, job.run)

    def start(self, job: _Job, now: float) -> bool:
        """Start ``job`` where it fits (module doc); False if it fits nowhere now."""
        t = job.trace
        if t.share > 0:
            spot = self.shard_spot(t.share)
            if spot is None:
                return False
            self.shards[spot[0]][spot[1]][t.job_id] = t.share
            job.gpus = [spot]
        else:
            free = FreeMap([sum(1 for g in range(self.per_node) if self.empty(n, g))
                            for n in range(len(self.names))])
            nodes = free.place(job.shape)
            if nodes is None:
                return False
            job.gpus = []
            for node, count in zip(nodes, job.shape, strict=True):
                gpus = [g for g in range(self.per_node) if self.empty(node, g)][:count]
                for g in gpus:
                    self.whole[node][g] = t.job_id
                job.gpus.extend((node, g) for g in gpus)
        job.phase, job.run_start, job.eligible = "running", now, None
        job.run += 1
        if job.first_start is None:
            job.first_start = now
        self.push(now + job.work_left, _COMPLETION, t.job_id, job.run)
        cfg = self.config
        if cfg.preemption:
            guard = guard_start(now, waited_before(now, job.last_run_end, t.submit),
                                cfg.min_run_s, cfg.wait_guard,
                                lost_before(now, job.first_start, job.base_s), job.base_s,
                                cfg.requeue_guard)
            if guard + cfg.min_run_s > now:   # a decision when the run's guard ends
                self.push(guard + cfg.min_run_s, _TICK)
        return True

    def empty(self, node: int, gpu: int) -> bool:
        return self.whole[node][gpu] is None and not self.shards[node][gpu]

    def shard_spot(self, share: float) -> tuple[int, int] | None:
        """The fullest GPU with shard jobs that ``share`` still fits on, else the first empty
        GPU (node order, then GPU index); None if neither."""
        best: tuple[float, int, int] | None = None
        for n in range(len(self.names)):
            for g in range(self.per_node):
                load = sum(self.shards[n][g].values())
                if self.whole[n][g] is None and 0 < load and load + share <= 1 + _EPS \
                        and (best is None or load > best[0]):
                    best = (load, n, g)
        if best is not None:
            return best[1], best[2]
        for n in range(len(self.names)):
            for g in range(self.per_node):
                if self.empty(n, g):
                    return n, g
        return None

    def schedule_tick(self, now: float) -> None:
        step = self.config.decision_interval_s
        due = (now // step + 1) * step
        if self.tick_at is None or not (now < self.tick_at <= due):
            self.tick_at = due
            self.push(due, _TICK)


def replay_shared(trace: Trace, nodes: int, gpus_per_node: int, config: PolicyConfig,
                  distribution: GittinsDistribution | None,
                  shapes: dict[int, tuple[int, ...]]) -> tuple[SharedReplay, float]:
    """Replay ``trace`` (the jobs named in ``shapes``: job id -> GPUs per node, ``(1,)`` for a
    shard job) with sharing; returns the finished replay and its wall seconds."""
    started = time.perf_counter()
    replay = SharedReplay(trace, nodes, gpus_per_node, config, distribution, shapes)
    replay.run()
    return replay, time.perf_counter() - started
