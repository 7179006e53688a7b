"""The eligible pending jobs the incremental scheduler (``policy.fast.incremental``) hands
the start walk (``placement.plan_starts``) and, on a short queue, the preemption walk
(``preemption.find_preemptions``): read lazily from its start order or its per-shape
lists, leaving out only jobs whose turn would change nothing.

* :func:`in_order`: the whole order, until no GPU is free (a later job could only reserve
  GPUs being freed);
* :func:`fitting`: the per-shape lists merged in start order, a shape dropped once it fits
  nowhere (GPUs only shrink during one walk, so it is skipped at every later turn);
* :func:`levels`: the whole order with each job's preemption level.

Each is a generator function, not a generator expression: mypyc builds the whole list for
those (``prioritizer.compiled``). tests/prioritizer/policy/test_policy_scheduler.py compares
the starts and preemptions with ``decide``'s at every step. Units: GPUs. No I/O.
"""

from __future__ import annotations

from heapq import heapify, heappop, heapreplace
from typing import Any, Iterator

from prioritizer.policy.placement import FreeMap

#: ``(sort key, job id)`` of the eligible pending jobs, ascending (``Scheduler.order`` and
#: each list of ``Scheduler.groups``)
Entries = list[tuple[Any, int]]


def in_order(order: Entries, jobs: dict[int, Any], now_map: FreeMap
             ) -> Iterator[tuple[int, tuple[int, ...]]]:
    """``(job id, shape)`` of the jobs of ``order`` in turn (``jobs``: id -> record with
    its ``shape``), until no GPU of ``now_map`` is free (no later job starts: the rest of
    the walk would only reserve GPUs being freed); a strict walk stops at the first that
    does not fit."""
    for _, job_id in order:
        if not now_map.free_any:
            return
        yield job_id, jobs[job_id].shape


def fitting(groups: dict[tuple[int, ...], Entries], now_map: FreeMap, soon: FreeMap | None
            ) -> Iterator[tuple[int, tuple[int, ...]]]:
    """``(job id, shape)`` of the jobs of ``groups`` (per shape, in start order) merged in
    start order, skipping those whose shape does not fit where the start model would place
    them (``soon`` if given, else ``now_map``): those would be walked and skipped (GPUs
    only shrink during one walk); none once no GPU of ``now_map`` is free (no later job
    starts)."""
    target = soon if soon is not None else now_map
    shapes = list(groups.items())
    heads = [(lst[0], i, 0) for i, (_, lst) in enumerate(shapes) if lst]
    heapify(heads)
    while heads and now_map.free_any:
        head, i, pos = heads[0]
        shape, lst = shapes[i]
        if target.place(shape) is None:   # never fits again in this walk
            heappop(heads)
            continue
        if pos + 1 < len(lst):
            heapreplace(heads, (lst[pos + 1], i, pos + 1))
        else:
            heappop(heads)
        yield head[1], shape


def levels(order: Entries, jobs: dict[int, Any]) -> Iterator[tuple[int, tuple[int, ...], float]]:
    """``(job id, shape, level)`` of the jobs of ``order`` in turn (``jobs``: id -> record
    with its ``shape`` and preemption ``level``)."""
    for _, job_id in order:
        rec = jobs[job_id]
        yield job_id, rec.shape, rec.level
