"""Unit tests of the pure policy (prioritizer.policy.decide, gittins, config): hand-computed cases."""

from __future__ import annotations

import dataclasses

import pytest

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.validation import ConfigError
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import JobPhase, NodeView
from prioritizer.policy.decide import (POLICIES, decide, next_queue_change, promotable, promotion_time,
                                       starved)
from policy_helpers import pending, running, snapshot

LAS = PolicyConfig(policy="tiresias-las")
TWO_NODES = {"n0": 8, "n1": 8}


def test_registry_has_exactly_the_cli_names() -> None:
    assert set(POLICIES) == {"tiresias-las", "tiresias-gittins", "las", "fifo", "fifo-fit",
                             "srtf"}


# ---- Gittins index: P(S - a <= Δ | S > a) / E[min(S - a, Δ) | S > a] --------------------

@pytest.mark.parametrize(("attained", "expected"), [
    # samples 100, 200, 400, 1000; Δ = 300
    pytest.param(150, 1 / 300, id="a=150: P=2/3, E=(50+250+300)/3=200"),
    pytest.param(0, 2 / 900, id="a=0: P=2/4, E=(100+200+300+300)/4=225"),
    pytest.param(500, 0.0, id="a=500: only 1000 left, P=0"),
    pytest.param(1000, 0.0, id="a beyond every sample"),
    pytest.param(800, 1 / 200, id="a=800: P=1, E=200"),
])
def test_gittins_index_hand_computed(attained: float, expected: float) -> None:
    dist = GittinsDistribution([1000, 100, 400, 200])
    assert dist.index(attained, 300) == pytest.approx(expected)


def test_gittins_rejects_bad_samples() -> None:
    with pytest.raises(ValueError, match="no samples"):
        GittinsDistribution([])
    with pytest.raises(ValueError, match="> 0"):
        GittinsDistribution([10, -1])


def test_gittins_orders_by_index_inside_a_queue() -> None:
    cfg = PolicyConfig(policy="tiresias-gittins", gittins_quantum_gpu_s=300)
    dist = GittinsDistribution([100, 200, 400, 1000])
    early = pending(1, (1,), submit=0, attained_gpu_s=0.0, queue=0, queue_entry_time=0.0,
                    last_run_end=10.0, last_run_s=0.0)
    late = pending(2, (1,), submit=5, attained_gpu_s=150.0, queue=0, queue_entry_time=5.0,
                   last_run_end=10.0, last_run_s=150.0)
    d = decide(snapshot({"n0": 8}, [early, late]), cfg, 20.0, distribution=dist)
    assert d.order == (2, 1)   # index 1/300 > 2/900


def test_gittins_without_distribution_is_an_error() -> None:
    with pytest.raises(ValueError, match="distribution"):
        decide(snapshot({"n0": 1}, [pending(1, (1,))]),
               PolicyConfig(policy="tiresias-gittins"), 0.0)


# ---- queues, FIFO inside a queue, demotion ---------------------------------------------

@pytest.mark.parametrize(("attained", "queue"), [
    pytest.param(0, 0, id="0"), pytest.param(3249.9, 0, id="just-below-T1"),
    pytest.param(3250, 1, id="at-T1"), pytest.param(7199, 1, id="below-T2"),
    pytest.param(7200, 2, id="at-T2"), pytest.param(1e9, 2, id="huge"),
])
def test_running_job_queue_by_2d_service(attained: float, queue: int) -> None:
    job = running(1, (2,), ("n0",), queue=0, attained=attained, run_start=0.0)
    state = decide(snapshot(TWO_NODES, [job]), LAS, 500.0).states[1]
    assert state.queue == queue
    assert state.changed == (queue != 0)
    assert state.queue_entry_time == (500.0 if queue else 0.0)


def test_service_counts_from_the_last_promotion() -> None:
    job = running(1, (1,), ("n0",), queue=0, attained=5000, service_base_gpu_s=4000)
    assert decide(snapshot(TWO_NODES, [job]), LAS, 10.0).states[1].queue == 0


def test_1d_las_uses_seconds_not_gpu_seconds() -> None:
    # 8 GPUs × 500 s = 4000 GPU·s: queue 1 in 2D, but 500 s < 3250 s in 1D
    job = running(1, (8,), ("n0",), queue=0, attained=4000)
    assert decide(snapshot(TWO_NODES, [job]), LAS, 10.0).states[1].queue == 1
    las = dataclasses.replace(LAS, policy="las")
    assert decide(snapshot(TWO_NODES, [job]), las, 10.0).states[1].queue == 0


def test_order_is_queue_then_entry_time() -> None:
    jobs = [pending(1, (1,), queue=1, queue_entry_time=50.0, attained_gpu_s=4000),
            pending(2, (1,), queue=1, queue_entry_time=10.0, attained_gpu_s=4000),
            pending(3, (1,), queue=1, queue_entry_time=30.0, attained_gpu_s=4000),
            pending(4, (1,), submit=100.0)]
    d = decide(snapshot({"n0": 8}, jobs), LAS, 200.0)
    assert d.order == (4, 2, 3, 1)
    assert d.states[4].reason == "new" and d.states[4].queue_entry_time == 100.0


# ---- starvation promotion ----------------------------------------------------------------

@pytest.mark.parametrize(("now", "promoted"), [
    pytest.param(1799.0, False, id="waited-799<800"), pytest.param(1800.0, True, id="800>=8x100"),
])
def test_promotion_after_knob_times_last_run(now: float, promoted: bool) -> None:
    job = pending(1, (4,), queue=2, queue_entry_time=900.0, attained_gpu_s=9000.0,
                  last_run_s=100.0, last_run_end=1000.0)
    d = decide(snapshot({"n0": 8}, [job]), LAS, now)
    assert (d.states[1].queue == 0) == promoted
    assert d.promotions == ((1,) if promoted else ())
    if promoted:
        assert d.states[1].queue_entry_time == now
        assert d.states[1].service_base_gpu_s == 9000.0


@pytest.mark.parametrize("case", ["knob-0", "running", "queue-0", "never-ran", "fifo"])
def test_no_promotion(case: str) -> None:
    cfg = PolicyConfig(policy="fifo" if case == "fifo" else "tiresias-las",
                       starve_knob=0 if case == "knob-0" else 8)
    kw = dict(queue=0 if case == "queue-0" else 2, queue_entry_time=0.0,
              attained_gpu_s=9000.0, last_run_s=100.0, last_run_end=0.0)
    if case == "never-ran":
        kw.update(last_run_s=0.0, last_run_end=None)
    if case == "running":
        job = running(1, (1,), ("n0",), queue=2, attained=9000, last_run_s=100.0,
                      last_run_end=0.0)
    else:
        job = pending(1, (1,), **kw)
    assert decide(snapshot({"n0": 8}, [job]), cfg, 1e6).promotions == ()


def test_event_time_helpers() -> None:
    job = running(1, (2,), ("n0",), queue=0, attained=3000)
    assert next_queue_change(job, LAS, 100.0) == pytest.approx(100 + 250 / 2)
    las = dataclasses.replace(LAS, policy="las")   # 1500 s run; next threshold 3250 s
    assert next_queue_change(job, las, 100.0) == pytest.approx(100 + 1750)
    assert next_queue_change(job, dataclasses.replace(LAS, policy="fifo"), 0.0) is None
    waiting = pending(2, (1,), queue=1, attained_gpu_s=4000, last_run_s=50, last_run_end=70)
    assert promotion_time(waiting, LAS) == 70 + 8 * 50


@pytest.mark.parametrize(("changes", "promotes", "knob", "expected"), [
    ({}, True, 8, True),
    ({"queue": 0}, True, 8, False),                 # already in the top queue
    ({"last_run_s": 0}, True, 8, False),            # never ran: no run time to scale
    ({"last_run_end": None}, True, 8, False),
    ({}, False, 8, False),                          # a policy without promotion (fifo, srtf)
    ({}, True, 0, False),                           # the knob off
], ids=["queue1", "queue0", "no-run", "no-end", "not-promoting", "knob-off"])
def test_promotable(changes: dict[str, object], promotes: bool, knob: float, expected: bool) -> None:
    kw: dict[str, object] = {"queue": 1, "last_run_s": 50, "last_run_end": 70, **changes}
    assert promotable(pending(2, (1,), **kw), promotes, knob) is expected


def test_starved_once_waited_knob_times_the_last_run() -> None:
    job = pending(2, (1,), queue=1, last_run_s=50, last_run_end=70)
    assert not starved(job, 8, 469.0)               # waited 399 s < 8 x 50 s
    assert starved(job, 8, 470.0) and starved(job, 2, 170.0)


# ---- preemption ------------------------------------------------------------------------------

def test_victim_from_lowest_queue() -> None:
    jobs = [running(1, (8,), ("n0",), queue=1, attained=5000),
            running(2, (8,), ("n1",), queue=2, attained=9000),
            pending(3, (8,), submit=100.0)]
    d = decide(snapshot(TWO_NODES, jobs), LAS, 1000.0)
    assert [(p.waiter, p.victims) for p in d.preemptions] == [(3, (2,))]


def test_victim_with_most_service_inside_a_queue() -> None:
    jobs = [running(1, (8,), ("n0",), queue=2, attained=9000),
            running(2, (8,), ("n1",), queue=2, attained=20000),
            pending(3, (8,))]
    assert decide(snapshot(TWO_NODES, jobs), LAS, 1000.0).preemptions[0].victims == (2,)


def test_victims_free_one_real_node_just_enough() -> None:
    # n0: X (q2, 9000) + Z (q2, 8000); n1: Y (q2, 10000) + W (q1). Counting GPUs, Y + X
    # would do; on real nodes only X + Z free a whole node for the 8-GPU waiter.
    jobs = [running(10, (4,), ("n0",), queue=2, attained=9000),
            running(11, (4,), ("n0",), queue=2, attained=8000),
            running(12, (4,), ("n1",), queue=2, attained=10000),
            running(13, (4,), ("n1",), queue=1, attained=4000),
            pending(20, (8,))]
    d = decide(snapshot(TWO_NODES, jobs), LAS, 1000.0)
    assert [(p.waiter, sorted(p.victims)) for p in d.preemptions] == [(20, [10, 11])]


def test_gang_waiter_needs_two_whole_nodes() -> None:
    jobs = [running(1, (8,), ("n0",), queue=2, attained=9000),
            running(2, (8,), ("n1",), queue=1, attained=4000),
            pending(3, (8, 8))]
    assert sorted(decide(snapshot(TWO_NODES, jobs), LAS, 1000.0).preemptions[0].victims) == [1, 2]


@pytest.mark.parametrize("case", ["min-run", "not-preemptible", "same-queue", "higher-queue",
                                  "being-preempted", "not-eligible", "fifo", "fifo-fit",
                                  "preemption-off"])
def test_no_preemption(case: str) -> None:
    cfg = {"fifo": PolicyConfig(policy="fifo"), "fifo-fit": PolicyConfig(policy="fifo-fit"),
           "preemption-off": PolicyConfig(preemption=False)}.get(case, LAS)
    victim = dict(queue=2, attained=9000.0, run_start=0.0)
    if case == "min-run":
        victim["run_start"] = 950.0   # ran 50 s < 60 s
    if case == "not-preemptible":
        victim["preemptible"] = False
    if case == "being-preempted":
        victim["releasing"] = True
    waiter = dict(queue=0, queue_entry_time=0.0)
    if case == "same-queue":   # both in queue 2
        waiter = dict(queue=2, queue_entry_time=0.0, attained_gpu_s=7300.0)
    if case == "higher-queue":  # the running job is in queue 0, the waiter in queue 1
        waiter = dict(queue=1, queue_entry_time=0.0, attained_gpu_s=3300.0)
        victim.update(queue=0, attained=100.0)
    if case == "not-eligible":
        waiter["eligible_time"] = 1001.0
    jobs = [running(1, (8,), ("n0",), **victim), pending(2, (8,), **waiter)]
    d = decide(snapshot({"n0": 8}, jobs), cfg, 1000.0)
    assert d.preemptions == ()


def test_each_victim_serves_one_waiter() -> None:
    jobs = [running(1, (8,), ("n0",), queue=2, attained=9000),
            pending(2, (8,), submit=1.0), pending(3, (8,), submit=2.0)]
    d = decide(snapshot({"n0": 8}, jobs), LAS, 1000.0)
    assert [(p.waiter, p.victims) for p in d.preemptions] == [(2, (1,))]


@pytest.mark.parametrize("policy", sorted(n for n, cls in POLICIES.items() if cls.preemptive))
def test_gpus_a_node_shows_free_already_are_not_counted_again_as_releasing(policy: str) -> None:
    """Jobs and nodes are read apart: n0 already shows the 8 GPUs of job 1, completing, as
    free while job 1 still lists n0. The two 8-GPU waiters share those 8 GPUs, not 16: the
    first starts on them, the second preempts job 2."""
    long = dict(queue=2, attained=80000.0, duration_s=50000.0)   # 10,000 s on 8 GPUs
    jobs = [running(1, (8,), ("n0",), releasing=True, **long),
            running(2, (8,), ("n1",), **long),
            pending(3, (8,), submit=1.0, duration_s=100.0),
            pending(4, (8,), submit=2.0, duration_s=100.0)]
    snap = dataclasses.replace(snapshot(TWO_NODES, jobs), nodes=(
        NodeView("n0", 8, 8), NodeView("n1", 8, 0)))
    d = decide(snap, PolicyConfig(policy=policy), 1000.0,
               distribution=GittinsDistribution([100, 900, 20000]))
    assert [(p.waiter, p.victims) for p in d.preemptions] == [(4, (2,))]


def test_srtf_preempts_only_longer_remaining_time() -> None:
    cfg = PolicyConfig(policy="srtf")
    long_job = running(1, (4,), ("n0",), queue=0, attained=400, duration_s=1000.0)  # 900 left
    short_job = running(2, (4,), ("n1",), queue=0, attained=400, duration_s=150.0)  # 50 left
    waiter = pending(3, (4, 4), duration_s=100.0)
    d = decide(snapshot({"n0": 4, "n1": 4}, [long_job, short_job, waiter]), cfg, 500.0)
    assert d.preemptions == ()                      # would need the 50-s job too
    waiter = pending(3, (4,), duration_s=100.0)
    d = decide(snapshot({"n0": 4, "n1": 4}, [long_job, short_job, waiter]), cfg, 500.0)
    assert [(p.waiter, p.victims) for p in d.preemptions] == [(3, (1,))]


def test_srtf_needs_durations() -> None:
    with pytest.raises(ValueError, match="duration_s"):
        decide(snapshot({"n0": 1}, [pending(1, (1,))]), PolicyConfig(policy="srtf"), 0.0)


def test_fifo_order_and_strictness() -> None:
    jobs = [pending(1, (1,), submit=5.0), pending(2, (1,), submit=1.0),
            running(3, (1,), ("n0",), queue=0, attained=10.0)]
    fifo = decide(snapshot({"n0": 8}, jobs), PolicyConfig(policy="fifo"), 10.0)
    fit = decide(snapshot({"n0": 8}, jobs), PolicyConfig(policy="fifo-fit"), 10.0)
    assert fifo.order == fit.order == (2, 1)
    assert fifo.strict_order and not fit.strict_order


def test_running_job_on_unknown_node_is_an_error() -> None:
    jobs = [running(1, (8,), ("gone",), queue=2, attained=9000), pending(2, (8,))]
    snap = snapshot({"n0": 8}, [jobs[1]])
    with pytest.raises(ValueError, match="gone"):
        decide(type(snap)(snap.nodes, tuple(jobs)), LAS, 1000.0)


def test_phase_enum_is_the_interface() -> None:
    assert {p.value for p in JobPhase} == {"PENDING", "RUNNING"}


# ---- config ---------------------------------------------------------------------------------

def test_config_defaults_match_the_issue() -> None:
    c = PolicyConfig()
    assert (c.thresholds_gpu_s, c.starve_knob, c.min_run_s, c.gittins_quantum_gpu_s,
            c.checkpoint_overhead_s, c.requeue_delay_s, c.decision_interval_s) == (
        (3250, 7200), 8, 60, 3250, 15, 121, 30)


def test_config_from_mapping() -> None:
    c = PolicyConfig.from_mapping({"policy": "las", "thresholds_gpu_s": [100, 200],
                                   "starve_knob": 4, "preemption": False})
    assert (c.policy, c.thresholds_gpu_s, c.starve_knob, c.preemption) == (
        "las", (100.0, 200.0), 4.0, False)
    assert c.zero_cost().requeue_delay_s == 0 and c.zero_cost().starve_knob == 4


@pytest.mark.parametrize(("data", "line"), [
    pytest.param({"knob": 8}, "policy.knob: unknown key; valid keys: checkpoint_overhead_s, "
                 "decision_interval_s, gittins_quantum_gpu_s, min_run_s, policy, preempt_gain, "
                 "preemption, promoted_preempts, requeue_delay_s, requeue_guard, starve_knob, "
                 "thresholds_gpu_s, thresholds_s, wait_guard", id="unknown-key"),
    pytest.param({"starve_knob": "8"}, "policy.starve_knob: expected a number >= 0 (got '8')",
                 id="string-for-number"),
    pytest.param({"starve_knob": True}, "policy.starve_knob: expected a number >= 0 (got True)",
                 id="bool-for-number"),
    pytest.param({"preemption": 1}, "policy.preemption: expected true or false (got 1)",
                 id="int-for-bool"),
    pytest.param({"thresholds_gpu_s": [7200, 3250]}, "policy.thresholds_gpu_s: thresholds must "
                 "increase strictly (got [7200.0, 3250.0])", id="decreasing"),
    pytest.param({"thresholds_gpu_s": "3250"}, "policy.thresholds_gpu_s: expected a list "
                 "(got '3250')", id="not-a-list"),
    pytest.param({"min_run_s": -1}, "policy.min_run_s: must be >= 0 (got -1)", id="negative"),
    pytest.param({"requeue_delay_s": float("nan")}, "policy.requeue_delay_s: must be a finite "
                 "number (got nan)", id="nan"),
    pytest.param({"policy": "dlas-gpu"}, "policy.policy: must be 'tiresias-las', "
                 "'tiresias-gittins', 'las', 'fifo', 'fifo-fit' or 'srtf' (got 'dlas-gpu')",
                 id="unknown-policy"),
    pytest.param(["las"], "policy: expected a mapping of keys, got list", id="not-a-mapping"),
])
def test_config_errors_name_the_key_and_range(data: dict, line: str) -> None:
    with pytest.raises(ConfigError) as err:
        PolicyConfig.from_mapping(data)
    assert str(err.value) == line


def test_config_reports_every_problem_and_direct_construction_is_checked() -> None:
    with pytest.raises(ConfigError) as err:
        PolicyConfig.from_mapping({"starve_knob": -1, "thresholds_s": [1, "x"]}, prefix="sim")
    assert str(err.value).splitlines() == [
        "sim.thresholds_s[1]: expected a number > 0 (got 'x')",
        "sim.starve_knob: must be >= 0 (got -1)"]
    with pytest.raises(ValueError, match="gittins_quantum_gpu_s"):
        PolicyConfig(gittins_quantum_gpu_s=0)
    with pytest.raises(ValueError, match="increase strictly"):
        dataclasses.replace(PolicyConfig(), thresholds_gpu_s=(10.0, 5.0))


def test_direct_construction_words_its_problems_and_converts_like_the_yaml_path() -> None:
    # the same one-line-per-problem message as from_mapping, without the section prefix
    with pytest.raises(ConfigError) as err:
        PolicyConfig(starve_knob=-1, thresholds_gpu_s=(5, float("inf")), preemption="yes")
    assert str(err.value).splitlines() == [
        "thresholds_gpu_s[1]: must be a finite number (got inf)",
        "starve_knob: must be >= 0 (got -1)",
        "preemption: expected true or false (got 'yes')"]
    # an int is taken as a float and a list as a tuple, so equal settings compare (and hash) equal
    c = PolicyConfig(starve_knob=4, thresholds_gpu_s=[100, 200])
    assert (type(c.starve_knob), c.thresholds_gpu_s) == (float, (100.0, 200.0))
    assert c == PolicyConfig(starve_knob=4.0, thresholds_gpu_s=(100.0, 200.0))
    assert hash(c) == hash(PolicyConfig(starve_knob=4.0, thresholds_gpu_s=(100.0, 200.0)))
