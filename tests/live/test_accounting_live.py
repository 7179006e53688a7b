"""``sacct`` on the live cluster (``dlcluster up --with-dbd``): a finished GPU job is read and
folded as the recorded output is (tests/slurm_plugin/slurm/test_accounting.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from live_helpers import wait_for

from slurm_plugin.slurm.accounting import fold_jobs, keeps_job_comments
from slurm_plugin.slurm.client import SlurmClient


@pytest.mark.releases
@pytest.mark.live
def test_live_accounting_sees_a_finished_gpu_job() -> None:
    client = SlurmClient()
    job_id = client.submit("#!/bin/sh\nsleep 1\n", ["--gres=gpu:2", "--job-name=acct-live",
                                                    "--output=/dev/null"])
    found = wait_for(lambda: [j for j in fold_jobs(client.accounting("now-1hour"))
                              if j.job_id == job_id and j.finished], 90, "job in sacct")
    job = found[0]
    assert job.gpus == 2 and job.name == "acct-live"
    assert job.state == "COMPLETED" and len(job.attempts) == 1
    assert 1 <= job.attempts[0].run_s <= 5


@pytest.mark.releases
@pytest.mark.live
def test_live_config_says_whether_accounting_keeps_job_comments() -> None:
    # what slurm.conf sets (dlcluster sets no AccountingStoreFlags: comments are not kept),
    # read from the file itself, against the reading of `scontrol show config`
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()
    flags = [line.split("=", 1)[1] for line in conf.splitlines()
             if line.strip().lower().startswith("accountingstoreflags=")]
    expected = any("job_comment" in f.lower().split(",") for f in flags)
    assert keeps_job_comments(SlurmClient().show_config()) is expected
