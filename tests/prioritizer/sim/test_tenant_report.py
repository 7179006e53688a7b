"""How the tenant report measures "below the guarantee" (prioritizer/sim/tenant_report.py,
``owed_gpus`` in prioritizer/sim/tenant_sched.py): figures worked out by hand."""

from __future__ import annotations

import pytest

from prioritizer.policy.tenants import Tenancy, VirtualCluster
from prioritizer.sim.engine import JobResult, SimResult
from prioritizer.sim.tenant_report import tenant_figures
from prioritizer.sim.tenant_sched import TenantSample, owed_gpus


def test_owed_is_what_pending_jobs_can_fill_of_the_guarantee() -> None:
    """Guarantee 8. Holding 4 with one 8-GPU job pending: 8 > 4 left, owed 4. Holding 4
    with two 4-GPU jobs: one fits, owed 8. Holding 2 with 4-GPU jobs: one fits in the 6
    left, the second not in the 2 then left: owed 6. Holding 2 with an 8, a 4 and two
    1-GPU jobs: largest first, 4 (2 left), then both 1s: owed 8. Holding 10 (borrowing):
    owed the guarantee, 8."""
    assert owed_gpus(8, 4, {8: 1}) == 4
    assert owed_gpus(8, 4, {4: 2}) == 8
    assert owed_gpus(8, 2, {4: 2}) == 6
    assert owed_gpus(8, 2, {8: 1, 4: 1, 1: 2}) == 8
    assert owed_gpus(8, 10, {1: 5}) == 8


def test_hours_below_compare_hourly_averages_with_what_is_owed() -> None:
    """Tenant A, guarantee 8 (0.95 x 8 = 7.6); samples (s: held, demand, owed):
    0: 8, 8, 8; 1800: 4, 12, 4 (an 8-GPU job waits, 4 left of the guarantee); 3600: 7, 9,
    8; 4000: 8, 8, 8; 7200: 2, 10, 6 (two 4-GPU jobs wait, one fits in the 6 left); the
    replay ends at 9000 (A's job). Demand reaches 8 all the time (9000 s = 2.5 h).
    Hour 0: held (8 x 1800 + 4 x 1800) / 3600 = 6, owed 6: not below. Hour 1: held
    (7 x 400 + 8 x 3200) / 3600 = 7.89 >= 0.95 x 8: not below. Hour 2 (1800 s): held 2 <
    0.95 x 6: below. Hours below 1800 / 9000 = 0.2. Instants below 7.6: 1800-4000 and
    7200-9000, 4000 / 9000 = 0.4444."""
    samples = [TenantSample(0.0, {"A": 8}, {"A": 8}, {"A": 8}),
               TenantSample(1800.0, {"A": 4}, {"A": 12}, {"A": 4}),
               TenantSample(3600.0, {"A": 7}, {"A": 9}, {"A": 8}),
               TenantSample(4000.0, {"A": 8}, {"A": 8}, {"A": 8}),
               TenantSample(7200.0, {"A": 2}, {"A": 10}, {"A": 6})]
    job = JobResult(1, "j1", 8, 0.0, 0.0, 9000.0, 9000.0, 0.0, 0, 0)
    result = SimResult("tiresias-las", (job,), 0, 0, 0.0, 16, 0.0, [], {1: "A"}, samples)
    tenancy = Tenancy((VirtualCluster("A", users=("u",), guaranteed_gpus=8),))
    row = tenant_figures(result, tenancy, {})["tenants"][0]
    assert row["demand_at_guarantee_h"] == pytest.approx(2.5)
    assert row["hours_below_guarantee_share"] == pytest.approx(0.2)
    assert row["time_below_guarantee_share"] == pytest.approx(4000 / 9000)
