"""``auto_tune`` on the live cluster: the daemon cycles against Slurm, starts its replay child
on the first cycle, and adopts the grid point only when the replay of the history clears both
bars. The history is fed as a history CSV (``auto_tune.history: PATH``), made for each case:

* *switch*: one job of 3,000 s on every GPU of the cluster (G GPUs; the test and the replay
  child read the shape from sinfo) submitted at 0, then twenty 1-GPU jobs of 60 s at 10..29 s.
  Under the default thresholds 3,250/7,200 GPU·s the big job reaches queue 1 only after
  3,250 / G s (203 s on 2 × 8 GPUs, 102 s on 4 × 8), the short jobs waiting behind it; under
  100/200 it leaves queue 0 after 100 / G s and is preempted at the first decision past
  ``min_run_s`` (60 s): every short job finishes sooner, and the p95 JCT (a short job's) falls
  with the average.
* *flat*: twenty-one 1-GPU jobs of 60 s, 100 s apart: no job ever waits, every setting
  replays to the same JCTs: no gain, no switch.

The daemon manages no partition of the cluster (``partitions: [no-such-partition]``, its
first-cycle check of the name skipped), so it acts on no job of other tests."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from prioritizer.config_file import from_mapping
from prioritizer.daemon import auto_tune
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.loop import Daemon
from prioritizer.daemon.metrics import Metrics
from prioritizer.history.trace import HistoryRow, write_rows
from prioritizer.sim.slurm_cluster import shape_from_slurm
from slurm_plugin.slurm.client import SlurmClient

pytestmark = [pytest.mark.live, pytest.mark.releases]

GRID = "thresholds=3250/7200,100/200"


def _history(path: Path, specs: list[tuple[float, int, float]], now: float) -> None:
    """(submit offset s, GPUs, duration s) per job, ended within the last day."""
    base = now - 86400
    with open(path, "w", newline="") as handle:
        write_rows((HistoryRow(str(i + 1), "u", "a", "gpu", base + t, base + t, g, 1, g * d, d,
                               base + t + d, d, "COMPLETED", 1, "self")
                    for i, (t, g, d) in enumerate(specs)), handle)


def _run_until_replayed(tmp_path: Path, history: Path) -> tuple[Daemon, Ledger, Metrics]:
    cfg = from_mapping({
        "ledger_path": str(tmp_path / "ledger"), "snapshot_path": str(tmp_path / "s.json"),
        "partitions": ["no-such-partition"], "metrics_port": 0,
        "auto_tune": {"enabled": True, "history": str(history), "grid": GRID, "min_jobs": 10,
                      "period_s": 3600, "budget_s": 60, "min_gain": 0.05, "max_p95_rise": 0}})
    ledger = Ledger(cfg.ledger_path)
    metrics = Metrics()
    daemon = Daemon(cfg, SlurmClient(timeout_s=20), ledger, CycleAdapter(), metrics,
                    auto_tune=True)
    # a partition the cluster lacks, on purpose (manage no job): skip its check
    daemon.names_checked = True
    deadline = time.monotonic() + 60
    try:
        while ledger.meta(auto_tune.META_LAST) is None:
            assert time.monotonic() < deadline, "no replay outcome within 60 s"
            daemon.cycle()
            time.sleep(0.5)
    finally:
        assert daemon.tuner is not None
        daemon.tuner.close()
    return daemon, ledger, metrics


def test_a_replay_that_clears_both_bars_switches(tmp_path: Path) -> None:
    history = tmp_path / "switch.csv"
    nodes, gpus = shape_from_slurm()
    _history(history, [(0, nodes * gpus, 3000)] + [(10 + i, 1, 60) for i in range(20)],
             time.time())
    daemon, ledger, metrics = _run_until_replayed(tmp_path, history)
    with ledger:
        assert daemon.cfg.policy.thresholds_gpu_s == (100.0, 200.0)
        assert ledger.meta(auto_tune.META_SWITCHES) == "1"
        assert metrics.registry.get_sample_value("dlprio_auto_tune_switches_total") == 1
        assert metrics.registry.get_sample_value("dlprio_auto_tune_replays_total",
                                                 {"outcome": "switched"}) == 1
        line = auto_tune.status_line(daemon.tuner.cfg, ledger)  # type: ignore[union-attr]
        assert "thresholds 100/200 GPU·s" in line and "1 switch(es)" in line
        assert "last replay" in line and "switched: to thresholds=100/200; 21 jobs" in line
        # a restarted daemon on the same ledger and config keeps the adopted settings
        again = Daemon(daemon.tuner.cfg, SlurmClient(timeout_s=20), ledger,  # type: ignore[union-attr]
                       CycleAdapter())
        assert again.cfg.policy.thresholds_gpu_s == (100.0, 200.0)


def test_a_replay_without_gain_keeps_the_settings(tmp_path: Path) -> None:
    history = tmp_path / "flat.csv"
    _history(history, [(100 * i, 1, 60) for i in range(21)], time.time())
    daemon, ledger, metrics = _run_until_replayed(tmp_path, history)
    with ledger:
        assert daemon.cfg.policy.thresholds_gpu_s == (3250.0, 7200.0)
        assert ledger.meta(auto_tune.META_SWITCHES) is None
        assert ledger.meta(auto_tune.META_SETTINGS) is None
        assert metrics.registry.get_sample_value("dlprio_auto_tune_switches_total") == 0
        assert metrics.registry.get_sample_value("dlprio_auto_tune_replays_total",
                                                 {"outcome": "kept"}) == 1
        assert "kept: 21 jobs: best grid point avg JCT 60.0 -> 60.0 s" in auto_tune.status_line(
            daemon.tuner.cfg, ledger)  # type: ignore[union-attr]
