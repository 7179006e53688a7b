"""``PolicyConfig.preempt_gain``: a waiter keeps the victims it found only when ``p ×`` the
shortest expected remaining time among them exceeds ``preempt_gain × k ×`` (the seconds it runs
in its quantum + checkpoint overhead + requeue delay), ``p`` being its chance to end within
that quantum, by the duration distribution passed in. Cases worked out by hand on the samples
1,000, 5,000 and 20,000 GPU·s (2D-LAS, thresholds 3,250 / 7,200 GPU·s, costs 15 + 121 = 136 s),
through ``decide`` and the incremental scheduler.

A new 1-GPU waiter: quantum 3,250 GPU·s, within which only the 1,000 sample ends: ``p`` 1/3,
run (1,000 + 3,250 + 3,250) / 3 = 2,500 s; it repays a victim with more than 3 × (2,500 +
136) = 7,908 s left. A 1-GPU job in queue 1 (3,250 to 7,200 GPU·s) that attained ``a`` < 5,000
has (5,000 + 20,000) / 2 - a = 12,500 - a s left."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.fast.incremental import Scheduler
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import Preemption
from prioritizer.policy.validation import ConfigError
from prioritizer.policy.victims import expected_left_s, preemption_pays, quantum_gpu_s
from tests.policy_helpers import pending, running, snapshot

DIST = GittinsDistribution([1_000.0, 5_000.0, 20_000.0])


@pytest.mark.parametrize(("attained", "gpus", "expected"), [
    (0.0, 1, 26_000.0 / 3),       # a new job: the mean, 8,666.7 s on one GPU
    (0.0, 2, 13_000.0 / 3),       # the same GPU·s over 2 GPUs: 4,333.3 s
    (4_000.0, 1, 8_500.0),        # samples above 4,000: 5,000 and 20,000, mean 12,500
    (8_000.0, 1, 12_000.0),       # only 20,000 is above: 12,000 left
    (30_000.0, 1, 30_000.0),      # past every sample: as long again as it ran
    (30_000.0, 0, 30_000.0),      # a job of 0 GPUs counts as one
])
def test_expected_left(attained: float, gpus: int, expected: float) -> None:
    assert expected_left_s(DIST, attained, gpus) == pytest.approx(expected)


@pytest.mark.parametrize(("attained", "quantum", "expected"), [
    (0.0, 3_250.0, (1 / 3, 2_500.0)),          # see the module doc
    (4_500.0, 2_700.0, (0.5, 1_600.0)),        # above: 5,000 (ends, 500) and 20,000 (2,700)
    (0.0, float("inf"), (1.0, 26_000.0 / 3)),  # no quantum: the mean
    (30_000.0, 40_000.0, (1.0, 30_000.0)),     # past every sample: as long again
    (30_000.0, 10_000.0, (0.0, 10_000.0)),     # ... which outlasts the quantum
])
def test_outlook(attained: float, quantum: float, expected: tuple[float, float]) -> None:
    assert DIST.outlook(attained, quantum) == pytest.approx(expected)


@pytest.mark.parametrize(("policy", "attained", "gpus", "expected"), [
    ("tiresias-las", 0.0, 2, 3_250.0),
    ("tiresias-las", 4_500.0, 1, 2_700.0),
    ("tiresias-las", 7_200.0, 1, float("inf")),   # the last queue
    ("las", 400.0, 2, 6_100.0),                   # thresholds 3,250 / 7,200 s × 2 GPUs
    ("tiresias-gittins", 9_000.0, 1, 3_250.0),    # the Gittins quantum
    ("srtf", 0.0, 1, float("inf")),
])
def test_quantum(policy: str, attained: float, gpus: int, expected: float) -> None:
    assert quantum_gpu_s(PolicyConfig(policy=policy), attained, gpus) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(("p", "run", "victims", "gain", "pays"), [
    (1.0, 100.0, [237.0], 1.0, True),          # 237 > 100 + 136
    (1.0, 100.0, [236.0], 1.0, False),         # equal: does not repay
    (0.5, 100.0, [473.0], 1.0, True),          # half of 473 > 236
    (1.0, 100.0, [500.0, 400.0], 1.0, False),  # two victims: 400 > 2 × 236 = 472? no
    (1.0, 100.0, [500.0, 480.0], 1.0, True),   # 480 > 472
    (1.0, 100.0, [200.0], 0.5, True),          # 200 > 0.5 × 236 = 118
])
def test_preemption_pays(p: float, run: float, victims: list[float], gain: float,
                         pays: bool) -> None:
    assert preemption_pays(p, run, victims, 136.0, gain) is pays


def _decisions(holders: list, waiter, gain: float, node_gpus: int,
               distribution: GittinsDistribution | None = DIST) -> tuple:
    config = PolicyConfig(preempt_gain=gain)
    d = decide(snapshot({"n0": node_gpus}, [*holders, waiter]), config, 1_000.0,
               distribution=distribution)
    return d.preemptions


@pytest.mark.parametrize(("gpus", "attained", "gain", "preempts"), [
    (1, 4_900.0, 1.0, False),    # 7,600 s left: less than 7,908
    (1, 4_000.0, 1.0, True),     # 8,500 s left
    (1, 8_000.0, 1.0, True),     # last queue: 20,000 - 8,000 = 12,000 s left
    (2, 4_000.0, 1.0, False),    # 2 GPUs: 8,500 GPU·s / 2 = 4,250 s left
    (2, 4_000.0, 0.5, True),     # 4,250 > 0.5 × 7,908
    (2, 4_000.0, 0.0, True),     # the rule off: the paper's preemption
])
def test_one_victim(gpus: int, attained: float, gain: float, preempts: bool) -> None:
    """A new 1-GPU waiter on a node whose ``gpus`` GPUs one queue-1 or last-queue job holds."""
    holder = running(1, (gpus,), ("n0",), queue=1 if attained < 7_200 else 2,
                     attained=attained)
    waiter = pending(2, (1,), submit=900.0)
    assert _decisions([holder], waiter, gain, gpus) == (
        (Preemption(2, (1,)),) if preempts else ())


@pytest.mark.parametrize(("attained", "gain", "preempts"), [
    # a new 2-GPU waiter: p 1/3, run 2,500 GPU·s / 2 = 1,250 s; two victims must have more
    # than 3 × 2 × (1,250 + 136) = 8,316 s left each
    (4_900.0, 1.0, False),   # 7,600 s left each: one would repay, two do not
    (4_000.0, 1.0, True),    # 8,500 s left each
    (4_900.0, 0.5, True),    # 7,600 > 4,158
])
def test_two_victims_must_repay_twice(attained: float, gain: float, preempts: bool) -> None:
    holders = [running(1, (1,), ("n0",), queue=1, attained=attained),
               running(3, (1,), ("n0",), queue=1, attained=attained)]
    waiter = pending(2, (2,), submit=900.0)
    assert _decisions(holders, waiter, gain, 2) == (
        (Preemption(2, (1, 3)),) if preempts else ())


def test_without_a_distribution_the_rule_is_off() -> None:
    holder = running(1, (1,), ("n0",), queue=1, attained=4_900.0)
    assert _decisions([holder], pending(2, (1,), submit=900.0), 1.0, 1, None) == (
        Preemption(2, (1,)),)


def test_a_refused_waiter_leaves_its_victims_to_the_next() -> None:
    """Two 1-GPU waiters on a 1-GPU node held by a queue-1 job with 7,600 s left: the new one
    (7,908 s to repay) preempts no one. The other attained 4,500 GPU·s before a requeue and
    is back in queue 0 by promotion (a last run of 10 s, then 100 s of waiting, knob 8): its
    quantum is 7,200 - 4,500 = 2,700 GPU·s, ``p`` 1/2, run 1,600 s, so it repays a victim
    with more than 2 × (1,600 + 136) = 3,472 s left, and takes the holder."""
    holder = running(1, (1,), ("n0",), queue=1, attained=4_900.0)
    new = pending(2, (1,), submit=900.0)
    back = pending(3, (1,), submit=0.0, queue=1, attained_gpu_s=4_500.0, attained_s=4_500.0,
                   queue_entry_time=900.0, last_run_s=10.0, last_run_end=900.0)
    d = decide(snapshot({"n0": 1}, [holder, new, back]), PolicyConfig(preempt_gain=1.0),
               1_000.0, distribution=DIST)
    assert d.order == (2, 3)   # the new one first
    assert d.preemptions == (Preemption(3, (1,)),)


@pytest.mark.parametrize(("attained", "gain", "preempts"), [
    (4_900.0, 1.0, False), (8_000.0, 1.0, True), (4_900.0, 0.0, True)])
def test_the_incremental_scheduler_applies_it(attained: float, gain: float,
                                              preempts: bool) -> None:
    """The one-victim case through ``Scheduler``: a 1-GPU job started at 0 runs ``attained``
    seconds; a new 1-GPU job arrives then."""
    sched = Scheduler(PolicyConfig(preempt_gain=gain), [1], ["n0"], DIST)
    sched.add(1, (1,), 0.0, 50_000.0)
    sched.decide(0.0)
    assert [p.job_id for p in sched.plan_starts(0.0)] == [1]
    sched.add(2, (1,), attained, 50_000.0)
    found = sched.decide(attained).preemptions
    assert found == ((Preemption(2, (1,)),) if preempts else ())


def test_a_negative_preempt_gain_is_refused() -> None:
    with pytest.raises(ConfigError, match="preempt_gain: must be >= 0"):
        PolicyConfig(preempt_gain=-1.0)


@pytest.mark.parametrize(("gain", "expected"), [
    # a new job's p 1/3 and run 2,500 s; A at 4,000 to 4,900 GPU·s has 8,500 to 7,600 s
    # left, less than 3 × (2,500 + 500) = 9,000: B waits for A's end
    (1.0, [(0.0, 4_900.0), (4_900.0, 5_000.0)]),
    # off: B preempts A (queue 1 from 3,250) at 4,000 and runs to 4,100; A is eligible
    # again at 4,500 and runs its last 900 s
    (0.0, [(0.0, 5_400.0), (4_000.0, 4_100.0)]),
])
def test_simulate_takes_the_preempt_gain_option(tmp_path: Path, gain: float,
                                                expected: list[tuple[float, float]]) -> None:
    """``dlprio simulate --preempt-gain 1`` on one 1-GPU node with the samples above
    (``--durations``), and without it, a 500 s requeue delay and no other cost: A
    from 0 for 4,900 s, B from 4,000 for 100 s (per-job CSV: first start, end)."""
    samples = tmp_path / "d.csv"
    samples.write_text("duration\n1000\n5000\n20000\n")
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\na,1,0,4900\nb,1,4000,100\n")
    out = tmp_path / "jobs.csv"
    rule = ["--preempt-gain", f"{gain:g}", "--durations", str(samples)] if gain else []
    assert main(["simulate", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1",
                 "--checkpoint-overhead", "0", "--requeue-delay", "500",
                 "--decision-interval", "0", "--min-run", "0", *rule,
                 "--jobs-csv", str(out)]) == 0
    rows = {r["job_id"]: r for r in csv.DictReader(out.read_text().splitlines())}
    assert [(float(rows[n]["start"]), float(rows[n]["end"])) for n in "ab"] == expected


@pytest.mark.parametrize(("config", "uses"), [
    (PolicyConfig(), False),
    (PolicyConfig(preempt_gain=1.0), True),          # drivers pass a distribution then
    (PolicyConfig(policy="tiresias-gittins"), True),
])
def test_which_settings_read_a_distribution(config: PolicyConfig, uses: bool) -> None:
    assert config.uses_distribution is uses
