"""The victims of one waiter: which running jobs a blocked job may preempt, in which order,
and which of them it keeps (Tiresias, NSDI'19 sections 3.2 and 4; docs/design.md, "Policy
rules and their sources", preemption).

A *candidate* is a job holding GPUs that :func:`may_be_victim` admits (preemptible, not
releasing its GPUs, past its first ``min_run_s``, and past ``wait_guard ×`` its wait before
this run and the run time that repays ``requeue_guard`` its time lost since its first start
when those are longer: :func:`guard_start`), as a :data:`Candidate` tuple; candidates
are taken in victim order (lowest queue, i.e. highest level, first; then most attained
service; then job id) until the waiter fits on real nodes, and only those on the nodes it
will use are kept, the newest dropped first while it still fits. ``find_preemptions``
(``prioritizer.policy.preemption``) applies this per waiter, and with ``preempt_gain`` > 0
keeps a waiter's victims only when :func:`preemption_pays`. Units: GPUs, GPU·seconds. No I/O.
"""

from __future__ import annotations

from heapq import heapify, heappop
from itertools import islice
from typing import Callable, Iterable, Iterator

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.placement import FreeMap

#: A victim candidate: ``(-level, -attained GPU·s, job id, gpus_per_node, node indices,
#: PriorityTier)``; candidates are taken in ascending tuple order (lowest queue, i.e.
#: highest level, first; then most attained service; then job id).
Candidate = tuple[float, float, int, tuple[int, ...], tuple[int, ...], int]


def needs_no_less(need: tuple[int, ...], other: tuple[int, ...]) -> bool:
    """Whether ``need`` (GPUs per node, largest first) asks for at least what ``other``
    (likewise) asks, entry by entry, on at least as many nodes: a waiter of no higher
    priority with such a need fails wherever ``other`` failed (``find_preemptions``'
    ``failed`` shortcut)."""
    return len(need) >= len(other) and all(a >= b for a, b in zip(need, other))


def may_be_victim(preemptible: bool, releasing: bool, run_start: float | None,
                  now: float, min_run_s: float) -> bool:
    """Whether a job holding GPUs may be chosen as a victim at ``now``: preemptible, not
    releasing its GPUs already (``JobView.releasing``), and past its first ``min_run_s`` seconds (the minimum run
    that spares fresh starts; ``PolicyConfig.min_run_s``)."""
    return preemptible and not releasing and now - (
        run_start if run_start is not None else now) >= min_run_s


def guard_start(run_start: float, waited_s: float, min_run_s: float, wait_guard: float,
                lost_s: float = 0.0, ran_s: float = 0.0, requeue_guard: float = 0.0) -> float:
    """The time (s) from which a run's ``min_run_s`` guard counts, as :func:`may_be_victim`
    takes it in place of the run's start: the start itself, later by as much as the run's
    longest guard exceeds ``min_run_s``, so the run is spared until ``run_start +
    max(min_run_s, wait_guard × waited_s, lost_s / requeue_guard - ran_s)``:

    * ``wait_guard × waited_s`` (``PolicyConfig.wait_guard``): ``waited_s`` is the seconds
      the job waited before this run (:func:`waited_before`);
    * ``lost_s / requeue_guard - ran_s`` (``PolicyConfig.requeue_guard``, when it and
      ``lost_s`` are > 0): ``lost_s`` is the seconds the job spent without GPUs between its
      first start and this run (:func:`lost_before`), ``ran_s`` its run time before this
      run; from then on its run time ``ran_s + t - run_start`` is at least ``lost_s /
      requeue_guard``, i.e. it has lost at most ``requeue_guard ×`` its run time.

    With both guards 0 it is ``run_start`` exactly."""
    spared = wait_guard * waited_s
    if requeue_guard > 0 and lost_s > 0:
        repaid = lost_s / requeue_guard - ran_s
        if repaid > spared:
            spared = repaid
    extra = spared - min_run_s
    return run_start + extra if extra > 0 else run_start


def lost_before(run_start: float, first_start: float | None, ran_s: float) -> float:
    """Seconds a job spent without GPUs between its first start (``first_start``; None: this
    run is its first) and the run that began at ``run_start``, having run ``ran_s`` seconds
    in between (its waits between runs, requeue delays included)."""
    return run_start - first_start - ran_s if first_start is not None else 0.0


def waited_before(run_start: float, last_run_end: float | None, submit_time: float) -> float:
    """Seconds a job waited before the run that began at ``run_start``: since its last run
    ended (``JobView.last_run_end``, requeue delay included), else since its submission."""
    return run_start - (last_run_end if last_run_end is not None else submit_time)


def expected_left_s(dist: GittinsDistribution, attained_gpu_s: float, gpus: int) -> float:
    """Expected remaining run time (s) of a job of ``gpus`` GPUs that has attained
    ``attained_gpu_s`` GPU·s, by ``dist`` (``GittinsDistribution.mean_residual`` over its
    GPUs; a job of 0 GPUs counts as 1)."""
    return dist.mean_residual(attained_gpu_s) / max(gpus, 1)


def quantum_gpu_s(config: PolicyConfig, attained_gpu_s: float, gpus: int) -> float:
    """The service (GPU·s) a waiter gets before its policy would put it behind others again:
    up to its queue's threshold (``tiresias-las``: ``thresholds_gpu_s``; ``las``:
    ``thresholds_s`` × its GPUs), by its whole attained service; ``gittins_quantum_gpu_s``
    for ``tiresias-gittins``; ``inf`` past the last threshold and for any other policy."""
    if config.policy == "tiresias-gittins":
        return config.gittins_quantum_gpu_s
    scale = 1 if config.policy == "tiresias-las" else max(gpus, 1)
    thresholds = (config.thresholds_gpu_s if config.policy == "tiresias-las"
                  else config.thresholds_s if config.policy == "las" else ())
    for t in thresholds:
        if t * scale > attained_gpu_s:
            return t * scale - attained_gpu_s
    return float("inf")


def preemption_pays(finish_p: float, waiter_run_s: float, victims_left_s: list[float],
                    cost_s: float, gain: float) -> bool:
    """Whether a preemption repays its cost (``PolicyConfig.preempt_gain``). The waiter runs
    for its quantum (:func:`quantum_gpu_s`), about ``waiter_run_s`` seconds, and ends within
    it with probability ``finish_p`` (``GittinsDistribution.outlook``); each of its victims
    is delayed by that run plus ``cost_s`` (checkpoint overhead and requeue delay). If the
    waiter ends, it saved the wait for its victims' GPUs, at least the shortest expected
    remaining time among them (the soonest those GPUs would free anyway); if not, it goes
    behind others again and saved nothing. It pays when ``finish_p × min(victims_left_s) >
    gain × len(victims_left_s) × (waiter_run_s + cost_s)``. With no quantum
    (``finish_p`` 1, ``waiter_run_s`` its expected remaining time) this is the exchange of
    two jobs run to the end. Seconds; jobs count, not GPUs, as the average JCT counts them."""
    return finish_p * min(victims_left_s) > gain * len(victims_left_s) * (waiter_run_s + cost_s)


#: the gain test of one waiter: ``pays(waiter job id, its chosen victims as (attained
#: GPU·s, GPUs) pairs)``
Pays = Callable[[int, list[tuple[float, int]]], bool]


def gain_test(config: PolicyConfig, dist: GittinsDistribution | None,
              waiter: Callable[[int], tuple[float, int]]) -> Pays | None:
    """The ``pays`` argument of ``find_preemptions`` and ``tenant_preemptions`` for
    ``config.preempt_gain`` (None: the rule is off, with ``preempt_gain`` 0 or no
    distribution). ``waiter(job_id)`` gives a pending job's attained GPU·s and GPUs."""
    gain = config.preempt_gain
    if not gain or dist is None:
        return None
    cost_s = config.checkpoint_overhead_s + config.requeue_delay_s
    seen: dict[int, tuple[float, float]] = {}

    def pays(job_id: int, chosen: list[tuple[float, int]]) -> bool:
        outlook = seen.get(job_id)
        if outlook is None:
            attained, gpus = waiter(job_id)
            p, run = dist.outlook(attained, quantum_gpu_s(config, attained, gpus))
            outlook = seen[job_id] = (p, run / max(gpus, 1))
        left = [expected_left_s(dist, attained, gpus) for attained, gpus in chosen]
        return preemption_pays(outlook[0], outlook[1], left, cost_s, gain)
    return pays


def _heap_order(entries: list[Candidate]) -> Iterator[Candidate]:
    """``entries`` in ascending order, sorted lazily (a heap popped as far as read)."""
    heapify(entries)
    while entries:
        yield heappop(entries)


class Victims:
    """The candidates in victim order, read lazily from ``source`` (so a decision that
    needs a few victims does not sort every running job) and kept for the next waiter.
    ``start`` skips the prefix already taken (no later waiter reads it again)."""

    __slots__ = ("source", "items", "start", "taken")

    def __init__(self, found: list[Candidate] | Iterator[Candidate], taken: set[int]) -> None:
        self.source = _heap_order(found) if isinstance(found, list) else found
        self.items: list[Candidate] = []
        self.start, self.taken = 0, taken

    def top(self) -> Candidate | None:
        """The first candidate in victim order (taken or not), or None."""
        if not self.items:
            self.items.extend(islice(self.source, 1))
        return self.items[0] if self.items else None

    def __iter__(self) -> Iterator[Candidate]:
        items, taken, source = self.items, self.taken, self.source
        i = self.start
        while i < len(items) and items[i][2] in taken:
            i += 1
        self.start = i
        yield from islice(items, i, None)   # what is read already (and appended)
        i = len(items)
        while True:
            if i < len(items):
                yield items[i]
            else:
                item = next(source, None)
                if item is None:
                    return
                items.append(item)
                yield item
            i += 1

    def all(self) -> list[Candidate]:
        """Every candidate in victim order."""
        self.items.extend(self.source)
        return self.items


def choose_victims(need: tuple[int, ...], soon: FreeMap, waiter_level: float,
                    candidates: Iterable[Candidate], taken: set[int]
                    ) -> list[Candidate] | None:
    """Victims for one waiter (see :func:`victims_for_gang`); a one-node waiter takes the
    arithmetic shortcut :func:`victims_for_one_node`, which gives the same victims."""
    if len(need) == 1:
        return victims_for_one_node(need[0], soon, -waiter_level, candidates, taken)
    return victims_for_gang(need, soon, -waiter_level, candidates, taken)


FAR: list[Candidate] = []   # victims_for_one_node's "no hit within ``limit``"
#: what a strategy's ``one_node`` (``victim_search.PlainSearch.one_node``) returns to leave a
#: one-node search to the walk over the candidates
DEFER: list[Candidate] = []


def victims_for_one_node(gpus: int, soon: FreeMap, floor: float,
                          candidates: Iterable[Candidate], taken: set[int],
                          limit: int = 0) -> list[Candidate] | None:
    """Same rule as :func:`victims_for_gang` for a waiter needing ``gpus`` on one node:
    the first node whose free GPUs plus those of the victims taken so far reach ``gpus``
    hosts it; only victims on that node are kept, newest dropped first while it fits.
    ``floor``: minus the waiter's level (candidates from there on are not below it).
    ``limit`` > 0: give up (returning ``FAR``, ``soon`` unchanged) once that many untaken
    candidates were walked without a hit."""
    extra: dict[int, int] = {}
    chosen: list[Candidate] = []
    hit = -1
    free = soon.free
    for cand in candidates:
        if cand[0] >= floor:
            break
        if cand[2] in taken:
            continue
        if len(chosen) == limit and limit:
            return FAR
        chosen.append(cand)
        nodes = cand[4]
        if len(nodes) == 1:
            node = nodes[0]
            have = extra.get(node, 0) + cand[3][0]
            extra[node] = have
            if free[node] + have >= gpus:
                hit = node
                break
            continue
        for node, g in zip(nodes, cand[3]):
            have = extra.get(node, 0) + g
            extra[node] = have
            if free[node] + have >= gpus:
                hit = node
        if hit >= 0:
            break
    if hit < 0:
        return None
    mine = [(cand, g) for cand in chosen for node, g in zip(cand[4], cand[3]) if node == hit]
    return keep_needed(mine, free[hit], gpus, soon)


def keep_needed(mine: list[tuple[Candidate, int]], free_gpus: int, gpus: int,
                soon: FreeMap) -> list[Candidate]:
    """The victims a one-node need of ``gpus`` GPUs keeps of ``mine`` (candidates in victim
    order with the GPUs each frees on the chosen node, which has ``free_gpus`` free; the rule
    is :func:`needed_on_node`). The kept victims' GPUs are added to ``soon``."""
    flags = needed_on_node([g for _, g in mine], free_gpus, gpus)
    kept = [cand for (cand, _), k in zip(mine, flags) if k]
    for cand in kept:
        soon.add(cand[4], cand[3])
    return kept


def needed_on_node(shares: list[int], free_gpus: int, gpus: int) -> list[bool]:
    """Which victims a waiter needing ``gpus`` GPUs on one node keeps, so that no job is
    preempted for nothing: ``shares`` are the GPUs each chosen victim frees on that node (in
    victim order), which has ``free_gpus`` free. The last is kept always (it made the need
    fit), an earlier one only if the need no longer fits without it, newest dropped first.
    Returns one flag per victim (True: kept). Arithmetic: the one-node case of
    :func:`needed_on_nodes`."""
    have = free_gpus + sum(shares)
    keep = [True] * len(shares)
    for i in range(len(shares) - 2, -1, -1):
        if have - shares[i] >= gpus:
            have -= shares[i]
            keep[i] = False
    return keep


def victims_for_gang(need: tuple[int, ...], soon: FreeMap, floor: float,
                      candidates: Iterable[Candidate], taken: set[int]
                      ) -> list[Candidate] | None:
    """Victims for one waiter: take ``candidates`` in order (strictly lower priority than
    the waiter, i.e. ``-level < floor``, not yet taken) until ``need`` fits, then keep only
    those on the nodes the waiter will use and drop, newest first, any of those it can do
    without. On success the victims' GPUs stay added to ``soon``; on failure ``soon`` is
    left unchanged."""
    chosen: list[Candidate] = []
    nodes = None
    free = soon.free
    # ``need`` fits iff, for its j-th largest entry n_j, at least j nodes have n_j GPUs
    # free (entries on distinct nodes; FreeMap.place finds a placement whenever one
    # exists, and puts an entry of 0 GPUs, a GPU-less hetjob component, only on a node
    # with a free GPU, so it counts as 1): count such nodes as victims are added, place
    # only once that holds
    order = sorted((max(n, 1) for n in need), reverse=True)
    sizes = sorted(set(order))
    have = {v: soon.count_at_least(v) for v in sizes}
    extra: dict[int, int] = {}   # GPUs of the chosen victims per node (not yet in soon)
    for cand in candidates:
        if cand[0] >= floor:
            break
        if cand[2] in taken:
            continue
        rose = False
        for node, g in zip(cand[4], cand[3]):
            added = extra.get(node, 0)
            before = free[node] + added
            extra[node] = added + g
            for v in sizes:
                if before < v <= before + g:
                    have[v] += 1
                    rose = True
        chosen.append(cand)
        if rose and all(have[n] >= j for j, n in enumerate(order, 1)):
            nodes = soon.place_with(extra, need)
            if nodes is not None:
                break
    if nodes is None:
        return None
    used = set(nodes)
    return drop_unneeded([cand for cand in chosen if not used.isdisjoint(cand[4])], need, soon)


def drop_unneeded(keep: list[Candidate], need: tuple[int, ...], soon: FreeMap
                   ) -> list[Candidate]:
    """The tail of :func:`victims_for_gang`: of ``keep`` (the chosen victims on the nodes the
    waiter will use, in victim order) those :func:`needed_on_nodes` keeps; their GPUs stay
    added to ``soon``."""
    flags = needed_on_nodes([(cand[4], cand[3]) for cand in keep], need, soon)
    return [cand for cand, keep_it in zip(keep, flags) if keep_it]


def needed_on_nodes(freed: list[tuple[tuple[int, ...], tuple[int, ...]]], need: tuple[int, ...],
                    soon: FreeMap) -> list[bool]:
    """Which victims a waiter of GPUs per node ``need`` keeps, so that no job is preempted for
    nothing: ``freed`` are the chosen victims on the nodes it will use, in victim order, each
    as its node indices and its GPUs on each. All are added to ``soon``, then each but the
    last (it made the need fit) is dropped again, newest first, if ``need`` still fits
    without it. Returns one flag per victim (True: kept); the kept ones' GPUs stay added to
    ``soon``."""
    for nodes, gpus in freed:
        soon.add(nodes, gpus)
    needed = [True] * len(freed)
    for i in range(len(freed) - 2, -1, -1):
        nodes, gpus = freed[i]
        soon.add(nodes, [-g for g in gpus])
        if soon.place(need) is None:
            soon.add(nodes, gpus)
        else:
            needed[i] = False
    return needed
