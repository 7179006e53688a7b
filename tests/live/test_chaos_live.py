"""R1 as a test: seeded churn of mixed jobs while ``dlprio run`` is
SIGKILLed at random moments and right after each preemption step; then, per job, ledger vs
``sacct --duplicates`` within one interval × GPUs, no run counted twice, every intent
finished, no attempt signalled twice (tests/chaos_helpers.py). A few minutes; the longer
version with printed figures is benchmarks/chaos_daemon.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos_helpers import run_chaos
from daemon_helpers import Jobs, live_jobs

pytestmark = pytest.mark.live


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    with live_jobs(tmp_path) as j:
        if "slurmdbd" not in j.client.show_config().get("AccountingStorageType", ""):
            pytest.fail("the chaos test needs slurmdbd (dlcluster up --with-dbd): sacct is its truth")
        yield j


def test_chaos_seeded_kills_ledger_matches_sacct(jobs: Jobs, tmp_path: Path) -> None:
    report = run_chaos(jobs, tmp_path, seed=14, n_jobs=12, churn_s=40, kill_every_s=(8, 20),
                       timeout_s=240)
    print("\n".join(report.lines()))
    assert report.kills_at_step == ["intent", "signal", "requeue-mark", "requeue"], report.lines()
    # One preemption can carry several step kills (the restarted daemon finishes the intent),
    # so the four step kills need not mean four preemptions; the four long jobs that fill the
    # cluster at the start are each demoted and preempted at most once before the churn ends.
    assert report.kills_random >= 2 and report.preemptions >= 3, report.lines()
    assert report.problems == [], "\n".join(report.lines())
