"""A job that Slurm suspends (``scontrol suspend``) attains no service while suspended, on the
live cluster: the daemon cycles (``dlprio once``) before, during and after the suspension, and
the run it records counts its wall time less the time suspended (docs/dlprio.md, "One cycle").
With slurmdbd, sacct's ``Suspended`` of the run (what a ledger rebuilt from sacct counts) is
the same time.

The truth is the test's own clock around the ``scontrol suspend`` and ``resume`` calls: each
takes well under a second, and Slurm counts whole seconds, so the ledger's figure may differ
from it by a few seconds, never by the tens of seconds the job stays suspended.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from daemon_helpers import Jobs, dlprio, live_jobs, open_ledger, write_config
from live_helpers import wait_for, wait_state

pytestmark = [pytest.mark.live, pytest.mark.releases]
SUSPENDED_S = 20.0


def _once(cfg: Path) -> None:
    done = subprocess.run(dlprio("once", "--config", str(cfg)), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def _scontrol(*args: str) -> float:
    """Run ``scontrol ARGS``; the epoch s halfway through the call."""
    before = time.time()
    done = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return (before + time.time()) / 2


def _running_and_seen(jobs: Jobs, cfg: Path, name: str) -> tuple[int, float]:
    """A 2-GPU job, running and recorded by one daemon cycle: (job id, its start)."""
    jid, _ = jobs.submit(name, nodes=1, gpus_per_node=2, steps=300)
    start = wait_state(jobs.client, jid, {"RUNNING"}, 60).start_time
    assert start is not None
    _once(cfg)
    return jid, start


def test_time_suspended_is_not_attained_service(tmp_path: Path) -> None:
    with live_jobs(tmp_path) as jobs:
        _suspend_and_resume(jobs, tmp_path)


def _suspend_and_resume(jobs: Jobs, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "dlprio.yaml")
    jid, start = _running_and_seen(jobs, cfg, "paused")
    time.sleep(4)
    suspended_at = _scontrol("suspend", str(jid))
    wait_state(jobs.client, jid, {"SUSPENDED"}, 30)
    _once(cfg)                                   # the daemon sees it suspended ...
    explained = subprocess.run(dlprio("explain", str(jid), "--config", str(cfg)),
                               capture_output=True, text=True, timeout=60)
    assert explained.returncode == 0, explained.stderr
    assert ("it keeps its GPUs but does not run; the time suspended is not counted as "
            "attained service") in explained.stdout
    time.sleep(SUSPENDED_S / 2)
    _once(cfg)                                   # ... and again, later in the suspension
    time.sleep(max(suspended_at + SUSPENDED_S - time.time(), 0))
    resumed_at = _scontrol("resume", str(jid))
    wait_state(jobs.client, jid, {"RUNNING"}, 30)
    time.sleep(4)
    _once(cfg)
    with open_ledger(cfg) as ledger:
        run, = ledger.runs(jid)
        gpu_s, ran_s = ledger.service(jid, run.last_seen)
    wall = run.last_seen - start
    paused = resumed_at - suspended_at
    # about 4 s run before, 4 s after (plus the cycles' own seconds): wall less the pause
    assert run.start == start and run.end is None and run.suspended_at is None
    assert abs(run.suspended_s - paused) <= 3, (run, paused)
    assert abs(ran_s - (wall - paused)) <= 3, (ran_s, wall, paused)
    assert ran_s < wall - SUSPENDED_S + 5 and gpu_s == pytest.approx(2 * ran_s)
    if "slurmdbd" in jobs.client.show_config().get("AccountingStorageType", ""):
        jobs.client.cancel([jid])
        rec, = wait_for(lambda: [r for r in jobs.client.accounting_runs(jid) if r.end], 30,
                        "the run in sacct")
        assert abs(rec.suspended_s - paused) <= 3, (rec, paused)


def test_a_job_requeued_and_cancelled_between_two_cycles_keeps_its_run(tmp_path: Path) -> None:
    """``scontrol requeue``, then ``scancel`` once it pends again, before the daemon's next
    cycle: squeue then shows the job CANCELLED after a restart, its start moved to the cancel
    (24.11, 26.05) and no time used (it ended pending). Its run ended at
    the requeue, and the ledger counts it whole: the truth is the test's clock around the
    requeue, and sacct's record of the run where slurmdbd runs."""
    with live_jobs(tmp_path) as jobs:
        cfg = write_config(tmp_path / "dlprio.yaml")
        jid, start = _running_and_seen(jobs, cfg, "requeued")
        time.sleep(6)
        requeued_at = _scontrol("requeue", str(jid))
        wait_state(jobs.client, jid, {"PENDING"}, 30)   # cancelled pending, as a user would
        jobs.client.cancel([jid])
        wait_state(jobs.client, jid, {"CANCELLED"}, 30)
        _once(cfg)
        with open_ledger(cfg) as ledger:
            run, = ledger.runs(jid)
            gpu_s, ran_s = ledger.service(jid, time.time() + 3600)
        assert run.start == start and run.end is not None
        assert run.suspended(run.end) == 0 and gpu_s == pytest.approx(2 * ran_s)
        assert abs(ran_s - (requeued_at - start)) <= 3, (run, requeued_at)
        if "slurmdbd" in jobs.client.show_config().get("AccountingStorageType", ""):
            rec = wait_for(lambda: next((r for r in jobs.client.accounting_runs(jid)
                                         if r.start == int(start) and r.end), None), 30,
                           "the run in sacct")
            assert abs(ran_s - (rec.end - rec.start)) <= 2, (run, rec)
