"""The default victim-search strategy of ``find_preemptions``: :class:`PlainSearch`, what
``decide`` uses (``prioritizer.policy.preemption``, its ``SearchStrategy``).

Per blocked waiter it chooses exactly the victims of the candidate walks of
``prioritizer.policy.victims`` (``victims_for_one_node``, ``victims_for_gang``), reading as
few candidates as it can: one-node waiters share one resumable walk (:class:`_PrefixScan`),
and once a decision has made :data:`_INDEX_AFTER` searches (a storm of promotions) the rest
are answered from a per-node index of the candidates (:class:`_NodeIndex`). It proves
nothing in advance (:meth:`PlainSearch.above`, :meth:`~PlainSearch.may_fit` and
:meth:`~PlainSearch.due` leave every waiter to the search); the incremental scheduler's
strategy (``prioritizer.policy.fast``) adds such bounds. tests/prioritizer/policy/test_decide_node_index.py
checks the index against the walks. Units: GPUs. No I/O.
"""

from __future__ import annotations

from bisect import bisect_left
from heapq import heapify, heappop, heappush, heapreplace
from operator import itemgetter

from prioritizer.policy.placement import FreeMap
from prioritizer.policy.victims import (DEFER, FAR, Candidate, Victims, choose_victims,
                                        drop_unneeded, keep_needed, victims_for_gang,
                                        victims_for_one_node)


class PlainSearch:
    """The victim search of one decision (a new one per ``find_preemptions`` call: it keeps
    the decision's walk and index). Implements ``preemption.SearchStrategy``; the
    incremental scheduler's ``FastSearch`` extends it with bounds kept between decisions.
    """

    __slots__ = ("failed", "failed_one", "searches", "index_after", "scan", "index")

    def __init__(self) -> None:
        #: ``(level, need largest first)`` of the waiters found no victim set
        self.failed: list[tuple[float, tuple[int, ...]]] = []
        #: the smallest one-node need the walk found no victims for (``[g]``; ``[]``: none)
        self.failed_one: list[int] = []
        self.searches = 0   # victim searches of this decision
        #: searches after which the rest are answered from the index (:data:`_INDEX_AFTER`)
        self.index_after = _INDEX_AFTER
        self.scan: _PrefixScan | None = None
        self.index: _NodeIndex | None = None

    def above(self, level: float) -> int:
        """GPUs held by preemptible running jobs of a level above ``level``; -1: not known."""
        return -1

    def may_fit(self, level: float, need: tuple[int, ...], extra: int, soon: FreeMap) -> bool:
        """False proves that no victim set makes ``need`` fit; True: search."""
        return True

    def due(self, level: float, need: tuple[int, ...], soon: FreeMap) -> bool:
        """True proves that the search would find victims; False: search."""
        return False

    def one_node(self, level: float, gpus: int, soon: FreeMap, taken: set[int],
                 taken_on: dict[int, int]) -> list[Candidate] | None:
        """A one-node waiter's victims found another way, or ``DEFER``: walk."""
        return DEFER

    def choose(self, need: tuple[int, ...], soon: FreeMap, level: float, victims: Victims,
               taken: set[int], taken_on: dict[int, int]) -> list[Candidate] | None:
        """The victims the candidate walk would choose for a waiter of ``level`` needing
        ``need`` (GPUs per node), their GPUs added to ``soon``; None: no victim set."""
        self.searches += 1
        if self.index is None and self.searches > self.index_after:
            self.index = _NodeIndex(victims, soon.free, taken)
        if self.index is not None:
            chosen = self.index.search(need, soon, -level)
            if chosen is FAR:   # (not expected) the index defers to the walk
                chosen = choose_victims(need, soon, level, victims, taken)
            return chosen
        if len(need) == 1:
            chosen = self.one_node(level, need[0], soon, taken, taken_on)
            if chosen is DEFER:
                if self.scan is None:
                    self.scan = _PrefixScan(victims)
                chosen = self.scan.one_node(need[0], soon, -level, taken)
            return chosen
        return victims_for_gang(need, soon, -level, victims, taken)

    def taken(self, chosen: list[Candidate], soon: FreeMap) -> None:
        """``chosen`` were taken as victims (their GPUs added to ``soon``)."""
        if self.index is not None:
            self.index.taken(chosen)
        elif self.scan is not None:
            self.scan.taken(chosen, soon)


class _PrefixScan:
    """The one-node victim walk of :func:`victims_for_one_node`, kept across the waiters
    of one decision instead of restarted from the first candidate (the same victims).

    That walk stops at the first candidate after which some node's free GPUs plus those
    of the untaken candidates walked so far on it reach the waiter's ``g``. The scan keeps,
    over the candidates read so far (``victims.items[:p]``), the untaken ones per node with
    their positions (``on``), their GPUs per node (``acc``) and per node an upper bound of
    ``free + acc`` (``soon``'s free GPUs only drop between waiters, except where victims
    are taken, which the scan is told of). Only nodes whose bound reaches ``g`` can hold
    the first hit inside the prefix: their hit positions are computed exactly; if none
    lies before the waiter's level break, the walk goes on from ``p``. A blocked waiter
    fits on no node with ``soon``'s free GPUs alone, so a node without scanned candidates
    never reaches ``g`` inside the prefix.
    """

    __slots__ = ("victims", "p", "acc", "on", "scanned", "bound", "at")

    def __init__(self, victims: Victims) -> None:
        self.victims = victims
        self.p = 0
        self.acc: dict[int, int] = {}
        self.on: dict[int, list[tuple[int, Candidate, int]]] = {}   # (position, cand, GPUs)
        self.scanned: set[int] = set()
        self.bound: dict[int, int] = {}
        self.at: dict[int, set[int]] = {}   # bound value -> nodes

    def _bound(self, node: int, value: int) -> None:
        old = self.bound.get(node)
        if old == value:
            return
        if old is not None:
            self.at[old].discard(node)
        self.bound[node] = value
        self.at.setdefault(value, set()).add(node)

    def one_node(self, gpus: int, soon: FreeMap, floor: float, taken: set[int]
                 ) -> list[Candidate] | None:
        """:func:`victims_for_one_node` of the scan's candidates (same victims)."""
        items, free, acc, on = self.victims.items, soon.free, self.acc, self.on
        if self.p:   # a first hit near the front (small needs) is found fastest by walking
            near = victims_for_one_node(gpus, soon, floor, self.victims, taken, limit=48)
            if near is not FAR:
                return near
        # level break inside the prefix (candidates are in ascending (-level, ...) order)
        stop = bisect_left(items, floor, 0, self.p, key=itemgetter(0))
        best: tuple[int, int] | None = None   # (hit position, -place among its nodes)
        hit = -1
        for value in [v for v in self.at if v >= gpus]:
            for node in list(self.at[value]):
                have = free[node] + acc[node]
                self._bound(node, have)   # exact again
                if have < gpus:
                    continue
                run = free[node]
                for pos, cand, g in on[node]:
                    if pos >= stop:
                        break
                    run += g
                    if run >= gpus:
                        rank = (pos, -cand[4].index(node))
                        if best is None or rank < best:
                            best, hit = rank, node
                        break
        if best is None:
            if stop < self.p:
                return None   # no hit before the level break
            hit = self._extend(gpus, free, floor, taken)
            if hit < 0:
                return None
            last = self.p - 1
        else:
            last = best[0]
        mine = [(cand, g) for pos, cand, g in on[hit] if pos <= last]
        return keep_needed(mine, free[hit], gpus, soon)

    def _extend(self, gpus: int, free: list[int], floor: float, taken: set[int]) -> int:
        """Read on from ``p`` until some node reaches ``gpus`` (returns it; the hit
        candidate is the last read) or the level break or the end (returns -1)."""
        items, source, acc, on = self.victims.items, self.victims.source, self.acc, self.on
        i, hit = self.p, -1
        while hit < 0:
            if i == len(items):
                item = next(source, None)
                if item is None:
                    break
                items.append(item)
            cand = items[i]
            if cand[0] >= floor:
                break
            i += 1
            if cand[2] in taken:
                continue
            self.scanned.add(cand[2])
            for node, g in zip(cand[4], cand[3]):
                have = acc.get(node, 0) + g
                acc[node] = have
                on.setdefault(node, []).append((i - 1, cand, g))
                self._bound(node, free[node] + have)
                if free[node] + have >= gpus:
                    hit = node
        self.p = i
        return hit

    def taken(self, victims: list[Candidate], soon: FreeMap) -> None:
        """``victims`` were taken and their GPUs added to ``soon``: keep ``acc``, ``on``
        and the bounds true."""
        acc, free = self.acc, soon.free
        for cand in victims:
            scanned = cand[2] in self.scanned
            for node, g in zip(cand[4], cand[3]):
                if scanned:
                    acc[node] -= g
                    self.on[node] = [e for e in self.on[node] if e[1][2] != cand[2]]
                if node in acc:
                    self._bound(node, free[node] + acc[node])


#: Victim searches of one decision (one tier) made by walking the candidates before
#: :class:`_NodeIndex` is built (building it reads and sorts every candidate: worth it
#: only for decisions with many blocked waiters, such as a storm of promotions).
_INDEX_AFTER = 16


class _NodeIndex:
    """The victim searches of :func:`victims_for_one_node` and :func:`victims_for_gang`
    answered from a per-node index of the candidates instead of a walk (the same victims).

    Both walks take the untaken candidates in victim order until some node (one-node
    need) or enough nodes (gang: for each GPU count ``v`` of the need, as many nodes as it
    has entries of at least ``v``) have reached ``v`` free GPUs, counting those of the
    candidates walked on them. So what decides a search is, per node and ``v``, its
    *reach*: the position (in victim order) of the candidate at which the node's free GPUs
    in ``soon`` plus those of its untaken candidates up to there first reach ``v`` (-1 if
    its free GPUs already do; none if never). Per ``v`` a heap holds a lower bound of each
    node's reach: ``soon`` only loses free GPUs between searches (starts, reservations),
    which only delays a reach, except on the nodes of taken victims (their GPUs are added
    to ``soon``), whose exact reach the next search pushes (:meth:`taken`). A search pops
    entries, recomputes each popped node's reach from its few candidates and pushes it
    back if it moved, until the smallest reaches are exact; the walk's stopping position
    is then known without reading the candidates before it. Candidates of a level not
    above the waiter's (victim order position ``>=`` the level break) are never taken.
    """

    __slots__ = ("items", "on", "taken_ids", "free", "heaps", "stops", "dirty")

    def __init__(self, victims: Victims, free: list[int], taken: set[int]) -> None:
        self.items = victims.all()
        # per node, its untaken candidates: (position, cand, GPUs there), in victim order
        self.on: dict[int, list[tuple[int, Candidate, int]]] = {}
        for pos, cand in enumerate(self.items):
            if cand[2] not in taken:
                for node, g in zip(cand[4], cand[3]):
                    self.on.setdefault(node, []).append((pos, cand, g))
        self.taken_ids, self.free = taken, free
        self.heaps: dict[int, list[tuple[int, int]]] = {}   # v -> [(reach bound, node)]
        self.stops: dict[float, int] = {}   # floor -> level break position
        self.dirty: set[int] = set()   # nodes of victims taken since the last search

    def _reach(self, node: int, v: int) -> int | None:
        have = self.free[node]
        if have >= v:
            return -1
        for pos, _, g in self.on.get(node, ()):
            have += g
            if have >= v:
                return pos
        return None

    def _heap(self, v: int) -> list[tuple[int, int]]:
        heap = self.heaps.get(v)
        if heap is None:
            reach = self._reach
            heap = [(r, node) for node in range(len(self.free))
                    if (r := reach(node, v)) is not None]
            heapify(heap)
            self.heaps[v] = heap
        return heap

    def _pop(self, heap: list[tuple[int, int]], v: int, got: dict[int, int]
             ) -> tuple[int, int] | None:
        """The next smallest exact reach ``(position, node)`` of a node not in ``got``
        (recorded there and off the heap until :meth:`_restore`), or None."""
        while heap:
            bound, node = heap[0]
            if node in got:
                heappop(heap)   # a duplicate: the node's exact entry is in ``got``
                continue
            exact = self._reach(node, v)
            if exact is None:
                heappop(heap)
            elif exact == bound:
                heappop(heap)
                got[node] = exact
                return exact, node
            else:
                heapreplace(heap, (exact, node))
        return None

    @staticmethod
    def _restore(heap: list[tuple[int, int]], got: dict[int, int]) -> None:
        for node, exact in got.items():
            heappush(heap, (exact, node))

    def _stop(self, floor: float) -> int:
        stop = self.stops.get(floor)
        if stop is None:
            stop = bisect_left(self.items, floor, key=itemgetter(0))
            self.stops[floor] = stop
        return stop

    def _mine(self, node: int, last: int) -> list[tuple[Candidate, int]]:
        """The untaken candidates on ``node`` up to position ``last``, with their GPUs
        there, in victim order."""
        return [(cand, g) for pos, cand, g in self.on.get(node, ()) if pos <= last]

    def search(self, need: tuple[int, ...], soon: FreeMap, floor: float
               ) -> list[Candidate] | None:
        """The victims :func:`choose_victims` would choose for a waiter of level ``-floor``
        (None: none; ``FAR``: a case left to the walk). ``soon`` changes as there."""
        self.free = soon.free
        if self.dirty:
            self._flush()
        stop = self._stop(floor)
        if len(need) == 1:
            gpus = need[0]
            heap = self._heap(gpus)
            got: dict[int, int] = {}
            first = self._pop(heap, gpus, got)
            hit = -1
            if first is not None and 0 <= first[0] < stop:
                hit = first[1]
                nodes = self.items[first[0]][4]
                if len(nodes) > 1:   # other nodes of the candidate may reach there too:
                    hits = [hit]     # the walk keeps the last of them
                    while (more := self._pop(heap, gpus, got)) is not None \
                            and more[0] == first[0]:
                        hits.append(more[1])
                    hit = max(hits, key=nodes.index)
            self._restore(heap, got)
            if first is None or first[0] >= stop:
                return None
            if hit < 0:
                return FAR
            return keep_needed(self._mine(hit, first[0]), soon.free[hit], gpus, soon)
        order = sorted((max(n, 1) for n in need), reverse=True)
        last = -1
        for j, v in enumerate(order):
            if j + 1 < len(order) and order[j + 1] == v:
                continue   # v's count is where its last entry stands
            heap, got = self._heap(v), {}
            found = None
            for _ in range(j + 1):
                found = self._pop(heap, v, got)
                if found is None or found[0] >= stop:
                    break
            self._restore(heap, got)
            if found is None or found[0] >= stop:
                return None
            last = max(last, found[0])
        if last < 0:
            return FAR
        # nodes whose free GPUs plus the candidates' up to ``last`` reach the smallest entry
        # (only those can host an entry; the others place_with cannot pick either)
        v = order[-1]
        heap, got = self._heap(v), {}
        while (found := self._pop(heap, v, got)) is not None and found[0] <= last:
            pass
        self._restore(heap, got)
        extra: dict[int, int] = {}
        for node, exact in got.items():
            if exact <= last:
                extra[node] = sum(g for _, g in self._mine(node, last))
        hosts = soon.place_with(extra, need)
        if hosts is None:
            return FAR
        keep: dict[int, tuple[int, Candidate]] = {}
        for node in set(hosts):
            for pos, cand, _ in self.on.get(node, ()):
                if pos <= last:
                    keep[cand[2]] = (pos, cand)
        return drop_unneeded([cand for _, cand in sorted(keep.values(), key=itemgetter(0))],
                              need, soon)

    def taken(self, victims: list[Candidate]) -> None:
        """``victims`` were taken and their GPUs added to ``soon``: their nodes' reach may
        have come earlier; the next search pushes it (once the waiter's reservation,
        which follows, has been made: fewer entries to correct)."""
        for cand in victims:
            self.dirty.update(cand[4])

    def _flush(self) -> None:
        taken = self.taken_ids
        for node in self.dirty:
            mine = self.on.get(node)   # None: a node of another tenant's victims only
            if mine:
                mine = self.on[node] = [e for e in mine if e[1][2] not in taken]
            most = self.free[node] + (sum(e[2] for e in mine) if mine else 0)
            for v, heap in self.heaps.items():
                if v <= most:   # else the node never reaches v
                    r = self._reach(node, v)
                    if r is not None:
                        heappush(heap, (r, node))
        self.dirty.clear()
