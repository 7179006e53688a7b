"""The victims of a blocked waiter of a queue policy read off the per-node counts
(``policy.fast.queue_room``) instead of a walk over the candidates, where few nodes can
serve it: ``find_preemptions``' gang and one-node searches of ``tiresias-las``, ``las`` and
``tiresias-gittins``.

The candidate walks of ``prioritizer.policy.victims`` read the candidates in victim order
until the need fits. Per node the answer is short: taking the node's own candidates (of a
queue above the waiter's, past ``min_run_s``, not taken) in victim order, the one at which its
free GPUs in ``soon`` plus theirs first reach ``v`` GPUs is its *reach* for ``v`` (before
every candidate when its free GPUs alone do). A one-node walk stops at the smallest reach for
the need (on a candidate that spans nodes, at the last of its nodes that reaches); a gang walk
stops at the candidate ``S`` after which, for each entry ``v`` of the need, as many nodes as it
has entries of at least ``v`` have reached ``v``: the largest over ``v`` of the so-manieth
smallest reach. What the walk then keeps follows from the candidates up to ``S`` on the nodes
that reach the need's smallest entry (no other node can host an entry): the same placement
(``FreeMap.place_with``), the same victims on the nodes used, the same ones dropped
(``keep_needed``, ``drop_unneeded``). Only the nodes that reach the smallest entry with every
candidate counted (:meth:`RoomView.serving`) are read; with more than ``MAX_NODES`` of
them the walk is left to find the victims (it then stops early). The scheduler's property
tests compare every decision with ``decide``. Units: GPUs, seconds. No I/O.
"""

from __future__ import annotations

from typing import Any, Callable

from prioritizer.policy.placement import FreeMap
from prioritizer.policy.victims import (DEFER, Candidate, drop_unneeded, keep_needed,
                                        may_be_victim)
from prioritizer.policy.fast.queue_room import RoomView
from prioritizer.policy.fast.records import Tracked

#: a node's reach: the candidate at which it reaches a need, or :data:`_BEFORE`
Reach = tuple[Any, ...]
#: a reach before every candidate (the node's free GPUs alone suffice)
_BEFORE: Reach = (float("-inf"),)


class QueueVictims:
    """The gang and one-node victim searches of one decision (see module doc): ``view``
    the decision's counts, ``exact(rec)`` a running job's :data:`Candidate` as the
    decision's candidate walk builds it."""

    __slots__ = ("view", "exact", "cands")

    def __init__(self, view: RoomView, exact: Callable[[Tracked], Candidate]) -> None:
        self.view, self.exact = view, exact
        self.cands: dict[int, Candidate] = {}   # built so far in this decision, by job id

    def _on(self, node: int, k: int, taken: set[int]) -> list[tuple[Candidate, int]]:
        """The candidates of queue ``k`` on on ``node`` with their GPUs there, in victim
        order."""
        view = self.view
        jobs, now, min_run, cands = view.jobs, view.now, view.min_run, self.cands
        out = []
        for job_id in view.room.on[node]:
            rec = jobs[job_id]
            if rec.preemptible and (rec.queue or 0) >= k and job_id not in taken \
                    and may_be_victim(True, False, rec.guard, now, min_run):
                cand = cands.get(job_id)
                if cand is None:
                    cand = cands[job_id] = self.exact(rec)
                out.append((cand, rec.shape[rec.nodes.index(node)]))
        out.sort()
        return out

    @staticmethod
    def _reach(mine: list[tuple[Candidate, int]], free: int, v: int) -> Reach | None:
        """The node's reach for ``v`` (``_BEFORE``: its free GPUs suffice; None: never)."""
        if free >= v:
            return _BEFORE
        for cand, g in mine:
            free += g
            if free >= v:
                return cand
        return None

    def one_node(self, level: float, gpus: int, soon: FreeMap, taken: set[int],
                 taken_on: dict[int, int]) -> list[Candidate] | None:
        """The victims ``victims_for_one_node`` would choose for a waiter of queue ``level``
        needing ``gpus`` on one node (added to ``soon``), None (none), or ``DEFER``."""
        k = int(level) + 1
        if gpus <= 0 or k >= self.view.room.queues:
            return DEFER
        found = self.view.serving(level, (gpus,), soon)
        if found is None:
            return DEFER
        free = soon.free
        best: Reach | None = None
        hits: list[int] = []
        per: dict[int, list[tuple[Candidate, int]]] = {}
        for node, _ in found:
            mine = per[node] = self._on(node, k, taken)
            reach = self._reach(mine, free[node], gpus)
            if reach is None:
                continue
            if best is None or reach < best:
                best, hits = reach, [node]
            elif reach == best:
                hits.append(node)
        if best is None:
            return None
        if best is _BEFORE:
            return DEFER   # (not expected: the waiter is blocked)
        hit = hits[0] if len(hits) == 1 else max(hits, key=best[4].index)
        return keep_needed([(cand, g) for cand, g in per[hit] if cand <= best],
                           free[hit], gpus, soon)

    def gang(self, level: float, need: tuple[int, ...], soon: FreeMap, taken: set[int]
             ) -> list[Candidate] | None:
        """The victims ``victims_for_gang`` would choose for a waiter of queue ``level``
        needing ``need`` (GPUs per node, in the job's order; added to ``soon``), None
        (none), or ``DEFER``."""
        k = int(level) + 1
        if k >= self.view.room.queues:
            return DEFER
        order = sorted((max(n, 1) for n in need), reverse=True)
        found = self.view.serving(level, tuple(sorted(need, reverse=True)), soon)
        if found is None:
            return DEFER
        nodes = [node for node, _ in found]
        free = soon.free
        per = {node: self._on(node, k, taken) for node in nodes}
        stop: Reach = _BEFORE
        for j, v in enumerate(order):
            if j + 1 < len(order) and order[j + 1] == v:
                continue   # v's count is where its last entry stands
            reaches = sorted(r for node in nodes
                             if (r := self._reach(per[node], free[node], v)) is not None)
            if len(reaches) <= j:
                return None
            if reaches[j] > stop:
                stop = reaches[j]
        if stop is _BEFORE:
            return DEFER   # (not expected: the waiter is blocked)
        extra: dict[int, int] = {}
        for node in nodes:
            e = sum(g for cand, g in per[node] if cand <= stop)
            if e:
                extra[node] = e
        hosts = soon.place_with(extra, need)
        if hosts is None:
            return DEFER   # (not expected: the counts hold at ``stop``)
        keep = {cand[2]: cand for node in set(hosts) for cand, _ in per[node] if cand <= stop}
        return drop_unneeded(sorted(keep.values()), need, soon)
