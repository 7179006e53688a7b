"""The preemption rule: which blocked waiters preempt which running jobs (Tiresias, NSDI'19
sections 3.2 and 4; docs/design.md, "Policy rules and their sources", preemption).

:func:`find_preemptions` runs the start model (``placement.plan_starts``) over the eligible
pending jobs in the policy's order. A job that can neither start nor reserve GPUs being
freed, and outranks running jobs (a strictly greater level), takes victims from the lowest
queue upward, most attained service first, just enough to fit on real nodes
(``prioritizer.policy.victims``); never a job inside its first ``min_run_s``, nor (with
``wait_guard`` > 0) one that has run less than ``wait_guard ×`` its wait before this run, nor
one that is not preemptible. Partition ``PriorityTier`` comes first: a waiter preempts only jobs of its
tier or lower, and none while a job of a higher tier is blocked ahead of it. A promoted job
that ``Policy.lifted`` marks preempts no one (``PolicyConfig.promoted_preempts`` false).
With ``PolicyConfig.preempt_gain`` > 0 a waiter keeps the victims it found only when the
preemption repays its cost (``victims.preemption_pays``); otherwise it preempts no one and
the walk goes on, its victims left to later waiters.

How the victims of one waiter are searched is a :class:`SearchStrategy`: ``decide`` uses
:class:`~prioritizer.policy.victim_search.PlainSearch`; the incremental scheduler
(``prioritizer.policy.fast``) passes one that also proves some answers from bounds it keeps
between decisions. Every strategy gives the same preemptions. Units: GPUs, seconds. No I/O.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Mapping, Protocol

from prioritizer.policy.model import Preemption
from prioritizer.policy.placement import FreeMap, plan_starts
from prioritizer.policy.victim_search import PlainSearch
from prioritizer.policy.victims import (Candidate, Pays, Victims, choose_victims,
                                        needs_no_less)


class SearchStrategy(Protocol):
    """How :func:`find_preemptions` searches one decision's victims (one per call: it may
    keep the decision's state). Each method may only spare work, never change an answer:
    the preemptions are those of :class:`~prioritizer.policy.victim_search.PlainSearch`.

    ``level`` is a waiter's preemption level (``Policy.level``); ``need`` its GPUs per node,
    largest first (:meth:`choose`: in the job's own order); ``soon`` the free GPUs once jobs releasing theirs have (mutated by the
    walk as it starts, reserves and takes victims). With PriorityTiers above 0 the walk
    asks only :meth:`above` and :meth:`taken`, and chooses each waiter's victims over its
    tier's candidates itself.
    """

    #: ``(level, need largest first)`` of the waiters the walk found no victim set for,
    #: kept by the walk (its ``failed`` shortcut): a blocked waiter of one tier whose need
    #: is as large, entry by entry, as one of them ends there.
    failed: list[tuple[float, tuple[int, ...]]]
    #: the smallest one-node need in :attr:`failed` (``[g]``; ``[]``: none yet), kept by
    #: the walk. A one-node waiter needing at least that many GPUs ends at the walk's
    #: ``failed`` shortcut as soon as it is blocked, so a caller's ``waiters`` may leave
    #: out such a waiter that fits nowhere in ``soon`` (one tier), and likewise a waiter
    #: whose need :attr:`failed` covers.
    failed_one: list[int]

    def above(self, level: float) -> int:
        """An upper bound on the GPUs held by preemptible running jobs (not releasing) of a
        level strictly greater than ``level``, or -1 (not known). A blocked waiter for whom
        it is 0 finds no victim, one for whom it and the GPUs in ``soon`` fall short of its
        need finds no victim set: both are decided without building the candidates."""

    def may_fit(self, level: float, need: tuple[int, ...], extra: int, soon: FreeMap) -> bool:
        """False proves (one tier) that for some j, fewer than j nodes reach the j-th
        largest entry of ``need`` with ``soon``'s free GPUs plus those of the candidates
        of a level above ``level`` there, so no victim set makes it fit (``extra``: the
        most GPUs that victims taken earlier in this decision added to one node of
        ``soon``). True: search."""

    def due(self, level: float, need: tuple[int, ...], soon: FreeMap) -> bool:
        """True proves (one tier, ``first_only``) that the search would find victims for
        the blocked waiter that got past every other check: the walk then ends with
        ``Preemption(job_id, ())``, its victims not chosen. False: search."""

    def choose(self, need: tuple[int, ...], soon: FreeMap, level: float, victims: Victims,
               taken: set[int], taken_on: dict[int, int]) -> list[Candidate] | None:
        """The victims the candidate walk (``victims.victims_for_one_node`` or
        ``victims_for_gang``) would choose over ``victims`` for a waiter of ``level`` (one
        tier), their GPUs added to ``soon``; None: no victim set (``soon`` unchanged).
        ``taken``: ids taken already; ``taken_on``: their GPUs per node."""

    def taken(self, chosen: list[Candidate], soon: FreeMap) -> None:
        """``chosen`` became victims (their GPUs are in ``soon``)."""


def find_preemptions(strict: bool, free: FreeMap, soon: FreeMap | None,
                     waiters: Iterable[tuple[int, tuple[int, ...], float]],
                     running: Callable[[float], list[Candidate] | Iterator[Candidate]],
                     now: float, *,
                     search: SearchStrategy | None = None,
                     first_only: bool = False,
                     tiers: Mapping[int, int] | None = None,
                     lifted: Callable[[int], bool] | None = None,
                     pays: Pays | None = None,
                     allowed: Callable[[int], frozenset[int] | None] | None = None
                     ) -> list[Preemption]:
    """Run the start model over the eligible pending jobs; for each job that can neither
    start nor reserve, pick victims (see module doc). The one preemption rule, used by
    ``decide`` and by the incremental scheduler (``policy.fast.incremental``).

    Args:
        strict: the policy's ``Policy.strict`` (the first job that does not fit blocks all).
        free: free GPUs per node now; mutated.
        soon: free GPUs once the releasing jobs (``JobView.releasing``: being preempted or
            completing) have freed theirs, or None when none is; mutated.
        waiters: ``(job_id, gpus_per_node, level)`` of the eligible pending jobs in start
            order. Levels never decrease along the order (every policy's sort key starts
            with its level), so the walk stops at the first waiter whose level is not below
            the highest candidate's: no later waiter may preempt anyone.
        running: called once, when a first waiter is blocked, with that waiter's level:
            the victim candidates (:data:`~prioritizer.policy.victims.Candidate`: a list in
            any order, or an iterator in victim order) among the jobs holding GPUs, i.e.
            those ``may_be_victim`` admits and placed on as many nodes as their shape has
            entries. It may leave out jobs whose level is not above the one given: no later
            waiter (of no smaller level) may preempt them.
        now: seconds.
        search: how victims are searched (:class:`SearchStrategy`; default a new
            :class:`~prioritizer.policy.victim_search.PlainSearch`).
        first_only: stop at the first preemption found (a driver that only needs to know
            whether one is due).
        tiers: ``{job id: PriorityTier}`` of the waiters when any job has a tier above 0
            (None: every job is tier 0). Waiters are then in tier order first, so levels
            may decrease along it and the walk does not stop early.
        lifted: optional ``lifted(job_id)``, True for a waiter that preempts no one: it
            starts on free GPUs (or reserves GPUs being freed) in its turn, but no victim
            is chosen for it (``Policy.lifted``, ``PolicyConfig.promoted_preempts``).
            Nothing is recorded for such a waiter, so later ones are searched as before.
        pays: optional ``pays(job_id, victims' (attained GPU·s, GPUs))`` (``victims.gain_test``,
            ``PolicyConfig.preempt_gain``): a waiter's victims, found by the plain candidate
            walk (``victims.choose_victims``, whatever ``search``), are kept only when it
            is True; else the waiter preempts no one (nothing is recorded for it, its
            victims' GPUs are taken out of ``soon`` again) and the walk goes on. ``search``'s
            ``due`` is not asked then (it proves that victims exist, not that they pay).
        allowed: optional ``allowed(job_id)``: the nodes a waiter may use (its partitions',
            ``policy.pools``; None: every node). Such a waiter starts, reserves and takes
            victims only there: its victims are chosen by the plain candidate walk
            (``victims.choose_victims``) over the free GPUs of those nodes and the
            candidates' GPUs on them (a candidate with none there is left out); the walk's shortcuts (``failed``, ``search``'s bounds) are
            neither asked nor fed for it, since they compare waiters over every node.

    Returns:
        the preemptions in waiter order.
    """
    if search is None:
        search = PlainSearch()
    above = search.above
    taken: set[int] = set()
    victims: list[Victims] = []     # built at the first blocked waiter (often none is)
    top: list[float] = []            # the highest candidate level, once built (none: -inf)
    result: list[Preemption] = []
    # (level, need largest first) of waiters no victim set could serve. A later waiter of
    # no higher priority whose need is as large entry by entry has fewer candidates and a
    # harder fit, so it is not searched again: a shortcut that can only skip a preemption
    # (rarely, when spare GPUs of earlier victims would have helped), never add a wrong one.
    failed = search.failed
    failed_one = search.failed_one   # the smallest one-node need in ``failed`` (one tier)

    def fail(mine: float, shape: tuple[int, ...]) -> None:
        failed.append((mine, shape))
        if len(shape) == 1 and (not failed_one or shape[0] < failed_one[0]):
            failed_one[:] = [shape[0]]
    # PriorityTier (JobView.tier; ``tiers``): the highest tier of a waiter left blocked so far;
    # a waiter of a lower tier preempts nothing, since Slurm would give the freed GPUs to that one.
    blocked_tier: list[int] = []
    top_tier: list[int] = []   # highest tier among the candidates, once built (tiers only)
    # (level, ``above`` of it) of the waiter the walk gave last: plan_starts asks
    # ``on_blocked`` about that one, before it takes the next
    walked: list[float] = [0.0, -1]
    taken_on: dict[int, int] = {}   # GPUs of the victims taken per node
    most = [0]                       # the largest value of ``taken_on`` (0: none)

    def above_level(mine: float) -> bool:
        """Whether a candidate of a level above ``mine`` exists; the candidates are built
        at the first blocked waiter that asks (with ``mine``: see ``running``)."""
        if not victims:
            victims.append(Victims(running(mine), taken))
            first = victims[0].top()
            top.append(-first[0] if first is not None else float("-inf"))
            if tiers:
                top_tier.append(max((c[5] for c in victims[0].all()), default=0))
        return mine < top[0]

    def on_blocked(job_id: int, need: tuple[int, ...], soon_map: FreeMap) -> bool:
        tier = tiers.get(job_id, 0) if tiers else 0
        if blocked_tier and tier < blocked_tier[0]:
            return False
        if _serve(job_id, need, soon_map, tier):
            return True
        blocked_tier[:] = [max(blocked_tier + [tier])]
        return False

    def _serve(job_id: int, need: tuple[int, ...], soon_map: FreeMap, tier: int) -> bool:
        if lifted is not None and lifted(job_id):
            return False   # a promoted job takes free GPUs only
        mask = allowed(job_id) if allowed is not None else None
        if mask is not None:
            return _serve_within(job_id, need, soon_map, tier, mask)
        if failed_one and len(need) == 1 and need[0] >= failed_one[0] and not tiers:
            return False   # the shortcut below, taken first: most blocked waiters end here
        mine, room = walked
        if room >= 0:   # the strategy's bound on the GPUs above this level
            if room == 0:
                return False   # no running job of a strictly greater level
            if room < sum(need) and soon_map.total + room < sum(need):
                # even every such job would not free enough GPUs: no victim set exists
                fail(mine, tuple(sorted(need, reverse=True)))
                return False
        shape = tuple(sorted(need, reverse=True))
        if len(shape) == 1 and not tiers:
            # one tier: levels never decrease along the walk, so every failed entry has
            # lv <= mine; a one-node need is covered by the smallest failed one-node need
            if failed_one and shape[0] >= failed_one[0]:
                return False
        elif any(mine >= lv and needs_no_less(shape, f) for lv, f in failed):
            return False
        if not tiers and not search.may_fit(mine, shape, most[0], soon_map):
            fail(mine, shape)   # what the search would conclude
            return False
        if first_only and not tiers and pays is None and search.due(mine, shape, soon_map):
            result.append(Preemption(job_id, ()))   # the search would succeed here
            return True
        # (the checks above need no candidates: most blocked waiters end there. Had the
        # level check below come first, it would have ended this waiter and, levels never
        # decreasing in one tier, every later one: a failure recorded above changes nothing)
        if not above_level(mine):
            return False   # no running job of a strictly greater level: no victim exists
        if pays is not None and not tiers:
            chosen = choose_victims(need, soon_map, mine, victims[0], taken)
        elif not tiers:
            chosen = search.choose(need, soon_map, mine, victims[0], taken, taken_on)
        else:
            pool: Iterable[Candidate] = (victims[0] if top_tier[0] <= tier
                                         else [c for c in victims[0].all() if c[5] <= tier])
            chosen = choose_victims(need, soon_map, mine, pool, taken)
        if chosen is None:
            fail(mine, shape)
            return False
        if pays is not None and not pays(job_id, [(-c[1], sum(c[3])) for c in chosen]):
            for cand in chosen:   # victims exist but do not pay: give their GPUs back
                soon_map.add(cand[4], [-g for g in cand[3]])
            return False
        return _take(job_id, chosen, soon_map)

    def _serve_within(job_id: int, need: tuple[int, ...], soon_map: FreeMap, tier: int,
                      mask: frozenset[int]) -> bool:
        """``_serve`` for a waiter that may use the nodes ``mask`` only (see ``allowed``)."""
        mine, room = walked
        if room == 0:
            return False   # no running job of a strictly greater level anywhere
        if not above_level(mine):
            return False
        # a candidate counts with its GPUs on the waiter's nodes (a gang on other nodes too
        # frees those as well, which the waiter cannot use); one with none there is left out
        pool: list[Candidate] = []
        whole: dict[int, Candidate] = {}
        for c in victims[0].all():
            if tiers and c[5] > tier:
                continue
            mine_nodes = [(n, g) for n, g in zip(c[4], c[3]) if n in mask]
            if not mine_nodes:
                continue
            if len(mine_nodes) < len(c[4]):
                whole[c[2]] = c
                c = (c[0], c[1], c[2], tuple(g for _, g in mine_nodes),
                     tuple(n for n, _ in mine_nodes), c[5])
            pool.append(c)
        masked = FreeMap([f if node in mask else 0 for node, f in enumerate(soon_map.free)])
        found = choose_victims(need, masked, mine, pool, taken)
        if found is None:
            return False
        chosen = [whole.get(c[2], c) for c in found]
        if pays is not None and not pays(job_id, [(-c[1], sum(c[3])) for c in chosen]):
            return False   # only the masked map had their GPUs
        for cand in chosen:
            soon_map.add(cand[4], cand[3])
        return _take(job_id, chosen, soon_map)

    def _take(job_id: int, chosen: list[Candidate], soon_map: FreeMap) -> bool:
        """``chosen`` (their GPUs in ``soon_map``) become the victims of ``job_id``."""
        ids = [cand[2] for cand in chosen]
        taken.update(ids)
        for cand in chosen:
            for node, g in zip(cand[4], cand[3]):
                have = taken_on[node] = taken_on.get(node, 0) + g
                if have > most[0]:
                    most[0] = have
        search.taken(chosen, soon_map)
        result.append(Preemption(job_id, tuple(ids)))
        return True

    def walk() -> Iterator[tuple[int, tuple[int, ...]]]:
        for job_id, need, mine in waiters:
            if first_only and result:
                return
            room = above(mine)
            if not tiers and (victims and mine >= top[0] or room == 0):
                return   # levels never decrease (one tier): no later waiter may preempt
            walked[0], walked[1] = mine, room
            yield job_id, need

    plan_starts(walk(), free, soon, strict=strict, on_blocked=on_blocked, allowed=allowed)
    return result
