"""Failure modes where Slurm's own behaviour is the point, on the live cluster.

* ``scontrol requeue`` of a job that completed just before runs it again; ``requeue
  incomplete`` (what the daemon sends) leaves it completed. The race is made deterministic:
  the daemon's observation says RUNNING (taken before the job ended), the requeue comes after.
* a ``--no-requeue`` job: Slurm refuses the requeue; the daemon logs the reason, does
  not count a preemption, and never picks the job again in that run.
* the victim carries its lowered SiteFactor *before* the requeue: the moment it is
  pending again, Slurm's priority for it is below the waiter's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import Jobs, live_jobs
from daemon_unit_helpers import observation, unit
from live_helpers import wait_state
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from log_helpers import captured
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.observe import build_snapshot, record_units
from prioritizer.daemon.preempt import Preemptor
from prioritizer.policy.model import Preemption

pytestmark = pytest.mark.live


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    with live_jobs(tmp_path) as j:
        yield j


def _preemptor(jobs: Jobs, ledger: Ledger, log: CycleAdapter) -> Preemptor:
    return Preemptor(jobs.client, ledger, DaemonConfig(), log)


def _wrap(jobs: Jobs, seconds: int, *extra: str) -> int:
    job_id = jobs.client.submit(f"#!/bin/bash\nsleep {seconds}\n",
                                ["--gres=gpu:1", "--output=/dev/null", *extra])
    jobs.ids.append(job_id)
    return job_id


@pytest.mark.releases
def test_item6_requeue_of_a_job_that_just_completed_does_not_run_it_again(
        jobs: Jobs, tmp_path: Path) -> None:
    # the race is real: a plain requeue resurrects a completed job
    plain = _wrap(jobs, 1)
    wait_state(jobs.client, plain, {"COMPLETED"}, 60)
    jobs.client.requeue(plain)
    assert jobs.client.job(plain).restart_count == 1
    # the daemon saw it RUNNING; it completes before the requeue
    job_id = _wrap(jobs, 1)
    seen = unit(job_id, marker=False)
    wait_state(jobs.client, job_id, {"COMPLETED"}, 60)
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            record_units(None, ledger, {job_id: seen}, 100)
        p = _preemptor(jobs, ledger, CycleAdapter())
        p.start((Preemption(1, (job_id,)),), observation(100, seen))
        assert p.progress(observation(100, seen)) == []
        assert [i.outcome for i in ledger.intents(job_id)] == ["ended before requeue"]
        assert ledger.job(job_id).preemptions == 0
    after = jobs.client.job(job_id)
    assert (after.state, after.restart_count) == ("COMPLETED", 0)


@pytest.mark.releases
def test_item5_no_requeue_job_refused_once_not_counted_not_chosen_again(
        jobs: Jobs, tmp_path: Path) -> None:
    job_id = _wrap(jobs, 300, "--no-requeue")
    running = wait_state(jobs.client, job_id, {"RUNNING"}, 60)
    seen = unit(job_id, marker=False)
    with Ledger(tmp_path / "l.sqlite") as ledger, captured() as (log, stream):
        with ledger.transaction():
            record_units(None, ledger, {job_id: seen}, 100)
        p = _preemptor(jobs, ledger, log)
        p.start((Preemption(1, (job_id,)),), observation(100, seen))
        assert p.progress(observation(100, seen)) == []
        (intent,) = ledger.intents(job_id)
        assert intent.outcome is not None and intent.outcome.startswith("requeue refused: ")
        assert "presently disabled" in intent.outcome          # Slurm's own reason
        assert ledger.job(job_id).preemptions == 0
        assert "preempt_refused" in stream.getvalue()
        snap = build_snapshot(ledger, {job_id: seen}, [], [], DaemonConfig(), now=101)
        assert [v.preemptible for v in snap.jobs] == [False]
    assert jobs.client.job(job_id).state == "RUNNING" and running.requeue is False


@pytest.mark.releases
def test_item3_victim_is_below_the_waiter_the_moment_it_is_pending_again(
        jobs: Jobs, tmp_path: Path) -> None:
    victim = _wrap(jobs, 300)
    wait_state(jobs.client, victim, {"RUNNING"}, 60)
    jobs.client.set_site_factor([victim], 500000)        # what it carried from queue 0
    waiter = _wrap(jobs, 300, "--begin=now+1hour")
    jobs.client.set_site_factor([waiter], 300000)        # the waiter's queue-0 value
    seen = unit(victim, marker=False)
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            record_units(None, ledger, {victim: seen}, 100)
        p = _preemptor(jobs, ledger, CycleAdapter())
        p.start((Preemption(waiter, (victim,)),), observation(100, seen))
        assert p.progress(observation(100, seen), {victim: "site_factor:1000"}) == [victim]
    # the requeue takes effect once slurmd has ended the job (COMPLETING until then)
    requeued = wait_state(jobs.client, victim, {"PENDING"}, 60)
    assert requeued.restart_count == 1
    assert requeued.priority < jobs.client.job(waiter).priority


@pytest.mark.releases
def test_item2_freed_gpus_go_to_the_higher_tier_whatever_the_priority(jobs: Jobs) -> None:
    """Why the policy orders by tier first: Slurm starts the higher-tier job on the GPUs a
    blocker frees, although the lower-tier job's priority is far higher. The daemon reads the
    tiers the same way it does every cycle."""
    from prioritizer.daemon.observe import partition_tiers
    name = "dlprio-test-hi"
    try:
        jobs.client.delete_partition(name)
    except Exception:
        pass
    jobs.client.create_partition(name, ["Nodes=ALL", "PriorityTier=10", "State=UP"])
    try:
        tiers = partition_tiers(jobs.client.show_partitions())
        assert tiers[name] == 10 and tiers[name] > tiers["gpu"]
        blocker = _wrap(jobs, 300, "--nodes=4", "--gres=gpu:8")
        wait_state(jobs.client, blocker, {"RUNNING"}, 60)
        low = _wrap(jobs, 300, "--gres=gpu:8")
        high = _wrap(jobs, 300, "--gres=gpu:8", f"--partition={name}", "--nodes=4")
        jobs.client.set_site_factor([low], 1_000_000)
        assert jobs.client.job(low).priority > jobs.client.job(high).priority
        jobs.client.cancel([blocker])
        wait_state(jobs.client, high, {"RUNNING"}, 60)
        assert jobs.client.job(low).state == "PENDING"
    finally:
        jobs.cleanup()
        wait_state(jobs.client, jobs.ids[-1], {"CANCELLED", "COMPLETED"}, 60)
        jobs.client.delete_partition(name)


def test_item4_parameter_server_needs_no_gpu_node(jobs: Jobs, tmp_path: Path) -> None:
    """A hetjob ps (0 GPUs) + worker (8 GPUs) while three nodes are full of demoted jobs and
    one is free: Slurm starts it without a second free GPU node, the daemon records it as one
    8-GPU unit and preempts no one. Slurm's backfill starts it within a cycle here, so the
    daemon seldom sees it pending: the check that the old (0, 8) shape preempted is the unit
    test tests/prioritizer/daemon/test_daemon_observe.py::test_gpu_less_component_lets_the_hetjob_start_on_a_free_node_without_preemption."""
    from daemon_helpers import DaemonProc, ledger_rows, write_config
    from live_helpers import wait_for
    cfg = write_config(tmp_path / "dlprio.yaml")
    daemon = DaemonProc(cfg).start()
    try:
        fillers = [jobs.submit(f"fill{i}", nodes=1, gpus_per_node=8, steps=120)[0]
                   for i in range(3)]
        for f in fillers:
            wait_state(jobs.client, f, {"RUNNING"}, 60)
        wait_for(lambda: all(ledger_rows(cfg).get(f, {}).get("queue") == 1 for f in fillers),
                 60, "the fillers demoted to queue 1")
        head = "".join(f"#SBATCH {line}\n" for line in (
            "--job-name=dae-ps", "--output=/dev/null", "--nodes=1", "--ntasks=1",
            "hetjob", "--nodes=1", "--ntasks=1", "--gres=gpu:8"))
        het = jobs.client.submit(f"#!/bin/bash\n{head}sleep 20\n", [])
        jobs.ids.append(het)
        wait_for(lambda: {j.state for j in jobs.client.jobs(job_ids=[het])} == {"RUNNING"}, 90,
                 "both hetjob components running (backfill starts hetjobs)")
        time.sleep(6)                              # a cycle after the start
        with Ledger(tmp_path / "ledger.sqlite", readonly=True) as ledger:
            assert ledger.job(het) is not None and ledger.job(het).gpus == 8
            assert ledger.open_intents() == [] and all(
                not ledger.intents(f) for f in fillers), "a filler was preempted"
        assert all(jobs.client.job(f).state == "RUNNING" for f in fillers)
    finally:
        assert daemon.stop() == 0, daemon.text()


def test_item1_views_after_sigterm_do_not_extrapolate(jobs: Jobs, tmp_path: Path) -> None:
    """Stop the daemon while a 2-GPU job runs; after the job ends, ``status`` shows at most
    what the last cycle saw, the same figure on every read, and says the ledger is STALE."""
    import subprocess
    from daemon_helpers import DaemonProc, attempts, dlprio, ledger_rows, write_config
    from live_helpers import wait_for
    cfg = write_config(tmp_path / "dlprio.yaml", interval_s=2, slurm_timeout_s=1.5)
    daemon = DaemonProc(cfg).start()
    job_id, log = jobs.submit("stale", nodes=1, gpus_per_node=2, steps=12)
    try:
        wait_for(lambda: (ledger_rows(cfg).get(job_id, {}).get("attained_gpu_s") or 0) >= 6, 60,
                 "the daemon to see the job run a few seconds")
    finally:
        assert daemon.stop() == 0, daemon.text()
    wait_state(jobs.client, job_id, {"COMPLETED"}, 60)
    (attempt,) = attempts(log)
    assert attempt.end is not None
    truth = (attempt.end - attempt.start) * 2
    time.sleep(7)                                   # > 3 intervals: stale
    reads = []
    for _ in range(2):
        out = subprocess.run(dlprio("status", "--config", str(cfg)), capture_output=True,
                             text=True, check=True).stdout.splitlines()
        assert "STALE" in out[0]
        reads.append(float(next(line.split()[4] for line in out[2:]
                                if line.split()[0] == str(job_id))))
        time.sleep(2)
    assert reads[0] == reads[1] and 0 < reads[0] <= truth + 1
