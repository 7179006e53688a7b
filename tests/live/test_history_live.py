"""Live fidelity of the history replay: a workload of 32 GPU jobs of mixed
sizes (1–8 GPUs) and lengths (sleeps of 6–30 s) runs under Slurm alone on the ``dlcluster``
(needs ``--with-dbd``), ``dlprio history export`` writes it, and the replay under fit-first
FIFO on the cluster's own node shape (``--cluster-from-slurm``) must give an average JCT within
10 % of the real one and per-job JCT within 20 % for at least 80 % of the jobs. About two
minutes of wall time (32 GPUs, about 2,900 GPU·s of work).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from live_helpers import wait_cluster_idle, wait_for

from prioritizer.cli import main
from prioritizer.history.check import check, dispatch_latency_of, format_fidelity
from prioritizer.history.cli import cluster_of, policy_config, start_latency
from prioritizer.history.trace import read_rows
from slurm_plugin.slurm.accounting import fold_jobs
from slurm_plugin.slurm.client import SlurmClient

# Single-node sizes: every job then has the same multifactor job-size factor, so Slurm alone
# starts them in submit order (fit-first). 2-node jobs get a larger job-size priority on
# dlcluster (PriorityWeightJobSize=100) and jump the queue, which fifo-fit does not model.
SIZES = (1, 1, 2, 2, 4, 4, 8, 8)


def workload(seed: int, count: int) -> list[tuple[int, int]]:
    """(GPUs, sleep seconds) of ``count`` jobs, seeded."""
    rng = random.Random(seed)
    return [(rng.choice(SIZES), rng.randint(6, 30)) for _ in range(count)]


def submit(client: SlurmClient, gpus: int, sleep_s: int, tag: str) -> int:
    nodes = max(1, gpus // 8)
    per_node = gpus // nodes
    return client.submit(f"#!/bin/sh\nsleep {sleep_s}\n",
                         [f"--job-name={tag}", f"--nodes={nodes}", f"--gres=gpu:{per_node}",
                          "--output=/dev/null"])


@pytest.mark.live
def test_history_replay_of_slurm_alone_meets_fidelity_targets(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    client = SlurmClient()
    wait_cluster_idle(client)
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1))
    ids = []
    for i, (gpus, sleep_s) in enumerate(workload(12, 32)):
        ids.append(submit(client, gpus, sleep_s, "hist-live"))
        if i % 8 == 7:
            time.sleep(3)    # four bursts: queueing inside and between them
    wait_for(lambda: not client.jobs(job_ids=ids, states={"PENDING", "RUNNING", "COMPLETING"}),
             400, "the workload to finish", interval_s=2)
    wait_for(lambda: {j.job_id for j in fold_jobs(client.accounting(since))
                      if j.finished} >= set(ids), 60, "sacct to record every job", interval_s=1)
    out = tmp_path / "history.csv"
    assert main(["history", "export", "--since", since, "-o", str(out)]) == 0
    rows = [r for r in read_rows(str(out)) if int(r.job_id) in ids]
    assert len(rows) == 32
    assert {r.ended_by for r in rows} == {"self"} and all(r.attempts == 1 for r in rows)
    latency = start_latency("auto")
    assert latency == 2.5        # dlcluster's bf_interval=5
    fidelity = check(rows, cluster_of(_shape_args()), policy_config(None, None),
                     start_latency_s=latency, dispatch_s=dispatch_latency_of(rows))
    print(format_fidelity(fidelity))
    assert abs(fidelity.avg_error) <= 0.10, format_fidelity(fidelity)
    assert fidelity.share_within >= 0.80, format_fidelity(fidelity)
    # the CLI prints the same table for the same file
    capsys.readouterr()
    assert main(["history", "check", "--trace", str(out), "--cluster-from-slurm",
                 "--summary-only"]) == 0
    assert "avg JCT s" in capsys.readouterr().out


def _shape_args():  # noqa: ANN202 - a tiny argparse stand-in
    import argparse

    return argparse.Namespace(cluster_from_slurm=True, nodes=None, gpus_per_node=None)
