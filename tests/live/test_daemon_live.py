"""``dlprio run`` on the live cluster (the letters in the test names: (a) preemption and resume, (c) a slurmctld
outage, (d)/(e) starvation promotion and ``explain``; and priority order).

Fast settings: 5 s cycle, 5 s grace, thresholds of tens of GPU·s, ``cred_expire`` 10 s on the
cluster. The truth for attained service is independent of the daemon: the start/end stamps
each attempt writes to its own log (tests/daemon_helpers.py) and, with slurmdbd, ``sacct
--duplicates``. Each test waits for an empty cluster (it needs all 32 GPUs) and cancels its
jobs at the end.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from daemon_helpers import (DaemonProc, Jobs, attempts, dlprio, ledger_rows, open_ledger,
                            live_jobs, stamp_service, write_config)
from live_helpers import cluster_name, wait_for, wait_state
from slurm_plugin.slurm.client import SlurmClient

pytestmark = pytest.mark.live
INTERVAL = 5


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    with live_jobs(tmp_path) as j:
        yield j


def _sacct_service(client: SlurmClient, job_id: int, gpus: int) -> float | None:
    """GPU·s from ``sacct --duplicates`` (None when the cluster has no slurmdbd)."""
    if "slurmdbd" not in client.show_config().get("AccountingStorageType", ""):
        return None
    runs = wait_for(lambda: [r for r in client.accounting_runs(job_id) if r.end], 30,
                    "sacct records")
    return sum(r.run_s * gpus for r in runs)


@pytest.mark.releases
def test_a_short_job_preempts_demoted_long_job_which_resumes(jobs: Jobs, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "dlprio.yaml")
    daemon = DaemonProc(cfg).start()
    try:
        long1, log1 = jobs.submit("long1", nodes=2, gpus_per_node=8, steps=40)
        long2, log2 = jobs.submit("long2", nodes=2, gpus_per_node=8, steps=40)
        for jid in (long1, long2):
            wait_state(jobs.client, jid, {"RUNNING"}, 60)
        # 16 GPUs each: past 40 GPU·s after 2.5 s, so both fall to queue 1
        wait_for(lambda: all(ledger_rows(cfg).get(j, {}).get("queue") == 1 for j in (long1, long2)),
                 30, "both long jobs demoted to queue 1")
        short, log_s = jobs.submit("short", nodes=1, gpus_per_node=8, steps=3)
        wait_for(lambda: ledger_rows(cfg).get(short, {}).get("queue") == 0, 30, "short job in queue 0")
        victim_row = wait_for(lambda: [r for j, r in ledger_rows(cfg).items()
                                       if j in (long1, long2) and r["preemptions"]], 40,
                              "a long job preempted")[0]
        victim = victim_row["job_id"]
        other, vlog, olog = (long2, log1, log2) if victim == long1 else (long1, log2, log1)
        s = wait_state(jobs.client, short, {"COMPLETED"}, 90)
        for jid in (long1, long2):
            wait_state(jobs.client, jid, {"COMPLETED"}, 180)
        wait_for(lambda: all(ledger_rows(cfg)[j]["state"] == "COMPLETED"
                             for j in (long1, long2, short)), 30, "the daemon to see the ends")
    finally:
        assert daemon.stop() == 0, daemon.text()

    v_att = attempts(vlog)
    # signalled once, checkpointed, requeued once, resumed from its checkpoint, finished
    assert vlog.read_text().count("checkpoint ") == 1
    ck_step = int(vlog.read_text().split("checkpoint ", 1)[1].split("step=")[1].split()[0])
    assert len(v_att) == 2 and v_att[0].end_reason == "killed" and v_att[1].end_reason == "done"
    assert v_att[1].start_step == ck_step > 0
    assert [a.end_reason for a in attempts(olog)] == ["done"]
    # the short job started after the victim's first run ended and before it resumed
    s_att = attempts(log_s)
    assert v_att[0].end is not None and s_att[0].start >= v_att[0].end - 1
    assert s_att[0].start < v_att[1].start
    assert s.start_time is not None

    rows = ledger_rows(cfg)
    assert rows[victim]["restart_count"] == 1 and rows[victim]["preemptions"] == 1
    assert rows[other]["restart_count"] == 0 and rows[other]["preemptions"] == 0
    for jid, log, gpus in ((victim, vlog, 16), (other, olog, 16), (short, log_s, 8)):
        truth = stamp_service(log, gpus)
        acct = _sacct_service(jobs.client, jid, gpus)
        print(f"job {jid}: ledger {rows[jid]['attained_gpu_s']} GPU·s, stamps {truth:.1f}, "
              f"sacct {acct}")
        assert abs(rows[jid]["attained_gpu_s"] - truth) <= INTERVAL * gpus, (jid, rows[jid], truth)
        with open_ledger(cfg) as ledger:
            assert len(ledger.runs(jid)) == len(attempts(log)), jid
        if acct is not None:
            assert abs(rows[jid]["attained_gpu_s"] - acct) <= INTERVAL * gpus, (jid, acct)
    with open_ledger(cfg) as ledger:
        assert [i.outcome for i in ledger.intents(victim)] == ["requeued"]
        assert len(ledger.runs(victim)) == 2


def _order_scenario(jobs: Jobs, cfg: Path, extra: tuple[str, ...],
                    told: Callable[[int, int], bool]) -> tuple[int, int, int]:
    """A job requeued by its user keeps its service (queue 1) and waits behind a blocker with a
    newer queue-0 job. Returns (old, new, blocker) once ``told(old, new)`` (the daemon has told
    Slurm the order)."""
    old, _ = jobs.submit("old", nodes=4, gpus_per_node=8, steps=100, marker=False, extra=extra)
    # in queue 1 with a margin: Slurm's whole-second times may take up to 1 s x 32 GPUs off the
    # run once it ends, which must not bring the job back under the 40 GPU·s threshold
    wait_for(lambda: ledger_rows(cfg).get(old, {}).get("queue") == 1
             and ledger_rows(cfg)[old]["attained_gpu_s"] >= 40 + 32, 40, "old job in queue 1")
    service = ledger_rows(cfg)[old]["attained_gpu_s"]
    jobs.client.requeue(old)
    blocker, _ = jobs.submit("blocker", nodes=4, gpus_per_node=8, steps=300, marker=False,
                             extra=extra)
    wait_state(jobs.client, blocker, {"RUNNING"}, 30)
    new, _ = jobs.submit("new", nodes=4, gpus_per_node=8, steps=3, marker=False, extra=extra)
    wait_for(lambda: told(old, new), 30, "the daemon to tell Slurm the order")
    rows = ledger_rows(cfg)
    assert rows[old]["queue"] == 1 and rows[new]["queue"] == 0
    # the user's requeue kept its service (Slurm's times are whole seconds: 1 s x 32 GPUs)
    assert rows[old]["attained_gpu_s"] >= service - 32
    return old, new, blocker


@pytest.mark.releases
def test_priority_mode_slurm_starts_jobs_in_policy_order(jobs: Jobs, tmp_path: Path) -> None:
    """The newer queue-0 job starts first when the blocker ends, although Slurm's own factors
    (age, id) favour the older job."""
    cfg = write_config(tmp_path / "dlprio.yaml", policy={"preemption": False})
    daemon = DaemonProc(cfg).start()
    try:
        old, new, blocker = _order_scenario(
            jobs, cfg, (), lambda old, new: _applied(cfg, old) and _applied(cfg, new))
        prio = {j.job_id: j.priority for j in jobs.client.jobs(job_ids=[old, new])}
        assert prio[new] > prio[old]
        jobs.client.cancel([blocker])
        wait_state(jobs.client, new, {"RUNNING", "COMPLETED"}, 60)
        assert jobs.client.job(old).state == "PENDING"
    finally:
        assert daemon.stop() == 0, daemon.text()


QUEUE_PARTITIONS = (("q0", "30"), ("q1", "20"), ("q2", "10"))


@pytest.fixture
def queue_partitions(jobs: Jobs) -> Iterator[None]:
    """Partitions q0..q2 over all nodes (conf/slurm.conf.d/40-partitions-partition-mode.conf),
    created at run time with scontrol and deleted afterwards."""
    for name, tier in QUEUE_PARTITIONS:
        jobs.client.create_partition(name, ["Nodes=ALL", f"PriorityTier={tier}", "PreemptMode=OFF",
                                            "MaxTime=INFINITE", "State=UP"])
    yield
    jobs.cleanup()
    wait_for(lambda: not [j for j in jobs.client.jobs(job_ids=jobs.ids) if j.is_active], 60,
             "test jobs to leave the queue partitions")
    for name, _ in QUEUE_PARTITIONS:
        jobs.client.delete_partition(name)


@pytest.mark.releases
def test_partition_mode_moves_pending_jobs_and_slurm_follows(
        jobs: Jobs, tmp_path: Path, queue_partitions: None) -> None:
    cfg = write_config(tmp_path / "dlprio.yaml", policy={"preemption": False}, mode="partition",
                       queue_partitions=[name for name, _ in QUEUE_PARTITIONS])
    daemon = DaemonProc(cfg).start()
    try:
        def told(old: int, new: int) -> bool:
            parts = {j.job_id: j.partition for j in jobs.client.jobs(job_ids=[old, new])}
            return parts == {old: "q1", new: "q0"} and ledger_rows(cfg)[new]["queue"] == 0

        old, new, blocker = _order_scenario(jobs, cfg, ("--partition=q0",), told)
        jobs.client.cancel([blocker])
        wait_state(jobs.client, new, {"RUNNING", "COMPLETED"}, 60)
        assert jobs.client.job(old).state == "PENDING"
    finally:
        assert daemon.stop() == 0, daemon.text()


def _applied(cfg: Path, job_id: int) -> bool:
    with open_ledger(cfg) as ledger:
        row = ledger.job(job_id)
        return bool(row and row.applied and row.state == "PENDING")


def test_c_slurmctld_outage_daemon_survives_and_loses_no_service(jobs: Jobs, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "dlprio.yaml")
    daemon = DaemonProc(cfg).start()
    name = cluster_name()
    try:
        jid, log = jobs.submit("outage", nodes=1, gpus_per_node=4, steps=45)
        wait_state(jobs.client, jid, {"RUNNING"}, 60)
        wait_for(lambda: ledger_rows(cfg).get(jid, {}).get("attained_gpu_s", 0) > 0, 30, "service")
        subprocess.run([str(Path(dlprio()[0]).parent / "dlcluster"), "ctl", "stop", "--name", name],
                       check=True, capture_output=True)
        stopped = time.monotonic()
        try:
            daemon.wait_log(r"event=slurm_unreachable", 30)
            wait_for(lambda: time.monotonic() - stopped >= 20, 30, "20 s of outage")
            assert daemon.alive()
        finally:
            subprocess.run([str(Path(dlprio()[0]).parent / "dlcluster"), "ctl", "start", "--name",
                            name], check=True, capture_output=True)
        daemon.wait_log(r"event=slurm_back", 60)
        wait_state(jobs.client, jid, {"COMPLETED"}, 90)
        wait_for(lambda: ledger_rows(cfg)[jid]["state"] == "COMPLETED", 30, "the daemon to see the end")
    finally:
        assert daemon.stop() == 0, daemon.text()
    truth = stamp_service(log, 4)
    assert truth >= 40 * 4
    assert abs(ledger_rows(cfg)[jid]["attained_gpu_s"] - truth) <= INTERVAL * 4


def test_d_e_starving_job_promoted_and_explained(jobs: Jobs, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "dlprio.yaml",
                       policy={"thresholds_gpu_s": [400, 100000], "starve_knob": 1})
    daemon = DaemonProc(cfg).start()
    try:
        big, _ = jobs.submit("big", nodes=4, gpus_per_node=8, steps=40)
        wait_for(lambda: ledger_rows(cfg).get(big, {}).get("queue") == 1, 40, "big job demoted")
        # 8 GPUs x 45 s = 360 GPU·s < 400: the short job stays in queue 0 and preempts big
        short, _ = jobs.submit("short", nodes=1, gpus_per_node=8, steps=45)
        wait_for(lambda: ledger_rows(cfg).get(big, {}).get("restart_count") == 1, 40, "big requeued")
        with open_ledger(cfg) as ledger:
            last_run = ledger.runs(big)[0].seconds(time.time())
        # waiting >= 1 x its last run (about 25 s) promotes it back to queue 0 while short runs
        row = wait_for(lambda: (r := ledger_rows(cfg)[big])["promotions"] >= 1 and r, 60,
                       "big job promoted")
        assert row["queue"] == 0
        assert wait_state(jobs.client, short, {"RUNNING", "COMPLETED"}, 5)
        text = daemon.wait_log(rf"job_id={big} event=promoted", 10)
        assert "to=0" in [line for line in text.splitlines() if f"job_id={big} event=promoted" in line][0]
        out = subprocess.run(dlprio("explain", str(big), "--config", str(cfg)),
                             capture_output=True, text=True, check=True).stdout
    finally:
        assert daemon.stop() == 0, daemon.text()
    assert "queue: 0 of 0..2" in out
    assert "thresholds: 400, 100000 GPU·s" in out
    assert "promoted: waited" in out and f"1 x {last_run:.0f} s" in out
    service_line = next(line for line in out.splitlines() if line.startswith("attained service:"))
    assert float(service_line.split()[2]) >= 400
    unknown = subprocess.run(dlprio("explain", "999999", "--config", str(cfg)),
                             capture_output=True, text=True)
    assert unknown.returncode == 5 and "999999" in unknown.stderr


def test_once_dry_run_changes_nothing_then_once_applies(jobs: Jobs, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "dlprio.yaml")
    jid, _ = jobs.submit("later", nodes=1, gpus_per_node=2, steps=3, extra=("--begin=now+2hours",))
    before = wait_state(jobs.client, jid, {"PENDING"}, 30).priority
    dry = subprocess.run(dlprio("once", "--dry-run", "--config", str(cfg)), capture_output=True,
                         text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0].split() == ["RANK", "JOBID", "STATE", "QUEUE",
                                                  "ATTAINED(GPU·s)", "TARGET", "REASON"]
    line = next(line for line in dry.stdout.splitlines() if f" {jid} " in line)
    assert line.split()[:4] == ["0", str(jid), "PENDING", "Q0"] and "site_factor:" in line
    ledger_path = Path(yaml.safe_load(cfg.read_text())["ledger_path"])
    assert dry.stdout.rstrip().splitlines()[-2:] == [
        "dry run: nothing sent to Slurm",
        f"dry run: nothing written; no ledger at {ledger_path}, decided as a first cycle"]
    assert jobs.client.job(jid).priority == before
    assert not ledger_path.exists() and not ledger_path.parent.joinpath("snapshot.json").exists()
    real = subprocess.run(dlprio("once", "--config", str(cfg), "--log-format", "json"),
                          capture_output=True, text=True, timeout=60)
    assert real.returncode == 0, real.stderr
    value = int(line.split("site_factor:")[1].split()[0])
    # SiteFactor is added to the multifactor sum: the priority rises by exactly the value
    # (the other factors of a job held by --begin do not change within seconds)
    after = jobs.client.job(jid).priority
    assert value - 5 <= after - before <= value + 5
    assert f'"job_id": {jid}, "event": "order_set"' in real.stderr
