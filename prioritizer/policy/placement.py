"""Pure GPU placement and the model of how Slurm starts jobs in a given order.

Used by the policy (``prioritizer.policy.preemption``: does a waiter fit, which victims make it
fit) and by the simulator (which jobs start now). Placement is *consolidated* (Tiresias, NSDI'19
section 5.1: fewest nodes, whole GPUs per node, every entry of a gang job on a distinct node);
GPU *counting* (idealised simulators) is the same code over one pooled node. No I/O.

Start model (docs/design.md, "Policy rules and their sources"): jobs start in the target order
wherever they fit and the rest are skipped, as Slurm's main scheduler and backfill do without
time limits; with ``strict`` the first job that does not fit blocks all behind it (strict FIFO).
A job that fits only once the GPUs of jobs being preempted are freed holds a reservation on
those nodes, as Slurm's backfill reserves nodes for its highest-priority pending job.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence


def consolidated_shape(num_gpus: int, gpus_per_node: int) -> tuple[int, ...]:
    """GPUs per node of a ``num_gpus`` job packed on the fewest nodes of ``gpus_per_node``.

    >>> consolidated_shape(12, 8)
    (8, 4)
    """
    if num_gpus <= 0 or gpus_per_node <= 0:
        raise ValueError(f"num_gpus and gpus_per_node must be > 0, got {num_gpus}, {gpus_per_node}")
    full, rest = divmod(num_gpus, gpus_per_node)
    return (gpus_per_node,) * full + ((rest,) if rest else ())


def fits_consolidated(num_gpus: int, nodes: int, gpus_per_node: int) -> bool:
    """True if a job of ``num_gpus`` (> 0) GPUs fits an empty cluster of ``nodes`` nodes of
    ``gpus_per_node`` GPUs each: :func:`can_ever_fit` of its :func:`consolidated_shape`, which
    takes ``ceil(num_gpus / gpus_per_node)`` distinct nodes, so ``num_gpus <= nodes ×
    gpus_per_node``. O(1) without building the shape (one entry per node): a job that can
    never fit may ask for far more GPUs than the cluster has (10⁸ GPUs on 1-GPU nodes is a
    shape of 10⁸ entries, gigabytes), so its fit is decided before any shape is made. The
    same test holds for GPU counting (one pooled node of all the GPUs)."""
    return 0 < num_gpus <= nodes * gpus_per_node


_ORDERS: dict[tuple[int, ...], list[int]] = {}


def _largest_first(need: Sequence[int]) -> list[int]:
    """Positions of ``need`` by entry, largest first (equal entries in position order)."""
    key = tuple(need)
    order = _ORDERS.get(key)
    if order is None:
        order = sorted(range(len(key)), key=lambda p: -key[p])
        if len(_ORDERS) < 4096:   # job shapes are few; bound the memo all the same
            _ORDERS[key] = order
    return order


class FreeMap:
    """Free GPUs per node (index ``0..n-1``) with an index by free count for fast fits.

    ``place`` is O(entries × log distinct-values); nodes are chosen best-fit (the node with
    the fewest free GPUs that still holds the entry, lowest index first), deterministically.
    """

    __slots__ = ("free", "_values", "_nodes_at")

    def __init__(self, free: Sequence[int],
                 _index: tuple[dict[int, list[int]], list[int]] | None = None) -> None:
        self.free = list(free)
        if _index is not None:   # copy(): the index of an equal map, already copied
            self._nodes_at, self._values = _index
            return
        self._nodes_at = {}
        for node, count in enumerate(self.free):
            if count > 0:
                self._nodes_at.setdefault(count, []).append(node)
        self._values = sorted(self._nodes_at)

    def copy(self) -> FreeMap:
        """An independent copy."""
        return FreeMap(self.free, ({v: list(ns) for v, ns in self._nodes_at.items()},
                                   list(self._values)))

    @property
    def free_any(self) -> bool:
        """True if some node has a free GPU (O(1))."""
        return bool(self._values)

    @property
    def largest(self) -> int:
        """The most GPUs free on one node (0 if none; O(1)): a one-node need of ``g`` >= 1
        fits iff ``g <= largest``."""
        return self._values[-1] if self._values else 0

    @property
    def total(self) -> int:
        """Free GPUs over all nodes."""
        return sum(self.free)

    def place(self, need: Sequence[int]) -> tuple[int, ...] | None:
        """Nodes (one per entry of ``need``, distinct) where ``need`` fits, or None.

        Entries are placed largest first, each on the best-fitting unused node; for the
        nested node sets of this problem that greedy finds a placement whenever one exists.
        The result is aligned with ``need`` (``result[i]`` hosts ``need[i]``).
        """
        values = self._values
        if len(need) == 1:
            i = bisect_left(values, need[0])
            if i == len(values):
                return None
            return (self._nodes_at[values[i]][0],)
        if not values or values[-1] < max(need):
            return None   # the largest entry fits nowhere
        used: dict[int, int] = {}
        result = [0] * len(need)
        for pos in _largest_first(need):
            i = bisect_left(self._values, need[pos])
            while i < len(self._values) and used.get(self._values[i], 0) >= len(
                    self._nodes_at[self._values[i]]):
                i += 1
            if i == len(self._values):
                return None
            value = self._values[i]
            result[pos] = self._nodes_at[value][used.get(value, 0)]
            used[value] = used.get(value, 0) + 1
        return tuple(result)

    def place_in(self, need: Sequence[int], allowed: frozenset[int]) -> tuple[int, ...] | None:
        """:meth:`place` over the nodes ``allowed`` only (a job's partitions, ``policy.pools``):
        entries largest first, each on the unused allowed node with the fewest free GPUs that
        holds it, lowest index first. O(allowed nodes × entries)."""
        free = self.free
        used: set[int] = set()
        result = [0] * len(need)
        for pos in _largest_first(need):
            want = max(need[pos], 1) if len(need) == 1 else need[pos]
            best: tuple[int, int] | None = None
            for node in allowed:
                f = free[node]
                if f >= want and f > 0 and node not in used and (best is None or (f, node) < best):
                    best = (f, node)
            if best is None:
                return None
            used.add(best[1])
            result[pos] = best[1]
        return tuple(result)

    def count_at_least(self, gpus: int) -> int:
        """How many nodes have at least ``gpus`` (> 0) GPUs free."""
        values = self._values
        return sum(len(self._nodes_at[v]) for v in values[bisect_left(values, gpus):])

    def place_with(self, extra: dict[int, int], need: Sequence[int]) -> tuple[int, ...] | None:
        """What :meth:`place` would return once the free GPUs of each node in ``extra`` are
        raised by ``extra[node]``, without changing this map (the same rule: entries largest
        first, each on the unused node with the fewest free GPUs that holds it, lowest index
        first among equals)."""
        if len(need) == 1:
            return self._place_one_with(extra, need[0])
        moved = sorted((self.free[n] + e, n) for n, e in extra.items() if e)
        skip = {n for _, n in moved}
        used: set[int] = set()
        result = [0] * len(need)
        values, nodes_at = self._values, self._nodes_at
        for pos in sorted(range(len(need)), key=lambda p: -need[p]):
            want = need[pos]
            best: tuple[int, int] | None = None
            i = bisect_left(values, want)
            while best is None and i < len(values):
                for node in nodes_at[values[i]]:
                    if node not in used and node not in skip:
                        best = (values[i], node)
                        break
                i += 1
            for j in range(bisect_left(moved, (want, -1)), len(moved)):
                if moved[j][1] not in used:
                    if best is None or moved[j] < best:
                        best = moved[j]
                    break
            if best is None:
                return None
            used.add(best[1])
            result[pos] = best[1]
        return tuple(result)

    def _place_one_with(self, extra: dict[int, int], want: int) -> tuple[int, ...] | None:
        """:meth:`place_with` for one entry of ``want`` GPUs: the least ``(free GPUs,
        node)`` that holds it over the raised nodes (one pass, no sort) and the others."""
        free = self.free
        best: tuple[int, int] | None = None
        for node, e in extra.items():
            if e and free[node] + e >= want and (best is None or (free[node] + e, node) < best):
                best = (free[node] + e, node)
        values = self._values
        for i in range(bisect_left(values, want), len(values)):
            if best is not None and values[i] > best[0]:
                break
            here = next((n for n in self._nodes_at[values[i]] if not extra.get(n)), None)
            if here is not None:
                if best is None or (values[i], here) < best:
                    best = (values[i], here)
                break
        return None if best is None else (best[1],)

    def add(self, nodes: Iterable[int], amounts: Iterable[int]) -> None:
        """Change free GPUs of ``nodes`` by ``amounts`` (negative = allocate)."""
        for node, amount in zip(nodes, amounts):
            if amount:
                self._set(node, self.free[node] + amount)

    def cap(self, node: int, limit: int) -> None:
        """Lower the free GPUs of ``node`` to at most ``limit``."""
        if self.free[node] > limit:
            self._set(node, limit)

    def _set(self, node: int, value: int) -> None:
        if value < 0:
            raise ValueError(f"node {node}: free GPUs would become {value}")
        old = self.free[node]
        if old > 0:
            lst = self._nodes_at[old]
            del lst[bisect_left(lst, node)]
            if not lst:
                del self._nodes_at[old]
                del self._values[bisect_left(self._values, old)]
        if value > 0:
            bucket = self._nodes_at.get(value)
            if bucket is None:
                self._nodes_at[value] = [node]
                insort(self._values, value)
            else:
                insort(bucket, node)
        self.free[node] = value


def place_once(free: list[int], need: Sequence[int]) -> tuple[int, ...] | None:
    """What ``FreeMap(free).place(need)`` returns, for a map placed on once: a one-node need
    by one pass over ``free`` (the node with the fewest free GPUs that holds it, lowest index
    first; an entry of 0 GPUs needs a free GPU, as in ``place``), a gang by the map."""
    if len(need) != 1:
        return FreeMap(free).place(need)
    want = max(need[0], 1)
    best = min(filter(want.__le__, free), default=None)   # the fewest free >= want
    return None if best is None else (free.index(best),)


@dataclass(frozen=True)
class Planned:
    """One outcome of :func:`plan_starts`: ``job_id`` on ``nodes`` (aligned with its need)."""

    job_id: int
    nodes: tuple[int, ...]


@dataclass
class StartPlan:
    """Result of :func:`plan_starts`: jobs that start now, jobs holding a reservation on
    GPUs being freed, and jobs that neither fit nor reserve."""

    starts: list[Planned]
    reserved: list[Planned]
    blocked: list[int]


OnBlocked = Callable[[int, tuple[int, ...], FreeMap], bool]


def plan_starts(jobs: Iterable[tuple[int, tuple[int, ...]]], now: FreeMap, soon: FreeMap | None,
                strict: bool, on_blocked: OnBlocked | None = None, *,
                complete: bool = True,
                allowed: Callable[[int], frozenset[int] | None] | None = None) -> StartPlan:
    """Walk ``jobs`` (``(job_id, gpus_per_node)`` in target order) through the start model.

    Args:
        jobs: eligible pending jobs, highest priority first.
        now: free GPUs now; mutated (allocations of starting jobs and reservations).
        soon: free GPUs once the jobs being preempted release theirs (>= ``now`` per node),
            or None when nothing is being released; mutated.
        complete: False stops the walk once no GPU is free, none is being released and
            there is no ``on_blocked`` (no later job can start nor reserve): ``starts`` is
            the same, ``blocked`` lists only the jobs walked.
        strict: stop at the first job that neither starts nor reserves (strict FIFO).
        on_blocked: called for a job that does not fit even in ``soon``; it may add GPUs to
            ``soon`` (by choosing victims) and return True, then the job reserves them.
        allowed: optional ``allowed(job_id)``: the nodes the job may use (its partitions',
            ``policy.pools``), None for every node; it starts and reserves only there.
    """
    plan = StartPlan([], [], [])
    jobs_iter = iter(jobs)
    mask: frozenset[int] | None = None
    for job_id, need in jobs_iter:
        if not complete and soon is None and on_blocked is None and not now.free_any:
            break
        if allowed is not None:
            mask = allowed(job_id)
        nodes = now.place(need) if mask is None else now.place_in(need, mask)
        if nodes is not None:
            now.add(nodes, [-g for g in need])
            if soon is not None:
                soon.add(nodes, [-g for g in need])
            plan.starts.append(Planned(job_id, nodes))
            continue
        if soon is None and on_blocked is not None:
            soon = now.copy()
        nodes = None if soon is None else (soon.place(need) if mask is None
                                            else soon.place_in(need, mask))
        if nodes is None and on_blocked is not None and soon is not None \
                and on_blocked(job_id, need, soon):
            nodes = soon.place(need) if mask is None else soon.place_in(need, mask)
        if nodes is not None and soon is not None:
            soon.add(nodes, [-g for g in need])
            for node in nodes:
                now.cap(node, soon.free[node])
            plan.reserved.append(Planned(job_id, nodes))
            continue
        plan.blocked.append(job_id)
        if strict:
            if complete:
                plan.blocked.extend(j for j, _ in jobs_iter)
            break
    return plan


def can_ever_fit(need: Sequence[int], totals: Sequence[int]) -> bool:
    """True if ``need`` fits on an empty cluster whose nodes have ``totals`` GPUs."""
    return FreeMap(totals).place(need) is not None
