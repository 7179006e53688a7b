"""The waiters the incremental scheduler hands ``find_preemptions``
(``prioritizer.policy.preemption``): its eligible pending jobs in start order, less those
whose turn the walk would pass without effect, found a whole job shape at a time.

At a waiter's turn the walk (one tier, not strict) places it on ``free`` or else on ``soon``
(start or reservation), and a job that fits on neither is blocked and asks for victims. A
blocked waiter ends without effect at the rule's ``failed`` shortcut when an earlier waiter
of no higher level, with a need no larger entry by entry, found no victim set (the
strategy's ``failed``; for one-node needs its smallest, ``failed_one``): it starts nothing,
reserves nothing and takes nothing (the rule may record its need among the failed ones
again, which covers nothing new). Whether a waiter is such a one depends only on its shape,
its level and the walk's state, and that state changes only at the turns of waiters the walk
is given. Between two of them ``soon`` only loses GPUs (starts and reservations) unless
victims are taken (``FastSearch.takes`` counts them) and the failed needs only grow, so a
shape found passed over stays passed over until victims are taken. :func:`waiters` keeps
the eligible pending jobs as one sorted list per shape (``Scheduler.groups``), merges the
heads of the shapes not passed over, and sets a shape aside at its first waiter passed over
until victims are next taken (then it resumes after the last waiter given). On a long
queue that the running jobs' first threshold crossings make preempt (the forecast of a
large site, ``benchmarks/forecast_refresh.py``) most blocked waiters end there.

The walk sees the same waiters' effects in the same order: the preemptions are those of the
order walked one job at a time (tests/prioritizer/policy/test_policy_scheduler.py compares
every decision with ``decide``). Units: GPUs. No I/O.
"""

from __future__ import annotations

from bisect import bisect_right
from heapq import heapify, heappop, heappush, heapreplace
from typing import Any, Iterator, Protocol

from prioritizer.policy.placement import FreeMap
from prioritizer.policy.victims import needs_no_less


class Pending(Protocol):
    """What :func:`waiters` reads of a pending job (``policy.fast.records.Tracked``)."""

    level: float


class Walked(Protocol):
    """What :func:`waiters` reads of the decision's search strategy (``FastSearch``)."""

    failed: list[tuple[float, tuple[int, ...]]]
    failed_one: list[int]
    takes: int


def passed_over(need: tuple[int, ...], level: float, soon: FreeMap, search: Walked) -> bool:
    """Whether a waiter of ``level`` needing ``need`` (GPUs per node, largest first) fits
    nowhere in ``soon`` and ends at the rule's ``failed`` shortcut (see module doc)."""
    failed_one = search.failed_one
    if len(need) == 1:
        return bool(failed_one) and failed_one[0] <= need[0] and need[0] > soon.largest
    for lv, f in search.failed:
        if lv <= level and needs_no_less(need, f):
            return soon.place(need) is None
    return False


def waiters(groups: dict[tuple[int, ...], list[tuple[Any, int]]], jobs: dict[int, Any],
            soon: FreeMap, search: Walked
            ) -> Iterator[tuple[int, tuple[int, ...], float]]:
    """``(job id, shape, level)`` of the eligible pending jobs in start order, those passed
    over left out (see module doc).

    Args:
        groups: per shape (GPUs per node) the ``(sort key, job id)`` of its eligible pending
            jobs, ascending; not changed during the walk.
        jobs: job id -> the job's record (its ``level``).
        soon: the ``soon`` map of the walk (the very object ``find_preemptions`` mutates).
        search: the walk's strategy (its failed needs and count of victims taken).
    """
    shapes = list(groups)
    needs = [tuple(sorted(shape, reverse=True)) for shape in shapes]
    lists = [groups[shape] for shape in shapes]
    heads = [(keys[0], i, 0) for i, keys in enumerate(lists)]
    heapify(heads)
    aside: list[int] = []   # shapes passed over since victims were last taken
    takes = search.takes
    last: Any = None        # the entry of the last waiter given
    while True:
        if search.takes != takes:   # victims taken: ``soon`` gained GPUs
            takes = search.takes
            for i in aside:
                keys = lists[i]
                pos = bisect_right(keys, last)
                if pos < len(keys):
                    heappush(heads, (keys[pos], i, pos))
            aside.clear()
        if not heads:
            return
        entry, i, pos = heads[0]
        level = jobs[entry[1]].level
        if passed_over(needs[i], level, soon, search):
            heappop(heads)
            aside.append(i)
            continue
        keys = lists[i]
        if pos + 1 < len(keys):
            heapreplace(heads, (keys[pos + 1], i, pos + 1))
        else:
            heappop(heads)
        last = entry
        yield entry[1], shapes[i], level
