"""Benchmark: tenants (virtual clusters) on the Philly dense window (127 × 8), costs on.

Users are sorted by name (as text) and cut into 4 groups of (nearly) equal GPU·s demanded
(GPUs × duration summed over their jobs), a rule that does not look at any outcome; each
group is a virtual cluster whose ``guaranteed_gpus`` is its share of the demand in whole nodes
(largest remainders, 127 nodes in all). The trace is replayed under pure 2D-LAS
(``tiresias-las``, no tenants) and under the tenant rules (``tiresias-las`` inside each
tenant), and each tenant's jobs alone on its guaranteed nodes (ρ's denominator). Prints the
figures of the targets in docs/simulator.md, "Tenants"; asserts nothing.
``--write-tenants FILE.yaml`` also writes the virtual clusters as ``dlprio simulate
--tenants`` reads them; ``--half-life S`` sets ``fair_share_half_life_s``.

Run: ``.venv/bin/python benchmarks/bench_tenants.py [--half-life 0] [--write-tenants F]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prioritizer.policy.config import PolicyConfig  # noqa: E402
from prioritizer.policy.tenants import Tenancy, VirtualCluster  # noqa: E402
from prioritizer.sim.engine import Cluster, simulate, trace_tenant  # noqa: E402
from prioritizer.sim.tenant_report import (alone_cluster, format_tenant_table,  # noqa: E402
                                           tenant_figures, tenant_trace)
from prioritizer.sim.traces import Trace, read_trace  # noqa: E402

TRACE = ROOT / "data" / "traces" / "philly-15k" / "philly_data_training.csv"
SINCE, NODES, GPN, GROUPS = 4147200.0, 127, 8, 4


def groups_by_demand(trace: Trace, groups: int) -> list[list[str]]:
    """Users sorted by name, cut into ``groups`` runs of nearly equal GPU·s demanded."""
    demand: dict[str, float] = {}
    for job in trace.jobs:
        demand[job.user] = demand.get(job.user, 0.0) + job.num_gpus * job.duration
    total = sum(demand.values())
    out: list[list[str]] = [[] for _ in range(groups)]
    acc = 0.0
    for user in sorted(demand):
        k = min(int(acc / total * groups), groups - 1)
        out[k].append(user)
        acc += demand[user]
    return out


def tenancy_for(trace: Trace, half_life: float) -> Tenancy:
    users = groups_by_demand(trace, GROUPS)
    demand = []
    for group in users:
        members = set(group)
        demand.append(sum(j.num_gpus * j.duration for j in trace.jobs if j.user in members))
    total = sum(demand)
    exact = [d / total * NODES for d in demand]
    nodes = [int(x) for x in exact]
    for i in sorted(range(GROUPS), key=lambda i: -(exact[i] - nodes[i]))[:NODES - sum(nodes)]:
        nodes[i] += 1
    return Tenancy(tuple(VirtualCluster(f"vc{i}", users=tuple(g), guaranteed_gpus=n * GPN)
                         for i, (g, n) in enumerate(zip(users, nodes))), half_life)


def split_below(result: object, tenancy: Tenancy) -> dict[str, tuple[float, float]]:
    """Per tenant, of its time with demand >= guarantee: the share below 95 % of it while
    some other tenant held more than its own guarantee, and while none did."""
    samples = result.tenant_samples  # type: ignore[attr-defined]
    out = {}
    for t in tenancy.tenants:
        g, want, both, lone = t.guaranteed_gpus, 0.0, 0.0, 0.0
        for cur, nxt in zip(samples, samples[1:]):
            dt = nxt.time - cur.time
            if cur.demand.get(t.name, 0) < g:
                continue
            want += dt
            if cur.held.get(t.name, 0) < 0.95 * g:
                lent = any(cur.held.get(o.name, 0) > o.guaranteed_gpus
                           for o in tenancy.tenants if o.name != t.name)
                if lent:
                    both += dt
                else:
                    lone += dt
        out[t.name] = (both / want if want else 0.0, lone / want if want else 0.0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half-life", type=float, default=0.0)
    parser.add_argument("--write-tenants", metavar="FILE.yaml")
    args = parser.parse_args()
    trace = read_trace(TRACE, since=SINCE)
    tenancy = tenancy_for(trace, args.half_life)
    if args.write_tenants:
        Path(args.write_tenants).write_text(yaml.safe_dump({
            "fair_share_half_life_s": args.half_life,
            "virtual_clusters": {t.name: {"guaranteed_gpus": t.guaranteed_gpus,
                                          "users": list(t.users)} for t in tenancy.tenants}},
            sort_keys=False))
    config = PolicyConfig()
    cluster = Cluster(NODES, GPN)
    started = time.perf_counter()
    pure = simulate(trace, cluster, config)
    pure_s = time.perf_counter() - started
    started = time.perf_counter()
    shared = simulate(trace, cluster, config, tenancy=tenancy)
    shared_s = time.perf_counter() - started
    alone = {}
    for t in tenancy.tenants:
        small = alone_cluster(t.guaranteed_gpus, GPN)
        if small is not None:
            alone[t.name] = simulate(tenant_trace(trace, shared.tenant_of, t.name), small, config)
    figures = tenant_figures(shared, tenancy, alone)
    print(format_tenant_table("tiresias-las with tenants", figures))
    avg = sum(j.jct for j in shared.jobs) / len(shared.jobs)
    pure_avg = sum(j.jct for j in pure.jobs) / len(pure.jobs)
    print(f"all jobs avg JCT: pure 2D-LAS {pure_avg:,.0f} s, with tenants {avg:,.0f} s "
          f"({avg / pure_avg - 1:+.1%}; target within 5 %)")
    print(f"replay wall: pure {pure_s:.1f} s, with tenants {shared_s:.1f} s")
    worst = 0.0
    for row in figures["tenants"]:
        jobs = [j for j in pure.jobs if trace_tenant(tenancy, trace.jobs[j.job_id]) == row["name"]]
        if not jobs or row["avg_jct_s"] is None:
            continue
        base = sum(j.jct for j in jobs) / len(jobs)
        worst = max(worst, row["avg_jct_s"] / base - 1)
        print(f"  {row['name']}: avg JCT {row['avg_jct_s']:,.0f} s vs pure 2D-LAS {base:,.0f} s "
              f"({row['avg_jct_s'] / base - 1:+.1%}); preemptions {row['preemptions']:,} vs "
              f"{sum(j.preemptions for j in jobs):,}")
    print("instants below 95 % of the guarantee while demand >= guarantee, split by whether "
          "another tenant held more than its guarantee then (reclaimable) or not "
          "(every GPU beyond the guarantees idle or in fragments):")
    for name, (both, lone) in split_below(shared, tenancy).items():
        print(f"  {name}: {both:.2%} while another borrowed, {lone:.2%} while none did")
    rhos = [r["rho"] for r in figures["tenants"] if r["rho"] is not None]
    below = [r["hours_below_guarantee_share"] for r in figures["tenants"]
             if r["hours_below_guarantee_share"] is not None]
    print("hours below 95 % of what the reclaim rule owes (hourly averages) / instants below "
          "95 % of the guarantee itself, of the time demand >= guarantee:")
    for r in figures["tenants"]:
        if r["hours_below_guarantee_share"] is not None:
            print(f"  {r['name']}: {r['hours_below_guarantee_share']:.2%} of "
                  f"{r['demand_at_guarantee_h']:,.0f} h / {r['time_below_guarantee_share']:.2%}")
    print(f"targets: max below-95% share {max(below, default=0):.2%} (<= 1 %), "
          f"max rho {max(rhos, default=0):.3f} (<= 1.2), worst tenant vs pure 2D-LAS "
          f"{worst:+.1%} (<= +10 %), all jobs {avg / pure_avg - 1:+.1%} (<= +5 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
