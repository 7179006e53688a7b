"""``dlprio history export --since/--until`` on the live cluster (``dlcluster up --with-dbd``):
the window selects jobs, never a part of one. sacct lists an attempt only when it falls in the
window, so a job requeued before ``--since`` comes with its later attempts only, and a job still
running at ``--until`` comes with the attempt that ends after it. Checked against ``sacct -j``
(every attempt of the job, no window)."""

from __future__ import annotations

import csv
import time
import uuid
from pathlib import Path

import pytest
from live_helpers import wait_for

from prioritizer.cli import main
from slurm_plugin.slurm.accounting import fold_jobs
from slurm_plugin.slurm.client import SlurmClient

pytestmark = [pytest.mark.live, pytest.mark.releases]

# 60 s on its first run, 2 s once requeued
SCRIPT = ("#!/bin/sh\nif [ \"${SLURM_RESTART_COUNT:-0}\" -gt 0 ]; then sleep 2; "
          "else sleep 60; fi\n")


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def _job(client: SlurmClient, job_id: int):
    return next((j for j in client.jobs(job_ids=[job_id]) if j.job_id == job_id), None)


def test_export_window_keeps_whole_jobs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    client = SlurmClient(timeout_s=30)
    tag = f"hwin-{uuid.uuid4().hex[:8]}"
    started = time.time()
    requeued = client.submit(SCRIPT, [f"--job-name={tag}-a", "--gres=gpu:1", "--requeue",
                                      "--output=/dev/null"])
    wait_for(lambda: (j := _job(client, requeued)) is not None and j.state == "RUNNING", 60,
             "the first run")
    time.sleep(2)
    client.requeue(requeued)
    time.sleep(2)
    since = time.time()   # the first run ended before the window
    wait_for(lambda: (j := _job(client, requeued)) is None or not j.is_active, 90,
             "the requeued job's second run to end")
    late = client.submit("#!/bin/sh\nsleep 20\n", [f"--job-name={tag}-b", "--gres=gpu:1",
                                                   "--output=/dev/null"])
    wait_for(lambda: (j := _job(client, late)) is not None and j.state == "RUNNING", 60,
             "the late job to run")
    until = time.time() + 5   # the late job runs on past it
    wait_for(lambda: (j := _job(client, late)) is None or not j.is_active, 60,
             "the late job to end")

    def recorded():   # both jobs whole, as sacct -j gives them (this test's records only)
        jobs = fold_jobs(r for r in client.accounting_jobs([requeued, late])
                         if (r.submit or 0) >= started - 1)
        return jobs if len(jobs) == 2 and all(j.finished for j in jobs) else None

    whole = {j.job_id: j for j in wait_for(recorded, 60, "sacct to record both jobs")}
    assert len(whole[requeued].attempts) == 2   # the job as sacct -j knows it
    out = tmp_path / "h.csv"
    assert main(["history", "export", "--since", _stamp(since), "--until", _stamp(until),
                 "-o", str(out)]) == 0
    err = capsys.readouterr().err
    rows = {r["job_id"]: r for r in csv.DictReader(out.open())}
    row = rows[str(requeued)]
    job = whole[requeued]
    assert int(row["attempts"]) == 2
    assert float(row["submit_time"]) == job.submit
    assert float(row["jct"]) == job.end - (job.eligible or job.submit)
    # ended after --until: still running at the window's end, left out as unfinished
    assert str(late) not in rows
    assert "unfinished" in err and str(late) in err.split("unfinished", 1)[1].splitlines()[0]
