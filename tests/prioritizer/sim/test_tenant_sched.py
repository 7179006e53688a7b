"""The simulator's tenant scheduler (``prioritizer.sim.tenant_sched``) decides as the daemon's
reference ``decide_tenants`` does: hypothesis replays random small traces on random clusters
with random tenants, and at every decision the preemptions (waiters and victims) and the
start order of the jobs that may start now are compared with ``decide_tenants`` on the
scheduler's own snapshot."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.tenant_decide import Owner, decide_tenants
from prioritizer.policy.tenants import Tenancy, VirtualCluster
from prioritizer.sim import engine
from prioritizer.sim.engine import Cluster, Simulator
from prioritizer.sim.tenant_sched import TenantScheduler
from prioritizer.sim.traces import Trace, TraceJob

#: the duration distribution of the gain rule (``preempt_gain``), in GPU·s
DIST = GittinsDistribution([100.0, 900.0, 2_500.0, 5_000.0])

CHECKED: list[int] = []


class Checked(TenantScheduler):
    """A tenant scheduler that checks each decision against ``decide_tenants``."""

    def decide(self, now: float, victims: bool = True, search: bool = True) -> Any:
        snap = self.snapshot(now)
        step = super().decide(now, victims, search)
        if not (victims and search):
            return step
        owners = {j: Owner(t, u) for j, (t, u) in self.owners.items()}
        usage = self.usage if self.tenancy.fair_share_half_life_s > 0 else None
        ref = decide_tenants(snap, self.config, now, self.tenancy, owners, usage=usage,
                             distribution=self.policy.distribution)
        assert step.preemptions == ref.decisions.preemptions
        assert self._merged().order == ref.tenant_order.order
        CHECKED.append(len(step.preemptions))
        return step


@st.composite
def cases(draw: st.DrawFn) -> tuple[Trace, Cluster, PolicyConfig, Tenancy]:
    nodes = draw(st.integers(1, 3))
    gpn = draw(st.sampled_from([2, 4]))
    guarantees = draw(st.lists(st.integers(0, nodes * gpn // 2), min_size=2, max_size=2))
    tenancy = Tenancy((
        VirtualCluster("a", users=("u1",), guaranteed_gpus=guarantees[0],
                       max_gpus=draw(st.sampled_from([None, nodes * gpn]))),
        VirtualCluster("b", users=("u2", "u3"), guaranteed_gpus=guarantees[1],
                       user_limit_factor=draw(st.sampled_from([None, 1.0, 2.0])))),
        draw(st.sampled_from([0.0, 600.0])))
    jobs = []
    for i in range(draw(st.integers(2, 9))):
        jobs.append(TraceJob(i, str(i), i + 2, float(draw(st.integers(0, 400))),
                             draw(st.integers(1, min(gpn * nodes, 6))),
                             float(draw(st.integers(10, 900))),
                             user=draw(st.sampled_from(["u1", "u2", "u3", "u4"]))))
    jobs.sort(key=lambda j: j.submit)
    jobs = [TraceJob(i, j.name, j.line, j.submit, j.num_gpus, j.duration, j.user)
            for i, j in enumerate(jobs)]
    config = PolicyConfig(policy=draw(st.sampled_from(["tiresias-las", "fifo-fit", "las"])),
                          thresholds_gpu_s=(100.0, 600.0), thresholds_s=(50.0, 300.0),
                          starve_knob=draw(st.sampled_from([0.0, 2.0])),
                          min_run_s=draw(st.sampled_from([0.0, 30.0])),
                          checkpoint_overhead_s=draw(st.sampled_from([0.0, 15.0])),
                          requeue_delay_s=draw(st.sampled_from([0.0, 40.0])),
                          decision_interval_s=draw(st.sampled_from([0.0, 30.0])),
                          wait_guard=draw(st.sampled_from([0.0, 1.0])),
                          requeue_guard=draw(st.sampled_from([0.0, 0.5])),
                          preempt_gain=draw(st.sampled_from([0.0, 1.0])))
    return Trace("mem", "philly", tuple(jobs), 0), Cluster(nodes, gpn), config, tenancy


@settings(max_examples=120, deadline=None)
@given(cases())
def test_simulator_decides_as_decide_tenants(case: tuple[Trace, Cluster, PolicyConfig,
                                                         Tenancy]) -> None:
    trace, cluster, config, tenancy = case
    sim = Simulator(trace, cluster, config, tenancy=tenancy)
    sched = sim.sched
    assert isinstance(sched, TenantScheduler)
    checked = Checked(config, cluster.node_totals(), [f"n{i}" for i in range(cluster.nodes)],
                      DIST if config.preempt_gain else None, tenancy, sched.owners)
    sim.sched = checked
    result = sim.run()
    assert len(result.jobs) == len(sim.jobs)


def test_the_check_runs_and_sees_preemptions() -> None:
    """The property above is not vacuous: some decisions it checked preempted."""
    assert engine is not None
    CHECKED.clear()
    trace = Trace("mem", "philly", (
        TraceJob(0, "0", 2, 0.0, 1, 1000.0, "u2"), TraceJob(1, "1", 3, 0.0, 1, 1000.0, "u2"),
        TraceJob(2, "2", 4, 0.0, 1, 1000.0, "u2"), TraceJob(3, "3", 5, 0.0, 1, 1000.0, "u2"),
        TraceJob(4, "4", 6, 100.0, 2, 500.0, "u1")), 0)
    tenancy = Tenancy((VirtualCluster("a", users=("u1",), guaranteed_gpus=2),
                       VirtualCluster("b", users=("u2",), guaranteed_gpus=2)))
    config = PolicyConfig().zero_cost()
    sim = Simulator(trace, Cluster(1, 4), config, tenancy=tenancy)
    sim.sched = Checked(config, [4], ["n0"], None, tenancy, sim.sched.owners)  # type: ignore[attr-defined]
    sim.run()
    assert max(CHECKED) == 1
