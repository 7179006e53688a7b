"""``gittins_samples: history`` on the live cluster: a daemon whose ledger holds no ended job
learns the Gittins distribution from sacct (the rules: tests/prioritizer/daemon/test_learned_gittins_daemon.py)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from log_helpers import captured
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.loop import Daemon
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.durations import load_samples
from slurm_plugin.slurm.client import SlurmClient


@pytest.mark.live
@pytest.mark.releases
def test_daemon_learns_gittins_from_sacct(tmp_path: Path) -> None:
    client = SlurmClient()
    job_id = client.submit("#!/bin/sh\nsleep 1\n", ["--gres=gpu:1", "--output=/dev/null"])
    from live_helpers import wait_for
    from slurm_plugin.slurm.accounting import fold_jobs
    wait_for(lambda: any(j.job_id == job_id and j.finished
                         for j in fold_jobs(client.accounting("now-1hour"))), 60, "sacct")
    cfg = dataclasses.replace(DaemonConfig(policy=PolicyConfig(policy="tiresias-gittins")),
                              gittins_samples="history", gittins_min_samples=1,
                              # manage no partition: the fresh ledger sees no job, so the
                              # samples must come from sacct
                              partitions=("h12-none",),
                              ledger_path=str(tmp_path / "l.sqlite"),
                              snapshot_path=str(tmp_path / "s.json"))
    with Ledger(cfg.ledger_path) as ledger, captured() as (log, out):
        daemon = Daemon(cfg, client, ledger, log, dry_run=True,
                        out=io.StringIO())
        # a partition the cluster lacks, on purpose (manage no job): skip its check
        daemon.names_checked = True
        daemon.cycle()
    print(out.getvalue())
    assert "event=gittins_learned" in out.getvalue() and "source=sacct" in out.getvalue()
    assert daemon.distribution is not None
    assert daemon.distribution.samples != tuple(sorted(load_samples()))
