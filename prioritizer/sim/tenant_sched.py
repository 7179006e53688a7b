"""The simulator's scheduler on a shared cluster (``dlprio simulate --tenants``).

:class:`TenantScheduler` keeps the incremental scheduler's job records and its Tiresias order
(``policy.fast.incremental.Scheduler``: queue states, promotions, the order inside each tenant) and
replaces its two answers by the tenant rules: the start order is
:func:`~prioritizer.policy.tenants.tenant_order` over the Tiresias order, with the waiters whose
victims are being checkpointed first (:func:`~prioritizer.policy.tenant_decide.waiters_first`,
as the daemon writes it), the preemptions are
:func:`~prioritizer.policy.tenant_preempt.tenant_preemptions` (the same functions the daemon's
``decide_tenants`` calls). It walks every pending job at each decision (the reference rules,
none of the incremental victim search's shortcuts): a replay with tenants costs more than
one without (docs/simulator.md, "Tenants"). It also counts, per tenant, the GPUs held and
asked at each decision (:class:`TenantSample`), which the tenant report reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.victims import gain_test, may_be_victim
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.fast.incremental import Scheduler, Step
from prioritizer.policy.fast.records import Tracked
from prioritizer.policy.model import Preemption
from prioritizer.policy.placement import Planned, plan_starts
from prioritizer.policy.tenant_decide import waiters_first
from prioritizer.policy.tenant_preempt import Holder, Walker, tenant_preemptions
from prioritizer.policy.tenants import (GUARANTEE, Holdings, Resources, Tenancy, TenantOrder,
                                        Waiting, decay, tenant_order)


@dataclass(frozen=True)
class TenantSample:
    """At ``time`` (s): per tenant the GPUs its jobs hold (``held``, checkpointing ones
    included), ask in all (``demand``: held plus pending, waiting out a requeue delay
    included) and are owed by the reclaim rule (``owed``, tenants with a guarantee only:
    :func:`owed_gpus`)."""

    time: float
    held: dict[str, int]
    demand: dict[str, int]
    owed: dict[str, int] = field(default_factory=dict)


def owed_gpus(guaranteed: int, held: int, pending: Mapping[int, int]) -> int:
    """The GPUs a tenant is owed: its guarantee, or less when its pending jobs cannot fill
    it. ``held`` plus the GPUs of pending jobs that fit in what is left of the guarantee
    (``pending``: job GPUs -> number of such jobs), largest first (the most that fits when
    every size divides the larger ones, as powers of two do), at most ``guaranteed``. A job
    larger than what is left is above the guarantee: the reclaim rule takes nothing back
    for it (:mod:`prioritizer.policy.tenant_preempt`).

    >>> owed_gpus(16, 8, {8: 1, 4: 3})   # 8 held, one 8-GPU job fits
    16
    >>> owed_gpus(16, 12, {8: 2})        # no 8-GPU job fits in the 4 left
    12
    """
    room = guaranteed - held
    if room <= 0:
        return guaranteed
    for gpus in sorted(pending, reverse=True):
        if 0 < gpus <= room:
            room -= gpus * min(pending[gpus], room // gpus)
    return guaranteed - room


class TenantScheduler(Scheduler):
    """``Scheduler`` with the tenant rules (module doc). ``owners``: job id -> (tenant,
    user) for every job of the trace."""

    def __init__(self, config: PolicyConfig, node_totals: list[int], node_names: list[str],
                 distribution: GittinsDistribution | None, tenancy: Tenancy,
                 owners: dict[int, tuple[str, str]]) -> None:
        super().__init__(config, node_totals, node_names, distribution)
        self.tenancy, self.owners = tenancy, owners
        self.totals3: Resources = (float(sum(node_totals)), 0.0, 0.0)
        self.holdings = Holdings()                 # running, not checkpointing
        self.held: dict[str, int] = {}             # running and checkpointing
        self.asked: dict[str, int] = {}            # pending
        self.sizes: dict[str, dict[int, int]] = {}  # pending: job GPUs -> jobs
        self.usage: dict[str, Resources] = {}      # decayed GPU·s (with a half-life)
        self.usage_at = 0.0
        self.samples: list[TenantSample] = []
        #: the tenant order of this decision, until a job changes state
        self.merged: TenantOrder | None = None
        #: waiter -> its victims, while GPUs are being freed for it (``waiters_first``)
        self.awaiting: dict[int, tuple[int, ...]] = {}

    # -- counters ------------------------------------------------------------------------
    def _move(self, rec: Tracked, held: int, asked: int, running: int) -> None:
        self.merged = None
        tenant, user = self.owners[rec.job_id]
        self.held[tenant] = self.held.get(tenant, 0) + held * rec.gpus
        self.asked[tenant] = self.asked.get(tenant, 0) + asked * rec.gpus
        if asked:
            sizes = self.sizes.setdefault(tenant, {})
            sizes[rec.gpus] = sizes.get(rec.gpus, 0) + asked
        if running:
            self.holdings.add(tenant, user, rec.gpus, sign=running)

    def add(self, job_id: int, shape: tuple[int, ...], submit: float,
            duration_s: float | None = None, preemptible: bool = True,
            preempts: bool = True) -> Tracked:
        rec = super().add(job_id, shape, submit, duration_s, preemptible, preempts)
        self._move(rec, 0, 1, 0)
        return rec

    def _start_planned(self, p: Planned, now: float) -> None:
        super()._start_planned(p, now)
        self._move(self.jobs[p.job_id], 1, -1, 1)

    def signal(self, job_id: int, now: float) -> None:
        rec = self.jobs[job_id]
        if rec.phase == "running":
            self._move(rec, 0, 0, -1)
        super().signal(job_id, now)

    def requeue(self, job_id: int, now: float, eligible: float | None) -> None:
        rec = self.jobs[job_id]
        self._move(rec, -1, 1, -1 if rec.phase == "running" else 0)
        super().requeue(job_id, now, eligible)

    def finish(self, job_id: int, now: float) -> None:
        rec = self.jobs[job_id]
        self._move(rec, -1, 0, -1 if rec.phase == "running" else 0)
        super().finish(job_id, now)

    # -- the decision --------------------------------------------------------------------
    def _merged(self) -> TenantOrder:
        if self.merged is not None:
            return self.merged
        owners, jobs = self.owners, self.jobs
        waiting = []
        for _, job_id in self.order:
            tenant, user = owners[job_id]
            waiting.append(Waiting(job_id, tenant, user, jobs[job_id].gpus))
        half = self.tenancy.fair_share_half_life_s
        self.merged = tenant_order(waiting, self.tenancy, self.holdings, self.totals3,
                                   self.usage if half > 0 else None)
        return self.merged

    def decide(self, now: float, victims: bool = True, search: bool = True) -> Step:
        """Queue states as ``Scheduler.decide``; preemptions by the tenant rules."""
        half = self.tenancy.fair_share_half_life_s
        if half > 0 and now > self.usage_at:
            for tenant in set(self.usage) | set(self.holdings.tenants):
                row = self.holdings.tenants.get(tenant, [0.0, 0.0, 0.0])
                self.usage[tenant] = decay(self.usage.get(tenant, (0.0, 0.0, 0.0)), row,
                                           now - self.usage_at, half)
            self.usage_at = now
        step = super().decide(now, victims=False, search=False)
        self.merged = None   # the Tiresias order may have changed
        if search and self.config.preemption and self.order and self.holding:
            step.preemptions = tuple(self._preemptions_by_tenant(now, victims))
            if victims:
                self.awaiting.update((p.waiter, p.victims) for p in step.preemptions)
        return step

    def _preemptions_by_tenant(self, now: float, victims: bool) -> list[Preemption]:
        merged = self._merged()
        if not self._blocked(merged):
            return []
        min_run, owners = self.config.min_run_s, self.owners
        holders = []
        for rec in self.holding.values():
            gpu_s, _, _ = rec.service(now)
            grace = rec.phase == "grace"
            holders.append(Holder(rec.job_id, owners[rec.job_id][0], rec.shape, rec.nodes,
                                  self._level_of(rec, now), gpu_s,
                                  may_be_victim(rec.preemptible, grace, rec.guard, now,
                                                min_run), grace))
        jobs = self.jobs
        why = merged.why
        walkers = [Walker(job_id, owners[job_id][0], jobs[job_id].shape, jobs[job_id].level,
                          by_guarantee=why[job_id][0] == GUARANTEE)   # as decide_tenants walks
                   for job_id in waiters_first(merged.order, self.awaiting)]
        pays = gain_test(self.config, self.policy.distribution,
                         lambda job_id: (jobs[job_id].closed_gpu_s, jobs[job_id].gpus))
        found, _ = tenant_preemptions(walkers, holders, self.free.free, self.tenancy,
                                      inside=self.policy.preemptive, pays=pays)
        return found[:1] if not victims else found

    def _blocked(self, merged: TenantOrder) -> bool:
        """Whether some job of ``merged`` neither starts nor reserves in the start model
        (else no preemption is due: the walk would only place them all)."""
        soon = self.free.copy()
        for job_id in self.grace:
            rec = self.jobs[job_id]
            soon.add(rec.nodes, rec.shape)
        jobs = self.jobs
        for job_id in merged.order:
            need = jobs[job_id].shape
            nodes = soon.place(need)
            if nodes is None:
                return True
            soon.add(nodes, [-g for g in need])
        return False

    def _level_of(self, rec: Tracked, now: float) -> float:
        if self.queue_levels:
            return float(rec.queue or 0)
        view = rec.view(now)
        state = rec.state
        assert state is not None   # every job holding GPUs was decided once
        return self.policy.level(view, state)

    def plan_starts(self, now: float) -> list[Planned]:
        """Start in the tenant order wherever jobs fit (held-back jobs never start)."""
        if self.order:
            merged = self._merged()
            free = self.free.copy()
            soon = None
            if self.grace:
                soon = free.copy()
                for job_id in self.grace:
                    rec = self.jobs[job_id]
                    soon.add(rec.nodes, rec.shape)
            jobs = self.jobs
            order = waiters_first(merged.order, self.awaiting)
            planned = plan_starts(((j, jobs[j].shape) for j in order), free, soon,
                                  self.policy.strict, complete=False).starts
            for p in planned:
                self.free.add(p.nodes, [-g for g in jobs[p.job_id].shape])
                self._start_planned(p, now)
        else:
            planned = []
        grace = self.grace
        self.awaiting = {w: v for w, v in self.awaiting.items()   # until its victims are freed
                         if self.jobs[w].phase == "pending" and any(j in grace for j in v)}
        held = self.held
        self.samples.append(TenantSample(now, dict(held), {
            t: held.get(t, 0) + self.asked.get(t, 0) for t in set(held) | set(self.asked)}, {
            t.name: owed_gpus(t.guaranteed_gpus, held.get(t.name, 0),
                              self.sizes.get(t.name, {}))
            for t in self.tenancy.tenants if t.guaranteed_gpus > 0}))
        return planned

