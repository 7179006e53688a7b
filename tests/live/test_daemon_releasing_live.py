"""A victim that is already completing when its checkpoint signal is sent gets no second
victim for the same waiter, on the live cluster of every release (docs/dlprio.md, "Failure
modes"). The race is made certain, not waited for: the daemon's first cycle decides from a
``squeue`` read taken while every job ran, and the victim is cancelled between that read and
the signal, so real ``scancel --signal`` meets a job Slurm already shows COMPLETING (its batch
shell ignores SIGTERM, so it stays COMPLETING for the cluster's KillWait, 5 s).
tests/prioritizer/daemon/test_daemon_releasing.py checks the same rules against a fake Slurm."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import live_jobs, write_config
from live_helpers import wait_for, wait_state
from prioritizer.config_file import load
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.loop import Daemon
from slurm_plugin.slurm.client import SlurmClient

pytestmark = [pytest.mark.live, pytest.mark.releases]

#: a batch shell (and its sleep) that ignores SIGTERM: a cancelled job stays COMPLETING until
#: Slurm's SIGKILL after KillWait
STUBBORN = "#!/bin/bash\ntrap '' TERM\nsleep 600\n"
MARKER = "--comment=dl:v1;signal=USR2;grace=5"


class StaleReads:
    """The real client, except that the whole-queue ``jobs()`` (squeue) and ``nodes()``
    (sinfo) answer reads recorded together while ``stale``: a daemon that observed the cluster
    just before the victim was cancelled (sinfo shows a completing job's GPUs free at once).
    Reads of given jobs (the preemptor's, after a refused signal) are always live."""

    def __init__(self, client: SlurmClient, recorded: list, nodes: list) -> None:
        self._client, self.recorded, self.recorded_nodes = client, recorded, nodes
        self.stale = True

    def jobs(self, job_ids: list[int] | None = None) -> list:
        if self.stale and job_ids is None:   # observe's read of the whole queue
            return list(self.recorded)
        return self._client.jobs(job_ids=job_ids)   # the preemptor's read of one job: live

    def nodes(self) -> list:
        return self._client.nodes() if not self.stale else list(self.recorded_nodes)

    def __getattr__(self, name: str) -> object:
        return getattr(self._client, name)


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator:
    with live_jobs(tmp_path) as j:
        yield j


@pytest.mark.parametrize("second_read", ["live", "stale"])
def test_victim_already_completing_at_its_signal_gets_no_second_victim(
        jobs, tmp_path: Path, second_read: str) -> None:
    """Two 2-node jobs of 8 GPUs per node fill the 4 nodes and fall to queue 1; a 1-node
    8-GPU waiter arrives. The daemon picks one of them as the victim; the victim is cancelled
    before its signal; Slurm refuses the signal, the job being completing. The next
    cycle, whether squeue and sinfo then show the victim COMPLETING and its GPUs free
    (``live``) or still RUNNING on full nodes (``stale``, not caught up), picks no other victim: the other job is never signalled,
    and the waiter starts on the victim's freed node."""
    client: SlurmClient = jobs.client
    nodes = [n for n in client.nodes() if n.gpus_total]
    assert len(nodes) == 4 and {n.gpus_total for n in nodes} == {8}, "needs 4 nodes x 8 GPUs"
    running = []
    for name in ("first", "second"):
        job_id = client.submit(STUBBORN, [f"--job-name=rel-{name}", "--nodes=2", "--gres=gpu:8",
                                          "--ntasks-per-node=1", "--requeue", MARKER,
                                          f"--output={tmp_path}/{name}.out"])
        jobs.ids.append(job_id)
        running.append(job_id)
    for job_id in running:
        wait_state(client, job_id, {"RUNNING"}, 60)
    waiter = client.submit(STUBBORN.replace("sleep 600", "true"),
                           ["--job-name=rel-waiter", "--nodes=1", "--gres=gpu:8", MARKER,
                            f"--output={tmp_path}/waiter.out"])
    jobs.ids.append(waiter)
    wait_for(lambda: client.job(waiter).reason in ("Resources", "Priority"), 30,
             "the waiter to wait for GPUs")
    time.sleep(6)   # past the config's min_run_s (5 s); 16 GPUs x 6 s > the 40 GPU·s threshold
    recorded, recorded_nodes = client.jobs(), client.nodes()
    assert {j.unit_id: j.state for j in recorded if j.unit_id in (*running, waiter)} == {
        running[0]: "RUNNING", running[1]: "RUNNING", waiter: "PENDING"}
    cfg = load(write_config(tmp_path / "dlprio.yaml"))
    stale = StaleReads(client, recorded, recorded_nodes)
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        plan = Daemon(cfg, stale, ledger, CycleAdapter(), dry_run=True,  # type: ignore[arg-type]
                      out=io.StringIO()).cycle()
        [(planned_waiter, (victim,))] = [(p.waiter, p.victims) for p in plan.preemptions]
        assert planned_waiter == waiter and victim in running
        other = running[1 - running.index(victim)]

        client.cancel([victim])
        wait_state(client, victim, {"COMPLETING"}, 10)
        daemon = Daemon(cfg, stale, ledger, CycleAdapter())  # type: ignore[arg-type]
        first = daemon.cycle()
        assert [(p.waiter, p.victims) for p in first.preemptions] == [(waiter, (victim,))]
        [intent] = ledger.intents(victim)
        assert intent.outcome is not None and intent.outcome.startswith("ended before signal: ")
        # Slurm's own refusal text follows: "already completing" or, with the batch step
        # gone, "Invalid job id specified" (by release and moment)
        assert "scancel: error:" in intent.outcome

        stale.stale = second_read == "stale"
        second = daemon.cycle()
        assert second.preemptions == ()
        assert ledger.intents(other) == []
        assert ledger.job(victim).preemptions == 0      # it ended by itself
    assert client.job(other).state == "RUNNING" and client.job(other).restart_count == 0
    wait_state(client, waiter, {"RUNNING", "COMPLETED"}, 30)
