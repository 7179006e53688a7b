"""``gittins_samples: history`` in the daemon: learned from ended jobs only (ledger, else
sacct: tests/live/test_learned_gittins_daemon_live.py), the packaged distribution below the
minimum (logged), refreshed on its period."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.daemon.cli import gittins_samples
from prioritizer.daemon.config import ConfigError, from_mapping
from prioritizer.daemon.learned_gittins import HistoryDistribution, ledger_samples
from prioritizer.daemon.ledger import Ledger
from log_helpers import captured
from prioritizer.policy.durations import load_samples


def _job(ledger: Ledger, job_id: int, runs: list[tuple[float, float | None]], ended: bool) -> None:
    ledger.upsert_job(job_id, user="u", account="a", partition="gpu", state="RUNNING", gpus=2,
                      submit_time=0, restart_count=0, now=0)
    for start, end in runs:
        ledger.start_run(job_id, start, 2, start)
        if end is not None:
            ledger.close_run(job_id, start, end, "slurm")
    if ended:
        ledger.mark_ended(job_id, "COMPLETED", 1000)


def test_ledger_samples_count_ended_jobs_only(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite") as ledger, ledger.transaction():
        _job(ledger, 1, [(0, 10), (20, 25)], ended=True)     # 2 GPUs × 15 s
        _job(ledger, 2, [(0, None)], ended=False)            # still running: never a sample
        _job(ledger, 3, [(0, 100)], ended=False)             # requeued, pending: not final
    with Ledger(tmp_path / "l.sqlite") as ledger:
        assert ledger_samples(ledger) == [30.0]


def test_below_minimum_keeps_packaged_and_says_so(tmp_path: Path) -> None:
    learner = HistoryDistribution(min_samples=5, refresh_s=60)
    with Ledger(tmp_path / "l.sqlite") as ledger, captured() as (log, out):
        dist = learner.current(None, ledger, 100.0, log)
        assert dist.samples == tuple(sorted(load_samples())) and not learner.learned
        assert "event=gittins_packaged samples=0 min=5" in out.getvalue()
        learner.current(None, ledger, 150.0, log)   # not due: no new line
        assert out.getvalue().count("gittins_packaged") == 1


def test_learned_once_the_ledger_has_the_minimum(tmp_path: Path) -> None:
    learner = HistoryDistribution(min_samples=1, refresh_s=60)
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            _job(ledger, 1, [(0, 10)], ended=True)          # 2 GPUs × 10 s
        assert learner.current(None, ledger, 100.0).samples == (20.0,)
        assert learner.learned   # this cluster's: its running jobs may join as censored


def test_config_keys_are_checked() -> None:
    cfg = from_mapping({"gittins_samples": "history", "gittins_min_samples": 20,
                        "gittins_refresh_s": 600})
    assert (cfg.gittins_min_samples, cfg.gittins_refresh_s) == (20, 600)
    with pytest.raises(ConfigError, match="gittins_min_samples"):
        from_mapping({"gittins_min_samples": 0})
    with pytest.raises(ConfigError, match="gittins_refresh_s"):
        from_mapping({"gittins_refresh_s": 0})



@pytest.mark.parametrize(("policy", "read"), [
    ({"policy": "tiresias-las", "preempt_gain": 1}, True),   # the gain rule reads it too
    ({"policy": "tiresias-gittins"}, True),
    ({"policy": "tiresias-las"}, False),                     # nothing reads it
])
def test_the_samples_file_is_read_for_the_gain_rule(tmp_path: Path, policy: dict,
                                                    read: bool) -> None:
    samples = tmp_path / "s.csv"
    samples.write_text("duration\n1000\n5000\n20000\n")
    cfg = from_mapping({"policy": policy, "gittins_samples": str(samples)})
    dist = gittins_samples(cfg, "dlprio.yaml")
    assert (dist.samples if dist is not None else None) == (
        (1000.0, 5000.0, 20000.0) if read else None)
