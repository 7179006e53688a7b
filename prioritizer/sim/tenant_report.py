"""Per-tenant figures of a replay on a shared cluster (``dlprio simulate --tenants``).

For each tenant (virtual cluster) of a :class:`~prioritizer.sim.engine.SimResult` replayed
with tenants:

* ``avg_jct_s``: the mean JCT of its jobs (s); ``preemptions``: how often its jobs were
  preempted (reclaimed or inside the tenant);
* ``gpu_share``: the GPUs it held, averaged over the replay, over the cluster's GPUs, beside
  ``guarantee_share`` (its ``guaranteed_gpus`` over the cluster's);
* ``hours_below_guarantee_share``: of the hours in which the GPUs its jobs ask (held plus
  pending) reach its guarantee, the share in which it held less than 95 % of what the
  reclaim rule owes it, both averaged over the part of each clock hour (counted from the
  first decision) in which its demand reached its guarantee; hours weigh by that part.
  Owed (:func:`~prioritizer.sim.tenant_sched.owed_gpus`): its guarantee, or the GPUs it holds
  plus its pending jobs that fit in the rest of the guarantee, when those do not fill it (a
  gang larger than what is left is above the guarantee and reclaims nothing). None: its
  demand never reached it. ``demand_at_guarantee_h``: those hours' parts, summed (h);
* ``time_below_guarantee_share``: the plain reading, of the time its demand reaches its
  guarantee the share of instants at which it holds less than 95 % of the guarantee itself;
* ``rho``: Themis's finish-time fairness (Mahajan et al., NSDI'20), the mean JCT of its jobs on
  the shared cluster over their mean JCT when only its jobs are replayed on its guaranteed
  GPUs alone (``floor(guaranteed / G)`` nodes of G GPUs, or one node of ``guaranteed`` GPUs
  when that is below G; jobs that can never fit there are left out of both means);

and over tenants, Jain's fairness index of the ρ values, ``(sum ρ)^2 / (n sum ρ^2)``
(1 when every tenant is slowed alike). Time series come from the scheduler's
:class:`~prioritizer.sim.tenant_sched.TenantSample` at each decision, each value holding
until the next decision (the last until the last job ends).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from prioritizer.policy.tenants import SHARED, Tenancy
from prioritizer.sim.engine import Cluster, SimResult
from prioritizer.sim.traces import Trace

#: a tenant is below its guarantee when it holds less than this share of it
BELOW = 0.95


def alone_cluster(guaranteed_gpus: int, gpus_per_node: int) -> Cluster | None:
    """The cluster a tenant's jobs are replayed alone on for ρ (module doc), or None for a
    tenant without a guarantee."""
    if guaranteed_gpus <= 0:
        return None
    if guaranteed_gpus < gpus_per_node:
        return Cluster(1, guaranteed_gpus)
    return Cluster(guaranteed_gpus // gpus_per_node, gpus_per_node)


def tenant_trace(trace: Trace, tenant_of: Mapping[int, str], name: str) -> Trace:
    """The jobs of ``trace`` that belong to tenant ``name`` (ids and times kept)."""
    return dataclasses.replace(trace, jobs=tuple(j for j in trace.jobs
                                                 if tenant_of.get(j.job_id) == name))


def jain_index(values: list[float]) -> float | None:
    """Jain's fairness index of ``values`` (None: no value)."""
    if not values:
        return None
    square = sum(v * v for v in values)
    return sum(values) ** 2 / (len(values) * square) if square > 0 else 1.0


def tenant_figures(result: SimResult, tenancy: Tenancy,
                   alone: Mapping[str, SimResult]) -> dict[str, Any]:
    """``{"tenants": [...], "jain_index": x}`` (module doc); ``alone``: per tenant the
    replay of its jobs alone on its guaranteed GPUs (a tenant missing gets ``rho`` None)."""
    names = [t.name for t in tenancy.tenants]
    if any(tenant == SHARED for tenant in result.tenant_of.values()):
        names.append(SHARED)
    total = result.total_gpus
    samples = list(result.tenant_samples)
    if samples:   # the last values hold until the last job ends (no decision there)
        end = max((j.end for j in result.jobs), default=samples[-1].time)
        samples.append(dataclasses.replace(samples[-1], time=max(end, samples[-1].time)))
    span = (samples[-1].time - samples[0].time) if len(samples) > 1 else 0.0
    rows: list[dict[str, Any]] = []
    for name in names:
        g = tenancy.guarantee(name)
        jobs = [j for j in result.jobs if result.tenant_of.get(j.job_id) == name]
        held_s = wanted_s = below_s = instant_s = 0.0
        hours: dict[int, list[float]] = {}   # hour -> [s wanted, GPU·s held, GPU·s owed]
        for cur, nxt in zip(samples, samples[1:]):
            dt = nxt.time - cur.time
            held = cur.held.get(name, 0)
            held_s += held * dt
            if g > 0 and cur.demand.get(name, 0) >= g:
                wanted_s += dt
                if held < BELOW * g:
                    instant_s += dt
                owed = cur.owed.get(name, g)
                for hour, part in _hour_parts(cur.time - samples[0].time, dt):
                    row = hours.setdefault(hour, [0.0, 0.0, 0.0])
                    row[0] += part
                    row[1] += held * part
                    row[2] += owed * part
        below_s = sum(w for w, got, owed in hours.values() if got < BELOW * owed)
        rho = None
        other = alone.get(name)
        if other is not None and jobs:
            mine = {j.job_id: j.jct for j in other.jobs}
            both = [j for j in jobs if j.job_id in mine]
            if both:
                rho = (sum(j.jct for j in both) / len(both)) / (
                    sum(mine[j.job_id] for j in both) / len(both))
        rows.append({
            "name": name, "guaranteed_gpus": g, "jobs": len(jobs),
            "avg_jct_s": sum(j.jct for j in jobs) / len(jobs) if jobs else None,
            "preemptions": sum(j.preemptions for j in jobs),
            "gpu_share": held_s / span / total if span > 0 else 0.0,
            "guarantee_share": g / total,
            "hours_below_guarantee_share": below_s / wanted_s if wanted_s > 0 else None,
            "time_below_guarantee_share": instant_s / wanted_s if wanted_s > 0 else None,
            "demand_at_guarantee_h": wanted_s / 3600.0,
            "rho": rho})
    return {"tenants": rows,
            "jain_index": jain_index([r["rho"] for r in rows if r["rho"] is not None])}


def _hour_parts(start: float, length: float) -> list[tuple[int, float]]:
    """The span ``[start, start + length)`` (s from the first decision) cut at whole hours:
    (hour index, seconds in it) per hour it touches."""
    out = []
    end = start + length
    while length > 0 and start < end:
        hour = int(start // 3600.0)
        cut = min(end, (hour + 1) * 3600.0)
        out.append((hour, cut - start))
        start = cut
    return out


def format_tenant_table(policy: str, figures: Mapping[str, Any], *,
                        styled: bool = False) -> str:
    """The per-tenant figures: a title line with Jain's index of rho, then one row per
    tenant laid out by :mod:`prioritizer.tables` (``styled``: for a terminal; otherwise plain,
    columns two spaces apart, numbers without separators), ending in a newline. Units in the
    headers (GPUs, s; shares as fractions of the cluster's GPUs, hours below as a percent)."""
    def num(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    head = ["tenant", "guaranteed GPUs", "jobs", "avg JCT s", "preempt", "GPU share",
            "guarantee share", "hours below 95%", "rho"]
    rows = [[r["name"], str(r["guaranteed_gpus"]), str(r["jobs"]), num(r["avg_jct_s"], ".1f"),
             str(r["preemptions"]), f"{r['gpu_share']:.3f}", f"{r['guarantee_share']:.3f}",
             num(r["hours_below_guarantee_share"], ".2%"), num(r["rho"], ".3f")]
            for r in figures["tenants"]]
    from prioritizer import tables   # rich: imported only when a table is printed
    title = f"tenants under {policy}: Jain's index of rho {num(figures['jain_index'], '.3f')}\n"
    return title + tables.render(head, rows, head[1:], styled=styled)


def write_tenant_plot(result: SimResult, tenancy: Tenancy, path: str) -> None:
    """GPUs held per tenant over time (hours), each with its guarantee as a dashed line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result.tenant_samples
    fig, ax = plt.subplots(figsize=(10, 4.5))
    hours = [s.time / 3600.0 for s in samples]
    for i, t in enumerate(tenancy.tenants):
        color = f"C{i % 10}"
        ax.step(hours, [s.held.get(t.name, 0) for s in samples], where="post", color=color,
                label=f"{t.name} held", linewidth=0.8)
        ax.axhline(t.guaranteed_gpus, color=color, linestyle="--", linewidth=0.8)
    ax.set_xlabel("hours")
    ax.set_ylabel("GPUs held (dashed: guarantee)")
    ax.set_title(f"GPUs per tenant, {result.policy}")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
