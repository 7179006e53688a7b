"""Replays with GPU sharing (prioritizer.sim.shared, .mix): worked examples on one node of
2 GPUs, JCTs computed by hand; the trace columns and the Philly-derived mix rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.policy.config import PolicyConfig
from prioritizer.sim.engine import Cluster, simulate
from prioritizer.sim.mix import opportunistic_mix, production_alone, sharing_mix, whole_gpus
from prioritizer.sim.report import format_sharing_table, summarize
from prioritizer.sim.traces import Trace, TraceError, TraceJob, read_trace

ONE_NODE = Cluster(1, 2)


def _trace(*jobs: TraceJob) -> Trace:
    return Trace("t", "tiresias", jobs, 0)


def test_two_half_gpu_jobs_share_one_gpu() -> None:
    # a, b: 0.5 GPU each; c: 1 GPU; d: 1 GPU at t=10. No costs, no preemption.
    # a and b share GPU 0 (b goes on the GPU a already uses), c takes GPU 1: all start at 0.
    # d waits for an empty GPU: GPU 0 empties when b ends (200), GPU 1 at 300 -> d runs
    # 200..250. JCTs: a 100, b 200, c 300, d 250 - 10 = 240.
    # Held GPU·s: 0.5*100 + 0.5*200 + 300 + 50 = 500.
    cfg = PolicyConfig(policy="fifo", preemption=False, min_run_s=0,
                       checkpoint_overhead_s=0, requeue_delay_s=0)
    r = simulate(_trace(TraceJob(0, "a", 2, 0, 1, 100, share=0.5),
                        TraceJob(1, "b", 3, 0, 1, 200, share=0.5),
                        TraceJob(2, "c", 4, 0, 1, 300),
                        TraceJob(3, "d", 5, 10, 1, 50)), ONE_NODE, cfg)
    assert {j.name: (j.start, j.jct) for j in r.jobs} == {
        "a": (0, 100), "b": (0, 200), "c": (0, 300), "d": (200, 240)}
    assert r.gpu_s_held == 500.0


def test_opportunistic_job_is_preempted_when_production_arrives() -> None:
    # o (opportunistic) and p (production) start at 0 on the two GPUs. q (production,
    # 50 s) arrives at 10 and does not fit: on the next tick (30) o is the victim, keeps its
    # GPU 5 s (checkpoint), q runs 35..85 (JCT 75). o ran 30 s, may restart at 55 (delay 20),
    # finds a GPU when q ends (85) and runs its last 70 s: ends 155, JCT 155, held 35 + 70 s.
    cfg = PolicyConfig(policy="las", min_run_s=0, checkpoint_overhead_s=5,
                       requeue_delay_s=20, decision_interval_s=30)
    r = simulate(_trace(TraceJob(0, "o", 2, 0, 1, 100, opportunistic=True),
                        TraceJob(1, "p", 3, 0, 1, 200),
                        TraceJob(2, "q", 4, 10, 1, 50)), ONE_NODE, cfg)
    got = {j.name: (j.start, j.end, j.jct, j.preemptions) for j in r.jobs}
    assert got == {"o": (0, 155, 155, 1), "p": (0, 200, 200, 0), "q": (35, 85, 75, 0)}
    assert {j.name: j.queueing_delay for j in r.jobs}["o"] == 155 - 105
    assert r.gpu_s_held == 35 + 70 + 200 + 50


def test_whole_gpu_waiter_preempts_both_shard_jobs_of_a_gpu() -> None:
    # tiresias-las, one threshold at 45 GPU·s, ticks every 30 s, no costs. a, b (0.5 GPU,
    # 400 s) share GPU 0 from 0 and attain 0.5 GPU·s/s: queue 1 from t=90. c (1 GPU, 1000 s)
    # takes GPU 1 at 80 and is still in queue 0 at 120 (40 GPU·s). d (1 GPU, 50 s) arrives
    # at 100 in queue 0; on the tick at 120 its victim set is GPU 0's shard jobs, a and b
    # together. d runs 120..170 (JCT 70); a and b ran 120 s, restart when d frees GPU 0
    # (170) and end at 170 + 280 = 450. Held GPU·s: 2 * 0.5 * 400 + 1000 + 50 = 1450.
    cfg = PolicyConfig(policy="tiresias-las", thresholds_gpu_s=(45.0,), min_run_s=0,
                       checkpoint_overhead_s=0, requeue_delay_s=0, decision_interval_s=30)
    r = simulate(_trace(TraceJob(0, "a", 2, 0, 1, 400, share=0.5),
                        TraceJob(1, "b", 3, 0, 1, 400, share=0.5),
                        TraceJob(2, "c", 4, 80, 1, 1000),
                        TraceJob(3, "d", 5, 100, 1, 50)), ONE_NODE, cfg)
    assert {j.name: (j.start, j.end, j.preemptions) for j in r.jobs} == {
        "a": (0, 450, 1), "b": (0, 450, 1), "c": (80, 1080, 0), "d": (120, 170, 0)}
    assert r.gpu_s_held == 1450.0


def test_summary_gives_production_and_opportunistic_jobs_apart() -> None:
    # One node of 1 GPU; checkpoint 5 s, requeue delay 20 s, ticks every 30 s.
    # o (opportunistic, 0.5 GPU, 100 s) starts at 0. p (production, 1 GPU, 50 s) arrives at
    # 20; on the tick at 30 o is the victim, holds its shards to 35; p runs 35..85 (JCT 65).
    # o ran 30 s, may restart at 55, gets the GPU at 85 and ends at 155 (JCT 155).
    # s (production, 0.5 GPU, 10 s) arrives at 200 and runs 200..210 (JCT 10).
    # Production: p and s, avg (65 + 10) / 2 = 37.5; all jobs: (65 + 155 + 10) / 3.
    # Held GPU·s: o 0.5 * 35 + 0.5 * 70, p 50, s 0.5 * 10 = 107.5 over 1 GPU x 210 s.
    # Arrival window [0, 200]: everything but s's run, 102.5 GPU·s over 1 GPU x 200 s.
    cfg = PolicyConfig(policy="las", min_run_s=0, checkpoint_overhead_s=5,
                       requeue_delay_s=20, decision_interval_s=30)
    r = simulate(_trace(TraceJob(0, "o", 2, 0, 1, 100, share=0.5, opportunistic=True),
                        TraceJob(1, "p", 3, 20, 1, 50),
                        TraceJob(2, "s", 4, 200, 1, 10, share=0.5)), Cluster(1, 1), cfg)
    summary = summarize(r)
    assert {k: summary[k] for k in ("production_jobs", "production_avg_jct_s",
                                    "opportunistic_jobs", "opportunistic_avg_jct_s",
                                    "opportunistic_preemptions")} == {
        "production_jobs": 2, "production_avg_jct_s": 37.5, "opportunistic_jobs": 1,
        "opportunistic_avg_jct_s": 155.0, "opportunistic_preemptions": 1}
    assert summary["avg_jct_s"] == pytest.approx(230 / 3)
    assert summary["gpu_utilisation"] == pytest.approx(107.5 / 210)
    assert summary["gpu_utilisation_arrival_window"] == pytest.approx(102.5 / 200)


def test_trace_reads_fractions_and_the_opportunistic_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,num_gpu,submit_time,duration,opportunistic\n"
                    "a,0.5,0,100,\nb,2,5,10,1\nc,1,7,10,false\n")
    jobs = read_trace(path).jobs
    assert [(j.num_gpus, j.share, j.opportunistic) for j in jobs] == [
        (1, 0.5, False), (2, 0.0, True), (1, 0.0, False)]
    path.write_text("job_id,num_gpu,submit_time,duration\na,1.5,0,100\n")
    with pytest.raises(TraceError, match=r"t.csv:2: num_gpu must be a whole number or a fraction"):
        read_trace(path)
    path.write_text("job_id,num_gpu,submit_time,duration,opportunistic\na,1,0,100,maybe\n")
    with pytest.raises(TraceError, match=r"t.csv:2: opportunistic must be"):
        read_trace(path)


def test_mix_rule_counts_one_gpu_jobs_only() -> None:
    # GPU counts 1,4,1,1,2,1: the 1-GPU jobs are n = 1..4 (ids 0, 2, 3, 5). shard_every=2:
    # n = 2, 4 (ids 2, 5) get 0.5; opportunistic_every=3: n = 3 (id 3).
    trace = _trace(*(TraceJob(i, str(i), i + 2, float(i), g, 10.0)
                     for i, g in enumerate((1, 4, 1, 1, 2, 1))))
    mix = sharing_mix(trace, shard_every=2, opportunistic_every=3)
    assert [(j.share, j.opportunistic) for j in mix.jobs] == [
        (0.0, False), (0.0, False), (0.5, False), (0.0, True), (0.0, False), (0.5, False)]
    alone = production_alone(mix)
    assert [(j.job_id, j.name, j.share) for j in alone.jobs] == [
        (0, "0", 0.0), (1, "1", 0.0), (2, "2", 0.0), (3, "4", 0.0), (4, "5", 0.0)]


def test_extra_opportunistic_mix_lays_later_windows_over_the_production_one() -> None:
    # Production: the first 2 jobs (ids "0" at 0, "1" at 100): window [0, 100], S = 100.
    # Later 1-GPU jobs, moved by k*S, offered load = 0.5 * duration cut at S / (1 GPU * 100 s):
    # "2" at 120 -> 20, 0.5 * 40 / 100 = 0.20; "3" has 4 GPUs, skipped;
    # "4" at 190 -> 90, 0.5 * min(500, 10) / 100 = 0.05   (window 1: 0.25)
    # "5" at 230 -> 30, 0.5 * 60 / 100 = 0.30; "6" at 260 -> 60, 0.5 * 40 / 100 = 0.20
    # (windows 1-2: 0.75); "7" at 310 is in window 3.
    jobs = [(0, 1, 100), (100, 2, 50), (120, 1, 40), (150, 4, 10), (190, 1, 500),
            (230, 1, 60), (260, 1, 100), (310, 1, 10)]
    trace = _trace(*(TraceJob(i, str(i), i + 2, float(t), g, float(d))
                     for i, (t, g, d) in enumerate(jobs)))

    # load 0.4: window 1 brings 0.25 < 0.4, windows 1-2 bring 0.75: candidates 2, 4, 5, 6,
    # p = 0.4 / 0.75 = 0.533: floor(n p) steps up at n = 2 and n = 4 -> "4" (at 90), "6" (at 60)
    mix = opportunistic_mix(trace, 2, total_gpus=1, load=0.4)
    assert [(j.job_id, j.name, j.submit, j.share, j.opportunistic) for j in mix.jobs] == [
        (0, "0", 0.0, 0.0, False), (1, "6", 60.0, 0.5, True), (2, "4", 90.0, 0.5, True),
        (3, "1", 100.0, 0.0, False)]
    assert [j.duration for j in mix.jobs] == [100.0, 100.0, 500.0, 50.0]
    assert [(j.share, j.opportunistic) for j in whole_gpus(mix).jobs] == [
        (0.0, False), (0.0, True), (0.0, True), (0.0, False)]
    assert [(j.job_id, j.name) for j in production_alone(mix).jobs] == [(0, "0"), (1, "1")]

    # load 0.2: window 1 (0.25) is enough; p = 0.8 keeps the 2nd candidate, "4"
    mix = opportunistic_mix(trace, 2, total_gpus=1, load=0.2)
    assert [(j.name, j.submit, j.opportunistic) for j in mix.jobs] == [
        ("0", 0.0, False), ("4", 90.0, True), ("1", 100.0, False)]

    with pytest.raises(ValueError, match="all arrive at once"):
        opportunistic_mix(_trace(*(TraceJob(i, str(i), i + 2, 0.0, 1, 10.0) for i in range(3))),
                          2, total_gpus=1, load=0.2)


def test_utilisation_over_arrivals_has_no_value_when_every_job_arrives_at_once() -> None:
    # Two shard jobs of 0.5 GPU submitted together at 0: the arrival window has no span, so
    # there is nothing to divide by (null in --json, "-" in the table); over the makespan
    # they held 2 x 0.5 x 100 GPU·s on 1 GPU x 100 s.
    cfg = PolicyConfig(policy="las", min_run_s=0, checkpoint_overhead_s=0,
                       requeue_delay_s=0, decision_interval_s=30)
    r = simulate(_trace(TraceJob(0, "a", 2, 0, 1, 100, share=0.5),
                        TraceJob(1, "b", 3, 0, 1, 100, share=0.5)), Cluster(1, 1), cfg)
    summary = summarize(r)
    assert summary["gpu_utilisation_arrival_window"] is None
    assert summary["gpu_utilisation"] == pytest.approx(1.0)
    assert format_sharing_table([summary]).splitlines()[-1].split()[-1] == "-"
