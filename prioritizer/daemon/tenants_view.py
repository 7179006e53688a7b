"""The daemon's side of the tenants (``virtual_clusters``): who owns a job, the decayed usage
kept in the ledger (the checks that need the cluster are
:func:`prioritizer.daemon.names_check.preflight`'s), and the per-tenant rows that
``dlprio status``, ``dlqueue`` and the metrics show.

The rules are :mod:`prioritizer.policy.tenants` (pure); this module reads the observation and
the ledger. A job's tenant comes from what squeue reports for it (its account and
partition), never from anything else the user sets. Units: GPUs; usage in GPU·s.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.observe import Observation
from prioritizer.policy.model import JobPhase
from prioritizer.policy.tenant_decide import Owner, TenantDecisions, holdings_of
from prioritizer.policy.tenants import (SHARED, Resources, Tenancy, decay,
                                        fair_share, reason_text)
from prioritizer.daemon.snapshot import PublicTenant

#: the ledger meta keys of the last cycle's tenant rows (``dlprio status``) and, per job, the
#: rule that placed or preempted it (``dlprio explain``)
ROWS_KEY, WHY_KEY = "tenant_rows", "tenant_why"
#: the ledger meta key of the decayed usage: ``{"at": epoch s, "usage": {tenant: [GPU·s,
#: CPU·s, MiB·s]}}``
USAGE_KEY = "tenant_usage"


def owners(tenancy: Tenancy, obs: Observation) -> dict[int, Owner]:
    """Each managed unit's tenant (from its account and partition) and user."""
    return {job_id: Owner(tenancy.tenant_of(u.account, u.partition.split(",")[0], None), u.user)
            for job_id, u in obs.units.items()}


def advance_usage(ledger: Ledger, tenancy: Tenancy, obs: Observation,
                  now: float) -> dict[str, Resources] | None:
    """The tenants' decayed usage at ``now`` (None without a half-life): the ledger's, decayed
    since it was written, plus what each tenant holds now over that time; written back."""
    half = tenancy.fair_share_half_life_s
    if half <= 0:
        return None
    raw = ledger.meta(USAGE_KEY)
    stored: dict[str, Any] = json.loads(raw) if raw else {"at": now, "usage": {}}
    held = holdings_of(obs.snapshot, owners(tenancy, obs)).tenants
    elapsed = max(now - float(stored["at"]), 0.0)
    names = set(stored["usage"]) | set(held)
    usage = {t: decay(stored["usage"].get(t, (0.0, 0.0, 0.0)), held.get(t, (0.0, 0.0, 0.0)),
                      elapsed, half) for t in names}
    ledger.set_meta(USAGE_KEY, json.dumps({"at": now, "usage": usage}))
    return usage


#: One tenant as ``dlprio status`` and ``dlqueue`` show it: the snapshot's record of it.
TenantRow = PublicTenant


def rows(tenancy: Tenancy, obs: Observation,
         usage: dict[str, Resources] | None = None) -> list[TenantRow]:
    """The per-tenant rows of one observation, in config order, then :data:`SHARED` if any
    job of no tenant is managed; ``usage``: the decayed usage the decision used (with a
    half-life), counted in the fair share as there. A pending array record waits with every
    element it stands for (:attr:`prioritizer.daemon.observe.Unit.tasks`)."""
    own = owners(tenancy, obs)
    used: dict[str, int] = {}
    waiting: dict[str, int] = {}
    for job in obs.snapshot.jobs:
        tenant = own.get(job.job_id, Owner()).tenant
        if job.phase is JobPhase.RUNNING:
            used[tenant] = used.get(tenant, 0) + job.num_gpus
        else:
            unit = obs.units.get(job.job_id)
            waiting[tenant] = waiting.get(tenant, 0) + job.num_gpus * (unit.tasks if unit else 1)
    total = float(sum(n.gpus_total for n in obs.snapshot.nodes))
    names = [t.name for t in tenancy.tenants]
    if SHARED in used or SHARED in waiting:
        names.append(SHARED)
    out = []
    for name in names:
        g = tenancy.guarantee(name)
        u = used.get(name, 0)
        share = fair_share((u, 0.0, 0.0), None if usage is None else usage.get(name),
                           (total, 0.0, 0.0), g, tenancy.fair_share_half_life_s) if total else 0.0
        out.append(TenantRow(name, g, u, max(u - g, 0), waiting.get(name, 0), share))
    return out


def record(ledger: Ledger, table: list[TenantRow], found: TenantDecisions) -> None:
    """Keep the last cycle's rows and rules in the ledger for ``dlprio status``/``explain``:
    per pending job its ``TenantOrder.why`` entry; per waiter that preempts its rule; per
    victim the waiter it makes room for."""
    ledger.set_meta(ROWS_KEY, json.dumps([dataclasses.astuple(r) for r in table]))
    why: dict[str, Any] = {str(k): list(v) for k, v in found.tenant_order.why.items()}
    for waiter, text in found.preempt_reasons.items():
        why[str(waiter)] = ["preempts", text]
    for p in found.decisions.preemptions:
        for victim in p.victims:
            why[str(victim)] = ["victim", f"its GPUs go to job {p.waiter} "
                                f"({found.preempt_reasons.get(p.waiter, '')})"]
    ledger.set_meta(WHY_KEY, json.dumps(why, separators=(",", ":")))


def recorded_rows(ledger: Ledger) -> list[TenantRow]:
    """The rows the last cycle kept (empty: no tenants)."""
    raw = ledger.meta(ROWS_KEY)
    return [TenantRow(*r) for r in json.loads(raw)] if raw else []


def recorded_reason(ledger: Ledger, job_id: int) -> str | None:
    """The tenant rule the last cycle applied to ``job_id``, in words (None: none kept)."""
    raw = ledger.meta(WHY_KEY)
    why = json.loads(raw).get(str(job_id)) if raw else None
    if why is None:
        return None
    if why[0] in ("preempts", "victim"):
        return str(why[1])
    return reason_text(why)


TENANT_HEADERS = ("TENANT", "GUARANTEED", "USED", "BORROWED", "WAITING", "FAIR_SHARE")


def tenant_cells(table: list[TenantRow]) -> list[list[str]]:
    """:data:`TENANT_HEADERS` cells of ``table`` (GPUs; the weighted share to 3 places)."""
    return [[r.name, str(r.guaranteed), str(r.used), str(r.borrowed), str(r.waiting),
             f"{r.fair_share:.3f}"] for r in table]
