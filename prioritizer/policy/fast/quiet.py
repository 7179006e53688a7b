"""A proof, kept between decisions, that no preemption is due (``srtf`` on real nodes).

A trace replay asks after nearly every event whether a preemption is due (the daemon acts on
one only at its next tick). Most answers are "no", and most events change little: a job
arrives, a job's first ``min_run_s`` seconds run out, a job ends. :class:`QuietProof` keeps
the last "no" and, at the next decision, tries to show from the changes alone that the
search of ``find_preemptions`` would again find nothing, so that the search is not run.

Why a "no" stays a "no" (``srtf``: a waiter's level is its remaining work, fixed while it
waits; a running job's level is its remaining time, which only shrinks). A search that
finds nothing, made with no job checkpointing (so ``soon`` is ``free`` and nobody
reserves), leaves every waiter that did not start with a failing *counting rule*: for the
j-th largest entry ``v`` of its need, fewer than j nodes reach ``v`` GPUs with their free
GPUs at its turn plus those of the victim candidates above its level (the searched ones
failed it; the ones the ``failed`` shortcut skipped need more than one that failed it,
with no more candidates; the ones past the walk's early end had no candidate above them).
A victim search succeeds only if that rule holds. Until the next decision:

* the starts made after the decision, and time passing, only lower every node's free
  GPUs and candidates' levels (a later decision comes at least ``SLACK_S`` later, so
  rounding cannot lift a level), except on the nodes *touched* since: where a run ended
  (GPUs freed) or a run's ``min_run_s`` ran out (a new candidate);
* so a waiter of the last decision can pass the rule now only if some touched node
  reaches its smallest entry, counting only candidates above its level;
* a waiter filed since (arrival, end of requeue delay) either starts at its turn or is
  checked on its own: too few GPUs above its level, covered by a waiter of the last
  decision ahead of it (``find_preemptions``' ``failed`` shortcut), or refused by the
  scheduler's per-node bound (``Scheduler.victim_bound``), an upper bound of its rule.
  The first one the bound lets pass is, between ticks (``victims=False``), the first
  preemption when the scheduler's exact test proves it due (``Scheduler.due_proof``);
  otherwise the search decides.

Any other change (a checkpoint signal, a start made outside ``plan_starts``, a decision
that did not search) drops the proof. The property tests (tests/prioritizer/policy/test_policy_quiet.py,
tests/prioritizer/policy/test_policy_scheduler.py) compare every decision, made with a kept proof or by a
search, with ``decide``. Units: seconds, GPUs. No clock, no I/O.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Any

from prioritizer.policy.model import Preemption
from prioritizer.policy.victims import may_be_victim, needs_no_less
from prioritizer.policy.fast.records import Tracked
from prioritizer.policy.fast.state import SchedulerState

_INF = float("inf")


class QuietProof:
    """The last "no preemption due" of a :class:`~prioritizer.policy.fast.incremental.Scheduler`
    and the changes since (see the module doc). ``slack``: the scheduler's ``SLACK_S``
    (seconds), the margin of its level comparisons."""

    __slots__ = ("since", "fresh", "freed", "runs", "slack")

    def __init__(self, slack: float) -> None:
        self.slack = slack
        #: time of the decision that found no preemption (None: no proof held)
        self.since: float | None = None
        self.fresh: list[Tracked] = []    # jobs filed into the start order since
        self.freed: set[int] = set()      # nodes where a run ended since
        #: (time its min_run_s guard runs out, job id, ``Tracked.guard``) of runs, ascending
        self.runs: list[tuple[float, int, float]] = []

    def drop(self) -> None:
        """Forget the proof (a change it does not follow)."""
        self.since = None
        self.fresh.clear()
        self.freed.clear()

    def filed(self, rec: Tracked) -> None:
        """``rec`` entered the start order (a new waiter)."""
        if self.since is not None:
            self.fresh.append(rec)

    def released(self, nodes: tuple[int, ...]) -> None:
        """A run on ``nodes`` ended (its GPUs are free)."""
        if self.since is not None:
            self.freed.update(nodes)

    def ran(self, rec: Tracked, min_run_s: float) -> None:
        """``rec`` started a run: a victim candidate ``min_run_s`` after ``rec.guard``."""
        insort(self.runs, (rec.guard + min_run_s, rec.job_id, rec.guard))

    def certify(self, now: float) -> None:
        """The decision at ``now`` found no preemption, with no job checkpointing."""
        self.since = now
        self.fresh.clear()
        self.freed.clear()
        self._trim(now)

    def _trim(self, now: float) -> None:
        # runs whose min_run_s ran out before ``now`` matter to no later proof
        cut = bisect_left(self.runs, (now - self.slack,))
        if cut:
            del self.runs[:cut]

    def answer(self, sched: SchedulerState, now: float, first_only: bool
               ) -> tuple[Preemption, ...] | None:
        """What the search at ``now`` would find, where the changes since the proof show
        it: ``()`` (no preemption due), or with ``first_only`` the first preemption as
        ``Scheduler.decide(victims=False)`` reports one proved due (a waiter filed since,
        its victims not chosen); None: search."""
        since = self.since
        if since is None or now - since < self.slack or sched.grace or sched.fixed \
                or sched.no_oracle or sched.node_bound is None:
            return None
        jobs = sched.jobs
        min_run = sched.config.min_run_s
        touched = set(self.freed)
        runs = self.runs
        lo = bisect_left(runs, (since - self.slack,))
        hi = bisect_right(runs, (now + self.slack, _INF))
        for _, job_id, run_start in runs[lo:hi]:
            rec = jobs.get(job_id)
            # a new candidate: its guard ran out since the proof (one that had run out
            # then was a candidate of the proof)
            if rec is not None and rec.phase == "running" and rec.guard == run_start \
                    and may_be_victim(True, False, run_start, now, min_run) \
                    and not may_be_victim(True, False, run_start, since, min_run):
                touched.update(rec.nodes)
        if touched and self._served(sched, touched, now, min_run):
            return None
        # every waiter of the last decision still fails its rule (and does not start)
        return self._fresh(sched, now, first_only) if self.fresh else ()

    def _fresh(self, sched: SchedulerState, now: float, first_only: bool
               ) -> tuple[Preemption, ...] | None:
        """The waiters filed since, in start order: each starts at its turn (the waiters
        of the last decision start nowhere: ``answer`` checked that) or fails its counting
        rule (too few GPUs above its level in all; or one of the last decision's waiters
        ahead of it needs no more on any node, so it fails with no fewer GPUs at its turn
        and no fewer candidates: ``find_preemptions``' ``failed`` shortcut; or the
        per-node bound refuses it): ``()``. The first that passes the bound is, with
        ``first_only``, the first preemption when the scheduler's exact test proves it
        due (``Scheduler.due_proof``); otherwise None (search)."""
        fresh = sorted((rec.entry_key, rec) for rec in set(self.fresh) if rec.where == "order")
        # built when first needed (most answers see one fresh waiter, which starts)
        above: Any = None
        fresh_ids: set[int] | None = None
        free = sched.free
        started = 0   # GPUs of the fresh waiters placed so far
        may_fit: Any = None
        fitted: list[Any] = [None]
        last = len(fresh) - 1
        for i, (key, rec) in enumerate(fresh):
            nodes = free.place(rec.shape)
            if nodes is not None:   # it starts: the start model places it as here
                if i < last:   # the later ones see the GPUs it leaves
                    if free is sched.free:
                        free = free.copy()
                    free.add(nodes, [-g for g in rec.shape])
                started += rec.gpus
                continue
            if above is None:
                above = sched.room_above(now)
            room = above(rec.level)
            if room == 0 or room < rec.gpus and sched.free.total - started + room < rec.gpus:
                continue   # not enough GPUs above its level in all
            need = tuple(sorted(rec.shape, reverse=True))
            if fresh_ids is None:
                fresh_ids = {r.job_id for _, r in fresh}
            if _covered(sched.groups, need, key, fresh_ids):
                continue
            if may_fit is None:
                may_fit = sched.victim_bound(now, fitted)
            if may_fit(rec.level, need, 0, free):
                due = sched.due_proof(now, fitted) if first_only else None
                if due is not None and due(rec.level, need, free):
                    return (Preemption(rec.job_id, ()),)
                return None
        return ()

    def _served(self, sched: SchedulerState, nodes: set[int], now: float, min_run: float
                ) -> bool:
        """Whether one of ``nodes`` may give some waiter its smallest entry ``m``: its free
        GPUs plus those of the candidates above the waiter's level reach ``m``. A
        candidate counts for a waiter of level ``l`` if its oracle end exceeds
        ``now + l - slack`` (an upper bound of ``level > l``), so taking a node's
        candidates longest remaining first, each adds GPUs for the waiters below its
        ``end - now + slack``; per ``m`` only the lowest level of the waiters whose
        smallest entry is at most ``m`` is compared."""
        bound = sched.node_bound
        assert bound is not None
        top = len(bound.col)   # the largest node's GPUs + 1
        lowest = [_INF] * top  # per smallest entry m: the lowest level of such a waiter
        jobs = sched.jobs
        for shape, keys in sched.groups.items():
            m = max(min(shape), 1)
            if m >= top:
                return True   # (not expected: no node holds it) left to the search
            level = jobs[keys[0][1]].level
            if level < lowest[m]:
                lowest[m] = level
        # per m, the lowest level of a waiter whose smallest entry is at most m
        for m in range(2, top):
            if lowest[m - 1] < lowest[m]:
                lowest[m] = lowest[m - 1]
        free = sched.free.free
        for node in nodes:
            have = min(free[node], top - 1)
            if have and lowest[have] < _INF:
                return True   # free GPUs alone reach a waiter's smallest entry
            keyed = bound.keyed_on(node)
            for i in range(len(keyed) - 1, -1, -1):   # longest remaining first
                key, g, run_start, _ = keyed[i]
                if not may_be_victim(True, False, run_start, now, min_run):
                    continue   # not a candidate yet (its first min_run_s seconds)
                have += g
                if have >= top:
                    have = top - 1
                if lowest[have] < key - now + self.slack:
                    return True
                if have == top - 1:
                    break
        return False


def _covered(groups: dict[tuple[int, ...], list[tuple[Any, int]]], need: tuple[int, ...],
             key: Any, fresh: set[int]) -> bool:
    """Whether a waiter that is not in ``fresh`` comes before ``key`` in the start order
    with a need no larger, entry by entry (largest first), than ``need`` (largest first)
    on no more nodes."""
    for shape, keys in groups.items():
        if not needs_no_less(need, tuple(sorted(shape, reverse=True))):
            continue
        for entry in keys:
            if entry >= key:
                break
            if entry[1] not in fresh:
                return True
    return False
