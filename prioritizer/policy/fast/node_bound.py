"""Per node, what a waiter could have there by preemption (``srtf`` on real nodes): the
incremental scheduler's bound behind its ``may_fit`` answers, the one-node victim reader
(``policy.fast.one_node``) and the kept "no preemption due" proof (``policy.fast.quiet``).
tests/prioritizer/policy/test_node_bound.py checks it against a direct count. Units: seconds, GPUs. No I/O.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Final

from prioritizer.policy.placement import FreeMap
from prioritizer.policy.victims import may_be_victim
from prioritizer.policy.fast.records import Tracked

_INF: Final = float("inf")


class NodeBound:
    """Per node, what a waiter could have there by preemption: the ``may_fit`` bound of
    ``find_preemptions``, kept across decisions instead of found by walking the victim
    candidates (a search that cannot succeed is skipped).

    ``srtf`` only. Each preemptible running job (not checkpointing) has a static key that
    orders levels: its oracle end time (level = remaining time = end - now, up to
    rounding; the scheduler compares with ``SLACK_S`` of margin). On node ``n`` (``total``
    GPUs) every GPU not held by such a job is free or being freed at the start of a
    decision. With the keys on ``n`` in ascending order, a waiter of key ``k`` can have
    ``g`` GPUs there only if the jobs of
    key <= ``k`` hold at most ``total - g``, i.e. only if ``k`` is below ``col[g][n]``: the
    key of the first job where that running sum exceeds ``total - g`` (inf if none).
    ``ranked[g]`` holds ``(col[g][n], n)`` sorted, so the nodes that pass are a suffix;
    each of those is then checked against the decision's own free GPUs (starts and
    reservations made earlier in the walk, victims taken) and the ``min_run_s`` guard.
    ``col[g]`` of a node changed since is recomputed at the next query for that ``g``
    (a start or an end changes several of a node's entries, of which a replay's queries
    read a few). Only valid while every job is preemptible (the scheduler checks).
    """

    __slots__ = ("totals", "held", "stale", "keyed", "col", "ranked")

    def __init__(self, totals: list[int]) -> None:
        self.totals = totals
        #: per node: job id -> (key, GPUs on the node, guard start: ``Tracked.guard``)
        self.held: list[dict[int, tuple[float, int, float]]] = [{} for _ in totals]
        #: per g: the nodes whose ``col[g]`` may be out of date
        self.stale: list[set[int]] = [set() for _ in range(max(totals) + 1)]
        #: per node: ``(key, GPUs, guard start, job id)`` of its jobs in ascending order,
        #: once asked for
        self.keyed: dict[int, list[tuple[float, int, float, int]]] = {}
        self.col = [[_INF if g <= t else -_INF for t in totals] for g in range(max(totals) + 1)]
        self.ranked = [sorted((e, n) for n, e in enumerate(c)) for c in self.col]

    def add(self, rec: Tracked, key: float) -> None:
        for node, g in zip(rec.nodes, rec.shape):
            self.held[node][rec.job_id] = (key, g, rec.guard)
            self._changed(node)

    def remove(self, rec: Tracked) -> None:
        for node in rec.nodes:
            if self.held[node].pop(rec.job_id, None) is not None:
                self._changed(node)

    def _changed(self, node: int) -> None:
        self.keyed.pop(node, None)
        for stale in self.stale:
            stale.add(node)

    def may_fit(self, key: float, need: tuple[int, ...], extra: int, soon: FreeMap,
                now: float, min_run: float) -> bool:
        """Whether ``need`` (GPUs per node, largest first) could fit once every job of a
        key above ``key`` that may be a victim at ``now`` is preempted: for its j-th
        largest entry ``v``, at least j nodes whose GPUs free in ``soon`` plus those of
        such jobs reach ``v`` (the counting rule of the gang victim search; a GPU-less
        entry counts as 1). ``extra``: the most GPUs victims taken in this decision added
        to one node of ``soon``. False: no victim set makes ``need`` fit."""
        for j, v in enumerate(need, 1):
            if j < len(need) and need[j] == v:
                continue   # v's count is where its last entry stands
            if not self._reaching(key, max(v, 1), j, extra, soon, now, min_run):
                return False
        return True

    def _reaching(self, key: float, gpus: int, want: int, extra: int, soon: FreeMap,
                  now: float, min_run: float) -> bool:
        """Whether on at least ``want`` nodes the GPUs free in ``soon`` plus those of the
        jobs of a key above ``key`` that may be victims at ``now`` could reach ``gpus``
        (see :meth:`may_fit`)."""
        if gpus - extra <= 0 or gpus >= len(self.col):
            return True
        if self.stale[gpus - extra]:
            self._flush(gpus - extra)
        ranked = self.ranked[gpus - extra]
        if ranked[-1][0] <= key:
            return False
        free, held = soon.free, self.held
        # highest first: the nodes most likely to serve the waiter
        for i in range(len(ranked) - 1, bisect_right(ranked, (key, len(free))) - 1, -1):
            node = ranked[i][1]
            have = free[node]
            if have < gpus:
                for k, g, run_start in held[node].values():
                    if k > key and may_be_victim(True, False, run_start, now, min_run):
                        have += g
            if have >= gpus:
                want -= 1
                if not want:
                    return True
        return False

    def keyed_on(self, node: int) -> list[tuple[float, int, float, int]]:
        """``(key, GPUs there, guard start, job id)`` of the jobs on ``node``, ascending
        (kept until the node changes)."""
        keyed = self.keyed.get(node)
        if keyed is None:
            keyed = self.keyed[node] = sorted(
                (key, g, run_start, job_id)
                for job_id, (key, g, run_start) in self.held[node].items())
        return keyed

    def by_reach(self, g: int) -> list[tuple[float, int]]:
        """``(col[g][n], n)`` ascending: per node the key of the job at which, taking its
        jobs longest remaining first with every other GPU of the node free, ``g`` GPUs
        are first reached (``-inf``: never; ``inf``: free ones suffice)."""
        if self.stale[g]:
            self._flush(g)
        return self.ranked[g]

    def _flush(self, g: int) -> None:
        """Bring ``col[g]`` and ``ranked[g]`` up to date for the nodes changed since."""
        col, ranked, stale = self.col[g], self.ranked[g], self.stale[g]
        for node in stale:
            keyed = self.keyed_on(node)
            room = self.totals[node] - g   # the most the jobs of key <= k may hold
            value = _INF if room >= 0 else -_INF
            held = 0
            if room >= 0:
                for key, gpus, _, _ in keyed:
                    held += gpus
                    if held > room:
                        value = key
                        break
            old = col[node]
            if old != value:
                del ranked[bisect_left(ranked, (old, node))]
                insort(ranked, (value, node))
                col[node] = value
        stale.clear()
