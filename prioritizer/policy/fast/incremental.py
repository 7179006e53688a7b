"""Incremental scheduler state: the decision of ``policy.decide`` kept up to date by events.

``decide(snapshot, config, now)`` recomputes everything from a snapshot: every job's queue
state, the order of all pending jobs, the start model. That is what the daemon needs once per
cycle, but a trace replay makes tens of thousands of decisions, each after a handful of
changes. :class:`Scheduler` holds the same state between decisions and touches only what an
event or the clock can change, using the very rules of ``policy.decide`` (``queue_state``,
``Policy.key``/``level``, ``next_queue_change``, ``promotion_time``),
``preemption.find_preemptions`` (with its own search strategy, ``policy.fast.search``) and
``placement.plan_starts``; it has no rule of its own. What it keeps:

* per job: its phase, service counted as ``closed + rate × (now - run_start)`` (so time
  passing changes nothing stored), its queue state and pending sort key;
* the eligible pending jobs as one ordered list and per job shape (``gpus_per_node``) an
  ordered list, so that the start model visits only jobs whose shape fits;
* jobs not yet eligible (requeue BeginTime) in a heap by eligible time;
* the next time a job's queue state can change (threshold crossing of a job holding GPUs,
  promotion deadline of a pending one) in a heap: only jobs whose time has come, and jobs
  whose inputs changed since the last decision, are re-examined;
* free GPUs per node (``placement.FreeMap``), updated by starts and ends;
* for ``srtf`` on real nodes, per node the running jobs by oracle end (``NodeBound``),
  from which a search that cannot succeed is skipped, a one-node waiter's victims are read
  (``policy.fast.one_node``) and the last "no preemption due" is kept across decisions that
  cannot change it (``policy.fast.quiet``).

tests/prioritizer/policy/test_policy_scheduler.py drives a :class:`Scheduler` and ``decide`` with the same
random event sequences and checks identical decisions at every step. Units: seconds,
GPU·seconds. No clock, no I/O.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from heapq import heappop, heappush
from dataclasses import dataclass, field
from typing import Any, Iterator

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import (POLICIES, PROMOTED, Policy, next_queue_change,
                                       promotion_on, promotion_time, queue_state)
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import JobView, NodeView, Preemption, QueueState, Snapshot
from prioritizer.policy.placement import FreeMap, Planned, plan_starts
from prioritizer.policy.preemption import find_preemptions
from prioritizer.policy.victims import (Candidate, gain_test, guard_start, lost_before,
                                        may_be_victim, waited_before)
from prioritizer.policy.fast.node_bound import NodeBound
from prioritizer.policy.fast.records import Tracked
from prioritizer.policy.fast.search import FastSearch
from prioritizer.policy.fast.victim_order import VictimOrder
from prioritizer.policy.fast.start_walk import fitting, in_order, levels
from prioritizer.policy.fast.waiters import waiters
from prioritizer.policy.fast.one_node import OneNodeVictims
from prioritizer.policy.fast.quiet import QuietProof
from prioritizer.policy.fast.queue_room import QueueRoom, RoomView, proofs
from prioritizer.policy.fast.queue_victims import QueueVictims

#: slack (seconds) when comparing a scheduled state-change time with ``now``: such times
#: are computed with a division, so a job is re-examined from slightly before its time on
#: (the exact test is ``queue_state``'s own).
SLACK_S = 1e-3


#: eligible pending jobs from which the preemption walk is handed only the waiters whose
#: turn can change something (``policy.fast.waiters``) and a queue policy's searches are
#: answered from the per-node counts (``policy.fast.queue_room``); exact either way, but on
#: a shorter queue the plain walk costs less
COUNTED_AFTER = 512


def _limit(now: float) -> float:
    """Scheduled state-change times up to this one are due at ``now`` (``SLACK_S``)."""
    return now + SLACK_S + abs(now) * 1e-12


class _Holding:
    """What ``find_preemptions`` and ``Policy.level`` read of a job holding GPUs at one
    time (the ``JobView`` and ``QueueState`` fields they use), built without the cost of
    a frozen dataclass: one per job holding GPUs at each decision that looks for victims."""

    __slots__ = ("job_id", "gpus_per_node", "preemptible", "releasing", "run_start",
                 "attained_gpu_s", "attained_s", "duration_s", "queue")

    def __init__(self, rec: Tracked, now: float) -> None:
        self.job_id, self.gpus_per_node, self.preemptible = rec.job_id, rec.shape, rec.preemptible
        self.releasing, self.run_start = rec.phase == "grace", rec.run_start
        self.attained_gpu_s, self.attained_s, self.duration_s = rec.service(now)
        self.queue = rec.queue if rec.queue is not None else 0


@dataclass(slots=True)
class Step:
    """Result of :meth:`Scheduler.decide` (the parts of ``Decisions`` a driver acts on).

    Attributes:
        changed: ``(job_id, new QueueState)`` of the jobs whose state changed (new,
            demoted, promoted), already recorded by the scheduler.
        promotions: ids promoted back to queue 0, sorted.
        preemptions: as ``Decisions.preemptions``; with ``victims=False`` only the first
            one (enough to know that some preemption is due), whose victims are left
            empty when the scheduler proved it due without choosing them (srtf).
        pending: pending jobs at this decision (eligible or not).
        strict_order: as ``Decisions.strict_order``.
    """

    changed: list[tuple[int, QueueState]] = field(default_factory=list)
    promotions: tuple[int, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    pending: int = 0
    strict_order: bool = False


class Scheduler:
    """The policy's state between decisions; see the module doc.

    Events (in trace or cluster order): :meth:`add` (a job is submitted), :meth:`start`,
    :meth:`signal` (checkpoint signal sent), :meth:`requeue` (run ends, job pending again),
    :meth:`finish` (run ends, job done). :meth:`decide` then gives what ``decide()`` would
    give on the snapshot of this state, and :meth:`plan_starts` starts the jobs Slurm would
    start (``placement.plan_starts`` on the policy's order).

    Raises:
        ValueError: as ``policy.decide`` (``tiresias-gittins`` without a distribution,
            ``srtf`` without an oracle duration); KeyError for an unknown job id.
    """

    def __init__(self, config: PolicyConfig, node_totals: list[int], node_names: list[str],
                 distribution: GittinsDistribution | None = None) -> None:
        self.config = config
        self.policy = POLICIES[config.policy](config, distribution)
        self.totals, self.names = list(node_totals), list(node_names)
        self.free = FreeMap(node_totals)
        #: free GPUs once the checkpointing jobs have freed theirs (``free`` plus theirs)
        self.soon = FreeMap(node_totals)
        self.jobs: dict[int, Tracked] = {}
        self.dirty: dict[int, None] = {}                 # ordered set: re-examine at decide
        self.order: list[tuple[Any, int]] = []           # eligible pending, start order
        self.groups: dict[tuple[int, ...], list[tuple[Any, int]]] = {}
        self.waiting: list[tuple[float, int, int]] = []  # (eligible, epoch, id) heap
        self.due: list[tuple[float, int, int]] = []      # (state change time, epoch, id)
        self.hot: dict[int, None] = {}                   # due: re-examine at every decide
        self.holding: dict[int, Tracked] = {}            # running or grace
        self.grace: dict[int, None] = {}
        self.pending = 0
        # levels are queue numbers (not srtf's remaining time): a cheap pre-check applies
        self.queue_levels = type(self.policy).level is Policy.level
        #: whether time alone can change a queue state (thresholds or promotion)
        #: (``next_queue_change`` is None for every job of a policy without thresholds,
        #: ``promotion_time`` for every job of one that does not promote: both skipped)
        self.crossings = bool(self.policy.thresholds)
        self.promoting = promotion_on(self.policy.promotes, config.starve_knob)
        #: promoted jobs preempt no one (``PolicyConfig.promoted_preempts`` False)
        self.lifting = self.policy.promotes and not config.promoted_preempts
        self.timed = self.crossings or self.promoting
        #: GPUs of preemptible running (not checkpointing) jobs per queue: the bound
        #: ``above`` of find_preemptions when levels are queues
        self.running_in = [0] * (len(self.policy.thresholds) + 1)
        #: (oracle end time, id) of preemptible running jobs when levels are remaining time
        self.ends: list[tuple[float, int]] = []
        self.end_gpus: list[int] = []   # GPUs of the job of each entry of ``ends``
        #: the end time of each entry of ``ends``: the queries bisect this list of floats
        #: (``bisect_left(end_times, x)`` is ``bisect_left(ends, (x,))``, without
        #: comparing tuples)
        self.end_times: list[float] = []
        #: jobs without an oracle duration (srtf's bound then does not apply)
        self.no_oracle = 0
        #: the preemptible running jobs in victim order (find_preemptions' candidates)
        self.victims = VictimOrder(self.queue_levels)
        #: no eligible pending job fits ``free`` (known after a start walk on ``free``
        #: itself; GPUs freed or a fitting job filed undo it): the next walk starts nothing
        self.stuck = False
        #: per-node bound of ``srtf``'s one-node victim searches (real nodes; every job
        #: preemptible, oracle durations): see :class:`NodeBound`. (Queue policies find
        #: a victim near the front of the candidates: there it costs more than it spares.)
        self.node_bound = (NodeBound(self.totals)
                           if len(self.totals) > 1 and not self.queue_levels else None)
        self.fixed = 0   # jobs that are not preemptible
        self.bystanders = 0   # jobs that preempt no one while waiting (``add``'s preempts)
        #: the last "no preemption due" and the changes since (srtf on real nodes): a
        #: decision it covers makes no search (see ``policy.fast.quiet``); none with
        #: ``preempt_gain``, whose test changes as the victims run, with no event
        self.quiet = (QuietProof(SLACK_S) if self.node_bound is not None
                      and config.preemption and self.policy.preemptive
                      and not config.preempt_gain else None)
        #: srtf's one-node victim searches from the per-node bound (real nodes)
        self.one_node = (None if self.node_bound is None
                         else OneNodeVictims(self, self.node_bound, SLACK_S))
        #: queue policies that preempt, on real nodes: per node and queue the GPUs within a
        #: waiter's reach, from which a search's outcome is known without reading the
        #: candidates (one pool: the walk finds its victims among the first candidates)
        self.queue_room = (QueueRoom(self.totals, len(self.policy.thresholds) + 1)
                           if self.queue_levels and self.crossings and self.policy.preemptive
                           and config.preemption and len(self.totals) > 1 else None)

    def switched(self, config: PolicyConfig,
                 distribution: GittinsDistribution | None = None) -> Scheduler:
        """A scheduler under ``config`` that holds this one's jobs as they are: a daemon whose
        policy settings change (``auto_tune``, an edited ``policy:`` section) keeps every
        job's runs, attained service and last queue state, and its next decision re-examines
        every job under the new settings, as ``decide`` does with the ledger's states
        ("thresholds changed", a demotion, a promotion), and the guard of each run
        (``victims.guard_start``) is the new settings' from its start on, as ``decide``
        computes it from the job's runs. The jobs move over (this scheduler is not used
        again); what is indexed per job is filed anew."""
        new = Scheduler(config, self.totals, self.names, distribution)
        for rec in self.jobs.values():
            rec.where, rec.entry_key, rec.state, rec.crossing = "", None, None, None
            rec.level, rec.lifted = 0.0, False
            rec.epoch += 1
            new.jobs[rec.job_id] = rec
            new.no_oracle += rec.work_left is None
            new.fixed += not rec.preemptible
            new.bystanders += not rec.preempts
            new.dirty[rec.job_id] = None
            if rec.phase == "pending":
                new.pending += 1
                continue
            # a queue the old settings had and the new ones lack is counted where it was
            # until the decision moves it
            new.running_in += [0] * ((rec.queue or 0) + 1 - len(new.running_in))
            rec.guard = new._guard(rec, rec.run_start)
            new.free.add(rec.nodes, [-g for g in rec.shape])
            new.holding[rec.job_id] = rec
            if rec.phase == "grace":
                new.grace[rec.job_id] = None
            else:
                new.soon.add(rec.nodes, [-g for g in rec.shape])
                new._count(rec, +1)
            if new.quiet is not None:
                new.quiet.ran(rec, config.min_run_s)
            if new.queue_room is not None:
                new.queue_room.started(rec)
        return new

    # -- events -------------------------------------------------------------------------
    def add(self, job_id: int, shape: tuple[int, ...], submit: float,
            duration_s: float | None = None, preemptible: bool = True,
            preempts: bool = True) -> Tracked:
        """A job is submitted (pending; gets its ``new`` state at the next decision).
        ``preempts`` False: a waiter that preempts no one, as ``find_preemptions`` treats a
        promoted job that ``promoted_preempts`` keeps from it (``lifted``): a driver's job
        that Slurm starts where it fits but dlprio preempts nothing for (a forecast's shard
        job). ``decide`` has no such job; with every job preempting, the two decide alike."""
        rec = Tracked(job_id, tuple(shape), submit, duration_s, preemptible, preempts)
        self.jobs[job_id] = rec
        self.no_oracle += duration_s is None
        self.fixed += not preemptible
        self.bystanders += not preempts
        self.pending += 1
        self.dirty[job_id] = None
        return rec

    def start(self, job_id: int, nodes: tuple[int, ...], now: float) -> Tracked:
        """``job_id`` starts on ``nodes`` (aligned with its shape); allocates the GPUs."""
        rec = self.jobs[job_id]
        self._unindex(rec)
        rec.phase, rec.run_start, rec.nodes, rec.eligible = "running", now, tuple(nodes), None
        rec.guard = self._guard(rec, now)
        rec.names = tuple([self.names[n] for n in nodes])
        self.free.add(rec.nodes, [-g for g in rec.shape])
        self.soon.add(rec.nodes, [-g for g in rec.shape])
        if self.quiet is not None:
            self.quiet.drop()   # a start not planned here: not one the proof follows
        self.holding[job_id] = rec
        self.pending -= 1
        self._count(rec, +1)
        self._started(rec, now)
        return rec

    def signal(self, job_id: int, now: float) -> None:
        """Checkpoint signal sent at ``now``: progress stops, the GPUs stay held."""
        rec = self.jobs[job_id]
        self._count(rec, -1)
        if rec.work_left is not None:
            rec.work_left -= now - rec.run_start
        rec.phase = "grace"
        self.grace[job_id] = None
        self.soon.add(rec.nodes, rec.shape)
        if self.quiet is not None:
            self.quiet.drop()
        self._touch(rec)

    def requeue(self, job_id: int, now: float, eligible: float | None) -> None:
        """The run ends at ``now``, GPUs freed; pending again, startable from ``eligible``."""
        rec = self._stop(job_id, now)
        rec.phase, rec.eligible = "pending", eligible
        self.pending += 1

    def finish(self, job_id: int, now: float) -> None:
        """The run ends at ``now`` and the job leaves the cluster."""
        rec = self._stop(job_id, now)
        del self.jobs[job_id]
        self.no_oracle -= rec.work_left is None
        self.fixed -= not rec.preemptible
        self.bystanders -= not rec.preempts
        self.dirty.pop(job_id, None)
        rec.phase = "done"

    def _stop(self, job_id: int, now: float) -> Tracked:
        rec = self.holding.pop(job_id)
        self.grace.pop(job_id, None)
        self.hot.pop(job_id, None)
        length = now - rec.run_start
        if rec.phase == "running":
            self._count(rec, -1)
            if rec.work_left is not None:
                rec.work_left -= length
            self.soon.add(rec.nodes, rec.shape)   # (a checkpointing job's are in it)
        rec.closed_gpu_s += length * rec.gpus
        rec.closed_s += length
        rec.last_run_s, rec.last_run_end = length, now
        self.free.add(rec.nodes, rec.shape)
        self.stuck = False
        if self.quiet is not None:
            self.quiet.released(rec.nodes)
        rec.nodes, rec.names = (), ()
        self._touch(rec)
        return rec

    def _count(self, rec: Tracked, sign: int) -> None:
        if self.queue_room is not None:
            self.queue_room.running(rec, sign)
        if not rec.preemptible:
            return
        if sign > 0:
            self.victims.add(rec)
        else:
            self.victims.remove(rec.job_id)
        if self.node_bound is not None:
            if sign < 0:
                self.node_bound.remove(rec)
            elif rec.work_left is not None:
                self.node_bound.add(rec, rec.run_start + rec.work_left)
        if self.queue_levels:
            self.running_in[rec.queue or 0] += sign * rec.gpus
        elif rec.work_left is not None:   # srtf: running jobs by oracle end time
            entry = (rec.run_start + rec.work_left, rec.job_id)
            if sign > 0:
                i = bisect_left(self.ends, entry)
                self.ends.insert(i, entry)
                self.end_gpus.insert(i, rec.gpus)
                self.end_times.insert(i, entry[0])
            else:
                i = bisect_left(self.ends, entry)
                del self.ends[i], self.end_gpus[i], self.end_times[i]

    def _above(self, level: float) -> int:
        return sum(self.running_in[int(level) + 1:])

    def room_above(self, now: float) -> Any:
        """``find_preemptions``'s ``above``: GPUs of preemptible running jobs of a level
        above the one given (queues; or srtf's remaining time, which for a running job is
        its oracle end minus ``now``, up to rounding: SLACK_S keeps it an upper bound)."""
        if self.queue_levels:
            return self._above
        if self.no_oracle:
            return None
        end_times, end_gpus = self.end_times, self.end_gpus
        known: dict[float, int] = {}   # per level, within this decision (asked again by
        # the walk after the pre-check, and by waiters of the same level)

        def above(level: float) -> int:
            # a sum over the entries past the level (most running jobs end before a
            # waiter's level: about a quarter of them are summed, cheaper than suffix
            # sums over all of them at each decision)
            room = known.get(level)
            if room is None:
                room = known[level] = sum(
                    end_gpus[bisect_left(end_times, now + level - SLACK_S):])
            return room
        return above

    def victim_bound(self, now: float, fitted: list[Any]) -> Any:
        """``find_preemptions``'s ``may_fit`` (see :class:`NodeBound`), or None; it keeps
        in ``fitted[0]`` the ``(level, need, extra)`` it last let pass."""
        bound = self.node_bound
        if bound is None or self.fixed or self.no_oracle:
            return None
        min_run = self.config.min_run_s

        def may_fit(level: float, need: tuple[int, ...], extra: int, soon: FreeMap) -> bool:
            # a candidate's level (end - now) is above the waiter's iff its end lies after
            # now + level, up to rounding: SLACK_S keeps the bound an upper bound
            if bound.may_fit(now + level - SLACK_S, need, extra, soon, now, min_run):
                fitted[0] = (level, need, extra)
                return True
            return False
        return may_fit

    def due_proof(self, now: float, fitted: list[Any]) -> Any:
        """``find_preemptions``'s ``due`` (``first_only``), or None: whether a blocked
        waiter of a level and need surely finds victims. srtf with oracle durations only:
        a candidate's level is its oracle end minus ``now`` (up to rounding), so when no
        end lies within ``2 × SLACK_S`` of ``now + level`` the candidates above the level
        are exactly the jobs ending after it, and the victim search succeeds iff, for the
        j-th largest entry ``v`` of the need, ``j`` nodes reach ``v`` GPUs with ``soon``'s
        free ones plus those of such jobs that ``may_be_victim`` admits (the rule of
        ``_victims_for_gang``; one node: ``_victims_for_one_node``). Real nodes: that is
        the per-node bound's own test, exact there (``fitted``: what ``may_fit`` just let
        pass, with nothing taken yet); one node (GPU counting): a sum over the jobs ending
        after the level."""
        if self.queue_levels or self.no_oracle:
            return None
        ends, end_gpus, jobs = self.ends, self.end_gpus, self.jobs
        end_times = self.end_times
        min_run = self.config.min_run_s
        clear = self.clear_of_ends
        bound = self.node_bound
        if bound is not None:
            if self.fixed:
                return None

            def due(level: float, need: tuple[int, ...], soon: FreeMap) -> bool:
                return (fitted[0] is not None and fitted[0] == (level, need, 0)
                        and need[0] < len(bound.col) and clear(now, level))
            return due
        if len(self.totals) != 1:
            return None

        def due_one(level: float, need: tuple[int, ...], soon: FreeMap) -> bool:
            if len(need) != 1 or not clear(now, level):
                return False
            have = soon.free[0]
            first = bisect_left(end_times, now + level)
            for i in range(len(ends) - 1, first - 1, -1):   # longest remaining first
                if may_be_victim(True, False, jobs[ends[i][1]].guard, now, min_run):
                    have += end_gpus[i]
                    if have >= need[0]:
                        return True
            return False
        return due_one

    def clear_of_ends(self, now: float, level: float) -> bool:
        """No oracle end of a preemptible running job lies within ``2 × SLACK_S`` of
        ``now + level``: every candidate's level (its end minus ``now``, up to rounding)
        is clearly above or below ``level``."""
        end_times = self.end_times
        lo = bisect_left(end_times, now + level - 2 * SLACK_S)
        return lo == len(end_times) or end_times[lo] > now + level + 2 * SLACK_S

    def one_node_victims(self, now: float, exact: Any) -> Any:
        """``find_preemptions``' ``one_node`` (srtf on real nodes, every job preemptible,
        oracle durations), or None: the victims of a one-node waiter found from the
        per-node bound instead of a walk over the candidates (see
        :class:`~prioritizer.policy.fast.one_node.OneNodeVictims`; one kept per scheduler,
        set to this decision's ``now`` and candidate builder ``exact``)."""
        helper = self.one_node
        if helper is None or self.fixed or self.no_oracle:
            return None
        helper.now, helper.exact = now, exact
        return helper

    def _guard(self, rec: Tracked, now: float) -> float:
        """``victims.guard_start`` of the run ``rec`` begins at ``now`` (its first start
        is recorded here)."""
        if rec.first_start is None:
            rec.first_start = now
        cfg = self.config
        if not (cfg.wait_guard or cfg.requeue_guard):
            return now
        return guard_start(now, waited_before(now, rec.last_run_end, rec.submit),
                           cfg.min_run_s, cfg.wait_guard,
                           lost_before(now, rec.first_start, rec.closed_s), rec.closed_s,
                           cfg.requeue_guard)

    def _started(self, rec: Tracked, now: float) -> None:
        """A start: the job's state cannot change by it, so instead of re-examining the
        job at the next decision its next threshold crossing is scheduled now (a job
        never decided yet is examined as usual)."""
        if self.quiet is not None:
            self.quiet.ran(rec, self.config.min_run_s)
        if self.queue_room is not None:
            self.queue_room.started(rec)
        if rec.queue is None or rec.job_id in self.dirty:
            self._touch(rec)
            return
        rec.epoch += 1
        self.hot.pop(rec.job_id, None)
        self._schedule(rec, now, _limit(now))

    def _touch(self, rec: Tracked) -> None:
        rec.epoch += 1
        self.hot.pop(rec.job_id, None)
        self.dirty[rec.job_id] = None

    # -- queries for a driver -----------------------------------------------------------
    def crossing_time(self, job_id: int, now: float) -> float | None:
        """``next_queue_change`` of a job holding GPUs (seconds), or None."""
        rec = self.jobs[job_id]
        if not self.crossings:
            return None
        known = rec.crossing
        if known is not None and known[0] == rec.epoch and known[1] == now:
            return known[2]   # computed by this decision from the very same state
        return next_queue_change(rec.view(now), self.config, now, self.policy)

    def promotion_due(self, job_id: int, now: float) -> float | None:
        """``promotion_time`` of a pending job (seconds), or None."""
        rec = self.jobs[job_id]
        if not self.promoting:
            return None
        return promotion_time(rec.view(now), self.config)

    def snapshot(self, now: float) -> Snapshot:
        """This state as ``decide`` takes it (nodes in index order, jobs by id)."""
        nodes = tuple(NodeView(n, t, f) for n, t, f in zip(self.names, self.totals,
                                                              self.free.free))
        return Snapshot(nodes, tuple(self.jobs[j].view(now) for j in sorted(self.jobs)))

    def start_order(self, now: float) -> tuple[int, ...]:
        """Every pending job's id in start order (as ``Decisions.order``); for tests."""
        keys = [rec.entry_key for rec in self.jobs.values() if rec.phase == "pending"]
        return tuple(job_id for _, job_id in sorted(k for k in keys if k is not None))

    # -- the decision -------------------------------------------------------------------
    def decide(self, now: float, victims: bool = True, search: bool = True) -> Step:
        """The decision ``decide(self.snapshot(now), config, now)`` would make; records the
        new queue states. ``victims=False``: stop at the first preemption found (its
        waiter; its victims, or ``()`` where proved due without choosing them);
        ``search=False``: no preemptions looked for (a driver that would not act on them)."""
        step = Step(strict_order=self.policy.strict)
        promotions: list[int] = []
        due, hot = self.due, self.hot
        limit = _limit(now)
        while due and due[0][0] <= limit:
            _, epoch, job_id = heappop(due)
            rec = self.jobs.get(job_id)
            if rec is not None and rec.epoch == epoch:
                hot[job_id] = None
        examine = list(self.dirty)
        if hot:
            examine.extend(j for j in hot if j not in self.dirty)
        self.dirty.clear()
        again: list[int] = []
        for job_id in examine:
            rec = self.jobs[job_id]
            fresh = job_id not in hot
            view = rec.view(now)
            state = rec.state = queue_state(self.policy, view, now, rec.state)
            if state.changed:
                if rec.phase == "running":
                    self._count(rec, -1)
                rec.queue, rec.entry, rec.base = state.queue, state.queue_entry_time, \
                    state.service_base_gpu_s
                if rec.phase == "running":
                    self._count(rec, +1)
                step.changed.append((job_id, state))
                if state.reason.startswith(PROMOTED):
                    promotions.append(job_id)
            if state.changed or fresh:
                hot.pop(job_id, None)
                rec.epoch += 1
                self._schedule(rec, now, limit, rec.restated(view) if state.changed else view)
                if rec.phase == "pending":
                    # decide() keys a job by the view it was given and its new state; a
                    # promotion changes the view too (counted service restarts), so the
                    # job is keyed again from its new view at the next decision (the keys
                    # and levels read of the view only its service base, besides fields
                    # fixed while pending: a new or demoted job keeps its key)
                    self._index(rec, now, view, state)
                    if state.changed and state.service_base_gpu_s != view.service_base_gpu_s:
                        again.append(job_id)
        for job_id in again:
            self.dirty[job_id] = None
        waiting = self.waiting
        while waiting and waiting[0][0] <= now:
            _, epoch, job_id = heappop(waiting)
            rec = self.jobs.get(job_id)
            if rec is not None and rec.where == "waiting" and rec.epoch == epoch:
                self._insert(rec)
        step.promotions = tuple(sorted(promotions))
        step.pending = self.pending
        cfg = self.config
        quiet = self.quiet
        if not search:
            if quiet is not None:
                quiet.drop()
        elif cfg.preemption and self.policy.preemptive and self.pending \
                and self.holding and self.order:
            known = None if quiet is None else quiet.answer(self, now, not victims)
            step.preemptions = (known if known is not None
                                else tuple(self._preemptions(now, victims)))
            if quiet is not None:
                if step.preemptions or self.grace:
                    quiet.drop()
                else:
                    quiet.certify(now)
        elif quiet is not None:
            if self.grace:
                quiet.drop()
            else:
                quiet.certify(now)   # no waiter or no running job: nothing due
        return step

    def _schedule(self, rec: Tracked, now: float, limit: float,
                  view: JobView | None = None) -> None:
        """Put the next time ``rec``'s state may change on the heap (or in ``hot``);
        ``view``: ``rec.view(now)`` if the caller has it."""
        if not self.timed:
            return
        if view is None:
            view = rec.view(now)
        if rec.phase == "pending":
            when = promotion_time(view, self.config)
        else:
            when = next_queue_change(view, self.config, now, self.policy)
            rec.crossing = (rec.epoch, now, when)
        if when is None:
            return
        if when <= limit:
            self.hot[rec.job_id] = None
        else:
            heappush(self.due, (when, rec.epoch, rec.job_id))

    def _index(self, rec: Tracked, now: float, view: JobView, state: QueueState) -> None:
        """(Re)compute a pending job's sort key and level from the ``view`` and ``state``
        of this decision; file it by eligibility."""
        key = (self.policy.key(view, state), rec.job_id)
        rec.level = self.policy.level(view, state)
        rec.lifted = (self.lifting and self.policy.lifted(view, state)) or not rec.preempts
        if rec.where == "order" and key == rec.entry_key:
            if self.quiet is not None:
                self.quiet.filed(rec)
            return   # filed in its place already
        self._unindex(rec)
        rec.entry_key = key
        if rec.eligible is None or rec.eligible <= now:
            self._insert(rec)
        else:
            rec.where = "waiting"
            heappush(self.waiting, (rec.eligible, rec.epoch, rec.job_id))

    def _insert(self, rec: Tracked) -> None:
        key = rec.entry_key
        assert key is not None   # set by _index before it files the job
        if self.stuck and self.free.place(rec.shape) is not None:
            self.stuck = False
        insort(self.order, key)
        group = self.groups.get(rec.shape)
        if group is None:
            group = self.groups[rec.shape] = []
        insort(group, key)
        rec.where = "order"
        if self.quiet is not None:
            self.quiet.filed(rec)

    def _unindex(self, rec: Tracked) -> None:
        if rec.where == "order":
            key = rec.entry_key
            assert key is not None   # set while the job is in the order
            del self.order[bisect_left(self.order, key)]
            group = self.groups[rec.shape]
            del group[bisect_left(group, key)]
            if not group:
                del self.groups[rec.shape]
        rec.where = ""
        if rec.phase != "pending":
            rec.entry_key = None

    def _preemptions(self, now: float, victims: bool) -> list[Preemption]:
        jobs = self.jobs
        if self.queue_levels:
            # levels are queues here: no preemption unless some running job sits in a
            # queue below the first waiter's (a cheap exact pre-check of find_preemptions)
            if not self._above(jobs[self.order[0][1]].level):
                return []

        above = self.room_above(now)
        if above is not None and not self.queue_levels and self._hopeless(above):
            return []

        free = self.free.copy()
        long = len(self.order) >= COUNTED_AFTER
        # with no job checkpointing: what plan_starts copies at the first blocked waiter,
        # made here so that ``waiters`` sees it (queue policies on a short queue: the copy
        # costs more than the waiters it leaves out)
        soon = self.soon.copy() if self.grace else \
            free.copy() if long or not self.queue_levels else None

        policy_level = self.policy.level

        def exact(rec: Tracked) -> Candidate:
            if self.queue_levels:   # Policy.level of a queue policy: the queue number
                return (-float(rec.queue or 0),
                        -(rec.closed_gpu_s + (now - rec.run_start) * rec.gpus),
                        rec.job_id, rec.shape, rec.nodes, 0)
            view = _Holding(rec, now)   # the JobView and QueueState fields level reads
            level = policy_level(view, view)  # type: ignore[arg-type]
            return (-level, -view.attained_gpu_s, rec.job_id, rec.shape, rec.nodes, 0)

        def running(floor: float) -> Iterator[Candidate]:
            return self.victims.ordered(now, floor, self.config.min_run_s, jobs, exact)

        took: list[Candidate] = []   # the victims taken in this decision
        if self.queue_room is not None and long:
            view = RoomView(self.queue_room, now, self.config.min_run_s, jobs, took)
            may_fit, due = proofs(view, not victims)
            readers = QueueVictims(view, exact)
            search = FastSearch(above, may_fit, due, readers.one_node, took, readers.gang)
        else:
            fitted: list[Any] = [None]   # what may_fit last let pass (read by due)
            search = FastSearch(above, self.victim_bound(now, fitted),
                                None if victims else self.due_proof(now, fitted),
                                self.one_node_victims(now, exact), took)
        # (the waiters whose turn would change nothing left out: policy.fast.waiters)
        walk = (waiters(self.groups, jobs, soon, search)
                if soon is not None and not self.policy.strict
                else levels(self.order, jobs))
        pays = gain_test(self.config, self.policy.distribution,
                         lambda job_id: (jobs[job_id].closed_gpu_s, jobs[job_id].gpus))
        return find_preemptions(self.policy.strict, free, soon, walk, running, now,
                                search=search, first_only=not victims,
                                lifted=(lambda job_id: jobs[job_id].lifted)
                                if self.lifting or self.bystanders else None, pays=pays)

    def _hopeless(self, above: Any) -> bool:
        """Whether no eligible pending job can preempt, by ``find_preemptions``' own
        test on the GPUs above a waiter's level, made before any search is set up: a
        blocked waiter for whom those GPUs plus every GPU free or being freed fall short of
        its need finds no victim set, and one above whose level no GPUs are held ends the
        walk (levels never decrease along the order). Until a first victim is taken, the
        GPUs free or being freed only shrink along the walk, so if every waiter up to
        that end falls short, none preempts (exact)."""
        jobs = self.jobs
        spare = -1   # GPUs free or being freed, summed when first needed
        for _, job_id in self.order:
            rec = jobs[job_id]
            room = above(rec.level)
            if room == 0:
                return True
            if room < rec.gpus and spare < 0:
                spare = self.free.total + sum(jobs[held].gpus for held in self.grace)
            if room >= rec.gpus or spare + room >= rec.gpus:
                return False   # this one may find victims: the search decides
        return True

    # -- Slurm's part -------------------------------------------------------------------
    def plan_starts(self, now: float) -> list[Planned]:
        """Start the pending jobs Slurm would start now (``placement.plan_starts`` on the
        policy's order, GPUs being freed by checkpointing jobs held as reservations);
        records the starts and returns them (job id, node indices)."""
        if not self.order or self.stuck:
            return []
        soon = None
        free = self.free
        if self.grace and not free.free_any:
            # nothing starts (the walk would only reserve GPUs being freed); as a walk on
            # a copy of ``free`` leaves it
            self.stuck = False
            return []
        if self.grace:
            free = free.copy()
            soon = self.soon.copy()
        if self.policy.strict:
            jobs = in_order(self.order, self.jobs, free)
        else:
            jobs = fitting(self.groups, free, soon)
        planned = plan_starts(jobs, free, soon, self.policy.strict, complete=False).starts
        # the walk on ``free`` itself (no reservations) left every job behind that does not
        # fit (``fitting`` drops a shape once it fails; GPUs only shrink during a walk)
        self.stuck = free is self.free and not self.policy.strict
        if free is not self.free:   # planned on a copy: make the allocations real
            for p in planned:
                self.free.add(p.nodes, [-g for g in self.jobs[p.job_id].shape])
        for p in planned:
            self._start_planned(p, now)
        return planned

    def _start_planned(self, p: Planned, now: float) -> None:
        """``start`` without the allocation (``plan_starts`` made it on ``self.free``
        already, or the caller did)."""
        rec = self.jobs[p.job_id]
        self._unindex(rec)
        rec.phase, rec.run_start, rec.nodes, rec.eligible = "running", now, p.nodes, None
        rec.guard = self._guard(rec, now)
        self.soon.add(p.nodes, [-g for g in rec.shape])
        rec.names = tuple([self.names[n] for n in p.nodes])
        self.holding[p.job_id] = rec
        self.pending -= 1
        self._count(rec, +1)
        self._started(rec, now)
