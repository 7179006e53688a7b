"""Preemption between and inside tenants: reclaim of lent GPUs, Tiresias inside a tenant.

The victim walk of a shared cluster (:mod:`prioritizer.policy.tenants` has the config and the
start order), pure and shared by ``decide_tenants`` (daemon, reference path) and the
simulator's tenant scheduler. The start order is walked as Slurm would start it
(``placement``'s start model: a job that fits starts or reserves its nodes); for a job that
does not fit:

* **reclaim**: if its tenant stays within its guarantee once it runs (``held + gpus <=
  guaranteed_gpus``) and the start order placed it by the guarantee rule (those come before
  every job placed by share, so none of those is ahead of it to take the GPUs it frees),
  victims are taken from tenants that hold more than their guarantee (borrowers), the one
  borrowing most first, inside each in Tiresias victim order (lowest queue, then most
  attained GPU·s): the job's nodes are those that need the fewest victims' GPUs (best fit),
  among nodes that fit alike the one whose first victim comes first in that order, and on
  each node victims in that order; a tenant is never a victim once it is at or below its
  guarantee (checked before each victim is taken). Kueue calls this reclaim within a cohort.
* **Tiresias inside the tenant**: then (or alone, for a job above its tenant's guarantee)
  running jobs of its own tenant in a lower queue, as ``decide``'s rule.

No job is a victim of another tenant's job above the guarantees: there the start order (DRF)
decides who gets the GPUs that come free. Victims are those ``victims.may_be_victim`` admits;
inside a tenant the victims are ``decide``'s (``victims.choose_victims`` over the tenant's
candidates: taken in order until the job fits, only those on the nodes it will use kept, and
each but the last dropped again, newest first, when the job fits without it), found by
``decide``'s search (``victim_search.PlainSearch``, one per tenant: the same victims, fewer
candidates read) except under the gain rule, which walks them as ``decide`` does.
Signal, grace and requeue are the driver's, as for any preemption.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress
from operator import add
from typing import NamedTuple

from prioritizer.policy.model import Preemption
from prioritizer.policy.placement import FreeMap
from prioritizer.policy.victim_search import PlainSearch
from prioritizer.policy.victims import Candidate, Pays, Victims, choose_victims
from prioritizer.policy.tenants import Tenancy

RECLAIM, INSIDE = "reclaim", "tiresias inside tenant"


class Holder(NamedTuple):
    """A job holding GPUs, as the victim walk sees it.

    Attributes:
        job_id, tenant: the job and its tenant.
        gpus_per_node, nodes: its shape and the node indices hosting each entry.
        level: its preemption level (Tiresias: its queue; a waiter preempts only higher).
        attained_gpu_s: GPU·s attained (more: taken first within a level).
        victim: whether it may be a victim now (``victims.may_be_victim``); a job being
            released already counts as not held by its tenant.
        releasing: its GPUs are already coming free (preemption or completion in flight).
    """

    job_id: int
    tenant: str
    gpus_per_node: tuple[int, ...]
    nodes: tuple[int, ...]
    level: float
    attained_gpu_s: float
    victim: bool = True
    releasing: bool = False

    @property
    def gpus(self) -> int:
        return sum(self.gpus_per_node)


class Walker(NamedTuple):
    """A pending job in start order: id, tenant, shape, level, eligible now, and whether
    ``tenant_order`` placed it by the guarantee rule (``by_guarantee``; only such a job
    reclaims)."""

    job_id: int
    tenant: str
    gpus_per_node: tuple[int, ...]
    level: float
    eligible: bool = True
    by_guarantee: bool = True


def tenant_preemptions(order: Iterable[Walker], holders: Sequence[Holder], free: Sequence[int],
                       tenancy: Tenancy, inside: bool = True, pays: Pays | None = None
                       ) -> tuple[list[Preemption], dict[int, str]]:
    """The preemptions of one decision (module doc) and, per waiter that preempts, the rule
    and the tenants involved (``reclaim: nlp at 0 of 16 guaranteed GPUs takes back from
    vision at 24 of 16``).

    Args:
        order: the pending jobs in start order (``tenant_order``'s, held-back jobs left out).
        holders: every job holding GPUs.
        free: free GPUs per node index now.
        inside: whether a job may preempt its own tenant's jobs (the policy is preemptive).
        pays: the gain rule (``victims.gain_test``, ``PolicyConfig.preempt_gain``) for
            preemptions inside a tenant: victims that do not repay their cost are given
            back and the waiter preempts no one. A reclaim of guaranteed GPUs is not
            weighed by it.
    """
    soon = FreeMap(free)
    used: dict[str, int] = {}
    mine = _Victims(len(free))
    for h in holders:
        if h.releasing:
            soon.add(h.nodes, h.gpus_per_node)
            continue
        used[h.tenant] = used.get(h.tenant, 0) + h.gpus
        if h.victim and len(h.nodes) == len(h.gpus_per_node):
            mine.add(h)
    result: list[Preemption] = []
    reasons: dict[int, str] = {}
    failed: dict[tuple[str, bool], int] = {}   # smallest need that found no victims
    for w in order:
        if not w.eligible:
            continue
        need = w.gpus_per_node
        nodes = soon.place(need)
        gpus = sum(need)
        if nodes is not None:
            soon.add(nodes, [-g for g in need])
            used[w.tenant] = used.get(w.tenant, 0) + gpus
            continue
        g = tenancy.guarantee(w.tenant)
        within = w.by_guarantee and g > 0 and used.get(w.tenant, 0) + gpus <= g
        own = inside and w.tenant in mine and mine.top(w.tenant) > w.level
        if not (within or own) or failed.get((w.tenant, within), gpus + 1) <= gpus:
            continue
        borrowers = sorted((t for t in mine if t != w.tenant
                            and used.get(t, 0) > tenancy.guarantee(t)),
                           key=lambda t: (tenancy.guarantee(t) - used.get(t, 0), t)) \
            if within else []
        if not borrowers and not own:
            continue
        victims = None
        if borrowers:
            victims = _reclaim(need, borrowers, mine, soon, used, tenancy)
        if victims is None and own:
            victims = mine.choose(w.tenant, need, w.level, soon, plain=pays is not None)
            if victims is not None and pays is not None and not pays(
                    w.job_id, [(v.attained_gpu_s, v.gpus) for v in victims]):
                for v in victims:   # they do not repay their cost: GPUs given back
                    soon.add(v.nodes, [-g for g in v.gpus_per_node])
                continue
        if victims is None:
            failed[w.tenant, within] = min(failed.get((w.tenant, within), gpus), gpus)
            continue
        before = {t: used.get(t, 0) for t in {v.tenant for v in victims}}
        mine.take_all(victims, soon)   # their GPUs are in ``soon`` already
        for v in victims:
            used[v.tenant] -= v.gpus
        nodes = soon.place(need)
        assert nodes is not None   # _reclaim and choose checked it
        soon.add(nodes, [-x for x in need])
        have = used.get(w.tenant, 0)
        used[w.tenant] = have + gpus
        others = [t for t in sorted(before) if t != w.tenant]
        if others:
            reasons[w.job_id] = (f"{RECLAIM}: {w.tenant} at {have} of {g} guaranteed GPUs takes "
                                 "back from " + ", ".join(
                                     f"{t} at {before[t]} of {tenancy.guarantee(t)}"
                                     for t in others))
        else:
            reasons[w.job_id] = f"{INSIDE}: {w.tenant}'s own jobs in a lower queue"
        result.append(Preemption(w.job_id, tuple(v.job_id for v in victims)))
    return result, reasons


class _Victims(dict[str, list[Holder]]):
    """Per tenant its jobs that may be victims, and an index the walk keeps beside them: the
    victim order (highest level, then most attained GPU·s, then job id) made the first time
    the walk asks for it (``ranked``), ``top`` (the tenant's highest level), ``taken``
    (job ids chosen as victims so far) and, per tenant, the GPUs its jobs not taken hold on
    each node (``room``) and its jobs on each node in victim order (``on``). Inside a
    tenant, :meth:`choose` gives the victims of ``victims.choose_victims`` (the rule
    ``decide`` applies) over the tenant's candidates, answered by a
    ``victim_search.PlainSearch`` per tenant (the same victims, fewer candidates read)
    unless ``plain``."""

    def __init__(self, nodes: int) -> None:
        super().__init__()
        self.nodes = nodes
        self._top: dict[str, float] = {}
        self.taken: set[int] = set()
        self._rooms: dict[str, list[int]] = {}
        self._on: dict[str, dict[int, list[Holder]]] = {}
        self._holder: dict[int, Holder] = {}
        self._cands: dict[str, Victims] = {}
        self._as_candidate: dict[int, Candidate] = {}
        self._searches: dict[str, PlainSearch] = {}

    def add(self, h: Holder) -> None:
        self.setdefault(h.tenant, []).append(h)
        self._holder[h.job_id] = h

    def top(self, tenant: str) -> float:
        if tenant not in self._top:
            self._top[tenant] = max(h.level for h in self[tenant])
        return self._top[tenant]

    def ranked(self, tenant: str) -> list[Holder]:
        if tenant not in self._on:
            self[tenant].sort(key=lambda h: (-h.level, -h.attained_gpu_s, h.job_id))
            on: dict[int, list[Holder]] = {}
            for h in self[tenant]:
                for node in h.nodes:
                    on.setdefault(node, []).append(h)
            self._on[tenant] = on
        return self[tenant]

    def choose(self, tenant: str, need: tuple[int, ...], level: float, soon: FreeMap,
               plain: bool = False) -> list[Holder] | None:
        """The victims inside ``tenant`` for a waiter of ``level`` needing ``need``
        (``victims.choose_victims``: taken in victim order until it fits, only those on the
        nodes it uses kept, each but the last dropped again, newest first, if it fits
        without), their GPUs added to ``soon``; None (``soon`` unchanged): no such set."""
        cands = self._cands.get(tenant)
        if cands is None:
            found = [_candidate(h) for h in self[tenant]]
            self._as_candidate.update((c[2], c) for c in found)
            cands = self._cands[tenant] = Victims(found, self.taken)
        if plain:
            chosen = choose_victims(need, soon, level, cands, self.taken)
        else:
            search = self._searches.setdefault(tenant, PlainSearch())
            chosen = search.choose(need, soon, level, cands, self.taken, {})
        return None if chosen is None else [self._holder[c[2]] for c in chosen]

    def room(self, tenant: str) -> list[int]:
        """GPUs per node index of the tenant's jobs not taken."""
        if tenant not in self._rooms:
            room = [0] * self.nodes
            for h in self[tenant]:
                if h.job_id not in self.taken:
                    for node, g in zip(h.nodes, h.gpus_per_node):
                        room[node] += g
            self._rooms[tenant] = room
        return self._rooms[tenant]

    def on(self, node: int, tenants: Iterable[str]) -> Iterator[Holder]:
        """The jobs not taken on ``node``: each tenant's in victim order, tenant by tenant."""
        for t in tenants:
            self.ranked(t)
            for h in self._on[t].get(node, ()):
                if h.job_id not in self.taken:
                    yield h

    def take_all(self, victims: list[Holder], soon: FreeMap) -> None:
        """``victims`` were taken (their GPUs are in ``soon``): every tenant's search is
        told, since GPUs freed on a node may bring its own candidates there within reach."""
        for h in victims:
            self.taken.add(h.job_id)
            room = self._rooms.get(h.tenant)
            if room is not None:
                for node, g in zip(h.nodes, h.gpus_per_node):
                    room[node] -= g
        if self._searches:
            known = self._as_candidate
            chosen = [known.get(h.job_id) or _candidate(h) for h in victims]
            for search in self._searches.values():
                search.taken(chosen, soon)


def _candidate(h: Holder) -> Candidate:
    """A holder as ``victims.Candidate`` (PriorityTier 0: tiers are not looked at across
    tenants)."""
    return (-h.level, -h.attained_gpu_s, h.job_id, h.gpus_per_node, h.nodes, 0)


def _reclaim(need: tuple[int, ...], borrowers: Sequence[str], mine: _Victims, soon: FreeMap,
             used: Mapping[str, int], tenancy: Tenancy) -> list[Holder] | None:
    """Victims that take lent GPUs back for ``need`` from the ``borrowers`` (most borrowing
    first; candidates: their jobs not taken, tenant by tenant in victim order): its nodes
    are chosen first, as ``FreeMap.place`` would place it if every candidate on a node were
    gone (best fit: the nodes needing the fewest victims), among nodes that fit alike the one
    whose first candidate comes first in victim order (:func:`_reclaim_hosts`), then on each
    chosen node candidates in victim order until its entry fits, a tenant's only while it
    still holds more than its guarantee. None (``soon`` unchanged): no such set; else the
    victims, their GPUs added to ``soon``."""
    room = soon.free   # then per node: free if every borrower's candidate there were gone
    for t in borrowers:
        room = list(map(add, room, mine.room(t)))
    hosts = _reclaim_hosts(room, need, mine, borrowers)
    if hosts is None:
        return None
    left = dict(used)
    extra: dict[int, int] = {}
    chosen: list[Holder] = []
    for entry, node in sorted(zip(need, hosts), key=lambda e: -e[0]):
        for h in mine.on(node, borrowers):
            if soon.free[node] + extra.get(node, 0) >= max(entry, 1):
                break
            if h in chosen or left.get(h.tenant, 0) <= tenancy.guarantee(h.tenant):
                continue
            chosen.append(h)
            left[h.tenant] -= h.gpus
            for n, g in zip(h.nodes, h.gpus_per_node):
                extra[n] = extra.get(n, 0) + g
        if soon.free[node] + extra.get(node, 0) < max(entry, 1):
            return None
    if soon.place_with(extra, need) is None:
        return None
    for h in chosen:
        soon.add(h.nodes, h.gpus_per_node)
    return chosen


def _reclaim_hosts(room: list[int], need: tuple[int, ...], mine: _Victims,
                   borrowers: Sequence[str]) -> tuple[int, ...] | None:
    """Nodes for ``need`` (aligned with it) by ``FreeMap.place``'s rule over ``room``: entries
    largest first, each on the unused node with the fewest GPUs that holds it (a lone entry
    of 0 GPUs needs one); among nodes that hold it alike, not the lowest index but the node
    whose first candidate (``_Victims.on``: borrower by borrower, each in victim order)
    comes first, a node without one before all (it needs no victim). So four Q1 jobs of 8
    GPUs on four nodes give up the most attained one, as Tiresias's victim order says.
    None: it fits nowhere."""
    order = {t: i for i, t in enumerate(borrowers)}

    def first(node: int) -> tuple[float, ...]:
        for h in mine.on(node, borrowers):
            return (order[h.tenant], -h.level, -h.attained_gpu_s, h.job_id)
        return (-1.0,)

    room = list(room)   # a node taken is marked -1: no entry fits there again
    result = [0] * len(need)
    for pos in sorted(range(len(need)), key=lambda p: -need[p]):
        want = max(need[pos], 1) if len(need) == 1 else need[pos]
        best = min(filter(want.__le__, room), default=None)
        if best is None:
            return None
        tied = list(compress(range(len(room)), map(best.__eq__, room)))
        node = tied[0] if len(tied) == 1 else min(tied, key=first)
        room[node] = -1
        result[pos] = node
    return tuple(result)
