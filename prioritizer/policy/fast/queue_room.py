"""Whether a blocked waiter of a queue policy finds victims, answered exactly from per-node
counts the incremental scheduler keeps between decisions, without reading the candidates:
``find_preemptions``' ``may_fit`` and ``due`` (``preemption.SearchStrategy``) for
``tiresias-las``, ``las`` and ``tiresias-gittins``, whose preemption level is the queue.

The candidate walks of ``prioritizer.policy.victims`` take the candidates (preemptible jobs
running, not checkpointing, past their first ``min_run_s``, not taken yet) of a queue above
the waiter's until its need fits: one node whose free GPUs in ``soon`` plus those of the
candidates read on it reach the need (one-node waiter), or for each entry ``v`` of a gang's
need as many such nodes as it has entries of at least ``v`` (``victims_for_gang``; an entry
of 0 GPUs counts as 1). A walk that reads every candidate without that ends with no victim
set, so it succeeds exactly when, with *every* candidate above the waiter's queue counted,
enough nodes reach each entry: the test :meth:`RoomView.reaches` makes. For a waiter of
queue ``q`` (candidates of queue ``k = q + 1`` on) a node ``n`` has

    ``soon.free[n] + busy[n] - pinned[k][n] - guarded_k(n) - taken_k(n)``

GPUs within reach: ``busy``, GPUs of the jobs running there (not checkpointing);
``pinned[k]``, those of such jobs of a queue below ``k`` or not preemptible; ``guarded_k``,
those of candidates-to-be of queue ``>= k`` still inside ``min_run_s`` (kept per node as runs
start, stop and change queue, and dropped as their guards end); ``taken_k``, those of victims of queue ``>= k`` taken earlier in this decision (their
GPUs are in ``soon`` already). Only nodes that could reach ``v`` are read: per ``k``, the nodes
are kept by ``total - pinned[k]``, which bounds that sum except on the nodes of victims taken
from a queue below ``k`` (read as well). A start or a run's end updates ``K - 1`` counts per
node of the job (``K`` queues). The victims themselves are read off the same counts where
few nodes can serve (``policy.fast.queue_victims``). tests/prioritizer/policy/
test_policy_scheduler.py compares every decision with ``decide``. Units: GPUs, seconds. No I/O.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from itertools import islice
from typing import Any, Iterator

from prioritizer.policy.placement import FreeMap
from prioritizer.policy.victims import Candidate, may_be_victim
from prioritizer.policy.fast.records import Tracked

#: nodes reaching a need that a search reads at most (more: the walk finds the victims)
MAX_NODES = 48


class QueueRoom:
    """Per node and queue, the GPUs a waiter could have there by preemption (see module
    doc), kept between decisions. ``totals``: GPUs per node; ``queues``: the policy's number
    of queues (>= 2)."""

    __slots__ = ("totals", "queues", "busy", "pinned", "at", "filed", "stale", "on", "recent",
                 "inside", "guarded")

    def __init__(self, totals: list[int], queues: int) -> None:
        self.totals = totals
        self.queues = queues
        #: per node: GPUs of the jobs running there (not checkpointing)
        self.busy = [0] * len(totals)
        #: per k (index 0 unused): per node, GPUs of those jobs below queue k or fixed
        self.pinned = [[0] * len(totals) for _ in range(queues)]
        #: per k: per value u, the nodes filed under u (``total - pinned[k]`` when filed;
        #: no empty set), brought up to date for the nodes in ``stale`` when read
        self.at: list[dict[int, set[int]]] = [{} for _ in range(queues)]
        #: per k: per node, the value it is filed under in ``at[k]``
        self.filed = [list(totals) for _ in range(queues)]
        for k in range(1, queues):
            for node, total in enumerate(totals):
                self.at[k].setdefault(total, set()).add(node)
        #: nodes whose ``pinned`` changed since ``at`` was last brought up to date
        self.stale: set[int] = set()
        #: per node: the ids of the jobs running there (not checkpointing)
        self.on: list[dict[int, None]] = [{} for _ in totals]
        #: ``(guard start, job id)`` of the runs started, ascending (``Tracked.guard``;
        #: trimmed as their guards end)
        self.recent: list[tuple[float, int]] = []
        #: the preemptible runs inside their guard as last read: job id -> (guard start,
        #: queue counted, record)
        self.inside: dict[int, tuple[float, int, Tracked]] = {}
        #: per k (index 0 unused): per node, GPUs of the runs of ``inside`` of queue >= k
        self.guarded: list[dict[int, int]] = [{} for _ in range(queues)]

    def running(self, rec: Tracked, sign: int) -> None:
        """``rec`` starts (``sign`` +1) or stops (-1) running without a checkpoint signal
        (a start, a signal, an end, or a change of its queue), on ``rec.nodes``."""
        first = (rec.queue or 0) + 1 if rec.preemptible else 1
        busy = self.busy
        if sign < 0:
            counted = self.inside.pop(rec.job_id, None)
            if counted is not None:
                self._guard(counted[2], counted[1], -1)
        elif rec.preemptible and rec.job_id not in self.inside:
            # a change of queue: the run is inside its guard while its start is listed
            entry = (rec.guard, rec.job_id)
            recent = self.recent
            i = bisect_left(recent, entry)
            if i < len(recent) and recent[i] == entry:
                self._enter(rec)
        for node, g in zip(rec.nodes, rec.shape):
            if sign > 0:
                self.on[node][rec.job_id] = None
            else:
                self.on[node].pop(rec.job_id, None)
            if not g:
                continue
            busy[node] += sign * g
            for k in range(first, self.queues):
                self.pinned[k][node] += sign * g
            self.stale.add(node)

    def buckets(self, k: int) -> dict[int, set[int]]:
        """``at[k]``, up to date (see :attr:`at`)."""
        if self.stale:
            totals = self.totals
            for j in range(1, self.queues):
                at, filed, pinned = self.at[j], self.filed[j], self.pinned[j]
                for node in self.stale:
                    value = totals[node] - pinned[node]
                    old = filed[node]
                    if value != old:
                        nodes = at[old]
                        nodes.discard(node)
                        if not nodes:
                            del at[old]
                        at.setdefault(value, set()).add(node)
                        filed[node] = value
            self.stale.clear()
        return self.at[k]

    def started(self, rec: Tracked) -> None:
        """``rec`` started a run: its ``min_run_s`` guard counts from ``rec.guard``
        (``victims.guard_start``: the run's start unless ``wait_guard`` extends it)."""
        insort(self.recent, (rec.guard, rec.job_id))
        if rec.preemptible and rec.phase == "running":
            counted = self.inside.pop(rec.job_id, None)
            if counted is not None:
                self._guard(counted[2], counted[1], -1)
            self._enter(rec)

    def _enter(self, rec: Tracked) -> None:
        queue = rec.queue or 0
        self.inside[rec.job_id] = (rec.guard, queue, rec)
        self._guard(rec, queue, +1)

    def _guard(self, rec: Tracked, queue: int, sign: int) -> None:
        """Count (``sign`` +1) or uncount (-1) the GPUs of ``rec``, a run of ``queue``
        inside its guard, in :attr:`guarded`."""
        for k in range(1, min(queue, self.queues - 1) + 1):
            gpus = self.guarded[k]
            for node, g in zip(rec.nodes, rec.shape):
                gpus[node] = gpus.get(node, 0) + sign * g

    def guards(self, k: int, now: float, min_run: float) -> dict[int, int]:
        """Per node, the GPUs of the preemptible jobs of queue ``k`` on running at ``now``
        inside their first ``min_run`` seconds (not yet candidates: ``may_be_victim``);
        ``now`` never decreases from one call to the next. The runs whose guards have
        ended are a prefix of :attr:`recent` (``now - guard`` falls along it), dropped
        here."""
        recent, inside = self.recent, self.inside
        ended = 0
        while ended < len(recent) and may_be_victim(True, False, recent[ended][0], now,
                                                     min_run):
            guard, job_id = recent[ended]
            counted = inside.get(job_id)
            if counted is not None and counted[0] == guard:
                del inside[job_id]
                self._guard(counted[2], counted[1], -1)
            ended += 1
        if ended:
            del recent[:ended]
        return self.guarded[k]


class RoomView:
    """The counts of :class:`QueueRoom` as one decision at ``now`` reads them: with the
    runs inside ``min_run`` seconds and the victims taken so far in the
    decision (``took``, appended to by the search as it takes them)."""

    __slots__ = ("room", "now", "min_run", "jobs", "took", "seen", "served")

    def __init__(self, room: QueueRoom, now: float, min_run: float, jobs: dict[int, Tracked],
                 took: list[Candidate]) -> None:
        self.room, self.now, self.min_run, self.jobs, self.took = room, now, min_run, jobs, took
        #: per k: (victims of ``took`` read, node -> their GPUs, nodes of those below k)
        self.seen: dict[int, tuple[list[int], dict[int, int], set[int]]] = {}
        #: (level, need, soon, nodes) of the waiter :meth:`reaches` was last asked about
        self.served: tuple[float, tuple[int, ...], FreeMap,
                           list[tuple[int, int]] | None] | None = None

    def less(self, k: int) -> tuple[dict[int, int], dict[int, int], set[int]]:
        """For candidates of queue ``k`` on: per node the guarded GPUs, per node the GPUs of
        the victims taken (both counted in ``busy - pinned[k]``), and the nodes of victims
        taken from a queue below ``k``."""
        guard = self.room.guards(k, self.now, self.min_run)
        seen = self.seen.get(k)
        if seen is None:
            seen = self.seen[k] = ([0], {}, set())
        read, taken, more = seen
        took = self.took
        for i in range(read[0], len(took)):   # the victims taken since the last call
            cand = took[i]
            if -cand[0] >= k:
                for node, g in zip(cand[4], cand[3]):
                    taken[node] = taken.get(node, 0) + g
            else:
                more.update(cand[4])
        read[0] = len(took)
        return guard, taken, more

    def reaching(self, k: int, v: int, soon: FreeMap, limit: int
                 ) -> list[tuple[int, int]] | None:
        """``(node, GPUs within reach)`` of every node on which ``soon``'s free GPUs plus
        those of the candidates of queue ``k`` on reach ``v`` (None: more than ``limit``
        of them)."""
        found: list[tuple[int, int]] = []
        for node, have in self._within(k, v, soon):
            found.append((node, have))
            if len(found) > limit:
                return None
        return found

    def _within(self, k: int, v: int, soon: FreeMap) -> Iterator[tuple[int, int]]:
        """``(node, GPUs within reach)`` of the nodes that reach ``v`` (see
        :meth:`reaching`), lazily."""
        room = self.room
        guard, taken, more = self.less(k)
        free, busy, pinned, at = soon.free, room.busy, room.pinned[k], room.buckets(k)
        for u in [u for u in at if u >= v]:
            for node in at[u]:
                have = free[node] + busy[node] - pinned[node] - guard.get(node, 0) \
                    - taken.get(node, 0)
                if have >= v:
                    yield node, have
        totals = room.totals
        for node in more:
            if totals[node] - pinned[node] < v:   # not read above
                have = free[node] + busy[node] - pinned[node] - guard.get(node, 0) \
                    - taken.get(node, 0)
                if have >= v:
                    yield node, have

    def reaches(self, level: float, need: tuple[int, ...], soon: FreeMap,
                keep: bool = True) -> bool | None:
        """Whether the candidate walk finds victims for a blocked waiter of queue ``level``
        needing ``need`` (GPUs per node, largest first) with ``soon`` as the walk has it
        (see module doc; exact); None: not answered (the search decides). ``keep``: keep
        the nodes that reach the need's smallest entry (when at most :data:`MAX_NODES`)
        for that waiter's search (:meth:`serving`); without it each entry's count is read
        only as far as it needs (a decision that stops at the first waiter found to
        preempt searches no victims)."""
        k = int(level) + 1
        self.served = None
        if k >= self.room.queues:
            return False   # no queue above: no candidate (and the waiter is blocked)
        if len(need) == 1 and need[0] <= 0:
            return None    # a GPU-less one-node need takes any first candidate: search
        order = sorted((max(v, 1) for v in need), reverse=True)
        found = None
        if keep:
            found = self.reaching(k, order[-1], soon, MAX_NODES)
            self.served = (level, need, soon, found)
        for j, v in enumerate(order):
            if j + 1 < len(order) and order[j + 1] == v:
                continue   # v's count is where its last entry stands
            if found is not None:
                enough = sum(have >= v for _, have in found) > j
            else:   # many nodes, or none kept: read until enough
                enough = next(islice(self._within(k, v, soon), j, None), None) is not None
            if not enough:
                return False
        return True

    def serving(self, level: float, need: tuple[int, ...], soon: FreeMap
                ) -> list[tuple[int, int]] | None:
        """:meth:`reaching` for the need's smallest entry of the waiter :meth:`reaches`
        was just asked about (``need`` largest first), read again only for another one."""
        served = self.served
        if served is not None and served[0] == level and served[1] == need \
                and served[2] is soon:
            return served[3]
        return self.reaching(int(level) + 1, max(need[-1], 1), soon, MAX_NODES)


def proofs(view: RoomView, first_only: bool) -> tuple[Any, Any]:
    """``(may_fit, due)`` of ``FastSearch`` from ``view`` (``due`` None unless
    ``first_only``): ``may_fit`` is False exactly when no victim set exists; ``due`` is True
    for the waiter ``may_fit`` just let pass (the search would succeed)."""
    passed: list[tuple[float, tuple[int, ...]] | None] = [None]

    keep = not first_only   # (the waiter ``due`` proves is not searched)

    def may_fit(level: float, need: tuple[int, ...], extra: int, soon: FreeMap) -> bool:
        ok = view.reaches(level, need, soon, keep)
        passed[0] = (level, need) if ok else None
        return ok is not False

    def due(level: float, need: tuple[int, ...], soon: FreeMap) -> bool:
        return bool(passed[0] == (level, need))
    return may_fit, (due if first_only else None)
