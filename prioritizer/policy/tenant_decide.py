"""``decide`` on a shared cluster: Tiresias inside each tenant, the tenant rules across them.

The reference path of the tenant rules (:mod:`prioritizer.policy.tenants`,
:mod:`prioritizer.policy.tenant_preempt`), used by the daemon: ``decide`` gives the queue
states and the Tiresias order (its own preemptions off), :func:`tenant_order` merges the
tenants' jobs that may start now into one start order, :func:`tenant_preemptions` picks the
victims. The waiters GPUs are being freed for come first in the order (:func:`waiters_first`),
in the victim walk too (so a waiter is not blocked by the jobs it goes ahead of into a second
victim),
jobs waiting out a requeue's BeginTime follow the others in Tiresias order, and jobs held
back by ``max_gpus`` or a user limit come last (on a cluster Slurm's QOS
``GrpTRES`` is the hard cap; docs/admins.md). Partition ``PriorityTier`` is not looked at
across tenants, and the victims are placed over every node (the guarantees are the
cluster's; ``decide`` alone places by node pool, ``policy.pools``). Pure, as ``decide``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import POLICIES, decide, run_guard
from prioritizer.policy.victims import gain_test, may_be_victim
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import Decisions, JobPhase, Preemption, Snapshot
from prioritizer.policy.tenant_preempt import Holder, Walker, tenant_preemptions
from prioritizer.policy.tenants import (GUARANTEE, SHARED, Holdings, Resources, Tenancy,
                                        TenantOrder, Waiting, tenant_order)


@dataclass(frozen=True)
class Owner:
    """What the tenant rules know of a job beyond its ``JobView``: its tenant, its user and
    the CPUs and MiB of memory it holds or asks (0: not counted in the dominant share)."""

    tenant: str = SHARED
    user: str = ""
    cpus: float = 0.0
    mem_mib: float = 0.0


#: the owner of a job ``owners`` does not name
NOBODY = Owner()


@dataclass(frozen=True)
class TenantDecisions:
    """``decisions`` (order with held-back jobs last, preemptions by the tenant rules),
    ``tenant_order`` (the merge, with a reason per pending job) and ``preempt_reasons``
    (the rule per waiter that preempts)."""

    decisions: Decisions
    tenant_order: TenantOrder
    preempt_reasons: dict[int, str]


def holdings_of(snapshot: Snapshot, owners: Mapping[int, Owner]) -> Holdings:
    """What each tenant holds: its RUNNING jobs not releasing their GPUs."""
    out = Holdings()
    for job in snapshot.jobs:
        if job.phase is JobPhase.RUNNING and not job.releasing:
            o = owners.get(job.job_id, NOBODY)
            out.add(o.tenant, o.user, job.num_gpus, o.cpus, o.mem_mib)
    return out


def waiters_first(order: Sequence[int], waiters: Collection[int]) -> tuple[int, ...]:
    """``order`` with the ``waiters`` in it moved to its head, each group in its own order.

    The GPUs a preemption frees (reclaim, or Tiresias inside the waiter's tenant) are the
    waiter's: Slurm starts the first job in its order that fits where they come free, and a
    job ahead of the waiter that may not preempt for itself (a job of no tenant, one placed
    by share) would take them, to be preempted in turn or to make the waiter preempt again.
    """
    if not waiters:
        return tuple(order)
    lead = set(waiters)
    return (tuple(j for j in order if j in lead) + tuple(j for j in order if j not in lead))


def decide_tenants(snapshot: Snapshot, config: PolicyConfig, now: float, tenancy: Tenancy,
                   owners: Mapping[int, Owner], *, totals: Resources | None = None,
                   usage: Mapping[str, Sequence[float]] | None = None,
                   distribution: GittinsDistribution | None = None,
                   awaiting: Collection[int] = ()) -> TenantDecisions:
    """One decision on a shared cluster (module doc).

    Args:
        owners: per job id its :class:`Owner` (a job not in it: :data:`SHARED`).
        totals: the cluster's GPUs, CPUs, MiB (default: the snapshot's GPUs, no CPU or
            memory counted).
        usage: decayed usage per tenant (resource-seconds) when the tenancy has a half-life.
        awaiting: pending jobs whose victims' GPUs are being freed for them (preemptions
            of earlier decisions still in flight): with this decision's waiters they come
            first in the order (:func:`waiters_first`).
    """
    inner = decide(snapshot, dataclasses.replace(config, preemption=False), now,
                   distribution=distribution)
    if totals is None:
        totals = (float(sum(n.gpus_total for n in snapshot.nodes)), 0.0, 0.0)
    jobs = {job.job_id: job for job in snapshot.jobs}
    rules = POLICIES[config.policy](config, distribution)
    waiting = []
    later: list[int] = []   # waiting out a requeue's BeginTime: after the others
    for job_id in inner.order:
        job = jobs[job_id]
        if job.eligible_time is not None and job.eligible_time > now:
            later.append(job_id)
            continue
        o = owners.get(job_id, NOBODY)
        waiting.append(Waiting(job_id, o.tenant, o.user, job.num_gpus, o.cpus, o.mem_mib))
    merged = tenant_order(waiting, tenancy, holdings_of(snapshot, owners), totals, usage)
    # the walk sees the order Slurm will: a waiter GPUs are being freed for ahead of the jobs
    # that would take them, so it is not blocked by them into preempting a second time
    walk = waiters_first(merged.order, awaiting)
    preemptions: list[Preemption] = []
    reasons: dict[int, str] = {}
    if config.preemption and merged.order:
        why, states, level = merged.why, inner.states, rules.level
        walkers = [Walker(job_id, why[job_id][1], jobs[job_id].gpus_per_node,
                          level(jobs[job_id], states[job_id]), True,
                          why[job_id][0] == GUARANTEE)
                   for job_id in walk]
        index = {node.name: i for i, node in enumerate(snapshot.nodes)}
        holders = []
        for job in snapshot.jobs:
            if job.phase is not JobPhase.RUNNING:
                continue
            try:
                placed = tuple(map(index.__getitem__, job.nodes))
            except KeyError as exc:
                raise ValueError(f"job {job.job_id}: node {exc.args[0]} not in snapshot") from None
            holders.append(Holder(job.job_id, owners.get(job.job_id, NOBODY).tenant,
                                  job.gpus_per_node, placed,
                                  rules.level(job, inner.states[job.job_id]),
                                  job.attained_gpu_s,
                                  may_be_victim(job.preemptible, job.releasing,
                                                run_guard(job, config, now),
                                                now, config.min_run_s),
                                  job.releasing))
        pays = gain_test(config, distribution,
                         lambda job_id: (jobs[job_id].attained_gpu_s, jobs[job_id].num_gpus))
        preemptions, reasons = tenant_preemptions(
            walkers, holders,
            [n.gpus_free for n in snapshot.nodes], tenancy, inside=rules.preemptive,
            pays=pays)
    first = {p.waiter for p in preemptions} | set(awaiting)
    decisions = dataclasses.replace(
        inner, order=waiters_first(merged.order, first) + tuple(later) + merged.held,
        preemptions=tuple(preemptions))
    return TenantDecisions(decisions, merged, reasons)
