"""Tenants on the live cluster (needs slurmdbd: ``dlcluster up --with-dbd``, 2 nodes x 8 GPUs or
more): two accounts, ``tflood`` and ``tgang``, guaranteed 8 GPUs each. tflood floods 1-GPU
jobs and, while tgang asks nothing, uses every GPU (borrowed); tgang's 2-node gang job (4 + 4
GPUs, within its guarantee) gets its GPUs back within one cycle plus the grace time; more
1-GPU jobs of tflood, in a higher queue than the gang job, never make it a victim (pure
Tiresias would: the gang job falls to queue 1 after 40 GPU·s)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import DaemonProc, Jobs, ledger_rows, live_jobs, open_ledger, write_config
from live_helpers import wait_for, wait_state

pytestmark = [pytest.mark.live, pytest.mark.releases]

GRACE_S, CYCLE_S = 5, 5


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    for args in (["add", "account", "tflood,tgang"], ["add", "user", "root",
                                                      "account=tflood,tgang"]):
        subprocess.run(["sacctmgr", "-i", *args], capture_output=True, check=False)
    known = subprocess.run(["sacctmgr", "-nP", "list", "account", "format=account"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert {"tflood", "tgang"} <= set(known), "needs slurmdbd (dlcluster up --with-dbd)"
    with live_jobs(tmp_path) as j:
        yield j


def _running(jobs: Jobs, ids: list[int]) -> list[int]:
    return [j.job_id for j in jobs.client.jobs(job_ids=ids) if j.state == "RUNNING"]


def test_gang_tenant_gets_its_guarantee_back_and_is_never_a_victim(
        jobs: Jobs, tmp_path: Path) -> None:
    gpus = sum(n.gpus_total for n in jobs.client.nodes())
    cfg = write_config(tmp_path / "dlprio.yaml", virtual_clusters={
        "flood": {"account": "tflood", "guaranteed_gpus": 8},
        "gang": {"account": "tgang", "guaranteed_gpus": 8}})
    daemon = DaemonProc(cfg).start()
    try:
        flood = [jobs.submit(f"f{i}", nodes=1, gpus_per_node=1, steps=60,
                             extra=("--account=tflood",))[0] for i in range(gpus)]
        # borrowed GPUs are used while the other tenant asks nothing
        wait_for(lambda: len(_running(jobs, flood)) == gpus, 40, "the flood on every GPU")
        gang, log = jobs.submit("gang", nodes=2, gpus_per_node=4, steps=25,
                                extra=("--account=tgang",))
        submitted = jobs.client.job(gang).submit_time
        started = wait_state(jobs.client, gang, {"RUNNING"}, 40).start_time
        more = [jobs.submit(f"m{i}", nodes=1, gpus_per_node=1, steps=5,
                            extra=("--account=tflood",))[0] for i in range(4)]
        wait_state(jobs.client, gang, {"COMPLETED"}, 60)
        with open_ledger(cfg) as ledger:
            intents = [i for j in flood for i in ledger.intents(j) if i.waiter == gang]
            against_gang = ledger.intents(gang)
        # one decision took exactly the 8 GPUs back (4 on each node), in the first cycle that
        # saw the gang job (cycles every CYCLE_S; one more allowed for the squeue read), and
        # the gang job started once their grace was over and they were requeued (a victim
        # whose requeue had to wait for a later cycle, Slurm slow to answer, while the gang job
        # started on GPUs its flood jobs freed meanwhile, runs on: ``waiter started``)
        assert len(intents) == 8
        assert len({i.created for i in intents}) == 1
        assert submitted is not None and started is not None
        assert intents[0].created - submitted <= 2 * CYCLE_S
        requeued = [i for i in intents if i.outcome == "requeued"]
        assert requeued and all(i.requeue_at is not None and i.requeue_at <= started + 1
                                for i in requeued), (started, intents)
        assert all(i.outcome == "waiter started" and (i.done_at or 0) >= started
                   for i in intents if i not in requeued), (started, intents)
        assert all(i.deadline is not None and i.deadline - i.signal_at == GRACE_S  # type: ignore[operator]
                   for i in intents)
        # the 1-GPU jobs submitted while it ran (queue 0, the gang job in queue 1) made no
        # victim of it (tflood's own jobs in queue 1 may be theirs: Tiresias inside tflood)
        assert against_gang == [] and jobs.client.job(gang).restart_count == 0
        assert "checkpoint" not in log.read_text() and more
    finally:
        assert daemon.stop() == 0, daemon.text()


def test_gpus_freed_for_a_waiter_are_not_taken_by_a_job_of_no_tenant_ahead(
        jobs: Jobs, tmp_path: Path) -> None:
    """Every node busy with one 8-GPU job: tgang's job ``g1`` (no checkpoint marker: requeued
    in the cycle that picks it) on one, tflood's on the others, all in queue 1 after 40 GPU·s.
    A job of no tenant (account root, 8 GPUs) is submitted, then tgang's ``w`` (8 GPUs). By
    share the job of no tenant goes first (its tenant holds nothing), but it may preempt no
    one; ``w`` preempts its own tenant's ``g1`` (queue 1). The GPUs of g1's node are w's: w
    is ranked first before g1 is requeued, starts there, and the job of no tenant waits (else
    Slurm would start it there, to be preempted for w in turn)."""
    nodes = [n for n in jobs.client.nodes() if n.gpus_total == 8]
    assert len(nodes) >= 2, "needs 2 nodes of 8 GPUs or more"
    cfg = write_config(tmp_path / "dlprio.yaml", priority_field="priority", virtual_clusters={
        "flood": {"account": "tflood", "guaranteed_gpus": 8},
        "gang": {"account": "tgang", "guaranteed_gpus": 8}})
    daemon = DaemonProc(cfg).start()
    try:
        g1, _ = jobs.submit("g1", nodes=1, gpus_per_node=8, steps=120, marker=False,
                            extra=("--account=tgang",))
        fill = [jobs.submit(f"fill{i}", nodes=1, gpus_per_node=8, steps=120,
                            extra=("--account=tflood",))[0] for i in range(len(nodes) - 1)]
        wait_for(lambda: len(_running(jobs, [g1, *fill])) == len(nodes), 60, "every node busy")
        where = jobs.client.job(g1).node_list
        wait_for(lambda: _queue(cfg, g1) == 1, 40, "g1 in queue 1")
        nobody, _ = jobs.submit("nobody", nodes=1, gpus_per_node=8, steps=5,
                                extra=("--account=root",))
        w, _ = jobs.submit("w", nodes=1, gpus_per_node=8, steps=5, extra=("--account=tgang",))
        started = wait_state(jobs.client, w, {"RUNNING"}, 60)
        assert started.node_list == where
        assert jobs.client.job(nobody).state == "PENDING"
        with open_ledger(cfg) as ledger:
            assert [(i.waiter, i.outcome) for i in ledger.intents(g1)] == [(w, "requeued")]
            assert ledger.intents(nobody) == []
    finally:
        assert daemon.stop() == 0, daemon.text()


def _queue(cfg: Path, job_id: int) -> int | None:
    """The job's queue in the daemon's ledger; None also before the daemon has made the
    ledger (it checks the config against the cluster first)."""
    return ledger_rows(cfg).get(job_id, {}).get("queue")
