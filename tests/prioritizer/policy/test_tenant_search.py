"""The victim walk of a shared cluster (``tenant_preempt.tenant_preemptions``) finds the victims
inside a tenant with ``decide``'s search (``victim_search.PlainSearch``, one per tenant),
which reads fewer candidates than the rule's plain walk (``victims.choose_victims``). Every
walk is computed three ways and compared whole (preemptions with their victims in order,
and the reasons): through the search with its per-node index from the first search, through
the search with its resumable one-node walk only, and through the plain walk (taken when
the gain rule is on: a ``pays`` that always says yes). Worlds hold several tenants' jobs
across nodes (gangs, GPU-less components, jobs being released, jobs that may not be
victims), so that one tenant's reclaims free GPUs on nodes where another's candidates sit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import prioritizer.policy.victim_search as search_module
from policy_helpers import draw_placements, index_after
from script_helpers import load_script
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.model import Preemption
from prioritizer.policy.tenant_decide import Owner, decide_tenants
from prioritizer.policy.tenant_preempt import Holder, Walker, tenant_preemptions
from prioritizer.policy.tenants import SHARED, Tenancy, VirtualCluster
from prioritizer.policy.victims import choose_victims

TENANTS = ("a", "b", "c", SHARED)


World = tuple[list[Walker], list[Holder], list[int], Tenancy]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    per_node = draw(st.sampled_from([2, 4, 8]))
    count = draw(st.integers(1, 12))
    free = dict.fromkeys(range(count), per_node)
    holders = []
    for job_id, (nodes, gpus) in enumerate(draw_placements(draw, free)):
        holders.append(Holder(job_id, draw(st.sampled_from(TENANTS)), gpus, nodes,
                              float(draw(st.integers(0, 2))),
                              float(draw(st.integers(0, 20_000))),
                              victim=draw(st.integers(0, 9)) > 0,
                              releasing=draw(st.integers(0, 19)) == 0))
    walkers = []
    for job_id in range(100, 100 + draw(st.integers(1, 40))):
        size = draw(st.integers(1, per_node))
        shape = draw(st.sampled_from([(size,), (per_node, size), (size, size, 1), (size, 0)]))
        walkers.append(Walker(job_id, draw(st.sampled_from(TENANTS)), shape,
                              float(draw(st.integers(0, 2))),
                              eligible=draw(st.integers(0, 9)) > 0,
                              by_guarantee=draw(st.booleans())))
    total = per_node * count
    tenancy = Tenancy(tuple(
        VirtualCluster(name, account=name,
                       guaranteed_gpus=draw(st.integers(0, total // 3)))
        for name in TENANTS[:3]))
    return walkers, holders, [free[n] for n in range(count)], tenancy


def three_ways(world: World) -> list[tuple[list[Preemption], dict[int, str]]]:
    walkers, holders, free, tenancy = world
    out = []
    for searches in (0, 10**9):
        with index_after(searches):
            out.append(tenant_preemptions(walkers, holders, free, tenancy))
    out.append(tenant_preemptions(walkers, holders, free, tenancy,
                                  pays=lambda job_id, chosen: True))
    return out


@settings(max_examples=500, deadline=None)
@given(worlds())
def test_search_chooses_the_plain_walks_victims(world: World) -> None:
    indexed, scanned, plain = three_ways(world)
    assert indexed == plain
    assert scanned == plain


def test_search_is_used_and_agrees_on_a_storm() -> None:
    """A small storm (benchmarks/bench_decide_tenants.py's shape: a full cluster, thousands
    of starving waiters, jobs dealt to 4 tenants guaranteed a quarter each): hundreds of
    waiters preempt inside their tenant, through each tenant's index, as through the walk."""
    bench = load_script("benchmarks/bench_decide.py")
    snap = bench.make_snapshot(1_500, 150)
    tenancy = Tenancy(tuple(VirtualCluster(f"t{i}", account=f"t{i}", guaranteed_gpus=300)
                            for i in range(4)))
    owners = {j.job_id: Owner(f"t{j.job_id % 4}", "u") for j in snap.jobs}
    calls = []
    real, search = search_module._NodeIndex.search, search_module.PlainSearch.choose

    def walk(self, need, soon, level, victims, taken, taken_on):
        return choose_victims(need, soon, level, victims, taken)

    def spy(self, *args):
        result = real(self, *args)
        calls.append(result)
        return result

    search_module._NodeIndex.search = spy
    try:
        with index_after(0):
            indexed = decide_tenants(snap, PolicyConfig(), bench.NOW, tenancy, owners)
    finally:
        search_module._NodeIndex.search = real
    search_module.PlainSearch.choose = walk   # the rule's plain walk in place of the search
    try:
        plain = decide_tenants(snap, PolicyConfig(), bench.NOW, tenancy, owners)
    finally:
        search_module.PlainSearch.choose = search   # type: ignore[method-assign]
    assert len(indexed.decisions.preemptions) > 100
    assert indexed.decisions.preemptions == plain.decisions.preemptions
    assert indexed.preempt_reasons == plain.preempt_reasons
    assert sum(1 for c in calls if c) > 100   # searches that found victims through the index
