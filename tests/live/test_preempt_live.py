"""Preemption and operation on the live cluster ((b) and (f) name the tests).

(b) the daemon SIGKILLs itself through the test-only fault point right after writing an intent
(or right after the requeue call, before recording it); a restarted daemon finishes the intent
and the job is requeued exactly once. (f) a job without the checkpoint marker is requeued at
once without a signal and completes; a second daemon on the same ledger is refused with the
holder's pid; the metrics endpoint answers with the named series. A hetjob is one unit, preempted
whole through its leader.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.observe import Observation, units_from_jobs
from prioritizer.daemon.preempt import Preemptor
from prioritizer.policy.model import Preemption, Snapshot
from slurm_plugin.slurm.records import Job
from daemon_helpers import (DaemonProc, Jobs, attempts, dlprio, ledger_rows, open_ledger,
                            live_jobs, write_config)
from live_helpers import wait_for, wait_state

pytestmark = pytest.mark.live


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    with live_jobs(tmp_path) as j:
        yield j


def _preempt_whole_cluster_job(jobs: Jobs, cfg: Path, marker: bool) -> tuple[int, Path, int]:
    """A 32-GPU job falls to queue 1; an 8-GPU job arrives. Returns (big id, its log, short id)."""
    big, log = jobs.submit("big", nodes=4, gpus_per_node=8, steps=30, marker=marker)
    wait_state(jobs.client, big, {"RUNNING"}, 60)
    wait_for(lambda: ledger_rows(cfg).get(big, {}).get("queue") == 1, 40, "big job in queue 1")
    short, _ = jobs.submit("short", nodes=1, gpus_per_node=8, steps=5)
    return big, log, short


@pytest.mark.parametrize("crash_after", ["intent", "requeue"])
def test_b_daemon_killed_mid_preemption_requeues_exactly_once(
        jobs: Jobs, tmp_path: Path, crash_after: str) -> None:
    cfg = write_config(tmp_path / "dlprio.yaml")
    first = DaemonProc(cfg, env={"DLPRIO_FAULT_AFTER": crash_after}).start()
    second = DaemonProc(cfg)
    try:
        big, log, short = _preempt_whole_cluster_job(jobs, cfg, marker=True)
        assert first.proc is not None
        assert first.proc.wait(60) == -9          # killed itself with SIGKILL at the fault point
        with open_ledger(cfg) as ledger:
            (intent,) = ledger.intents(big)
        assert intent.done_at is None             # the intent was left open
        if crash_after == "intent":
            assert intent.signal_at is None and "checkpoint" not in log.read_text()
            assert jobs.client.job(big).restart_count == 0
        second.start()
        wait_state(jobs.client, short, {"COMPLETED"}, 90)
        wait_state(jobs.client, big, {"COMPLETED"}, 180)
        wait_for(lambda: ledger_rows(cfg)[big]["state"] == "COMPLETED", 30, "the daemon to see it")
    finally:
        assert second.stop() == 0, second.text()
    assert jobs.client.job(big).restart_count == 1
    assert log.read_text().count("checkpoint ") == 1
    assert [a.end_reason for a in attempts(log)] == ["killed", "done"]
    with open_ledger(cfg) as ledger:
        assert [i.outcome for i in ledger.intents(big)] == ["requeued"]
    assert ledger_rows(cfg)[big]["preemptions"] == 1


@pytest.mark.releases
def test_an_array_task_under_the_arrays_own_id_is_requeued_alone(jobs: Jobs, tmp_path: Path) -> None:
    """Array A's task 1, the last one Slurm starts, runs under A's own id, and ``scontrol
    requeue A`` would requeue every task of the array (scontrol(1)): the daemon's preemption of
    that task (no marker: requeued at once) names it ``A_1`` and leaves task 0 running."""
    proc = subprocess.run(["sbatch", "--parsable", "--array=0-1", "--gres=gpu:1", "--requeue",
                           "--output=/dev/null", "--job-name=dlp-array-own-id", "--wrap",
                           "sleep 300"], capture_output=True, text=True, timeout=30, check=True)
    array = int(proc.stdout.strip().split(";")[0])

    def running() -> dict[int, Job] | None:
        seen = {j.array_task_id: j for j in jobs.client.jobs(job_ids=[array])
                if j.state == "RUNNING" and j.array_task_id is not None}
        return seen if len(seen) == 2 else None
    try:
        tasks = wait_for(running, 60, f"both tasks of array {array} running")
        assert tasks[1].job_id == array != tasks[0].job_id, tasks
        units = units_from_jobs(tasks.values(), DaemonConfig())
        now = time.time()
        obs = Observation(now, Snapshot((), ()), units, ())
        with Ledger(tmp_path / "ledger.sqlite") as ledger:
            preemptor = Preemptor(jobs.client, ledger, DaemonConfig(), CycleAdapter())
            assert preemptor.start((Preemption(0, (array,)),), obs) == [array]
            assert preemptor.progress(obs) == [array]
            assert [i.outcome for i in ledger.intents(array)] == ["requeued"]
        assert jobs.client.job(array).restart_count == 1
        other = jobs.client.job(tasks[0].job_id)
        assert (other.state, other.restart_count) == ("RUNNING", 0)
    finally:
        jobs.client.cancel([array])


def test_f_job_without_marker_requeued_without_signal_and_completes(jobs: Jobs, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "dlprio.yaml")
    daemon = DaemonProc(cfg).start()
    try:
        big, log, short = _preempt_whole_cluster_job(jobs, cfg, marker=False)
        wait_state(jobs.client, short, {"COMPLETED"}, 90)
        wait_state(jobs.client, big, {"COMPLETED"}, 180)
        wait_for(lambda: ledger_rows(cfg)[big]["state"] == "COMPLETED", 30, "the daemon to see it")
    finally:
        assert daemon.stop() == 0, daemon.text()
    # the script logs "checkpoint" if USR2 ever reaches it: it never did
    assert "checkpoint" not in log.read_text()
    assert [a.end_reason for a in attempts(log)] == ["killed", "done"]
    assert attempts(log)[1].start_step == 0      # no checkpoint: it started over, and finished
    assert jobs.client.job(big).restart_count == 1
    with open_ledger(cfg) as ledger:
        (intent,) = ledger.intents(big)
    assert intent.signal is None and intent.signal_at is None and intent.outcome == "requeued"
    assert intent.requeue_at == intent.created   # requeued in the cycle that decided it


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_f_second_daemon_refused_and_metrics_endpoint(jobs: Jobs, tmp_path: Path) -> None:
    port = _free_port()
    cfg = write_config(tmp_path / "dlprio.yaml", metrics_port=port)
    daemon = DaemonProc(cfg).start()
    try:
        jid, _ = jobs.submit("metrics", nodes=1, gpus_per_node=2, steps=60)
        wait_for(lambda: ledger_rows(cfg).get(jid, {}).get("queue") == 0
                 and ledger_rows(cfg)[jid]["state"] == "RUNNING", 40, "job seen running")
        again = subprocess.run(dlprio("run", "--config", str(cfg)), capture_output=True,
                               text=True, timeout=30)
        assert daemon.proc is not None
        assert again.returncode == 6   # Exit.HELD
        assert f"held by process {daemon.proc.pid}" in again.stderr
        assert len(again.stderr.strip().splitlines()) == 1
        body = wait_for(lambda: (b := _scrape(port)) and 'state="RUNNING"} 1.0' in b and b, 30,
                        "metrics to show the running job")
    finally:
        assert daemon.stop() == 0, daemon.text()
    for series in ('dlprio_queue_length{queue="0",state="RUNNING"} 1.0',
                   'dlprio_queue_length{queue="1",state="PENDING"} 0.0',
                   "dlprio_attained_service_gpu_seconds_bucket",
                   'dlprio_attained_service_gpu_seconds_count 1.0',
                   "dlprio_preemptions_total 0.0", "dlprio_promotions_total 0.0",
                   "dlprio_requeues_total 0.0", "dlprio_cycle_duration_seconds_count",
                   'dlprio_slurm_errors_total{kind="unreachable"} 0.0',
                   "dlprio_last_cycle_timestamp_seconds"):
        assert series in body, series


@pytest.mark.releases
def test_hetjob_is_one_unit_preempted_whole_through_its_leader(jobs: Jobs, tmp_path: Path) -> None:
    from daemon_helpers import CKPT_SCRIPT
    cfg = write_config(tmp_path / "dlprio.yaml")
    log = tmp_path / "het.log"
    head = "".join(f"#SBATCH {line}\n" for line in (
        "--job-name=dae-het", f"--output={log}", "--open-mode=append", "--requeue",
        "--comment=dl:v1;signal=USR2;grace=5", "--nodes=2", "--gres=gpu:8",
        "--ntasks-per-node=1", "hetjob", "--nodes=2", "--gres=gpu:8", "--ntasks-per-node=1"))
    script = CKPT_SCRIPT.replace("#!/bin/bash\n", "#!/bin/bash\n" + head, 1)
    daemon = DaemonProc(cfg).start()
    try:
        het = jobs.client.submit(script, [f"--export=ALL,CK_DIR={tmp_path},STEPS=30"])
        jobs.ids.append(het)
        wait_for(lambda: {j.state for j in jobs.client.jobs(job_ids=[het])} == {"RUNNING"}, 60,
                 "both hetjob components running")
        wait_for(lambda: ledger_rows(cfg).get(het, {}).get("queue") == 1, 40, "hetjob in queue 1")
        with open_ledger(cfg) as ledger:
            row = ledger.job(het)
            assert row is not None and row.gpus == 32       # one unit: 2 x 8 + 2 x 8 GPUs
            assert row.components == 2                      # +0 and +1
            others = {j.job_id for j in jobs.client.jobs(job_ids=[het])} - {het}
            assert len(others) == 1
            assert ledger.job(component := others.pop()) is None   # no second unit
        # the component's own id (squeue's JSON, dlqueue --json) is explained as leader+1
        raw = subprocess.run(dlprio("explain", str(component), "--config", str(cfg)),
                             capture_output=True, text=True)
        assert raw.returncode == 0, raw.stderr
        assert raw.stdout.splitlines()[0] == (f"job {component} is component {het}+1 of "
                                              f"hetjob {het}")
        no_such = subprocess.run(dlprio("explain", f"{het}+2", "--config", str(cfg)),
                                 capture_output=True, text=True)
        assert (no_such.returncode, no_such.stderr.strip()) == (
            5, f"dlprio: job {het} has components +0..+1; no +2"), no_such
        short, _ = jobs.submit("short", nodes=1, gpus_per_node=8, steps=5)
        wait_state(jobs.client, short, {"COMPLETED"}, 120)
        wait_for(lambda: {j.state for j in jobs.client.jobs(job_ids=[het])} == {"COMPLETED"},
                 180, "the hetjob to complete")
        wait_for(lambda: ledger_rows(cfg)[het]["state"] == "COMPLETED", 30, "the daemon to see it")
    finally:
        assert daemon.stop() == 0, daemon.text()
    assert {j.restart_count for j in jobs.client.jobs(job_ids=[het])} == {1}
    assert log.read_text().count("checkpoint ") == 1
    assert [a.end_reason for a in attempts(log)] == ["killed", "done"]
    with open_ledger(cfg) as ledger:
        assert [i.outcome for i in ledger.intents(het)] == ["requeued"]


@pytest.mark.releases
def test_a_victim_suspended_in_its_grace_is_not_requeued(jobs: Jobs, tmp_path: Path) -> None:
    """``scontrol suspend`` of the victim right after its checkpoint signal: the requeue, due
    one cycle later, is not sent (a suspended job requeued stays held, JobHeldAdmin); the
    intent finishes ``suspended``, no preemption counted, and the job resumes where it was."""
    cfg = write_config(tmp_path / "dlprio.yaml")
    daemon = DaemonProc(cfg).start()
    try:
        big, _, short = _preempt_whole_cluster_job(jobs, cfg, marker=True)
        daemon.wait_log(rf"job_id={big} event=preempt_signal", 40)
        subprocess.run(["scontrol", "suspend", str(big)], check=True, timeout=30)
        daemon.wait_log(rf"job_id={big} event=preempt_done", 40)
        with open_ledger(cfg) as ledger:
            assert [i.outcome for i in ledger.intents(big)] == ["suspended"]
        job = jobs.client.job(big)
        assert (job.state, job.restart_count) == ("SUSPENDED", 0)
        subprocess.run(["scontrol", "resume", str(big)], check=True, timeout=30)
        wait_state(jobs.client, big, {"RUNNING", "COMPLETED"}, 30)
        wait_for(lambda: ledger_rows(cfg)[big]["preemptions"] == 0, 30, "no preemption counted")
    finally:
        assert daemon.stop() == 0, daemon.text()


def test_a_victim_whose_waiter_started_elsewhere_in_its_grace_runs_on(
        jobs: Jobs, tmp_path: Path) -> None:
    """Three 8-GPU jobs (30 s grace) fill three nodes and fall to queue 1; a 1-GPU job ahead in
    queue 0 holds the fourth node for about 20 s more. An 8-GPU waiter preempts one of the
    three; the 1-GPU job ends in the grace and the waiter starts on its node. When the
    victim's requeue is due it is not sent: the intent ends ``waiter started``, no preemption is
    counted, and the victim (it checkpointed and kept running, as the contract says) finishes
    its one attempt."""
    grace = ("--comment=dl:v1;signal=USR2;grace=30",)
    cfg = write_config(tmp_path / "dlprio.yaml", max_grace_s=30)
    daemon = DaemonProc(cfg).start()
    try:
        longs = [jobs.submit(f"long{i}", nodes=1, gpus_per_node=8, steps=75, marker=False,
                             extra=grace) for i in range(3)]
        for job_id, _ in longs:
            wait_state(jobs.client, job_id, {"RUNNING"}, 60)
        one, _ = jobs.submit("one", nodes=1, gpus_per_node=1, steps=25, marker=False)
        wait_state(jobs.client, one, {"RUNNING"}, 60)
        wait_for(lambda: all(ledger_rows(cfg).get(j, {}).get("queue") == 1 for j, _ in longs),
                 40, "the long jobs in queue 1")
        waiter, _ = jobs.submit("waiter", nodes=1, gpus_per_node=8, steps=40, marker=False)
        text = daemon.wait_log(rf"job_id=\d+ event=preempt_intent waiter={waiter}\b", 40)
        victim = next(j for j, _ in longs if f"job_id={j} event=preempt_intent waiter={waiter}" in text)
        daemon.wait_log(rf"job_id={victim} event=preempt_signal", 20)
        wait_state(jobs.client, waiter, {"RUNNING", "COMPLETED"}, 60)
        daemon.wait_log(rf"job_id={victim} event=preempt_done", 60)
        with open_ledger(cfg) as ledger:
            assert [i.outcome for i in ledger.intents(victim)] == ["waiter started"]
        wait_state(jobs.client, victim, {"COMPLETED"}, 120)
        wait_for(lambda: ledger_rows(cfg)[victim]["state"] == "COMPLETED", 30, "the daemon to see it")
    finally:
        assert daemon.stop() == 0, daemon.text()
    log = dict(longs)[victim]
    assert "checkpoint " in log.read_text()                 # it was told to checkpoint
    assert [a.end_reason for a in attempts(log)] == ["done"]  # one attempt, never requeued
    assert jobs.client.job(victim).restart_count == 0
    assert ledger_rows(cfg)[victim]["preemptions"] == 0


@pytest.fixture
def two_partitions(jobs: Jobs) -> Iterator[tuple[str, str]]:
    """Partitions ``dlpool_a`` (the first node) and ``dlpool_b`` (the other three), beside the
    cluster's own; deleted once the test's jobs are gone."""
    names = sorted(n.name for n in jobs.client.nodes())
    jobs.client.create_partition("dlpool_a", [f"Nodes={names[0]}", "State=UP"])
    jobs.client.create_partition("dlpool_b", [f"Nodes={','.join(names[1:])}", "State=UP"])
    try:
        yield "dlpool_a", "dlpool_b"
    finally:
        jobs.cleanup()
        wait_for(lambda: not [j for j in jobs.client.jobs(job_ids=jobs.ids) if j.is_active],
                 60, "the test's jobs to end")
        jobs.client.delete_partition("dlpool_a")
        jobs.client.delete_partition("dlpool_b")


@pytest.mark.releases
def test_a_waiter_preempts_in_its_own_partition_whatever_is_free_elsewhere(
        jobs: Jobs, tmp_path: Path, two_partitions: tuple[str, str]) -> None:
    """L (8 GPUs in dlpool_a, one node) falls to queue 1; W (8 GPUs, dlpool_a) arrives while
    dlpool_b's 24 GPUs are idle. Slurm starts W only on dlpool_a's node, so the daemon preempts
    L for it (W does not "fit" on GPUs of nodes outside its partition: policy.pools)."""
    part_a, _ = two_partitions
    cfg = write_config(tmp_path / "dlprio.yaml")
    daemon = DaemonProc(cfg).start()
    try:
        long_id, log = jobs.submit("pool-long", nodes=1, gpus_per_node=8, steps=60,
                                   extra=(f"--partition={part_a}",))
        wait_state(jobs.client, long_id, {"RUNNING"}, 60)
        wait_for(lambda: ledger_rows(cfg).get(long_id, {}).get("queue") == 1, 40,
                 "the long job in queue 1")
        waiter, _ = jobs.submit("pool-waiter", nodes=1, gpus_per_node=8, steps=5,
                                extra=(f"--partition={part_a}",))
        daemon.wait_log(rf"job_id={long_id} event=preempt_signal", 40)
        wait_state(jobs.client, waiter, {"COMPLETED"}, 90)
    finally:
        assert daemon.stop() == 0, daemon.text()
    with open_ledger(cfg) as ledger:
        assert [(i.outcome, i.waiter) for i in ledger.intents(long_id)] == [("requeued", waiter)]
    assert log.read_text().count("checkpoint ") == 1


@pytest.mark.releases
def test_a_waiter_takes_no_victim_on_nodes_of_its_pool_it_cannot_use(
        jobs: Jobs, tmp_path: Path, two_partitions: tuple[str, str]) -> None:
    """dlpool_a is the first node, gpu every node: one pool. P (dlpool_a, exempt) holds the
    first node; G1-G3 (gpu, queue 1) hold the others. W (dlpool_a, queue 0) can start only
    where P runs: preempting a G frees a node W may not use, so nobody is preempted."""
    part_a, _ = two_partitions
    cfg = write_config(tmp_path / "dlprio.yaml", exempt_partitions=[part_a])
    daemon = DaemonProc(cfg).start()
    try:
        keep, _ = jobs.submit("pool-keep", nodes=1, gpus_per_node=8, steps=120,
                              extra=(f"--partition={part_a}",))
        wait_state(jobs.client, keep, {"RUNNING"}, 60)
        others = [jobs.submit(f"pool-g{i}", nodes=1, gpus_per_node=8, steps=120)[0]
                  for i in range(3)]
        for job in others:
            wait_state(jobs.client, job, {"RUNNING"}, 60)
        wait_for(lambda: all(ledger_rows(cfg).get(j, {}).get("queue") == 1 for j in others),
                 40, "the gpu jobs in queue 1")
        waiter, _ = jobs.submit("pool-waiter", nodes=1, gpus_per_node=8, steps=5,
                                extra=(f"--partition={part_a}",))
        wait_for(lambda: ledger_rows(cfg).get(waiter, {}).get("queue") == 0, 30,
                 "the daemon to see the waiter")
        daemon.wait_log(rf"job_id={waiter} ", 30)
        time.sleep(12)   # two more cycles
        assert "preempt_intent" not in daemon.text(), daemon.text()
        assert {j.state for j in jobs.client.jobs(job_ids=others)} == {"RUNNING"}
    finally:
        assert daemon.stop() == 0, daemon.text()
