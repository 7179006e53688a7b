"""The daemon's start-time forecasts (``prioritizer.daemon.forecasts``): the world a cycle
hands over, and a forecast made in the child process and published, on a world whose answer
is worked out by hand."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path

import pytest

from daemon_unit_helpers import unit
from prioritizer.config_file import ForecastConfig
from prioritizer.daemon.forecasts import DrawBudget, Forecaster, world_of
from prioritizer.daemon.observe import Observation
from prioritizer.forecast.forecast import forecast
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import Decisions, JobPhase, JobView, NodeView, QueueState, Snapshot
from slurm_plugin.slurm.shapes import job_from_json

NOW = 10_000.0


def _observation():
    """n0: 1 GPU held by job 1 (running since NOW - 40, 40 GPU·s); n1: 8 GPUs, 6 free (2 held
    by a job the daemon does not manage); job 2 waits for 1 GPU."""
    a = JobView(1, JobPhase.RUNNING, (1,), 0.0, attained_gpu_s=40.0, attained_s=40.0,
                run_start=NOW - 40, nodes=("n0",))
    b = JobView(2, JobPhase.PENDING, (1,), NOW - 100)
    nodes = (NodeView("n0", 1, 0), NodeView("n1", 8, 6))
    units = {1: unit(1, gpus=1), 2: unit(2, "PENDING", start=None, gpus=1)}
    return Observation(NOW, Snapshot(nodes, (a, b)), units, ())


def _decisions():
    return Decisions(order=(2,), states={
        1: QueueState(1, 0, NOW - 40, 0.0, False, "new"),
        2: QueueState(2, 0, NOW - 100, 0.0, True, "new")})


def _collect(forecaster) -> None:
    """Wait (at most 60 s) for the child's forecast and take it in."""
    deadline = time.monotonic() + 60
    while not forecaster.running.ready():
        assert time.monotonic() < deadline, "no forecast within 60 s"
        time.sleep(0.1)
    forecaster.collect()


def _forecast_once(config: ForecastConfig, obs: Observation, tenants: bool = False) -> dict:
    """One forecast of ``obs`` under fifo, every job drawing 100 GPU·s: the snapshot part."""
    forecaster = Forecaster(config, 30.0, logging.getLogger("test-forecasts"))
    try:
        forecaster.tick(1, obs, _decisions(), PolicyConfig(policy="fifo"),
                        GittinsDistribution([100.0]), tenants=tenants)
        _collect(forecaster)
    finally:
        forecaster.close()
    assert forecaster.latest is not None
    return forecaster.latest


def test_world_of_a_cycle():
    record = job_from_json({"job_id": 2, "job_state": "PENDING",
                            "time_limit": 30})
    world = world_of(_observation(), _decisions(), PolicyConfig(), {2: ((record,), None)})
    assert world.now == NOW
    assert world.nodes == (("n0", 1), ("n1", 6))   # n1: the 6 free GPUs only
    a, b = world.jobs
    assert (a.job_id, a.phase, a.run_start, a.nodes, a.queue) == ("1", "running", NOW - 40,
                                                                   ("n0",), 0)
    assert (b.job_id, b.phase, b.queue_entry_time, b.time_limit_s) == ("2", "pending",
                                                                       NOW - 100, 1800.0)


def test_a_forecast_is_made_in_the_child_and_published():
    # every past job took 100 GPU·s: job 1 (40 of them done, 1 GPU) ends at NOW + 60; job 2
    # finds 6 free GPUs on n1, starts at once and ends at NOW + 100
    forecaster = Forecaster(ForecastConfig(every_cycles=2, cpu_budget_s=5.0, draws=3),
                            30.0, logging.getLogger("test-forecasts"))
    dist = GittinsDistribution([100.0])
    try:
        forecaster.tick(3, _observation(), _decisions(), PolicyConfig(policy="fifo"), dist)
        assert forecaster.running is None          # cycle 3: not due
        forecaster.tick(4, _observation(), _decisions(), PolicyConfig(policy="fifo"), dist)
        _collect(forecaster)
    finally:
        forecaster.close()
    got = forecaster.latest
    assert got["made_at"] == NOW and got["draws"] == 3   # far within the CPU budget
    assert got["stale_after_s"] == pytest.approx(3 * 2 * 30.0 + 5.0)
    assert got["jobs"]["1"]["start"] == [NOW - 40] * 3
    assert got["jobs"]["1"]["finish"] == [NOW + 60] * 3
    assert got["jobs"]["2"]["start"] == [NOW] * 3
    assert got["jobs"]["2"]["finish"] == [NOW + 100] * 3
    assert got["jobs"]["2"]["ahead"] == 0 and got["jobs"]["2"]["preempt_chance"] == 0.0
    # job 1 ran at the forecast and no draw preempted it: no restart known; job 2 waited
    assert got["jobs"]["1"]["restart"] is None and "restart" not in got["jobs"]["2"]


def test_a_job_waits_for_a_node_of_its_own_partition():
    """As :func:`test_a_forecast_is_made_in_the_child_and_published`, with n0 in partition a
    and n1 in b: job 2 (partition a) cannot use n1's 6 free GPUs and starts when job 1 ends on
    n0 at NOW + 60, ending at NOW + 160; job 3 asks partition c, which has no node here: it
    fits on no node."""
    obs = _observation()
    a, b = obs.snapshot.jobs
    c = JobView(3, JobPhase.PENDING, (1,), NOW - 50, partitions=("c",))
    nodes = (NodeView("n0", 1, 0, ("a",)), NodeView("n1", 8, 6, ("b",)))
    obs = Observation(NOW, Snapshot(nodes, (dataclasses.replace(a, partitions=("a",)),
                                            dataclasses.replace(b, partitions=("a",)), c)),
                      {**obs.units, 3: unit(3, "PENDING", start=None, gpus=1)}, ())
    got = _forecast_once(ForecastConfig(every_cycles=1, cpu_budget_s=5.0, draws=3), obs)
    assert got["jobs"]["1"]["finish"] == [NOW + 60] * 3
    assert got["jobs"]["2"]["start"] == [NOW + 60] * 3
    assert got["jobs"]["2"]["finish"] == [NOW + 160] * 3
    assert got["jobs"]["3"]["start"] is None and got["draws"] == 3


def test_a_job_that_waits_for_no_gpu_is_not_forecast_and_said_why():
    """As :func:`test_a_forecast_is_made_in_the_child_and_published`, with job 3 (1 GPU) a
    job array's pending tasks held by its throttle (``JobArrayTaskLimit``, eligible never)
    and job 4 held by its user: n1's free GPUs would not start either, so neither has a
    start (no ``>24h``); each says what it waits for, dlqueue shows ``n/a`` and explain
    the reason. Job 2 still starts at once."""
    from prioritizer.daemon.forecast_text import detail_lines, json_field, start_cell
    obs = _observation()
    a, b = obs.snapshot.jobs
    c = JobView(3, JobPhase.PENDING, (1,), NOW - 50, eligible_time=float("inf"))
    d = JobView(4, JobPhase.PENDING, (1,), NOW - 40, eligible_time=float("inf"))
    obs = Observation(NOW, Snapshot(obs.snapshot.nodes, (a, b, c, d)), {
        **obs.units, 3: dataclasses.replace(unit(3, "PENDING", start=None, gpus=1,
                                                 reason="JobArrayTaskLimit"), priority=1000),
        4: unit(4, "PENDING", start=None, gpus=1, reason="JobHeldUser")}, ())
    got = _forecast_once(ForecastConfig(every_cycles=1, cpu_budget_s=5.0, draws=3), obs)
    assert got["jobs"]["2"]["start"] == [NOW] * 3
    assert got["jobs"]["3"]["waits_for"] == "JobArrayTaskLimit"
    assert got["jobs"]["4"]["waits_for"] == "a hold (JobHeldUser)"
    assert got["jobs"]["3"]["start"] is None and got["jobs"]["3"]["finish"] is None
    assert start_cell(got, 3, NOW, waiting=True) == "n/a"
    assert json_field(got, 3, NOW)["waits_for"] == "JobArrayTaskLimit"
    assert json_field(got, 2, NOW)["waits_for"] is None
    assert detail_lines(got, 3, NOW, running=False)[1:] == [
        "  start: not forecast: it waits for JobArrayTaskLimit, which no GPU freed ends (the "
        "forecast starts jobs as GPUs come free)"]


def test_with_tenants_the_forecast_says_it_orders_by_the_policy_alone():
    """Virtual clusters order the daemon's jobs; the replay does not model them: the published
    forecast is marked, and every job's detail says so (without tenants: no such line)."""
    from prioritizer.daemon.forecast_text import detail_lines
    note = ("  virtual clusters are not modeled: the forecast orders jobs by the policy alone, "
            "so a job the tenant rules hold back (max_gpus, user limit) or put first "
            "(guarantee, fair share) may start later or sooner than shown")
    for tenants in (True, False):
        got = _forecast_once(ForecastConfig(every_cycles=1, cpu_budget_s=5.0, draws=3),
                             _observation(), tenants)
        assert got.get("tenants_not_modeled", False) is tenants
        assert (note in detail_lines(got, 2, NOW, running=False)) is tenants


def test_an_idle_cluster_of_partitioned_nodes_gets_an_empty_forecast():
    nodes = (NodeView("n0", 1, 1, ("a",)), NodeView("n1", 8, 8, ("b",)))
    obs = Observation(NOW, Snapshot(nodes, ()), {}, ())
    got = _forecast_once(ForecastConfig(every_cycles=1, cpu_budget_s=5.0, draws=3), obs)
    assert got["jobs"] == {} and got["made_at"] == NOW


def test_a_job_being_requeued_is_forecast_to_its_next_start_and_a_completing_one_ends():
    # job 1 is a victim of an open preemption intent and Slurm shows it COMPLETING (requeue
    # under way): its GPU on n0 comes free now and it may start again after the 121 s
    # requeue delay, at NOW + 121 (n0 is free then), never at its old run's start NOW - 40;
    # it has 60 GPU·s left of the 100 all past jobs took, so it ends at NOW + 181. Job 3
    # (1 GPU on n1, COMPLETING on its own, no intent) has no run time left.
    obs = _observation()
    ending = JobView(3, JobPhase.RUNNING, (1,), 0.0, attained_gpu_s=10.0, attained_s=10.0,
                     run_start=NOW - 10, nodes=("n1",), releasing=True)
    victim = JobView(1, JobPhase.RUNNING, (1,), 0.0, attained_gpu_s=40.0, attained_s=40.0,
                     run_start=NOW - 40, nodes=("n0",), releasing=True)
    units = {**obs.units, 1: unit(1, "COMPLETING", gpus=1), 3: unit(3, "COMPLETING", gpus=1)}
    obs = Observation(NOW, Snapshot(obs.snapshot.nodes, (victim, obs.snapshot.jobs[1], ending)),
                      units, (), preempting=frozenset({1}))
    world = world_of(obs, _decisions(), PolicyConfig())
    one, _, three = world.jobs
    assert (one.phase, one.grace_end) == ("grace", NOW)
    assert (three.phase, three.remaining_s) == ("running", 0.0)
    got = forecast(world, PolicyConfig(policy="fifo"), GittinsDistribution([100.0])).by_id()
    assert got["1"].start == (NOW + 121,) * 3 and got["1"].finish == (NOW + 181,) * 3
    assert got["3"].finish == (NOW,) * 3


def test_shard_and_opportunistic_jobs_are_forecast_as_whole_gpu_jobs_and_said_so():
    # job 1 (running on n0's one GPU) is opportunistic, job 2 a pending shard job of a
    # quarter GPU: the forecast counts them as whole-GPU production jobs, so job 2 takes one
    # of n1's 6 free GPUs at once and, drawing 100 GPU·s over that one GPU, ends at NOW + 100
    from prioritizer.daemon.forecast_text import detail_lines, json_field
    from prioritizer.policy.sharing import Share
    obs = _observation()
    obs = Observation(NOW, obs.snapshot, obs.units, (),
                      shares={1: Share(opportunistic=True), 2: Share(share=0.25)})
    got = _forecast_once(ForecastConfig(every_cycles=1, cpu_budget_s=5.0, draws=3), obs)
    assert got["sharing_jobs"] == 2
    assert got["jobs"]["1"]["sharing"] == "opportunistic"
    assert got["jobs"]["2"]["sharing"] == "shard"
    assert got["jobs"]["2"]["start"] == [NOW] * 3 and got["jobs"]["2"]["finish"] == [NOW + 100] * 3
    assert json_field(got, 2, NOW)["sharing"] == "shard"
    assert detail_lines(got, 2, NOW, False)[-1] == (
        "  GPU sharing is not modeled: this shard job is forecast as a job of one whole GPU "
        "(Slurm may start it sooner, on the free shards of a busy GPU)")
    assert detail_lines(got, 1, NOW, True)[-1].startswith(
        "  GPU sharing is not modeled: this opportunistic job is forecast as a production job")
    # a forecast with sharing jobs tells every other job how many it counted so
    plain = {**got, "jobs": {**got["jobs"], "2": {k: v for k, v in got["jobs"]["2"].items()
                                                  if k != "sharing"}}}
    assert detail_lines(plain, 2, NOW, False)[-1] == (
        "  2 shard or opportunistic job(s) counted as whole-GPU production jobs: GPU sharing "
        "is not modeled")
    assert json_field(plain, 2, NOW)["sharing"] is None


def _las_forecast(shares: dict) -> dict:
    """One forecast under 2D-LAS (default thresholds and costs, ticks every 30 s): n0's one
    GPU held by job 1 (queue 1, 5,000 GPU·s attained, running since NOW - 40), job 2 waiting
    for 1 GPU in queue 0; every job drawing from one sample of 100 GPU·s, so job 1, past
    every sample, draws as much again as it has attained (5,000 s left)."""
    a = JobView(1, JobPhase.RUNNING, (1,), 0.0, attained_gpu_s=5000.0, attained_s=5000.0,
                run_start=NOW - 40, nodes=("n0",), queue=1)
    b = JobView(2, JobPhase.PENDING, (1,), NOW - 100)
    units = {1: unit(1, gpus=1), 2: unit(2, "PENDING", start=None, gpus=1)}
    obs = Observation(NOW, Snapshot((NodeView("n0", 1, 0),), (a, b)), units, (),
                      shares=shares)
    decisions = Decisions(order=(2,), states={
        1: QueueState(1, 1, NOW - 40, 0.0, False, "queue 1"),
        2: QueueState(2, 0, NOW - 100, 0.0, True, "new")})
    forecaster = Forecaster(ForecastConfig(every_cycles=1, cpu_budget_s=5.0, draws=3), 30.0,
                            logging.getLogger("test-forecasts"))
    try:
        forecaster.tick(1, obs, decisions, PolicyConfig(policy="tiresias-las"),
                        GittinsDistribution([100.0]))
        _collect(forecaster)
    finally:
        forecaster.close()
    assert forecaster.latest is not None
    return forecaster.latest["jobs"]


def test_a_waiting_shard_job_preempts_no_one_in_the_forecast():
    from prioritizer.policy.sharing import Share
    # a whole-GPU job 2 preempts job 1 at the tick of NOW + 20 s (10,020 s); job 1 holds its
    # GPU for the 15 s checkpoint, so job 2 starts at NOW + 35 s
    plain = _las_forecast({})
    assert plain["2"]["start"] == [NOW + 35] * 3 and plain["1"]["preempt_chance"] == 1.0
    # a shard job waits for the GPU instead, as dlprio preempts nothing for it: job 1 runs its
    # 5,000 s to NOW + 5,000 s
    shard = _las_forecast({2: Share(share=0.25)})
    assert shard["2"]["start"] == [NOW + 5000] * 3 and shard["1"]["preempt_chance"] == 0.0


def test_a_running_job_without_node_names_is_left_out():
    obs = _observation()
    lost = JobView(3, JobPhase.RUNNING, (2,), 0.0, attained_gpu_s=10.0, attained_s=5.0,
                   run_start=NOW - 5)                      # Slurm named no node
    obs = Observation(NOW, Snapshot(obs.snapshot.nodes, (*obs.snapshot.jobs, lost)),
                      obs.units, ())
    world = world_of(obs, _decisions(), PolicyConfig())
    assert [j.job_id for j in world.jobs] == ["1", "2"]
    assert world.nodes == (("n0", 1), ("n1", 6))


def test_forecast_arrivals_are_validated_in_the_config_file(tmp_path):
    from prioritizer.config_file import load
    from prioritizer.policy.validation import ConfigError
    good = tmp_path / "good.yaml"
    good.write_text("forecast:\n  arrivals: history\n  arrival_window_s: 3600\n")
    cfg = load(good).forecast
    assert (cfg.arrivals, cfg.arrival_window_s) == ("history", 3600.0)
    assert ForecastConfig().arrivals == "none"
    bad = tmp_path / "bad.yaml"
    bad.write_text("forecast:\n  arrivals: poisson\n")
    with pytest.raises(ConfigError, match="arrivals: must be 'none' or 'history'"):
        load(bad)


def test_drawn_arrivals_reach_the_child_and_come_after_the_waiting_jobs_under_fifo():
    # forecast.arrivals: history; in the last 6 h only job 2 was submitted (job 1 at 0): one
    # job per 6 h drawn; under fifo a drawn arrival waits behind jobs 1 and 2, whose times
    # are those of the forecast without arrivals (above)
    got = _forecast_once(ForecastConfig(every_cycles=1, cpu_budget_s=5.0, draws=3,
                                        arrivals="history"), _observation())
    assert got["draws"] == 3
    assert got["jobs"]["1"]["finish"] == [NOW + 60] * 3
    assert got["jobs"]["2"]["start"] == [NOW] * 3
    assert got["jobs"]["2"]["finish"] == [NOW + 100] * 3


def test_the_detail_line_says_whether_later_submissions_are_drawn():
    from prioritizer.daemon.forecast_text import detail_lines
    from prioritizer.daemon.forecasts import public
    from prioritizer.forecast.forecast import Forecast, JobForecast
    made = Forecast(NOW, 3, (JobForecast("2", (NOW + 60,) * 3, (NOW + 160,) * 3, 0.0, 0, ()),))
    for arrivals, said in (("none", "no job submitted later is counted"),
                           ("history", "later submissions drawn from the recent ones")):
        snap = public(made, 86400.0, 600.0, 0.1, arrivals)
        assert snap["arrivals"] == arrivals
        first = detail_lines(snap, 2, NOW, False)[0]
        assert first.endswith(f"from 3 duration draws; {said}")


class _Ready:
    """A forecast already made (what the child's AsyncResult gives), so that
    :meth:`Forecaster.collect` runs without a child."""

    def __init__(self, made):
        self.made = made

    def ready(self):
        return True

    def get(self, timeout=None):
        return self.made, 0.1


class _Meta(dict):
    """The ledger's meta table, in memory."""

    def meta(self, key, default=None):
        return self.get(key, default)

    def set_meta(self, key, value):
        self[key] = value


def test_published_start_bands_are_calibrated_on_earlier_forecasts_outcomes():
    from prioritizer.daemon.forecast_text import detail_lines
    from prioritizer.daemon.forecasts import META_KEY
    from prioritizer.forecast.calibrate import Past
    from prioritizer.forecast.forecast import Forecast, JobForecast
    # 30 earlier forecasts, each "starts now" (median wait 0), made before NOW - 1000; ten
    # started 0 s, ten 60 s and ten 180 s after their forecast: (wait + 60) / 60 = 1, 2, 4,
    # residuals 10 × 0, 10 × ln 2, 10 × ln 4, none censored: the survival after the k-th is
    # (30 - k) / 30, so q10 = the 3rd (0), q90 = the 27th (ln 4): a raw median wait of 0
    # gives p10 and p90 (60 · 1 - 60, 60 · 4 - 60) = (0, 180) s from the moment; the p50 is
    # the draws' median (0 s) clipped into them: 0 s
    store = _Meta()
    forecaster = Forecaster(ForecastConfig(every_cycles=1), 30.0,
                            logging.getLogger("test-forecasts"), store)
    forecaster.past = [Past(f"{k}", NOW - 2000 + k, NOW - 2000 + k,
                            NOW - 2000 + k + (0, 60, 180)[k % 3]) for k in range(30)]
    forecaster.waiting = frozenset({"2"})
    made = Forecast(NOW, 3, (JobForecast("1", (NOW - 40,) * 3, (NOW + 60,) * 3, 0.0, 0, ()),
                             JobForecast("2", (NOW,) * 3, (NOW + 100,) * 3, 0.0, 0, ())))
    forecaster.running = _Ready(made)
    forecaster.collect()
    got = forecaster.latest
    assert got["known_outcomes"] == 30
    assert got["jobs"]["2"]["start"] == [NOW, NOW, NOW + 180]
    assert got["jobs"]["2"]["raw_start"] == [NOW] * 3 and got["jobs"]["2"]["calibrated"] == 30
    assert got["jobs"]["1"]["start"] == [NOW - 40] * 3     # a running job's run start as is
    assert got["jobs"]["1"]["calibrated"] == 0
    assert "band calibrated on 30 earlier forecasts" in detail_lines(got, 2, NOW, False)[2]
    # job 2's raw median start is remembered, still waiting, and kept in the store: a
    # forecaster restarted now reads it back (as censored, until its start is seen)
    assert forecaster.past[-1] == Past("2", NOW, NOW)
    assert json.loads(store[META_KEY])[-1] == ["2", NOW, NOW, None]
    assert Forecaster(ForecastConfig(every_cycles=1), 30.0, logging.getLogger("test-forecasts"),
                      store).past[-1] == Past("2", NOW, NOW)
    # it starts at NOW + 90: the outcome is noted and kept in the store, which a restarted
    # forecaster reads back
    obs = _observation()
    started = JobView(2, JobPhase.RUNNING, (1,), NOW - 100, run_start=NOW + 90, nodes=("n1",))
    forecaster.learn(Observation(NOW + 120, Snapshot(obs.snapshot.nodes,
                                                     (obs.snapshot.jobs[0], started)),
                                 obs.units, ()))
    assert forecaster.past[-1] == Past("2", NOW, NOW, NOW + 90)
    again = Forecaster(ForecastConfig(every_cycles=1), 30.0,
                       logging.getLogger("test-forecasts"), store)
    assert len(again.past) == 31 and again.past[-1] == Past("2", NOW, NOW, NOW + 90)


def test_before_enough_outcomes_the_raw_band_is_published_and_said_so():
    from prioritizer.daemon.forecast_text import detail_lines
    from prioritizer.forecast.forecast import Forecast, JobForecast
    forecaster = Forecaster(ForecastConfig(every_cycles=1), 30.0,
                            logging.getLogger("test-forecasts"))
    forecaster.waiting = frozenset({"2"})
    forecaster.running = _Ready(Forecast(NOW, 3, (
        JobForecast("2", (NOW + 60, NOW + 120, NOW + 300), (NOW + 400,) * 3, 0.0, 0, ()),)))
    forecaster.collect()
    got = forecaster.latest
    assert got["jobs"]["2"]["start"] == [NOW + 60, NOW + 120, NOW + 300]
    assert got["jobs"]["2"]["calibrated"] == 0 and got["known_outcomes"] == 0
    assert detail_lines(got, 2, NOW, False)[2].strip() == (
        "raw band of the draws (too narrow as a rule): 0 earlier forecasts' outcomes known, "
        "30 needed to calibrate it")


@pytest.mark.parametrize("bad", [
    '["x", 0, Infinity, 500]', '["x", 0, NaN, 500]', '["x", NaN, 0, 500]',
    '["x", 0, 0, Infinity]', '["x", 900, 0, 500]', '["x", 0, 0]', '[null, 0, 0, 500]',
    '["x", 0, "0", 500]', '["x", 0, true, 500]', '"x"', '7'],
    ids=["p50-inf", "p50-nan", "made-nan", "start-inf", "start-before-made", "short",
         "null-id", "string-time", "bool-time", "string-row", "number-row"])
def test_a_damaged_outcome_in_the_ledger_is_left_out_and_forecasts_go_on(bad):
    from prioritizer.daemon.forecasts import META_KEY
    from prioritizer.forecast.forecast import Forecast, JobForecast
    # the 30 good outcomes of the calibration test above (residuals 10 × 0, 10 × ln 2,
    # 10 × ln 4: a raw median wait of 0 gives the band (0, 0, 180) s from the moment) and
    # one damaged entry, which must neither count nor stop the forecast being published
    good = [[f"{k}", NOW - 2000 + k, NOW - 2000 + k, NOW - 2000 + k + (0, 60, 180)[k % 3]]
            for k in range(30)]
    text = json.dumps(good)
    store = _Meta({META_KEY: text[:-1] + ", " + bad + "]"})
    forecaster = Forecaster(ForecastConfig(every_cycles=1), 30.0,
                            logging.getLogger("test-forecasts"), store)
    assert len(forecaster.past) == 30
    forecaster.waiting = frozenset({"2"})
    forecaster.running = _Ready(Forecast(NOW, 3, (JobForecast("2", (NOW,) * 3,
                                                              (NOW + 100,) * 3, 0.0, 0, ()),)))
    forecaster.collect()
    assert forecaster.running is None
    assert forecaster.latest["jobs"]["2"]["start"] == [NOW, NOW, NOW + 180]
    assert forecaster.latest["known_outcomes"] == 30


def test_the_ledger_keeps_known_outcomes_and_waiting_forecasts():
    from prioritizer.daemon.forecasts import META_KEY
    from prioritizer.forecast.calibrate import Past
    # a known outcome (the only form some ledgers hold) and a forecast still waiting (null)
    store = _Meta({META_KEY: '[["7", 100, 400, 350.5], ["8", 200, 900, null]]'})
    forecaster = Forecaster(ForecastConfig(every_cycles=1), 30.0,
                            logging.getLogger("test-forecasts"), store)
    assert forecaster.past == [Past("7", 100.0, 400.0, 350.5), Past("8", 200.0, 900.0)]


@pytest.mark.parametrize("raw", ["", "not json", "{}", "[[[[", "[" * 100_000])
def test_an_unreadable_outcomes_value_starts_calibration_over(raw):
    from prioritizer.daemon.forecasts import META_KEY
    forecaster = Forecaster(ForecastConfig(every_cycles=1), 30.0,
                            logging.getLogger("test-forecasts"), _Meta({META_KEY: raw}))
    assert forecaster.past == []


def test_the_finish_band_moves_with_the_calibrated_start():
    from prioritizer.forecast.calibrate import Past
    from prioritizer.forecast.forecast import Forecast, JobForecast
    # 30 outcomes of forecasts of median wait 0, ten each 60, 180 and 420 s late: residuals
    # 10 × ln 2, 10 × ln 4, 10 × ln 8; q10 = ln 2, q90 = ln 8: a raw median wait of 0 gives
    # p10 and p90 of (60 · 2 - 60, 60 · 8 - 60) = (60, 420) s from the moment, and the draws'
    # median (0 s) clipped into them: 60 s. Job 2 runs 100 s in every draw: raw finish
    # NOW + 100; calibrated, its starts move by 60, 60 and 420 s, so do the finishes. Job 3's
    # raw p90 start is beyond the horizon: its p90 finish stays beyond it (null)
    forecaster = Forecaster(ForecastConfig(every_cycles=1), 30.0,
                            logging.getLogger("test-forecasts"))
    forecaster.past = [Past(f"{k}", NOW - 2000 + k, NOW - 2000 + k,
                            NOW - 2000 + k + (60, 180, 420)[k % 3]) for k in range(30)]
    forecaster.waiting = frozenset({"2", "3"})
    inf = float("inf")
    forecaster.running = _Ready(Forecast(NOW, 3, (
        JobForecast("2", (NOW,) * 3, (NOW + 100,) * 3, 0.0, 0, ()),
        JobForecast("3", (NOW, NOW, inf), (NOW + 100, NOW + 100, inf), 0.0, 0, ()))))
    forecaster.collect()
    jobs = forecaster.latest["jobs"]
    assert jobs["2"]["start"] == [NOW + 60, NOW + 60, NOW + 420]
    assert jobs["2"]["finish"] == [NOW + 160, NOW + 160, NOW + 520]
    assert jobs["3"]["start"] == [NOW + 60, NOW + 60, NOW + 420]
    assert jobs["3"]["finish"] == [NOW + 160, NOW + 160, None]


def test_a_node_offers_no_more_gpus_than_it_has_when_shard_units_share_one():
    # n0 has 2 GPUs; jobs 1 and 2 are shard units (one GPU each for placement) on the same
    # GPU, which Slurm's GresUsed does not count: 2 free. Free + held would be 4 GPUs
    a = JobView(1, JobPhase.RUNNING, (1,), 0.0, run_start=NOW - 40, nodes=("n0",))
    b = JobView(2, JobPhase.RUNNING, (1,), 0.0, run_start=NOW - 40, nodes=("n0",))
    obs = Observation(NOW, Snapshot((NodeView("n0", 2, 2),), (a, b)), {}, ())
    world = world_of(obs, Decisions(order=(), states={}), PolicyConfig())
    assert world.nodes == (("n0", 2),)


def test_a_running_job_publishes_its_restart_after_a_preemption():
    from prioritizer.daemon.forecasts import public
    from prioritizer.forecast.forecast import Forecast, JobForecast
    made = Forecast(NOW, 3, (
        JobForecast("1", (NOW - 40,) * 3, (NOW + 500,) * 3, 1.0, 0, (),
                    (NOW + 136, NOW + 200, float("inf"))),
        JobForecast("2", (NOW,) * 3, (NOW + 100,) * 3, 0.0, 0, ())))
    snap = public(made, 86400.0, 600.0, 0.1, running=frozenset({"1"}),
                  waiting=frozenset({"2"}))
    assert snap["jobs"]["1"]["restart"] == [NOW + 136, NOW + 200, None]   # None: beyond
    assert "restart" not in snap["jobs"]["2"]


def _clock(*readings: float):
    """A CPU clock that reads ``readings`` in turn (the first when the budget is made)."""
    it = iter(readings)
    return lambda: next(it)


def test_the_draws_stop_before_one_that_would_overrun_the_budget():
    # budget 2 s less the 15 % kept for the end: 1.7 s for draws. Draws of 0.5 s: after 1
    # draw 0.5 + 0.5 <= 1.7, after 2 1.0 + 0.5 <= 1.7, after 3 1.5 + 0.5 = 2.0 > 1.7: three
    # draws, 1.5 s (a fourth would end at 2.0 s)
    budget = DrawBudget(2.0, _clock(10.0, 10.5, 11.0, 11.5))
    assert [budget(), budget(), budget()] == [False, False, True]
    assert budget.made == 3


def test_one_draw_over_the_budget_is_made_and_stops_the_forecast():
    # the first draw alone takes 2.5 s of a 2 s budget: forecast() makes it (one at least)
    # and stops there
    budget = DrawBudget(2.0, _clock(0.0, 2.5, 2.5))
    assert budget() is True
    assert budget.spent() == 2.5


def test_unequal_draws_are_judged_by_their_mean():
    # draws of 0.2 s then 1.4 s: after 2, 1.6 s spent and a mean of 0.8 s: 2.4 > 1.7, stop;
    # after 1, 0.2 + 0.2 <= 1.7, go on
    budget = DrawBudget(2.0, _clock(5.0, 5.2, 6.6))
    assert [budget(), budget()] == [False, True]


def test_a_spent_budget_ends_the_draw_in_progress():
    # 15 % of the 2 s is kept for ending the draw and summarizing: over past 1.7 s
    budget = DrawBudget(2.0, _clock(1.0, 2.625, 2.75))
    assert budget.over() is False    # 1.625 s spent
    assert budget.over() is True     # 1.75 s


def test_a_forecast_cut_by_its_budget_publishes_how_far_it_reached():
    from prioritizer.daemon.forecast_text import detail_lines
    from prioritizer.daemon.forecasts import public
    from prioritizer.forecast.forecast import Forecast, JobForecast
    made = Forecast(NOW, 1, (JobForecast("2", (float("inf"),) * 3, (float("inf"),) * 3, 0.0,
                                         0, ()),), reached_s=3 * 3600.0)
    snap = public(made, 86400.0, 600.0, 2.1, waiting=frozenset({"2"}))
    assert snap["horizon_s"] == 3 * 3600.0 and snap["horizon_cut"] is True
    lines = detail_lines(snap, 2, NOW + 10, running=False)
    assert lines[1] == ("  it reaches 3h ahead: forecast.cpu_budget_s ended its draw there "
                        "(a larger budget reaches further)")
    assert lines[2] == "  start: >3h"
    whole = public(Forecast(NOW, 1, made.jobs), 86400.0, 600.0, 0.5, waiting=frozenset({"2"}))
    assert whole["horizon_s"] == 86400.0 and whole["horizon_cut"] is False
    assert not any("it reaches" in line for line in detail_lines(whole, 2, NOW + 10, False))


@pytest.mark.parametrize("learned", [False, True])
def test_running_jobs_count_as_censored_only_beside_this_clusters_samples(learned):
    # one past job took 30 GPU·s; job 1 (1 GPU) has run 40 GPU·s, longer than it. Job 1 has
    # outlived every sample: as much again, 40 s, ends at NOW + 40 either way. Job 2 (new)
    # starts at once on n1. From the samples alone it runs 30 s. Beside samples learned here
    # job 1 is a censored observation: Kaplan-Meier puts 1/2 at 30 and 1/2 beyond it, where a
    # draw takes twice the longest sample, 60: job 2 ends at NOW + 30 or NOW + 60
    forecaster = Forecaster(ForecastConfig(every_cycles=1, cpu_budget_s=5.0, draws=20),
                            30.0, logging.getLogger("test-forecasts"))
    try:
        forecaster.tick(1, _observation(), _decisions(), PolicyConfig(policy="fifo"),
                        GittinsDistribution([30.0]), learned=learned)
        _collect(forecaster)
    finally:
        forecaster.close()
    got = forecaster.latest["jobs"]
    assert got["1"]["finish"] == [NOW + 40] * 3
    low, _, high = got["2"]["finish"]
    assert (low, high) == ((NOW + 30, NOW + 60) if learned else (NOW + 30, NOW + 30))


def test_a_forecast_child_killed_by_a_signal_is_a_failed_forecast_and_close_returns(
        caplog: pytest.LogCaptureFixture) -> None:
    """systemd's stop sends SIGTERM to every process of the unit, the forecast child too: the
    daemon logs the forecast as failed (how the child ended) and stops at once, the child
    reaped (a pool's worker killed so left ``Pool.terminate`` waiting for ever)."""
    import os
    import signal
    forecaster = Forecaster(ForecastConfig(every_cycles=1, draws=1000, cpu_budget_s=60),
                            30.0, logging.getLogger("test-forecasts"))
    try:
        forecaster.tick(1, _observation(), _decisions(), PolicyConfig(policy="fifo"),
                        GittinsDistribution([100.0]))
        child = forecaster.running
        assert child is not None and child.proc.pid is not None
        os.kill(child.proc.pid, signal.SIGTERM)
        child.proc.join(30)
        assert child.ready()
        with caplog.at_level(logging.ERROR, logger="test-forecasts"):
            forecaster.collect()
        assert forecaster.running is None and forecaster.latest is None
        failed = [r for r in caplog.records if r.getMessage() == "forecast_failed"]
        assert [r.fields["error"] for r in failed] == [   # type: ignore[attr-defined]
            "the forecast child ended without an answer (killed by signal 15)"]
        forecaster.tick(2, _observation(), _decisions(), PolicyConfig(policy="fifo"),
                        GittinsDistribution([100.0]))
        second = forecaster.running
        assert second is not None and second is not child
        began = time.monotonic()
        forecaster.close()                     # a forecast in flight: killed and reaped
        assert time.monotonic() - began < 10 and second.proc.exitcode == -signal.SIGKILL
    finally:
        forecaster.close()


def test_a_job_both_opportunistic_and_shard_gets_both_caveats():
    from prioritizer.daemon.forecast_text import not_modeled_lines
    from prioritizer.daemon.forecasts import sharing_of
    from prioritizer.policy.sharing import Share
    world = world_of(_observation(), _decisions(), PolicyConfig())
    kinds = sharing_of({1: Share(share=0.5, opportunistic=True), 2: Share(share=0.25)}, world)
    assert kinds == {"1": "opportunistic shard", "2": "shard"}
    [line] = not_modeled_lines({"sharing": kinds["1"]}, {"sharing_jobs": 2})
    assert "opportunistic shard job is forecast as a production job of one whole GPU" in line
    assert "free shards of a busy GPU" in line and "preempted more often" in line


def test_every_sharing_kind_survives_the_snapshot_and_has_its_caveat(tmp_path: Path) -> None:
    """What sharing_of writes, the snapshot's reader takes (a value it refuses makes the
    whole snapshot unreadable: every job would lose its queue, service and forecast in
    dlqueue), and the views have a caveat for it; a value no writer gives is refused."""
    from prioritizer.daemon.forecast_text import SHARING_NOTES
    from prioritizer.daemon.snapshot import (SHARING_KINDS, SnapshotError, read_snapshot,
                                             write_snapshot)
    from queue_helpers import pub, snapshot
    assert set(SHARING_NOTES) == set(SHARING_KINDS) == {"shard", "opportunistic",
                                                        "opportunistic shard"}
    now = time.time()
    entry = {"start": [now + 60, now + 120, now + 600], "finish": [now + 90, now + 200, now + 900],
             "preempt_chance": 0.0, "ahead": 0, "first_ahead": []}
    for kind in (*SHARING_KINDS, "shared"):
        forecast = {"made_at": now - 1, "draws": 20, "horizon_s": 86400.0, "stale_after_s": 17.0,
                    "jobs": {"12": {**entry, "sharing": kind}}}
        path = tmp_path / "snap.json"
        write_snapshot(path, dataclasses.replace(snapshot(pub(12, 0, 0, rank=0),
                                                          generated_at=now - 1),
                                                 forecast=forecast))
        if kind == "shared":
            with pytest.raises(SnapshotError, match="sharing: expected one of"):
                read_snapshot(path)
            continue
        read = read_snapshot(path)
        assert read is not None and read.forecast is not None
        assert read.forecast["jobs"]["12"]["sharing"] == kind
