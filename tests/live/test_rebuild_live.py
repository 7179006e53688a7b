"""A lost ledger is rebuilt from ``sacct --duplicates``, live on a
``dlcluster --with-dbd``: a 2-GPU job runs, is requeued, runs again; a daemon starting with an
empty ledger must count the first run (from sacct, every attempt) besides the current one,
log how many jobs it rebuilt, ask sacct only once, and never count a run twice."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from live_helpers import wait_cluster_idle, wait_for
from log_helpers import captured

from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.observe import observe
from slurm_plugin.slurm.accounting import fold_jobs
from slurm_plugin.slurm.client import SlurmClient


@pytest.mark.releases
@pytest.mark.live
def test_lost_ledger_is_rebuilt_from_every_attempt(tmp_path: Path) -> None:
    client = SlurmClient()
    wait_cluster_idle(client)
    job_id = client.submit("#!/bin/sh\nsleep 300\n", ["--gres=gpu:2", "--requeue",
                                                       "--job-name=rebuild-live",
                                                       "--output=/dev/null"])
    try:
        first = wait_for(lambda: (j := client.job(job_id)).state == "RUNNING" and j, 60, "start")
        time.sleep(3)
        client.requeue(job_id)
        second = wait_for(lambda: (j := client.job(job_id)).state == "RUNNING"
                          and j.start_time != first.start_time and j, 90, "second run")
        acct = wait_for(lambda: [j for j in fold_jobs(client.accounting_jobs([job_id]))
                                 if len(j.attempts) == 2], 30, "both attempts in sacct")[0]
        lost = acct.attempts[0]
        assert lost.state == "REQUEUED" and lost.gpus == 2
        with Ledger(tmp_path / "fresh.sqlite") as ledger, captured() as (log, out):   # lost ledger
            now = time.time()
            observe(client, ledger, DaemonConfig(), now, log)
            runs = ledger.runs(job_id)
            assert [(r.start, r.end, r.gpus, r.end_source) for r in runs] == [
                (lost.start, lost.end, 2, "sacct"), (second.start_time, None, 2, None)]
            service, _ = ledger.service(job_id, now)
            assert service == pytest.approx(2 * lost.run_s + 2 * (now - second.start_time))
            # jobs that ended a moment ago (earlier tests) are still in squeue and are rebuilt
            # too: this job is one of the jobs the line counts, its one lost run among the runs
            line = re.search(r"event=ledger_rebuilt jobs=(\d+) runs=(\d+) source=sacct", out.getvalue())
            assert line and 1 <= int(line[1]) <= int(line[2])
            observe(client, ledger, DaemonConfig(), time.time(), log)     # no double count
            assert len(ledger.runs(job_id)) == 2
            assert out.getvalue().count("ledger_rebuilt") == 1
    finally:
        client.cancel([job_id])
