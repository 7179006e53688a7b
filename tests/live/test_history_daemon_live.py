"""Live fidelity of the history replay under ``dlprio run``: 30 checkpointing
GPU jobs (1, 2, 4 or 8 GPUs, 15–75 one-second steps) in three bursts of ten, 10 s apart, run
while the daemon orders and preempts them (2D-LAS, thresholds 210/100,000 GPU·s, 5 s cycle, 5 s
grace); ``dlprio history export --ledger`` writes the history and ``history check --config
--ledger`` replays it under the daemon's own policy with the cluster's real costs (5 s
checkpoint grace, 11 s requeue delay = dlcluster's ``cred_expire=10`` + 1, 5 s decisions), the
replay's ticks in phase with the daemon's cycles and the dispatch latency seen in the history.
Prints the fidelity table; about 3 minutes.

Asserted: both of the issue's targets, avg JCT within 10 % and per-job JCT within 20 % for
>= 80 % of jobs. The job lengths are those of DL jobs relative to the 5 s cycle: with jobs of
only 6–25 s (the first version of this test) a few seconds of cycle phase or start latency
decide which job is preempted, and the per-job share varied from 77 % to 97 % between runs
(docs/history.md). The first threshold is 210 GPU·s, not 200: an 8-GPU job crosses it 26.25 s
after its start, a 4-GPU job 52.5 s, never on a whole number of 5 s cycles. With 200 an 8-GPU
job that starts when its victim is requeued (on a cycle) crosses exactly on a cycle 25 s later,
and whether the daemon demotes it then or 5 s later depends on whether Slurm's whole-second
start time fell before or after that cycle's fraction of a second (seen both ways in three runs:
all met the targets, 90-93 %)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
import yaml
from daemon_helpers import DaemonProc, live_jobs, write_config
from live_helpers import wait_for

from prioritizer.cli import main
from prioritizer.history.check import check, dispatch_latency_of, format_fidelity
from prioritizer.history.cli import cluster_of, policy_config, start_latency
from prioritizer.history.ledger_read import cycle_time
from prioritizer.history.trace import read_rows

POLICY = {"thresholds_gpu_s": [210, 100000], "checkpoint_overhead_s": 5, "requeue_delay_s": 11,
          "decision_interval_s": 5}


@pytest.mark.live
def test_history_replay_under_dlprio_run(tmp_path: Path) -> None:
    import argparse

    cfg = write_config(tmp_path / "dlprio.yaml", policy=dict(POLICY))
    rng = random.Random(11)
    with live_jobs(tmp_path) as jobs:
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1))
        daemon = DaemonProc(cfg).start()
        try:
            ids = []
            for i in range(30):
                job_id, _ = jobs.submit(f"h{i}", nodes=1, gpus_per_node=rng.choice((1, 2, 4, 8)),
                                        steps=rng.randint(15, 75))
                ids.append(job_id)
                if i % 10 == 9:
                    time.sleep(10)
            wait_for(lambda: not [j for j in jobs.client.jobs(job_ids=ids) if j.is_active],
                     600, "the workload to finish", interval_s=2)
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
                     start_latency_s=start_latency("auto"), dispatch_s=dispatch_latency_of(rows),
                     cycle_at=cycle_time(ledger))
    print(f"preemptions {sum(r.preemptions for r in rows)}")
    print(format_fidelity(fidelity))
    assert fidelity.meets_targets, format_fidelity(fidelity)
