"""The per-node victim index (``victim_search._NodeIndex``, used once a decision has made
``victim_search._INDEX_AFTER`` victim searches) chooses exactly the victims the candidate walks
choose: every decision is computed twice, with the index from the first search and with
walks only, and compared whole (order, states, promotions, preemptions with their victims
in order). Worlds hold running gang jobs across nodes (some with a GPU-less component),
non-preemptible jobs and jobs being preempted, so that searches fail, tie and fall back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import prioritizer.policy.victim_search as search_module
from policy_helpers import draw_placements, index_after, pending, running, snapshot
from script_helpers import load_script
from prioritizer.policy.config import POLICY_NAMES, PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.model import Decisions, Snapshot
from test_policy_properties import DIST

NOW = 100_000.0


def both(snap: Snapshot, config: PolicyConfig) -> tuple[Decisions, Decisions]:
    with index_after(0):
        indexed = decide(snap, config, NOW, distribution=DIST)
    with index_after(10**9):
        walked = decide(snap, config, NOW, distribution=DIST)
    return indexed, walked


@st.composite
def worlds(draw: st.DrawFn) -> tuple[Snapshot, PolicyConfig]:
    per_node = draw(st.sampled_from([2, 4, 8]))
    count = draw(st.integers(1, 12))
    totals = {f"n{i}": per_node for i in range(count)}
    free = dict(totals)
    jobs = []
    for job_id, (nodes, gpus) in enumerate(draw_placements(draw, free)):
        jobs.append(running(
            job_id, gpus, nodes, queue=draw(st.integers(0, 2)),
            attained=float(draw(st.integers(0, 20_000))),
            run_start=draw(st.sampled_from([0.0, NOW - 10])),
            preemptible=draw(st.integers(0, 9)) > 0, releasing=draw(st.integers(0, 19)) == 0,
            duration_s=float(draw(st.integers(10_000, 40_000)))))
    for job_id in range(100, 100 + draw(st.integers(1, 40))):
        size = draw(st.integers(1, per_node))
        shape = draw(st.sampled_from([(size,), (per_node, size), (size, size, 1), (size, 0)]))
        queue = draw(st.sampled_from([None, 0, 1, 2]))
        ran = float(draw(st.sampled_from([10, 100, 1000]))) if queue else 0.0
        jobs.append(pending(
            job_id, shape, submit=float(draw(st.integers(0, 900))), queue=queue,
            queue_entry_time=float(draw(st.integers(0, 900))),
            attained_gpu_s=ran * sum(shape), attained_s=ran, last_run_s=ran,
            last_run_end=NOW - float(draw(st.integers(0, 20_000))) if ran else None,
            duration_s=ran + float(draw(st.integers(1, 30_000)))))
    policy = draw(st.sampled_from([p for p in POLICY_NAMES if p not in ("fifo", "fifo-fit")]))
    config = PolicyConfig(policy=policy, min_run_s=draw(st.sampled_from([0.0, 60.0])),
                          thresholds_gpu_s=(3_000.0, 12_000.0), thresholds_s=(1_000.0, 4_000.0))
    return snapshot(totals, jobs), config


@settings(max_examples=400, deadline=None)
@given(worlds())
def test_index_chooses_the_walks_victims(world: tuple[Snapshot, PolicyConfig]) -> None:
    snap, config = world
    indexed, walked = both(snap, config)
    assert indexed == walked
    assert indexed.preemptions == walked.preemptions   # (Decisions' == covers them; explicit)


def test_index_is_used_and_agrees_on_a_storm() -> None:
    """A small storm (benchmarks/bench_decide.py's shape: a full cluster, thousands of
    starving waiters): dozens of waiters preempt, through the index, as through the walks."""
    bench = load_script("benchmarks/bench_decide.py")
    snap = bench.make_snapshot(1_500, 150)
    calls = []
    real = search_module._NodeIndex.search

    def spy(self, *args):
        result = real(self, *args)
        calls.append(result)
        return result

    for policy in ("tiresias-las", "las", "srtf"):
        config = PolicyConfig(policy=policy)
        search_module._NodeIndex.search = spy
        try:
            with index_after(0):
                indexed = decide(snap, config, bench.NOW, distribution=DIST)
        finally:
            search_module._NodeIndex.search = real
        with index_after(10**9):
            walked = decide(snap, config, bench.NOW, distribution=DIST)
        assert len(walked.preemptions) > 20
        assert indexed.preemptions == walked.preemptions
        assert indexed == walked
    assert sum(1 for c in calls if c) > 60   # searches that found victims through the index
    assert not any(c is search_module.FAR for c in calls)
