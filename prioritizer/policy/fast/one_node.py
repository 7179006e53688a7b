"""The victims of a one-node waiter read off the per-node bound (``srtf`` on real nodes).

``find_preemptions`` finds a blocked one-node waiter's victims by walking the candidates in
victim order (longest remaining first) until some node's free GPUs plus those of the
candidates walked on it reach the waiter's need; it keeps the ones on that node it needs
(``keep_needed``). At a daemon tick that walk reads a few dozen candidates per waiter, each
built exactly as ``decide()`` builds it. Per node, though, the answer is short: taking the
node's own candidates longest remaining first, the one at which it reaches the need (its
*reach*). The walk stops at the node whose reach comes first in victim order, i.e. has the
latest oracle end. :class:`OneNodeVictims` computes the reaches of the few nodes that can
have the latest one, from the scheduler's per-node bound (``NodeBound``: its ``col[g]`` is
each node's reach with every GPU not held by a candidate free, an upper bound), and builds
exact candidates only for the victims.

Exact where the order by oracle end is the victim order: it defers to the walk (``DEFER``)
when an oracle end lies within ``2 × SLACK_S`` of the waiter's level (the level test is then
not clear), when two candidates that decide the answer have ends that close (their victim
order is decided by the exact key), or when too many nodes would be read. The scheduler's
property tests compare every decision with ``decide()``. Units: seconds, GPUs. No I/O.
"""

from __future__ import annotations

from typing import Any

from prioritizer.policy.placement import FreeMap
from prioritizer.policy.victims import DEFER, Candidate, keep_needed, may_be_victim
from prioritizer.policy.fast.node_bound import NodeBound
from prioritizer.policy.fast.state import SchedulerState

#: nodes whose reach one search reads at most before it defers to the walk
MAX_NODES = 24


class OneNodeVictims:
    """``find_preemptions``' ``one_node`` helper of a scheduler, for the decision at
    ``now`` (seconds; set by the scheduler at each decision, with ``exact(rec)``, which
    builds a job's :data:`~prioritizer.policy.victims.Candidate` as that decision's
    candidate list does); ``slack``: the scheduler's ``SLACK_S``."""

    __slots__ = ("sched", "bound", "now", "exact", "min_run", "band")

    def __init__(self, sched: SchedulerState, bound: NodeBound, slack: float) -> None:
        self.sched, self.bound = sched, bound
        self.now = 0.0
        self.exact: Any = None
        self.min_run = sched.config.min_run_s
        self.band = 2 * slack

    def __call__(self, level: float, gpus: int, soon: FreeMap, taken: set[int],
                 taken_on: dict[int, int]) -> list[Candidate] | None:
        """The victims the walk would choose for a waiter of ``level`` needing ``gpus`` on
        one node (None: none), ``DEFER``, or victims added to ``soon`` as the walk does."""
        sched, bound, now, band = self.sched, self.bound, self.now, self.band
        if gpus >= len(bound.col) or not sched.clear_of_ends(now, level):
            return DEFER
        floor = now + level   # a candidate is above the waiter iff its end is past it
        free = soon.free
        best: tuple[float, int] | None = None   # (reach end, job id)
        hits: list[int] = []                     # nodes reached at ``best``
        second = float("-inf")                   # latest reach of another job
        read = 0

        def consider(node: int) -> bool:
            nonlocal best, second
            found = self._reach(node, gpus, floor, free, taken)
            if found is DEFER:
                return False
            if found is None:
                return True
            if best is None or found[0] > best[0]:
                if best is not None:
                    second = max(second, best[0])
                best = found
                hits[:] = [node]
            elif found[1] == best[1]:
                hits.append(node)   # the same candidate reaches there too
            else:
                second = max(second, found[0])
            return True

        done: set[int] = set()
        for node in taken_on:   # victims taken there: free GPUs above the bound's
            done.add(node)
            read += 1
            if not consider(node):
                return DEFER
        ranked = bound.by_reach(gpus)
        for i in range(len(ranked) - 1, -1, -1):
            col, node = ranked[i]
            if col <= floor or (best is not None and col < best[0] - band):
                break   # no node further down reaches in time
            if node in done:
                continue
            read += 1
            if read > MAX_NODES or not consider(node):
                return DEFER
        if best is None:
            return None
        if best[0] - second <= band:
            return DEFER   # another candidate reaches too close in the order
        rec = sched.jobs[best[1]]
        hit = max(hits, key=rec.nodes.index)   # the walk keeps the candidate's last one
        mine: list[tuple[Candidate, int]] = []
        keyed = bound.keyed_on(hit)
        for i in range(len(keyed) - 1, -1, -1):
            key, g, run_start, job_id = keyed[i]
            if key < best[0]:
                break
            if job_id not in taken and may_be_victim(True, False, run_start, now,
                                                     self.min_run):
                mine.append((self.exact(sched.jobs[job_id]), g))
        mine.sort(key=lambda entry: entry[0])
        return keep_needed(mine, free[hit], gpus, soon)

    def _reach(self, node: int, gpus: int, floor: float, free: list[int],
               taken: set[int]) -> Any:
        """``(end, job id)`` of the candidate at which ``node`` reaches ``gpus`` (its free
        GPUs plus those of its candidates above ``floor``, latest end first), None if it
        never does, ``DEFER`` if a candidate next to that one ends within the band."""
        now, band, min_run = self.now, self.band, self.min_run
        have = free[node]
        keyed = self.bound.keyed_on(node)
        last = float("inf")   # end of the previous candidate counted (ties before the
        # reaching one leave it the reaching one, in either order)
        found: tuple[float, int] | None = None
        for i in range(len(keyed) - 1, -1, -1):
            key, g, run_start, job_id = keyed[i]
            if key <= floor:
                break
            if job_id in taken or not may_be_victim(True, False, run_start, now, min_run):
                continue
            if found is not None:   # the next candidate after the reaching one
                return DEFER if found[0] - key <= band else found
            have += g
            if have >= gpus:
                if last - key <= band:
                    return DEFER   # the one before it ends too close
                found = (key, job_id)
            last = key
        return found
