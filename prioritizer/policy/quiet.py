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
* a waiter filed since (arrival, end of requeue delay) is checked on its own with the
  per-node bound of the scheduler (``_NodeBound.may_fit``), an upper bound of its rule.

Any other change (a checkpoint signal, a start made outside ``plan_starts``, a decision
that did not search) drops the proof. The scheduler's property test
(tests/test_policy_scheduler.py) compares every decision, with and without a kept proof,
with ``decide``. Units: seconds, GPUs. No clock, no I/O.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from prioritizer.policy.decide import may_be_victim

if TYPE_CHECKING:   # the scheduler owns the proof (no import cycle at run time)
    from prioritizer.policy.incremental import Scheduler, Tracked

_INF = float("inf")


class QuietProof:
    """The last "no preemption due" of a :class:`~prioritizer.policy.incremental.Scheduler`
    and the changes since (see the module doc). ``slack``: the scheduler's ``SLACK_S``
    (seconds), the margin of its level comparisons."""

    __slots__ = ("since", "fresh", "freed", "runs", "slack")

    def __init__(self, slack: float) -> None:
        self.slack = slack
        #: time of the decision that found no preemption (None: no proof held)
        self.since: float | None = None
        self.fresh: list[Tracked] = []    # jobs filed into the start order since
        self.freed: set[int] = set()      # nodes where a run ended since
        #: (time its min_run_s runs out, job id, run start) of runs, ascending
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
        """``rec`` started a run: it becomes a victim candidate ``min_run_s`` later."""
        entry = (rec.run_start + min_run_s, rec.job_id, rec.run_start)
        if not self.runs or entry >= self.runs[-1]:
            self.runs.append(entry)
        else:
            bisect.insort(self.runs, entry)

    def certify(self, now: float) -> None:
        """The decision at ``now`` found no preemption, with no job checkpointing."""
        self.since = now
        self.fresh.clear()
        self.freed.clear()
        self._trim(now)

    def _trim(self, now: float) -> None:
        # runs whose min_run_s ran out before ``now`` matter to no later proof
        cut = bisect.bisect_left(self.runs, (now - self.slack,))
        if cut:
            del self.runs[:cut]

    def holds(self, sched: Scheduler, now: float) -> bool:
        """Whether the search at ``now`` surely finds no preemption (False: search)."""
        since = self.since
        if since is None or now - since < self.slack or sched.grace or sched.fixed \
                or sched.no_oracle:
            return False
        bound, jobs = sched.node_bound, sched.jobs
        if bound is None:
            return False
        min_run = sched.config.min_run_s
        touched = set(self.freed)
        runs = self.runs
        lo = bisect.bisect_left(runs, (since - self.slack,))
        hi = bisect.bisect_right(runs, (now + self.slack, _INF))
        for _, job_id, run_start in runs[lo:hi]:
            rec = jobs.get(job_id)
            if rec is not None and rec.phase == "running" and rec.run_start == run_start:
                touched.update(rec.nodes)
        if touched:
            reach = self._reach(sched, touched, now, min_run)
            for shape, keys in sched.groups.items():
                m = max(min(shape), 1)
                if m >= len(reach) or jobs[keys[0][1]].level < reach[m]:
                    return False   # a touched node may serve the group's first waiter
        # every waiter of the last decision still fails its rule (and does not start)
        return not self.fresh or self._fresh_fail(sched, now, min_run)

    def _fresh_fail(self, sched: Scheduler, now: float, min_run: float) -> bool:
        """Whether every waiter filed since either starts at its turn (the waiters of the
        last decision start nowhere: ``holds`` checked that) or fails its counting rule:
        too few GPUs above its level in all, or one of the last decision's waiters ahead
        of it in the order needs no more on any node (it fails with no fewer GPUs at its
        turn and no fewer candidates: ``find_preemptions``' ``failed`` shortcut), or the
        per-node bound refuses it."""
        above: Any = sched.room_above(now)
        bound = sched.node_bound
        assert bound is not None
        fresh = sorted((rec.entry_key, rec) for rec in set(self.fresh) if rec.where == "order")
        fresh_ids = {rec.job_id for _, rec in fresh}
        free = sched.free
        spare = free.total
        for key, rec in fresh:
            nodes = free.place(rec.shape)
            if nodes is not None:   # it starts: the start model places it as here
                if free is sched.free:
                    free = free.copy()
                free.add(nodes, [-g for g in rec.shape])
                spare -= rec.gpus
                continue
            room = above(rec.level)
            if room == 0 or spare + room < rec.gpus:
                continue   # not enough GPUs above its level in all
            need = tuple(sorted(rec.shape, reverse=True))
            if _covered(sched.groups, need, key, fresh_ids):
                continue
            if bound.may_fit(now + rec.level - self.slack, need, 0, free, now, min_run):
                return False
        return True

    def _reach(self, sched: Scheduler, nodes: set[int], now: float, min_run: float
               ) -> list[float]:
        """Per GPU count ``m``: the level below which a waiter could have ``m`` GPUs on
        one of ``nodes`` (free ones plus those of candidates above its level; ``inf``:
        free ones suffice, ``-inf``: none can). A candidate counts for a waiter of level
        ``l`` only if its oracle end exceeds ``now + l - slack`` (upper bound)."""
        bound = sched.node_bound
        assert bound is not None
        free = sched.free.free
        top = len(bound.col)   # the largest node's GPUs + 1
        reach = [-_INF] * top
        for node in nodes:
            have = free[node]
            m = 1
            while m <= have and m < top:
                reach[m] = _INF
                m += 1
            keyed = bound.keyed_on(node)
            for i in range(len(keyed) - 1, -1, -1):   # longest remaining first
                key, g, run_start = keyed[i]
                if not may_be_victim(True, False, run_start, now, min_run):
                    continue   # not a candidate yet (its first min_run_s seconds)
                have += g
                level = key - now + self.slack
                while m <= have and m < top:
                    if level > reach[m]:
                        reach[m] = level
                    m += 1
        return reach

def _covered(groups: dict[tuple[int, ...], list[tuple[Any, int]]], need: tuple[int, ...],
             key: Any, fresh: set[int]) -> bool:
    """Whether a waiter that is not in ``fresh`` comes before ``key`` in the start order
    with a need no larger, entry by entry (largest first), than ``need`` (largest first)
    on no more nodes."""
    for shape, keys in groups.items():
        if len(shape) > len(need):
            continue
        mine = sorted(shape, reverse=True)
        if any(a > b for a, b in zip(mine, need)):
            continue
        for entry in keys:
            if entry >= key:
                break
            if entry[1] not in fresh:
                return True
    return False
