"""Future arrivals in a forecast draw (``prioritizer.forecast.arrivals`` and the replay that
files them), on worlds whose answer is worked out by hand."""

from __future__ import annotations

import random

import pytest

from prioritizer.forecast.arrivals import ArrivalModel, recent
from prioritizer.forecast.draws import ServiceSurvival
from prioritizer.forecast.forecast import forecast
from prioritizer.forecast.replay import ForwardReplay
from prioritizer.forecast.world import ForecastJob, World
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution

DIST = GittinsDistribution([100.0, 200.0, 400.0])
NODE = (("n0", 4),)


def las_world(a_left: float | None = None, b_left: float | None = None) -> World:
    # one node of 4 GPUs; A (queue 0, 100 s × 4 GPUs = 400 GPU·s attained, below las's first
    # threshold 3250 GPU·s) runs 300 s more: ends at 1300; B waits in queue 1 (it has run
    # 4000 s × 4 GPUs before) with 100 s left
    a = ForecastJob("A", "running", (4,), 0.0, attained_gpu_s=400.0, attained_s=100.0,
                    run_start=900.0, nodes=("n0",), queue=0, queue_entry_time=900.0,
                    remaining_s=a_left)
    b = ForecastJob("B", "pending", (4,), 0.0, attained_gpu_s=16000.0, attained_s=4000.0,
                    queue=1, queue_entry_time=500.0, remaining_s=b_left)
    return World(1000.0, NODE, (a, b))


def test_a_new_job_arriving_in_queue_0_goes_ahead_of_a_demoted_one():
    config = PolicyConfig(policy="las").zero_cost()
    world = las_world()
    alone, _ = ForwardReplay(world, config, [300.0, 100.0]).outcomes()
    assert alone[1].start == 1300.0 and alone[1].end == 1400.0
    # C (4 GPUs, 50 s) arrives at 1100 in queue 0: it does not preempt A (same queue), takes
    # the node when A ends at 1300 and ends at 1350; B starts then, 50 s later than alone
    got, order = ForwardReplay(world, config, [300.0, 100.0],
                               arrivals=iter([(1100.0, (4,), 50.0)])).outcomes()
    assert got[0].end == 1300.0
    assert got[1].start == 1350.0 and got[1].end == 1450.0
    assert order == ("B",)   # the start order at now holds the world's jobs only


def test_an_arrival_larger_than_every_node_is_skipped():
    config = PolicyConfig(policy="las").zero_cost()
    got, _ = ForwardReplay(las_world(), config, [300.0, 100.0],
                           arrivals=iter([(1100.0, (8,), 50.0)])).outcomes()
    assert got[1].start == 1300.0


class FixedRng(random.Random):
    """Exponential gaps, indices and uniforms given in advance (the stream's arithmetic by
    hand): every index is 1, every uniform 0.5."""

    def __init__(self, gaps: list[float]) -> None:
        super().__init__(0)
        self.gaps, self.rates = list(gaps), []

    def expovariate(self, lambd: float) -> float:
        self.rates.append(lambd)
        return self.gaps.pop(0)

    def randrange(self, *args, **kwargs) -> int:   # type: ignore[override]
        return 1

    def random(self) -> float:
        return 0.5


def test_recent_arrivals_give_the_rate_and_a_poisson_stream_within_the_window():
    # submitted in (10000 - 3600, 10000]: the jobs at 7000 and 9000 (6000 is too old, 11000
    # is after the moment): λ = 2 / 3600 per s
    model = recent([(6000.0, (8,)), (7000.0, (1,)), (9000.0, (2, 2)), (11000.0, (4,))],
                   10000.0, 3600.0)
    assert model.shapes == ((1,), (2, 2))
    assert model.rate_per_s == pytest.approx(2 / 3600)
    rng = FixedRng([100.0, 200.0, 5000.0])
    # arrivals at 10100 and 10300; the next gap would reach 15300 > 10000 + 3600: the end.
    # Each takes shapes[1] = (2, 2) and a total service from three ended samples of mass 1/3
    # each: the uniform 0.5 falls in the second's (1/3, 2/3], 200 GPU·s: 200 / 4 GPUs = 50 s
    got = list(model.stream(10000.0, ServiceSurvival([100.0, 200.0, 400.0]), rng))
    assert got == [(10100.0, (2, 2), 50.0), (10300.0, (2, 2), 50.0)]
    assert rng.rates == [pytest.approx(2 / 3600)] * 3


def test_no_recent_job_draws_no_arrival_and_a_window_must_be_positive():
    assert list(recent([], 0.0, 60.0).stream(0.0, ServiceSurvival([1.0]),
                                             random.Random(0))) == []
    with pytest.raises(ValueError, match="window_s"):
        ArrivalModel(0.0, ())


def test_forecast_with_arrivals_is_seeded_and_later_than_without():
    config = PolicyConfig(policy="las").zero_cost()
    # known remaining times: one replay without arrivals; every draw with them
    known = las_world(300.0, 100.0)
    assert forecast(known, config, DIST, draws=5).draws == 1
    model = ArrivalModel(3600.0, ((4,),) * 36)   # one 4-GPU job per 100 s on average
    first = forecast(known, config, DIST, draws=5, arrivals=model)
    assert first.draws == 5
    assert forecast(known, config, DIST, draws=5, arrivals=model) == first
    # arrivals in queue 0 only ever delay B (queue 1) past its start alone, 1300
    assert min(first.by_id()["B"].start) >= 1300.0
