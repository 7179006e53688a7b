"""The victim candidates of the incremental scheduler, kept in victim order between
decisions (:class:`VictimOrder`): a decision reads them lazily instead of sorting every
running job. The order is the one ``decide`` builds (``policy.victims.Candidate``); the
scheduler's property tests compare every decision. Units: seconds, GPU·seconds. No I/O.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from heapq import heapify, heappop, heapreplace
from typing import Any, Iterator

from prioritizer.policy.victims import Candidate, may_be_victim
from prioritizer.policy.fast.records import Tracked


class VictimOrder:
    """The victim candidates of ``find_preemptions`` (preemptible jobs running, not
    checkpointing) kept between decisions, so that a decision reads them in victim order
    without rebuilding and sorting every running job.

    The order (:data:`policy.victims.Candidate`: level descending, then attained GPU·s
    descending, then id) moves with ``now``, but within a group it does not: for queue
    policies a group is (queue, GPUs), whose attained GPU·s at ``now`` is
    ``now × GPUs + (run start × GPUs - closed GPU·s)`` up to rounding; for ``srtf`` (one
    group) minus the remaining time is ``now - (run start + work left)``. Each group is kept
    sorted by that static part ``a``; a decision merges the groups by the exact key that
    ``decide()`` computes (``exact``), and inside a group compares exactly every job whose
    ``a`` lies within ``window`` of the first one (rounding moves a key by far less, so no
    job beyond it can come first). The result is the very order of sorting all keys.
    """

    __slots__ = ("queues", "groups", "mag", "where")

    def __init__(self, queues: bool) -> None:
        self.queues = queues
        self.groups: dict[tuple[int, int], list[tuple[float, int]]] = {}
        self.mag: dict[tuple[int, int], float] = {}     # bound on the magnitudes in a group
        self.where: dict[int, tuple[tuple[int, int], float]] = {}

    def add(self, rec: Tracked) -> None:
        if self.queues:
            group = (rec.queue or 0, rec.gpus)
            a = rec.run_start * rec.gpus - rec.closed_gpu_s
            mag = abs(rec.closed_gpu_s) + abs(rec.run_start) * rec.gpus
        else:
            left = rec.work_left if rec.work_left is not None else 0.0
            group, a = (0, 1), -(rec.run_start + left)
            mag = abs(rec.closed_s) + abs(rec.run_start) + abs(left)
        insort(self.groups.setdefault(group, []), (a, rec.job_id))
        self.mag[group] = max(self.mag.get(group, 0.0), mag)
        self.where[rec.job_id] = (group, a)

    def remove(self, job_id: int) -> None:
        found = self.where.pop(job_id, None)
        if found is None:
            return
        group, a = found
        lst = self.groups[group]
        del lst[bisect_left(lst, (a, job_id))]
        if not lst:
            del self.groups[group], self.mag[group]

    def ordered(self, now: float, floor: float, min_run: float, jobs: dict[int, Tracked],
                exact: Any) -> Iterator[Candidate]:
        """The candidates at ``now`` in victim order (lazily): only queues above ``floor``
        (queue policies), only jobs ``may_be_victim`` admits; ``exact(rec)`` is the job's
        :data:`Candidate` as ``decide()`` builds it."""
        heads: list[tuple[Candidate, int]] = []
        cursors: list[list[Any]] = []
        for group, lst in self.groups.items():
            if self.queues and group[0] <= floor:
                continue
            window = 1e-9 * (1.0 + self.mag[group] + abs(now) * group[1])
            cursor = [lst, 0, set(), window]
            first = self._pick(cursor, now, min_run, jobs, exact)
            if first is not None:
                heads.append((first, len(cursors)))
            cursors.append(cursor)
        heapify(heads)
        while heads:
            cand, i = heads[0]
            yield cand
            following = self._pick(cursors[i], now, min_run, jobs, exact)
            if following is None:
                heappop(heads)
            else:
                heapreplace(heads, (following, i))

    @staticmethod
    def _pick(cursor: list[Any], now: float, min_run: float, jobs: dict[int, Tracked],
              exact: Any) -> Candidate | None:
        """The next candidate of one group (see the class doc), marked as used."""
        lst, p, used, window = cursor
        n = len(lst)
        while p < n and (lst[p][1] in used or not may_be_victim(
                True, False, jobs[lst[p][1]].guard, now, min_run)):
            p += 1
        cursor[1] = p
        if p == n:
            return None
        limit = lst[p][0] + window
        best: Candidate = exact(jobs[lst[p][1]])
        k = p + 1
        while k < n and lst[k][0] <= limit:
            job_id = lst[k][1]
            rec = jobs[job_id]
            if job_id not in used and may_be_victim(True, False, rec.guard, now, min_run):
                key = exact(rec)
                if key < best:
                    best = key
            k += 1
        used.add(best[2])
        return best
