"""Simulator (prioritizer.sim.engine): reference figures, hand-computed replays, invariants."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prioritizer.policy.config import POLICY_NAMES, PolicyConfig
from prioritizer.policy.durations import load_distribution
from prioritizer.sim.report import nearest_rank, summarize
from prioritizer.sim.engine import Cluster, SimResult, Switch, simulate
from prioritizer.sim.traces import Trace, TraceJob, read_cluster_spec, read_trace

TIRESIAS = Path(__file__).resolve().parents[3] / "data" / "traces" / "tiresias"
ZERO = PolicyConfig().zero_cost()
DIST = load_distribution()


def trace(*jobs: tuple[float, int, float]) -> Trace:
    """Jobs as (submit, GPUs, duration) in submit order."""
    return Trace("mem", "tiresias", tuple(TraceJob(i, str(i), i + 2, s, g, d)
                                          for i, (s, g, d) in enumerate(jobs)), 0)


def by_id(result: SimResult) -> dict[int, tuple[float, float, int, int]]:
    return {j.job_id: (j.start, j.end, j.preemptions, j.promotions) for j in result.jobs}


# ---- the reference simulator's figures, 60_job.csv, counting, zero cost --------

@pytest.mark.parametrize(("spec", "policy", "avg_jct"), [
    ("n2g4.csv", "fifo", 1556.5), ("n2g4.csv", "fifo-fit", 715.3), ("n2g4.csv", "srtf", 519.9),
    ("n4g4.csv", "fifo", 200.8), ("n4g4.csv", "fifo-fit", 190.7), ("n4g4.csv", "srtf", 192.1),
])
def test_reproduces_reference_on_60_jobs(spec: str, policy: str, avg_jct: float) -> None:
    nodes, gpus = read_cluster_spec(TIRESIAS / spec)
    result = simulate(read_trace(TIRESIAS / "60_job.csv"), Cluster(nodes, gpus, "count"),
                      dataclasses.replace(ZERO, policy=policy))
    assert round(summarize(result)["avg_jct_s"], 1) == avg_jct


# ---- hand-computed replays -------------------------------------------------------------------

def test_strict_fifo_blocks_and_fifo_fit_skips() -> None:
    jobs = trace((0, 3, 100), (1, 4, 10), (2, 1, 10))
    cluster = Cluster(1, 4, "count")
    fifo = simulate(jobs, cluster, dataclasses.replace(ZERO, policy="fifo"))
    fit = simulate(jobs, cluster, dataclasses.replace(ZERO, policy="fifo-fit"))
    assert [j.jct for j in fifo.jobs] == [100, 109, 118]
    assert [j.jct for j in fit.jobs] == [100, 109, 10]


def test_consolidated_placement_sees_fragmentation() -> None:
    jobs = trace((0, 3, 100), (0, 3, 100), (1, 2, 10))   # 1 GPU left on each node
    count = simulate(jobs, Cluster(2, 4, "count"), dataclasses.replace(ZERO, policy="fifo-fit"))
    real = simulate(jobs, Cluster(2, 4), dataclasses.replace(ZERO, policy="fifo-fit"))
    assert count.jobs[2].jct == 10 and real.jobs[2].jct == 109


def test_preemption_zero_cost() -> None:
    # A (4 GPUs, 10000 s) reaches queue 1 at 812.5 s; B (4 GPUs, 100 s) arrives at 1000 in
    # queue 0 and preempts it; A resumes at 1100 with 9000 s left.
    result = simulate(trace((0, 4, 10000), (1000, 4, 100)), Cluster(1, 4, "count"), ZERO)
    assert by_id(result) == {0: (0, 10100, 1, 0), 1: (1000, 1100, 0, 0)}


def test_preemption_with_costs() -> None:
    # Same jobs, default costs: the daemon's tick at 1020 signals A, which holds its GPUs
    # 15 s (until 1035); B runs 1035-1135; A may restart at 1035 + 121 = 1156 with
    # 10000 - 1020 = 8980 s left, ending at 10136.
    result = simulate(trace((0, 4, 10000), (1000, 4, 100)), Cluster(1, 4, "count"),
                      PolicyConfig())
    assert by_id(result) == {0: (0, 10136, 1, 0), 1: (1035, 1135, 0, 0)}
    assert result.jobs[0].queueing_delay == 121       # 10136 - (1035 + 8980)
    assert result.gpu_s_held == 4 * (1035 + 8980) + 4 * 100


def test_starvation_promotion_in_a_replay() -> None:
    # 2 queues at 100 GPU·s, knob 2, 1 GPU. A(0, 1000 s) demoted at 100; B(150, 1000 s)
    # preempts A at 150; B demoted at 250; A promoted at 150 + 2x150 = 450 and preempts B;
    # A demoted at 550; B promoted at 450 + 2x300 = 1050 and preempts A (850-600 = 250 s
    # left); B ends 1050 + 700 = 1750, then A ends at 2000.
    cfg = dataclasses.replace(ZERO, thresholds_gpu_s=(100.0,), starve_knob=2.0)
    result = simulate(trace((0, 1, 1000), (150, 1, 1000)), Cluster(1, 1, "count"), cfg)
    assert by_id(result) == {0: (0, 2000, 2, 1), 1: (150, 1750, 1, 1)}
    assert [j.queueing_delay for j in result.jobs] == [1000, 600]


def test_settings_switched_mid_replay_apply_to_the_running_jobs_from_then_on() -> None:
    # 2D-LAS, 1 GPU, zero cost, no promotion. A (0, 2000 s), B (100, 300 s). At 1000 GPU·s
    # A is demoted at 1000 and B preempts it: B 1000-1300, A ends 2300.
    cfg = dataclasses.replace(ZERO, thresholds_gpu_s=(1000.0,), starve_knob=0.0)
    jobs = trace((0, 1, 2000), (100, 1, 300))
    assert by_id(simulate(jobs, Cluster(1, 1), cfg)) == {0: (0, 2300, 1, 0),
                                                         1: (1000, 1300, 0, 0)}
    # switched at 200 s to 500 GPU·s: A (200 GPU·s then) is demoted at 500, not 1000, and B
    # runs 500-800; A resumes at 800 with 1500 s left, ends 2300
    lower = dataclasses.replace(cfg, thresholds_gpu_s=(500.0,))
    switched = simulate(jobs, Cluster(1, 1), cfg, switches=[Switch(200.0, lower)])
    assert by_id(switched) == {0: (0, 2300, 1, 0), 1: (500, 800, 0, 0)}
    # switched at 600 s, past A's attained 600 GPU·s: demoted by the decision at the switch
    assert by_id(simulate(jobs, Cluster(1, 1), cfg, switches=[Switch(600.0, lower)])) == {
        0: (0, 2300, 1, 0), 1: (600, 900, 0, 0)}
    # and a switch to FIFO at 200 s: no preemption at all, B waits for A
    fifo = dataclasses.replace(cfg, policy="fifo-fit")
    assert by_id(simulate(jobs, Cluster(1, 1), cfg, switches=[Switch(200.0, fifo)])) == {
        0: (0, 2000, 0, 0), 1: (2000, 2300, 0, 0)}


def test_unfittable_jobs_are_counted_not_dropped_silently() -> None:
    result = simulate(trace((0, 8, 10), (0, 2, 10)), Cluster(1, 4), ZERO)
    assert len(result.jobs) == 1 and result.unfittable_jobs == 1
    assert summarize(result)["skipped_jobs"] == 1


@pytest.mark.parametrize("placement", ["consolidate", "count"])
def test_a_job_that_never_fits_costs_no_shape(placement: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A job of 10^8 GPUs on one 1-GPU node would need a shape of 10^8 entries (6 GB) to be
    found never to fit; its fit is decided first and only the jobs that fit get a shape, on
    both replay paths (whole GPUs, and shard jobs)."""
    from prioritizer.sim import engine
    real = engine.consolidated_shape

    def only_fitting(num_gpus: int, gpus_per_node: int) -> tuple[int, ...]:
        if num_gpus > gpus_per_node:   # the cluster is one node: such a job never fits
            raise AssertionError(f"a shape was built for a {num_gpus}-GPU job")
        return real(num_gpus, gpus_per_node)

    monkeypatch.setattr(engine, "consolidated_shape", only_fitting)
    huge = trace((0, 102_400_000, 5), (0, 1, 5))
    result = simulate(huge, Cluster(1, 1, placement), ZERO)
    assert (len(result.jobs), result.unfittable_jobs) == (1, 1)
    shard = Trace("mem", "tiresias", (*huge.jobs, TraceJob(2, "2", 4, 0, 1, 5, share=0.5)), 0)
    result = simulate(shard, Cluster(1, 1, placement), ZERO)
    assert (len(result.jobs), result.unfittable_jobs) == (2, 1)


def test_fits_consolidated_is_can_ever_fit_of_the_shape() -> None:
    from prioritizer.policy.placement import can_ever_fit, consolidated_shape, fits_consolidated
    for nodes in range(1, 5):
        for per_node in range(1, 5):
            for gpus in range(1, 24):
                assert fits_consolidated(gpus, nodes, per_node) == can_ever_fit(
                    consolidated_shape(gpus, per_node), [per_node] * nodes)


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 21)]          # 1..20
    assert nearest_rank(values, 95) == 19.0            # rank ceil(0.95 x 20) = 19
    assert nearest_rank(values, 99) == 20.0
    assert nearest_rank([5.0], 50) == 5.0 and nearest_rank([], 95) == 0.0


def test_summary_keys_and_values() -> None:
    result = simulate(trace((0, 2, 10), (0, 2, 30)), Cluster(1, 4, "count"), ZERO)
    s = summarize(result)
    assert list(s) == ["policy", "jobs", "skipped_jobs", "avg_jct_s", "median_jct_s",
                       "p95_jct_s", "p99_jct_s", "makespan_s", "avg_queueing_delay_s",
                       "preemptions", "promotions", "gpu_utilisation", "wall_s"]
    assert (s["avg_jct_s"], s["makespan_s"], s["gpu_utilisation"]) == (20.0, 30.0,
                                                                        80 / 120)


# ---- invariants over random traces -------------------------------------------------------------

jobs_strategy = st.lists(st.tuples(st.integers(0, 500), st.sampled_from([1, 2, 3, 4, 8]),
                                   st.integers(1, 4000)), min_size=1, max_size=12)


@settings(max_examples=40)
@given(jobs_strategy, st.sampled_from(POLICY_NAMES), st.booleans(), st.booleans())
def test_every_job_finishes_and_work_is_conserved(rows: list[tuple[int, int, int]], policy: str,
                                                   zero: bool, count: bool) -> None:
    rows = sorted(rows, key=lambda r: r[0])
    cfg = PolicyConfig(policy=policy)
    cfg = cfg.zero_cost() if zero else cfg
    result = simulate(trace(*rows), Cluster(2, 4, "count" if count else "consolidate"), cfg,
                      DIST)
    assert result.unfittable_jobs == 0 and len(result.jobs) == len(rows)   # all shapes fit
    for job in result.jobs:
        submit, gpus, duration = rows[job.job_id]
        assert submit <= job.start and job.end >= job.start + duration - 1e-6
        assert job.queueing_delay >= -1e-6
    if zero:
        expected = sum(g * d for _, g, d in (rows[j.job_id] for j in result.jobs))
        assert result.gpu_s_held == pytest.approx(expected)
    if policy == "fifo":
        starts = [j.start for j in sorted(result.jobs, key=lambda j: j.job_id)]
        assert starts == sorted(starts)                # strict FIFO starts in order
    if policy in ("fifo", "fifo-fit"):
        assert all(j.preemptions == 0 for j in result.jobs)


@settings(max_examples=15)
@given(jobs_strategy, st.sampled_from(POLICY_NAMES))
def test_replays_are_identical(rows: list[tuple[int, int, int]], policy: str) -> None:
    rows = sorted(rows, key=lambda r: r[0])
    cfg = PolicyConfig(policy=policy)
    first = simulate(trace(*rows), Cluster(2, 4), cfg, DIST)
    second = simulate(trace(*rows), Cluster(2, 4), cfg, DIST)
    assert first.jobs == second.jobs


# ---- the garbage collector's thresholds during a replay (engine.fewer_collections) --------

def test_replay_runs_with_raised_gc_thresholds_and_restores_them(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from prioritizer.sim import engine

    seen: list[tuple[int, int, int]] = []
    decide = engine.Simulator.decide

    def spy(self: engine.Simulator, now: float, tick: bool) -> None:
        seen.append(gc.get_threshold())
        decide(self, now, tick)

    monkeypatch.setattr(engine.Simulator, "decide", spy)
    old = gc.get_threshold()
    gc.set_threshold(701, 11, 12)
    try:
        simulate(trace((0, 1, 10), (1, 1, 5)), Cluster(1, 1, "count"), dataclasses.replace(ZERO, policy="fifo"))
        assert seen and set(seen) == {engine.REPLAY_GC_THRESHOLDS}
        assert gc.get_threshold() == (701, 11, 12)
        with pytest.raises(RuntimeError), engine.fewer_collections():
            assert gc.get_threshold() == engine.REPLAY_GC_THRESHOLDS
            raise RuntimeError("inside")
        assert gc.get_threshold() == (701, 11, 12)
    finally:
        gc.set_threshold(*old)
