"""One forward replay of a :class:`~prioritizer.forecast.world.World` with known remaining
run times: the simulator's event loop (``prioritizer.sim.engine.Simulator``) seeded with the
live state instead of a trace's arrivals.

Seeding at ``world.now``: every job is filed with the scheduler (``policy.fast.incremental``) with
its service so far and its recorded queue state; a running job is started on its own nodes at
its own run start (its attained service, thrash guard and victim order are those of the
cluster), its completion falls at ``now`` + its remaining run time; a ``grace`` job is
started and signalled (its GPUs come free at ``grace_end``, then it is requeued; its
forecast start is its next start, after the requeue); a pending
job with a BeginTime becomes startable then. From there the policy and the start model decide
exactly as in ``dlprio simulate``, with the same costs (checkpoint overhead, requeue delay,
preemptions on the daemon's ticks, ``tick_on_time``). Without ``arrivals`` no arrival is
invented: the forecast is "if no other job were submitted", so a job's start is a lower bound
in a queue that keeps growing ahead of it (new jobs of a higher priority queue jump ahead under
LAS). With ``arrivals`` (:mod:`prioritizer.forecast.arrivals`) the drawn jobs arrive as in a
trace, and the replay stops once every job of the world has ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from math import inf
from typing import Any

from prioritizer.forecast.arrivals import Drawn
from prioritizer.forecast.world import World
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.fast.incremental import Scheduler
from prioritizer.policy.placement import can_ever_fit
from prioritizer.sim.engine import (Arrival, Completion, DecisionTick, GraceEnd, RequeueReady, SimJob,
                                    Simulator, fewer_collections)
from prioritizer.sim.traces import TraceJob


@dataclass(frozen=True)
class Outcome:
    """One job in one draw: ``start`` (the first start at or after ``now``; a running job
    keeps its run start; a ``grace`` job, being preempted, has its next start, after its
    requeue, never the start of the run it is leaving), ``end`` (s) and whether it was
    preempted before it ended (within the horizon; for a ``grace`` job: preempted again after
    that next start). ``inf``: not within the horizon. ``None`` start/end: the job fits on no
    node of the world."""

    start: float | None
    end: float | None
    preempted: bool
    #: a job running at ``now`` that was preempted: its next start (``inf``: not within the
    #: horizon); None for any other job or draw
    restart: float | None = None


#: events between two asks of ``out_of_time`` (a CPU clock read costs about a microsecond; an
#: event of a large site tens of microseconds)
CHECK_EVERY = 32


class ForwardReplay(Simulator):
    """The simulator seeded from ``world`` with ``remaining[i]`` s of run time left for
    ``world.jobs[i]`` (see module doc), and the jobs of ``arrivals`` (time order) arriving
    as they come. :meth:`outcomes` runs it."""

    def __init__(self, world: World, config: PolicyConfig, remaining: list[float],
                 distribution: GittinsDistribution | None = None,
                 arrivals: Iterator[Drawn] | None = None) -> None:
        # Simulator's state, without a trace (its __init__ files a trace's arrivals)
        self.config, self.tick_on_time = config, True
        names = [name for name, _ in world.nodes]
        at = {name: i for i, name in enumerate(names)}
        held = [0] * len(names)
        for job in world.jobs:
            for node, g in zip(job.nodes, job.gpus_per_node):
                held[at[node]] += g
        totals = [max(total, h) for (_, total), h in zip(world.nodes, held)]
        self.sched = Scheduler(config, totals, names, distribution)
        self.jobs: dict[int, SimJob] = {}
        self.unfittable = 0
        self.cut_at: float | None = None   # set when out_of_time ended the replay
        self.active = 0
        self.heap = []
        self.seq = 0
        self.tick_at = None
        self.guard_at = None
        self.samples = []
        self.gpu_s_held = 0.0
        self.released = []
        self.world = world
        self.fits = [True] * len(world.jobs)
        now = world.now
        sched = self.sched
        fits: dict[tuple[int, ...], bool] = {}
        for i, (job, left) in enumerate(zip(world.jobs, remaining)):
            pairs = sorted(zip(job.gpus_per_node, job.nodes), reverse=True) \
                if job.phase != "pending" else None
            shape = tuple(g for g, _ in pairs) if pairs else \
                tuple(sorted(job.gpus_per_node, reverse=True))
            if pairs is None and shape not in fits:
                fits[shape] = can_ever_fit(shape, totals)
            if pairs is None and not fits[shape]:
                self.fits[i] = False
                self.unfittable += 1
                continue
            ran = now - job.run_start if job.run_start is not None else 0.0
            sim = self.jobs[i] = SimJob(TraceJob(i, job.job_id, 0, job.submit, job.gpus, left),
                                        shape)
            sim.spell = 1
            rec = sim.rec = sched.add(i, shape, job.submit, left + ran, job.preemptible,
                                      job.preempts)
            rec.closed_gpu_s = max(job.attained_gpu_s - ran * job.gpus, 0.0)
            rec.closed_s = max(job.attained_s - ran, 0.0)
            rec.queue, rec.entry = job.queue, job.queue_entry_time
            rec.base = job.service_base_gpu_s
            rec.last_run_s, rec.last_run_end = job.last_run_s, job.last_run_end
            rec.first_start = job.first_start
            self.active += 1
            if pairs is None:
                if job.eligible is not None and job.eligible > now:
                    rec.eligible = job.eligible
                    self.push(job.eligible, RequeueReady(i))
                continue
            assert job.run_start is not None   # World checks it for running and grace jobs
            sched.start(i, tuple(at[n] for _, n in pairs), job.run_start)
            sim.run = 1
            if job.phase == "running":
                sim.first_start = job.run_start
                self.push(now + left, Completion(i, 1))
                self.schedule_crossing(sim, now)
                guard = job.run_start + config.min_run_s
                if config.preemption and config.min_run_s > 0 and guard > now:
                    self.push(guard, DecisionTick(False))
            else:   # being preempted: its start is the next one, after the requeue
                sched.signal(i, now)
                self.push(max(job.grace_end or now, now), GraceEnd(i, 1))
        self.push(now, DecisionTick(False))
        self.order: tuple[int, ...] = ()
        #: per job of the world, its first start after one in this replay or at seeding
        self.restarts: dict[int, float] = {}
        self.totals = totals
        self.world_left = len(self.jobs)   # jobs of the world not ended yet
        self.arrivals = arrivals
        self.next_arrival()

    def next_arrival(self) -> None:
        """File the next drawn arrival that fits on some node (none when the stream ends)."""
        if self.arrivals is None:
            return
        for when, shape, run_s in self.arrivals:
            ordered = tuple(sorted(shape, reverse=True))
            if not can_ever_fit(ordered, self.totals):
                continue
            k = len(self.world.jobs) + self.seq   # unique: seq grows with every push
            while k in self.jobs:
                k += 1
            self.jobs[k] = SimJob(TraceJob(k, f"arrival-{k}", 0, when, sum(shape), run_s),
                                  ordered)
            self.push(when, Arrival(k))
            return

    def start(self, job: SimJob, now: float) -> None:
        """The simulator's start, noting a restart of a job of the world."""
        k = job.trace.job_id
        if job.first_start is not None and k < len(self.world.jobs) and k not in self.restarts:
            self.restarts[k] = now
        super().start(job, now)

    def apply(self, event: Any, now: float) -> bool:
        """The simulator's :meth:`Simulator.apply`, counting the world's completions and
        filing the next drawn arrival when one arrives."""
        changed = super().apply(event, now)
        kind = type(event)
        if kind is Arrival:
            self.next_arrival()
        elif kind is Completion and changed and event.job_id < len(self.world.jobs):
            self.world_left -= 1
        return changed

    def outcomes(self, horizon_s: float | None = None,
                 out_of_time: Callable[[], bool] | None = None
                 ) -> tuple[list[Outcome], tuple[str, ...]]:
        """Run the replay to the last completion, or to ``world.now + horizon_s``: per job of
        the world its :class:`Outcome`, and the ids of the pending jobs in the policy's start
        order at ``now`` (after the starts made at ``now``).

        ``out_of_time``: asked every :data:`CHECK_EVERY` events; True ends the replay there,
        as the horizon would have at that event's time, which :attr:`cut_at` then holds
        (a caller's CPU budget: :func:`prioritizer.forecast.forecast.forecast`)."""
        heap = self.heap
        first = True
        stop = self.world.now + horizon_s if horizon_s is not None else float("inf")
        steps = 0
        with fewer_collections():
            while heap:
                if heap[0][0] > stop:
                    break
                now = self.step()
                if first:
                    first = False
                    self.order = self.sched.start_order(now)
                if self.arrivals is not None and self.world_left == 0:
                    break   # only drawn arrivals are left
                steps += 1
                if out_of_time is not None and steps % CHECK_EVERY == 0 and heap \
                        and heap[0][0] > now and out_of_time():
                    self.cut_at = now   # every event up to ``now`` is made
                    break
        out = []
        for i, job in enumerate(self.world.jobs):
            sim = self.jobs.get(i)
            if sim is None:
                out.append(Outcome(None, None, False))
            else:
                start = sim.first_start if sim.first_start is not None else inf
                restart = self.restarts.get(i, inf) \
                    if job.phase == "running" and sim.preemptions else None
                out.append(Outcome(start, sim.end if sim.end is not None else inf,
                                   sim.preemptions > 0, restart))
        ids = self.world.jobs
        return out, tuple(ids[i].job_id for i in self.order if i < len(ids))
