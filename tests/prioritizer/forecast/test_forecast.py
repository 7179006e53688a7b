"""Start-time forecasts (``prioritizer.forecast``) on small worlds whose answer is worked out
by hand: one node, known remaining run times, the policy's costs applied step by step; and
the calibration of start bands on a handful of past outcomes worked out by hand."""

from __future__ import annotations

import random
from math import inf, log

import pytest

from prioritizer.forecast.calibrate import (RECORD_GAP_S, Past, Residuals, calibration,
                                            cohort, km_quantile, note_starts, remember)
from prioritizer.forecast.draws import ServiceSurvival, remaining_s, survival_of
from prioritizer.forecast.forecast import band, forecast, quantile
from prioritizer.forecast.world import ForecastJob, World
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution

DIST = GittinsDistribution([100.0, 200.0, 400.0])
NODE = (("n0", 4),)


def running(job_id, gpus=4, *, attained_s, run_start, left=None, limit=None):
    return ForecastJob(job_id, "running", (gpus,), 0.0, attained_gpu_s=attained_s * gpus,
                       attained_s=attained_s, run_start=run_start, nodes=("n0",),
                       remaining_s=left, time_limit_s=limit)


def pending(job_id, gpus=4, *, submit, left=None, eligible=None, attained_s=0.0):
    return ForecastJob(job_id, "pending", (gpus,), submit, attained_gpu_s=attained_s * gpus,
                       attained_s=attained_s, remaining_s=left, eligible=eligible)


def by_id(world, config, **kw):
    return forecast(world, config, DIST, **kw).by_id()


def test_fifo_one_node_known_durations_gives_exact_starts():
    # A holds all 4 GPUs until 1000 + 300; B (4 GPUs) then runs 200 s; C (2 GPUs) comes
    # after B in strict FIFO order and runs 50 s once B ends
    world = World(1000.0, NODE, (running("A", attained_s=100, run_start=900.0, left=300),
                                 pending("B", submit=10.0, left=200),
                                 pending("C", 2, submit=20.0, left=50)))
    got = by_id(world, PolicyConfig(policy="fifo"))
    assert got["A"].start == (900.0, 900.0, 900.0)
    assert got["A"].finish == (1300.0, 1300.0, 1300.0)
    assert got["B"].start == (1300.0, 1300.0, 1300.0)
    assert got["B"].finish == (1500.0, 1500.0, 1500.0)
    assert got["C"].start == (1500.0, 1500.0, 1500.0)
    assert got["C"].finish == (1550.0, 1550.0, 1550.0)
    assert got["C"].ahead == 1 and got["C"].first_ahead == ("B",)
    assert got["B"].ahead == 0 and got["B"].first_ahead == ()
    assert all(j.preempt_chance == 0.0 for j in got.values())


def test_horizon_marks_what_lies_beyond_it():
    # as the fifo world above: B would start at 1300 and end at 1500
    world = World(1000.0, NODE, (running("A", attained_s=100, run_start=900.0, left=300),
                                 pending("B", submit=10.0, left=200)))
    got = forecast(world, PolicyConfig(policy="fifo"), DIST, horizon_s=400.0).by_id()
    assert got["B"].start == (1300.0,) * 3 and got["B"].finish == (inf,) * 3
    got = forecast(world, PolicyConfig(policy="fifo"), DIST, horizon_s=100.0).by_id()
    assert got["B"].start == (inf,) * 3 and got["A"].finish == (inf,) * 3


def test_known_durations_need_one_replay():
    world = World(0.0, NODE, (pending("B", submit=0.0, left=10),))
    assert forecast(world, PolicyConfig(), DIST, draws=7).draws == 1


def test_las_preemption_without_costs():
    # A has run 4000 s (above las's first threshold 3250 s: queue 1); B is new (queue 0) and
    # takes the node at once: A is requeued with 500 s left and ends at 1000 + 100 + 500
    world = World(1000.0, NODE, (running("A", attained_s=4000, run_start=0.0, left=500),
                                 pending("B", submit=990.0, left=100)))
    got = by_id(world, PolicyConfig(policy="las").zero_cost())
    assert got["B"].start == (1000.0,) * 3 and got["B"].finish == (1100.0,) * 3
    assert got["A"].finish == (1600.0,) * 3
    assert got["A"].preempt_chance == 1.0 and got["B"].preempt_chance == 0.0
    # A ran at the forecast: its run start stays its start, its next one is B's end
    assert got["A"].start == (0.0,) * 3 and got["A"].restart == (1100.0,) * 3
    assert got["B"].restart is None


def test_las_preemption_with_the_default_costs():
    # preemption on the next 30 s tick (1020); A's checkpoint holds the GPUs 15 s (B starts
    # at 1035, ends 1135); A has 500 - 20 = 480 s left and may restart after the 121 s
    # requeue delay: 1035 + 121 = 1156, ends 1156 + 480 = 1636
    world = World(1000.0, NODE, (running("A", attained_s=4000, run_start=0.0, left=500),
                                 pending("B", submit=990.0, left=100)))
    got = by_id(world, PolicyConfig(policy="las"))
    assert got["B"].start == (1035.0,) * 3 and got["B"].finish == (1135.0,) * 3
    assert got["A"].finish == (1636.0,) * 3
    assert got["A"].restart == (1156.0,) * 3   # what dlqueue shows once A waits again


def test_grace_job_frees_its_gpus_at_grace_end_and_waits_out_the_requeue_delay():
    a = ForecastJob("A", "grace", (4,), 0.0, attained_gpu_s=16000, attained_s=4000,
                    run_start=0.0, nodes=("n0",), remaining_s=300, grace_end=1010.0)
    world = World(1000.0, NODE, (a, pending("B", submit=990.0, left=100)))
    got = by_id(world, PolicyConfig(policy="las"))
    assert got["B"].start == (1010.0,) * 3 and got["B"].finish == (1110.0,) * 3
    # A's start is its next one, at its BeginTime 1010 + 121 (B ended at 1110), never the
    # start of the run it is leaving (0); it is not preempted again
    assert got["A"].start == (1131.0,) * 3
    assert got["A"].finish == (1131.0 + 300,) * 3
    assert got["A"].preempt_chance == 0.0 and got["A"].restart is None


def test_a_job_being_preempted_waits_for_its_next_start_behind_the_queue():
    # A (queue 1, 4000 s attained) leaves the node at 1010 and may restart at 1131; B (queue
    # 0, new) takes the node at 1010 and runs 300 s, so A restarts when B ends at 1310 and
    # ends 100 s later; in the start order at 1000 A waits behind nobody (B started at once)
    a = ForecastJob("A", "grace", (4,), 0.0, attained_gpu_s=16000, attained_s=4000,
                    run_start=0.0, nodes=("n0",), remaining_s=100, grace_end=1010.0)
    world = World(1000.0, NODE, (a, pending("B", submit=990.0, left=300)))
    got = by_id(world, PolicyConfig(policy="las"))
    assert got["B"].start == (1010.0,) * 3
    assert got["A"].start == (1310.0,) * 3 and got["A"].finish == (1410.0,) * 3


def test_begin_time_delays_a_start_on_a_free_node():
    world = World(1000.0, NODE, (pending("B", submit=0.0, left=60, eligible=1050.0),))
    got = by_id(world, PolicyConfig())
    assert got["B"].start == (1050.0,) * 3 and got["B"].finish == (1110.0,) * 3


def test_a_job_larger_than_every_node_has_no_forecast():
    world = World(0.0, NODE, (pending("B", 8, submit=0.0, left=60),
                              pending("C", 2, submit=0.0, left=60)))
    got = by_id(world, PolicyConfig())
    assert got["B"].start is None and got["B"].finish is None
    assert got["C"].start == (0.0,) * 3


def test_remaining_is_drawn_above_the_attained_service():
    # samples 100, 200, 400 GPU·s; a 1-GPU job at 150 GPU·s has 50 or 250 s left
    ended = ServiceSurvival(DIST.samples)
    job = ForecastJob("J", "pending", (1,), 0.0, attained_gpu_s=150.0, attained_s=150.0)
    rng = random.Random(1)
    seen = {remaining_s(job, ended, 0.0, rng) for _ in range(200)}
    assert seen == {50.0, 250.0}
    two = ForecastJob("J", "pending", (2,), 0.0, attained_gpu_s=150.0, attained_s=75.0)
    assert {remaining_s(two, ended, 0.0, rng) for _ in range(200)} == {25.0, 125.0}


class Uniform(random.Random):
    """``random()`` returns the given values in turn."""

    def __init__(self, *values: float) -> None:
        super().__init__(0)
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def test_censored_jobs_move_the_mass_of_total_service_to_longer_samples():
    # Kaplan-Meier of ended 100, 200, 400 and censored (still running) 150, 300 GPU·s:
    # at 100, 5 at risk: mass 1/5, survival 4/5; at 200 (150 censored below it) 3 at risk:
    # mass 4/5 * 1/3 = 4/15, survival 8/15; at 400 (300 censored) 1 at risk: mass 8/15.
    # Cumulative 0.2, 0.4667, 1: plain samples would give 1/3 each.
    km = ServiceSurvival([400.0, 100.0, 200.0], [300.0, 150.0, 0.0])
    assert km.tail == 0.0
    picks = [km.total(0.0, Uniform(u)) for u in (0.19, 0.21, 0.46, 0.47, 0.99)]
    assert picks == [100.0, 200.0, 200.0, 400.0, 400.0]
    # above 150 GPU·s attained: 200 (mass 4/15) or 400 (8/15), so 1/3 and 2/3 of the draws
    assert [km.total(150.0, Uniform(u)) for u in (0.33, 0.34)] == [200.0, 400.0]


def test_mass_beyond_every_ended_sample_draws_twice_the_longest():
    # ended 100, 200; 300 still running: 1/3 at 100, 1/3 at 200, 1/3 beyond 200 (the tail).
    # Above 150 attained: 200 or the tail, half each; the tail is 2 x max(200, 150) = 400
    km = ServiceSurvival([100.0, 200.0], [300.0])
    assert km.tail == pytest.approx(1 / 3)
    job = ForecastJob("J", "pending", (1,), 0.0, attained_gpu_s=150.0, attained_s=150.0)
    assert remaining_s(job, km, 0.0, Uniform(0.49)) == 50.0
    assert remaining_s(job, km, 0.0, Uniform(0.51)) == 250.0
    # the survival a forecast draws from: its samples, and its jobs of unknown end censored
    world = (running("A", 1, attained_s=300, run_start=0.0),
             running("K", 1, attained_s=900, run_start=0.0, left=5.0))
    assert survival_of([100.0, 200.0], world).tail == pytest.approx(1 / 3)


def test_outlived_job_gets_its_attained_service_again():
    job = ForecastJob("J", "pending", (2,), 0.0, attained_gpu_s=1000.0, attained_s=500.0)
    assert remaining_s(job, ServiceSurvival(DIST.samples), 0.0, random.Random(0)) == 500.0


def test_time_limit_bounds_the_current_run():
    # ran 100 s of a 120 s limit: at most 20 s left whatever is drawn (50 or 250 s)
    job = ForecastJob("J", "running", (1,), 0.0, attained_gpu_s=150.0, attained_s=150.0,
                      run_start=0.0, nodes=("n0",), time_limit_s=120.0)
    assert remaining_s(job, ServiceSurvival(DIST.samples), 100.0, random.Random(0)) == 20.0


def test_unknown_durations_give_ordered_bands_and_a_repeatable_forecast():
    world = World(0.0, NODE, (running("A", attained_s=20, run_start=0.0),
                              pending("B", submit=0.0), pending("C", 2, submit=1.0)))
    first = forecast(world, PolicyConfig(), DIST, draws=10, seed=3)
    assert first == forecast(world, PolicyConfig(), DIST, draws=10, seed=3)
    for job in first.jobs:
        assert job.start is not None and job.finish is not None
        assert job.start[0] <= job.start[1] <= job.start[2]
        assert job.finish[0] <= job.finish[1] <= job.finish[2]
        assert job.finish[0] >= job.start[0]
    assert first.by_id()["A"].start == (0.0, 0.0, 0.0)


def test_quantiles_interpolate_between_ranks():
    values = [float(v) for v in range(1, 12)]          # 1..11: ranks 0..10
    assert band(values) == (2.0, 6.0, 10.0)
    assert quantile([0.0, 10.0], 0.1) == pytest.approx(1.0)
    # beyond the horizon: the points above the last finite rank are beyond it too
    assert band([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, inf, inf]) == (2.0, 6.0, inf)
    assert quantile([5.0, inf], 0.0) == 5.0


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="job X: a running job needs run_start"):
        ForecastJob("X", "running", (1,), 0.0)
    with pytest.raises(ValueError, match="job X: holds unknown node"):
        World(0.0, NODE, (ForecastJob("X", "running", (1,), 0.0, run_start=0.0,
                                      nodes=("n9",)),))
    with pytest.raises(ValueError, match="draws: must be >= 1"):
        forecast(World(0.0, NODE, ()), PolicyConfig(), DIST, draws=0)


# ---------------------------------------------------------------- calibration (calibrate.py)
#: five past forecasts of median wait 240 s (group < 10 min), made at 1000..5000 s; actual
#: waits 90, 240, 240, 540, 1140 s, so (actual + 60) / (240 + 60) = 0.5, 1, 1, 2, 4 and the
#: residuals are ln 0.5, 0, 0, ln 2, ln 4; they started at 1090, 2240, 3240, 4540, 6140 s
FIVE = [Past(str(k), 1000.0 * k, 1000.0 * k + 240, 1000.0 * k + wait)
        for k, wait in zip(range(1, 6), (90, 240, 240, 540, 1140))]


def test_calibrated_band_of_five_worked_residuals():
    # sorted residuals -ln2, 0, 0, ln2, 2 ln2, none censored: the Kaplan-Meier survival
    # after each is 4/5, 3/5, 2/5, 1/5, 0. q10: first at most 0.9: -ln2; q50: first at most
    # 0.5: 0 (2/5); q90: first at most 0.1: 2 ln2. A raw median wait of 240 s: (240 + 60) =
    # 300, p10 = 300 / 2 - 60 = 90 s, p50 = 240 s, p90 = 300 · 4 - 60 = 1140 s
    cal = calibration(FIVE, 10_000.0, min_known=5)
    assert cal.pooled.known == pytest.approx((-log(2), 0.0, 0.0, log(2), 2 * log(2)))
    assert cal.pooled.censored == ()
    got, used = cal.start_band(10_000.0, (10_100.0, 10_240.0, 10_500.0))
    assert used == 5
    assert got == pytest.approx((10_090.0, 10_240.0, 11_140.0))
    # a median wait of 2 h is another group, empty: the pooled residuals calibrate it;
    # (7200 + 60) · 4 - 60 = 28,980 s
    got, used = cal.start_band(0.0, (0.0, 7200.0, 9000.0))
    assert used == 5 and got[1] == pytest.approx(7200.0) and got[2] == pytest.approx(28_980.0)


def test_the_published_median_is_the_draws_clipped_into_the_calibrated_band():
    # five forecasts of median wait 240 s whose jobs all started later: waits 540, 540,
    # 1140, 1140, 2340 s, ratios (w + 60) / 300 = 2, 2, 4, 4, 8: residuals ln2, ln2, 2 ln2,
    # 2 ln2, 3 ln2. Survival 4/5, 3/5, 2/5, 1/5, 0: q10 = ln2, q50 = 2 ln2, q90 = 3 ln2; a
    # raw median wait of 240 s: p10 = 300 · 2 - 60 = 540 s, p90 = 300 · 8 - 60 = 2340 s. The
    # draws' median (240 s) is below p10: clipped to 540 s; shifted by the median ratio it
    # would be 300 · 4 - 60 = 1140 s
    late = [Past(str(k), 1000.0 * k, 1000.0 * k + 240, 1000.0 * k + wait)
            for k, wait in zip(range(1, 6), (540, 540, 1140, 1140, 2340))]
    cal = calibration(late, 10_000.0, min_known=5)
    raw = (10_100.0, 10_240.0, 10_500.0)
    assert cal.start_band(10_000.0, raw) == (pytest.approx((10_540.0, 10_540.0, 12_340.0)), 5)
    assert cal.start_band(10_000.0, raw, shift_median=True) == (
        pytest.approx((10_540.0, 11_140.0, 12_340.0)), 5)


def test_kaplan_meier_quantiles_of_five_residuals_two_censored():
    # known -ln2, 0, 2 ln2; censored (still waiting) at 0 and ln2. In order, at risk and
    # survival: -ln2 known, 5 at risk: S = 4/5; 0 known (before the censored 0), 4 at risk:
    # S = 4/5 · 3/4 = 3/5; 0 and ln2 censored: S stays 3/5, 1 left at risk; 2 ln2 known:
    # S = 3/5 · 0 = 0. q10 = -ln2 (4/5 <= 0.9); q50 = 2 ln2 (3/5 > 0.5 until then); q90 =
    # 2 ln2. Without the censored two the median would be 0
    known, censored = (-log(2), 0.0, 2 * log(2)), (0.0, log(2))
    assert [km_quantile(known, censored, p) for p in (0.1, 0.5, 0.9)] == pytest.approx(
        [-log(2), 2 * log(2), 2 * log(2)])
    assert km_quantile(known, (), 0.5) == 0.0
    assert Residuals(known, censored).quantiles == pytest.approx(
        (-log(2), 2 * log(2), 2 * log(2)))


def test_a_censored_long_wait_widens_p90():
    # known 1..10: S after the k-th is (10 - k) / 10; q10 = 1 (S = 0.9 exactly), q90 = 9
    # (S = 0.1). With one censored at 8.5 (11 at risk at first): S after 1..8 is
    # 10/11, 9/11, ..., 3/11 (each (n - 1) / n of the one before); 9 has 2 at risk: 3/22 =
    # 0.136 > 0.1; 10: 0. q10 = 2 (10/11 = 0.909 > 0.9), q90 = 10
    known = tuple(float(k) for k in range(1, 11))
    assert km_quantile(known, (), 0.1) == 1.0 and km_quantile(known, (), 0.9) == 9.0
    assert km_quantile(known, (8.5,), 0.1) == 2.0 and km_quantile(known, (8.5,), 0.9) == 10.0
    # above every known one, a censored residual leaves S at 1/6 > 0.1: p90 is open (inf)
    assert km_quantile(known[:5], (5.5,), 0.9) == inf
    # FIVE at 10,000 s and a forecast of median wait 240 s made at 7000 s whose job still
    # waits: censored at ln((3000 + 60) / 300) = ln 10.2 > 2 ln2. S: 5/6, 4/6, 3/6 (q50 = 0),
    # 2/6, 1/6, then the censored: q90 open, p90 beyond the horizon; p10 and p50 stay
    waiting = Past("w", 7000.0, 7240.0)
    cal = calibration(FIVE + [waiting], 10_000.0, min_known=5)
    assert cal.pooled.censored == pytest.approx((log(10.2),))
    got, used = cal.start_band(10_000.0, (10_100.0, 10_240.0, 10_500.0))
    assert used == 6 and got == pytest.approx((10_090.0, 10_240.0, inf))


def test_a_group_with_enough_residuals_calibrates_its_own_forecasts():
    # five more of median wait 2 h (group 1-6 h), each exact: residual 0, so that group's
    # band is the median itself; the 240 s forecasts keep their own five
    exact = [Past(f"x{k}", 100.0 * k, 100.0 * k + 7200, 100.0 * k + 7200) for k in range(5)]
    cal = calibration(FIVE + exact, 10_000.0, min_known=5)
    assert cal.start_band(10_000.0, (10_000.0, 17_200.0, 20_000.0)) == (
        (17_200.0, 17_200.0, 17_200.0), 5)
    got, used = cal.start_band(10_000.0, (10_100.0, 10_240.0, 10_500.0))
    assert used == 5 and got[2] == pytest.approx(11_140.0)


def test_too_few_outcomes_or_a_median_beyond_the_horizon_keep_the_raw_band():
    raw = (10_100.0, 10_240.0, 10_500.0)
    assert calibration(FIVE[:4], 10_000.0, min_known=5).start_band(10_000.0, raw) == (raw, 0)
    # censored residuals do not count towards the known outcomes a group needs
    still = [Past(f"w{k}", 9000.0, 9240.0) for k in range(3)]
    assert calibration(FIVE[:4] + still, 10_000.0, min_known=5).start_band(
        10_000.0, raw) == (raw, 0)
    beyond = (10_100.0, inf, inf)
    assert calibration(FIVE, 10_000.0, min_known=5).start_band(10_000.0, beyond) == (beyond, 0)


def test_a_forecast_never_uses_an_outcome_known_only_after_its_moment():
    # at 5000 s: job 5's forecast is made at 5000 (not before): only jobs 1-4 count, all
    # started by then; at 4500 s job 4 (made at 4000, started at 4540) still waits: censored
    # at ln((500 + 60) / 300)
    at_5000 = calibration(FIVE, 5000.0, min_known=1).pooled
    assert at_5000.known == pytest.approx((-log(2), 0.0, 0.0, log(2))) and not at_5000.censored
    at_4500 = calibration(FIVE, 4500.0, min_known=1).pooled
    assert at_4500.known == pytest.approx((-log(2), 0.0, 0.0))
    assert at_4500.censored == pytest.approx((log(560 / 300),))
    waiting = Past("w", 0.0, 100.0)                        # its job has not started
    assert calibration([waiting], 10_000.0, min_known=1).pooled == Residuals(
        (), (pytest.approx(log(10_060 / 160)),))


def test_the_cohort_is_the_latest_forecasts_made_back_to_max_known_outcomes():
    # at 6000 s, 2 outcomes at most: latest made first, w (3000, still waiting), s2 (2000,
    # started 2100), s1 (1000, started 1100): two known, the cohort ends there. l (made at 0,
    # started 5000, the latest start) is older than the cohort: picking by start instead would
    # keep l and s2 and leave w's long wait out
    past = [Past("l", 0.0, 60.0, 5000.0), Past("s1", 1000.0, 1060.0, 1100.0),
            Past("s2", 2000.0, 2060.0, 2100.0), Past("w", 3000.0, 3060.0)]
    assert [p.job_id for p in cohort(past, 6000.0, max_known=2)] == ["w", "s2", "s1"]
    # remember keeps what a later calibration can use: the same cohort, in order of moment
    assert remember(past, 6000.0, {}, max_known=2) == past[1:]


def test_starts_are_noted_and_forecasts_are_remembered_once_per_gap():
    past = [Past("a", 100.0, 400.0), Past("b", 100.0, 400.0), Past("c", 100.0, 400.0)]
    # a started at 350 (after its forecast); b is gone without a start (cancelled); c waits
    got = note_starts(past, {"a": 350.0, "z": 50.0}, ["a", "c"])
    assert got == [Past("a", 100.0, 400.0, 350.0), Past("c", 100.0, 400.0)]
    # c's waiting forecast is 800 s old at 900 s: less than the 900 s gap, not remembered
    # again; d is new; at 1000 s c's is 900 s old: remembered
    got = remember(got, 900.0, {"c": 1500.0, "d": 2000.0})
    assert got == [Past("a", 100.0, 400.0, 350.0), Past("c", 100.0, 400.0),
                   Past("d", 900.0, 2000.0)]
    assert remember(got, 1000.0, {"c": 1500.0})[-1] == Past("c", 1000.0, 1500.0)


def test_a_forecast_taken_in_after_its_jobs_start_was_noted_is_not_remembered_again():
    """a's forecast made at 300 s, while it waited, comes in after its start (350 s) was noted
    on its forecast of 100 s: 200 s apart, one start, remembered once (counted twice, every
    outcome would weigh double and calibration would start with half the outcomes it needs)."""
    noted = [Past("a", 100.0, 400.0, 350.0), Past("c", 100.0, 400.0)]
    assert remember(noted, 300.0, {"a": 420.0, "c": 500.0}) == noted
    # past the gap, a job that started and waits again (requeued) is remembered anew
    assert remember(noted, 100.0 + RECORD_GAP_S, {"a": 2000.0})[-1] == Past(
        "a", 100.0 + RECORD_GAP_S, 2000.0)


def test_after_the_clock_goes_back_records_from_the_future_are_dropped():
    year = 365 * 86400.0
    # while the clock ran a year ahead: x's forecast and start, and c's waiting forecast; a
    # (made at 100, started at 350) is a real outcome. Back at 1000 s, x would hold a slot of
    # the latest outcomes for a year and c would not be remembered again for a year
    past = [Past("a", 100.0, 400.0, 350.0), Past("x", year, year + 60, year + 30),
            Past("c", year, year + 500)]
    got = remember(past, 1000.0, {"c": 1500.0})
    assert got == [Past("a", 100.0, 400.0, 350.0), Past("c", 1000.0, 1500.0)]
    # a start noted up to gap_s after the forecast's moment (a later cycle saw it) is kept
    late = [Past("b", 900.0, 950.0, 1000.0 + RECORD_GAP_S)]
    assert remember(late, 1000.0, {}) == late


def _asked_from(k):
    """An ``out_of_time`` that says yes from its ``k``-th ask on."""
    asks = [0]

    def out_of_time():
        asks[0] += 1
        return asks[0] >= k
    return out_of_time


def test_a_draw_cut_by_its_budget_reaches_only_as_far_as_it_got(monkeypatch):
    # the fifo world of the first test, no modeled cost: events at 1000 (the seeding), 1300
    # (A ends, B starts), 1500 (B ends, C starts), 1550. Asked after every event: yes at the
    # second ask ends the replay at 1300, at the third at 1500; what lies after is as beyond
    # the horizon
    import prioritizer.forecast.replay as replay
    monkeypatch.setattr(replay, "CHECK_EVERY", 1)
    world = World(1000.0, NODE, (running("A", attained_s=100, run_start=900.0, left=300),
                                 pending("B", submit=10.0, left=200),
                                 pending("C", 2, submit=20.0, left=50)))
    config = PolicyConfig(policy="fifo").zero_cost()
    made = forecast(world, config, DIST, out_of_time=_asked_from(2))
    got = made.by_id()
    assert made.reached_s == 300.0
    assert got["A"].finish == (1300.0,) * 3 and got["B"].start == (1300.0,) * 3
    assert got["B"].finish == (inf,) * 3 and got["C"].start == (inf,) * 3
    made = forecast(world, config, DIST, out_of_time=_asked_from(3))
    got = made.by_id()
    assert made.reached_s == 500.0
    assert got["B"].finish == (1500.0,) * 3 and got["C"].start == (1500.0,) * 3
    assert got["C"].finish == (inf,) * 3
    # never out of time: the whole replay, reached_s None
    made = forecast(world, config, DIST, out_of_time=lambda: False)
    assert made.reached_s is None and made.by_id()["C"].finish == (1550.0,) * 3


def test_a_cut_draw_ends_the_draws_and_clips_the_earlier_ones(monkeypatch):
    # two draws made, the second cut at 1300: the first draw's end 1400 is past what the
    # second saw, so it counts as beyond (a band of [1250, inf] is inf above its lowest rank)
    from prioritizer.forecast.forecast import summarize
    from prioritizer.forecast.replay import Outcome
    world = World(1000.0, NODE, (pending("B", submit=10.0),))
    made = summarize(world, [[Outcome(1100.0, 1400.0, False)], [Outcome(1200.0, 1250.0, False)]],
                     ("B",), cut_at=1300.0)
    (job,) = made.jobs
    assert job.start == (1110.0, 1150.0, 1190.0)   # 1100 + 0.1 / 0.5 / 0.9 × 100
    assert job.finish == (inf, inf, inf)
    assert made.reached_s == 300.0
    # and the draws stop at a cut draw: two asked, the first cut, one made
    import prioritizer.forecast.replay as replay
    monkeypatch.setattr(replay, "CHECK_EVERY", 1)
    world = World(1000.0, NODE, (running("A", attained_s=100, run_start=900.0),
                                 pending("B", submit=10.0)))
    assert forecast(world, PolicyConfig(policy="fifo"), DIST, draws=2,
                    out_of_time=lambda: True).draws == 1


def test_a_later_draw_the_budget_ends_is_dropped(monkeypatch):
    # A's remaining time is drawn, so two draws are asked; the budget runs out only after
    # the first (``enough`` is asked after each draw and flips it): the second is ended at
    # its first ask and dropped, the first stands whole, to the last completion
    import prioritizer.forecast.replay as replay
    monkeypatch.setattr(replay, "CHECK_EVERY", 1)
    world = World(1000.0, NODE, (running("A", attained_s=100, run_start=900.0),
                                 pending("B", submit=10.0, left=50)))
    spent = [False]

    def enough():
        spent[0] = True
        return False

    made = forecast(world, PolicyConfig(policy="fifo").zero_cost(), DIST, draws=2,
                    enough=enough, out_of_time=lambda: spent[0])
    assert made.draws == 1 and made.reached_s is None
    b = made.by_id()["B"]
    # A (400 GPU·s attained) has outlived every sample (100/200/400 GPU·s): it is given as
    # much again, 400 GPU·s on 4 GPUs = 100 s, and ends at 1100; B then runs 50 s
    assert b.start == (1100.0,) * 3 and b.finish == (1150.0,) * 3
