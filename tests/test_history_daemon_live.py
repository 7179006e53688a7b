"""Live fidelity of the history replay under ``dlprio run`` (issue 12, part 2): 30 checkpointing
GPU jobs (1–8 GPUs, 6–25 one-second steps) run while the daemon orders and preempts them
(2D-LAS, thresholds 40/100,000 GPU·s, 5 s cycle, 5 s grace); ``dlprio history export --ledger``
writes the history and ``history check --config`` replays it under the daemon's own policy
with the cluster's real costs (5 s checkpoint grace, 11 s requeue delay = dlcluster's
``cred_expire=10`` + 1, 5 s decisions). Prints the fidelity table; about 90 s.

Asserted: the issue's avg-JCT target (within 10 %). Not asserted, because it is not reliably
met: per-job JCT within 20 % for >= 80 % of jobs; two runs measured 77 % (23/30, missed) and
97 % (29/30) (docs/history.md): short jobs the daemon preempts early restart at moments that
depend on cycle phase and backfill timing."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
import yaml
from daemon_helpers import DaemonProc, live_jobs, write_config
from live_helpers import wait_for

from prioritizer.cli import main
from prioritizer.history.check import check, format_fidelity
from prioritizer.history.cli import cluster_of, policy_config, start_latency
from prioritizer.history.trace import read_rows

COSTS = {"checkpoint_overhead_s": 5, "requeue_delay_s": 11, "decision_interval_s": 5}


@pytest.mark.live
def test_history_replay_under_dlprio_run(tmp_path: Path) -> None:
    import argparse

    cfg = write_config(tmp_path / "dlprio.yaml", policy=dict(COSTS))
    rng = random.Random(14)
    with live_jobs(tmp_path) as jobs:
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1))
        daemon = DaemonProc(cfg).start()
        try:
            ids = []
            for i in range(30):
                job_id, _ = jobs.submit(f"h{i}", nodes=1, gpus_per_node=rng.choice((1, 2, 4, 8)),
                                        steps=rng.randint(6, 25))
                ids.append(job_id)
                if i % 10 == 9:
                    time.sleep(4)
            wait_for(lambda: not [j for j in jobs.client.jobs(job_ids=ids) if j.is_active],
                     480, "the workload to finish", interval_s=2)
        finally:
            daemon.stop()
    ledger = yaml.safe_load(cfg.read_text())["ledger_path"]
    out = tmp_path / "history.csv"
    wait_for(lambda: main(["history", "export", "--since", since, "--ledger", ledger,
                           "-o", str(out)]) == 0
             and len([r for r in read_rows(str(out)) if int(r.job_id) in ids]) == 30,
             60, "sacct to record every job", interval_s=2)
    rows = [r for r in read_rows(str(out)) if int(r.job_id) in ids]
    assert sum(r.preemptions for r in rows) >= 1          # the daemon did preempt
    shape = argparse.Namespace(cluster_from_slurm=True, nodes=None, gpus_per_node=None)
    fidelity = check(rows, cluster_of(shape), policy_config(None, str(cfg)),
                     start_latency_s=start_latency("auto"))
    print(format_fidelity(fidelity))
    assert abs(fidelity.avg_error) <= 0.10, format_fidelity(fidelity)
