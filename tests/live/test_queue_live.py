"""``dlqueue`` against the live cluster that SLURM_CONF names (4 nodes x 8 fake GPUs).

Each test submits real jobs through :meth:`SlurmClient.submit` (pending ones behind a blocker
that takes every GPU, or with ``--begin=now+2hours``), runs the installed ``dlqueue`` command,
and compares its output with what Slurm itself reports through the client. Polling has
timeouts; every job is cancelled at the end.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from live_helpers import (logged_calls, logging_path, per_cluster_user, wait_cluster_idle, wait_for,
                          wait_state)
from prioritizer.daemon.snapshot import write_snapshot
from queue_helpers import pub, snapshot
from slurm_plugin.slurm.client import SlurmClient, SlurmError
from submit.queue_view import visible

pytestmark = [pytest.mark.live, pytest.mark.releases]

DLQUEUE = str(Path(sys.executable).parent / "dlqueue")
NO_SNAPSHOT = "/nonexistent/dlqueue-test/snapshot.json"
HOSTILE_NAME = "-x [red]x[/red] $(id) `id` 'q\" #SBATCH --gres=gpu:8\nünï 训练 🚀"


class Jobs:
    """Submits jobs for one test and remembers them for the clean-up."""

    def __init__(self, client: SlurmClient) -> None:
        self.client, self.ids = client, []

    def submit(self, *sbatch: str, seconds: int = 300, gpus: int = 2, name: str | None = None) -> int:
        script = ("#!/bin/bash\n" + "".join(f"#SBATCH {s}\n" for s in
                                            ("--output=/dev/null", f"--gres=gpu:{gpus}", *sbatch))
                  + f"sleep {seconds}\n")
        extra = [f"--job-name={name}"] if name is not None else []
        job_id = self.client.submit(script, extra)
        self.ids.append(job_id)
        return job_id


@pytest.fixture
def jobs() -> Iterator[Jobs]:
    client = SlurmClient(timeout_s=20)
    wait_cluster_idle(client, 180)  # the blocker below needs every GPU
    j = Jobs(client)
    yield j
    try:
        j.client.cancel(j.ids)
    except SlurmError:
        pass  # some already ended
    wait_for(lambda: not [x for x in client.jobs(job_ids=j.ids) if x.is_active], 60,
             "the test's jobs to end")


def dlqueue(*args: str, rc: int = 0) -> subprocess.CompletedProcess[str]:
    """Run dlqueue; assert its exit status is ``rc`` (5, NOT_FOUND: no job ``-j`` names is in
    the table)."""
    proc = subprocess.run([DLQUEUE, *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, COLUMNS="100"))
    assert proc.returncode == rc, proc.stderr
    return proc


def dlqueue_json(*args: str, rc: int = 0) -> list[dict]:
    return json.loads(dlqueue("--json", *args, rc=rc).stdout)


def ids_arg(ids: list[int]) -> str:
    return ",".join(map(str, ids))


def test_json_and_table_behind_a_blocker(jobs: Jobs) -> None:
    tag = uuid.uuid4().hex[:6]
    blocker = jobs.submit("--nodes=4", f"--job-name=dlq-block-{tag}", gpus=8)
    waiting = jobs.submit(f"--job-name=dlq-wait-{tag}", gpus=2)
    later = jobs.submit("--begin=now+2hours", f"--job-name=dlq-later-{tag}", gpus=1)
    wait_state(jobs.client, blocker, {"RUNNING"}, 60)

    def settled() -> dict | None:  # a new job's reason is "None" until the scheduler looks at it
        now = {j.job_id: j for j in jobs.client.jobs(job_ids=jobs.ids)}
        ok = now[waiting].reason in ("Resources", "Priority") and now[later].reason == "BeginTime"
        return now if ok else None
    slurm = wait_for(settled, 60, "Slurm to give the pending jobs their reasons")

    rows = dlqueue_json("-j", ids_arg(jobs.ids), "--snapshot", NO_SNAPSHOT)
    now = time.time()
    by_id = {r["job_id"]: r for r in rows}
    assert rows[0]["job_id"] == blocker and set(by_id) == {blocker, waiting, later}
    assert by_id[blocker] | {"wait_s": 0} == {
        "job_id": blocker, "display_id": str(blocker), "user": slurm[blocker].user, "name": f"dlq-block-{tag}",
        "state": "RUNNING", "queue": None, "attained_gpu_s": None, "gpus": 32, "nodes": 4,
        "wait_s": 0, "preemptions": 0, "reason": "", "shards": 0, "job_class": "production",
        "forecast": None}
    assert by_id[waiting]["state"] == "PENDING" and by_id[waiting]["gpus"] == 2
    assert by_id[waiting]["reason"] in ("Resources", "Priority")
    # wait of a pending job = now - submit_time, as Slurm reports it (a few seconds of slack)
    assert 0 <= now - slurm[waiting].submit_time - by_id[waiting]["wait_s"] <= 15
    assert by_id[later]["reason"].startswith(("BeginTime (eligible in 1:59:", "BeginTime (eligible in 2:00:00"))

    # filters: user, state, partition
    assert dlqueue_json("-j", ids_arg(jobs.ids), "-u", "nobody", "--snapshot", NO_SNAPSHOT,
                        rc=5) == []
    assert [r["job_id"] for r in dlqueue_json("-j", ids_arg(jobs.ids), "-t", "R", "--me",
                                               "-p", slurm[blocker].partition,
                                               "--snapshot", NO_SNAPSHOT)] == [blocker]

    # the table (not a terminal): no QUEUE/ATTAINED columns, and it says why
    lines = dlqueue("-j", ids_arg(jobs.ids), "--snapshot", NO_SNAPSHOT).stdout.splitlines()
    assert lines[0].split() == ["JOBID", "USER", "NAME", "STATE", "GPUS", "NODES", "WAIT",
                                "PREEMPTS", "REASON"]
    assert lines[1].split()[:6] == [str(blocker), slurm[blocker].user, f"dlq-block-{tag}",
                                    "RUNNING", "32", slurm[blocker].nodes]
    # the note, then (-j) each job's forecast line, none without a snapshot
    notes = [line for line in lines if "daemon snapshot not found" in line]
    assert len(notes) == 1 and lines[-1] == ("  forecast: none (no current dlprio snapshot of "
                                             "this cluster: see the note above)")


def test_requeue_delay_is_shown_as_such(jobs: Jobs) -> None:
    cred_expire = int(dict(kv.split("=") for kv in jobs.client.show_config()["AuthInfo"].split(",")
                           if "=" in kv).get("cred_expire", "120"))
    job = jobs.submit("--requeue", f"--job-name=dlq-rq-{uuid.uuid4().hex[:6]}", gpus=1)
    wait_state(jobs.client, job, {"RUNNING"}, 60)
    jobs.client.requeue(job)

    def delayed() -> dict | None:
        rows = dlqueue_json("-j", str(job), "--snapshot", NO_SNAPSHOT)
        ok = rows and rows[0]["state"] == "PENDING" and rows[0]["reason"].startswith("requeue delay")
        return rows[0] if ok else None
    row = wait_for(delayed, 20, "dlqueue to show the requeue delay")
    seconds = int(row["reason"].removeprefix("requeue delay (starts in ~").removesuffix("s)"))
    assert 0 <= seconds <= cred_expire + 1  # Slurm: BeginTime = requeue + cred_expire + 1 s
    assert row["preemptions"] == 1  # Slurm's restart_cnt, as there is no daemon snapshot


def test_an_array_element_selects_the_folded_row_of_pending_elements(jobs: Jobs) -> None:
    """squeue folds an array's pending elements into one row (``30_[5-9]``): ``-j 30_6``
    selects that row, ``-j 30_10`` nothing; with a step (``--array=1-9:2``) only the
    elements of the step are in it. The folded id itself (``-j 30_[5-9]``) selects the row."""
    held = jobs.submit("--hold", "--array=5-9", gpus=1)
    stepped = jobs.submit("--hold", "--array=1-9:2%2", gpus=1)
    wait_for(lambda: len(jobs.client.jobs(job_ids=[held, stepped])) == 2, 20,
             "both arrays to be listed")
    for selector, expected in ((f"{held}_6", [f"{held}_[5-9]"]), (f"{held}_5", [f"{held}_[5-9]"]),
                               (f"{held}_9", [f"{held}_[5-9]"]), (f"{held}_10", []),
                               (f"{held}_4", []), (f"{stepped}_5", [f"{stepped}_[1,3,5,7,9%2]"]),
                               (f"{stepped}_4", []), (f"{held}_7,{stepped}_3",
                                                      [f"{held}_[5-9]", f"{stepped}_[1,3,5,7,9%2]"]),
                               # the folded ids as printed, copied whole, and other element lists
                               (f"{held}_[5-9]", [f"{held}_[5-9]"]),
                               (f"{stepped}_[1,3,5,7,9%2]", [f"{stepped}_[1,3,5,7,9%2]"]),
                               (f"{held}_[10-12],{stepped}_[2-4]", [f"{stepped}_[1,3,5,7,9%2]"]),
                               (f"{held}_[1-4]", [])):
        found = 0 if expected else 5
        out = dlqueue("-j", selector, "--snapshot", NO_SNAPSHOT, rc=found).stdout.splitlines()
        assert out[0].startswith("JOBID"), out
        shown = [line.split()[0] for line in out[1:] if line[:1].isdigit()]   # the rows
        assert sorted(shown) == sorted(expected), (selector, out)
        if not expected:   # a selector that selects no row says so
            assert f"job {selector}: not in the table: no such job, or it ended" in \
                "\n".join(out), (selector, out)
        rows = dlqueue_json("-j", selector, "--snapshot", NO_SNAPSHOT, rc=found)
        assert sorted(r["job_id"] for r in rows) == sorted(
            {f"{held}": held, f"{stepped}": stepped}[e.split("_")[0]] for e in expected)


def test_snapshot_gives_queue_attained_and_rank_order(jobs: Jobs, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    blocker = jobs.submit("--nodes=4", f"--job-name=dlq-block-{tag}", gpus=8)
    first = jobs.submit(f"--job-name=dlq-first-{tag}")
    second = jobs.submit(f"--job-name=dlq-second-{tag}")
    wait_state(jobs.client, blocker, {"RUNNING"}, 60)
    path = tmp_path / "snapshot.json"
    # the daemon ranks the later job first (it is in queue 0, the other was demoted to Q1)
    write_snapshot(path, snapshot(pub(blocker, 2, 36_000, state="RUNNING", preemptions=3),
                                  pub(second, 0, 900, rank=0), pub(first, 1, 5400, rank=1),
                                  generated_at=time.time()))
    rows = dlqueue_json("-j", ids_arg(jobs.ids), "--snapshot", str(path))
    assert [(r["job_id"], r["queue"], r["attained_gpu_s"], r["preemptions"]) for r in rows] == [
        (blocker, 2, 36_000, 3), (second, 0, 900, 0), (first, 1, 5400, 0)]
    lines = dlqueue("-j", ids_arg(jobs.ids), "--snapshot", str(path)).stdout.splitlines()
    assert lines[0].split()[:7] == ["JOBID", "USER", "NAME", "STATE", "QUEUE", "ATTAINED(GPU·s)",
                                    "GPUS"]
    # ATTAINED in GPU·s, as in the snapshot, REASON and dlprio status
    assert [ln.split()[3:6] for ln in lines[1:4]] == [
        ["RUNNING", "Q2", "36000"], ["PENDING", "Q0", "900"], ["PENDING", "Q1", "5400"]]
    # no "snapshot not found" note; -j adds each job's forecast, none in this snapshot
    assert lines[4:] == [line for job in (blocker, second, first) for line in (
        f"job {job}:", "  forecast: none (the daemon has not made one yet)")]


def test_watch_in_tmux_shows_hostile_name_literally(jobs: Jobs) -> None:
    # 160 columns: the whole table fits, so nothing folds (folding is unit-tested)
    job = jobs.submit("--begin=now+2hours", name=HOSTILE_NAME, gpus=1)
    shown = wait_state(jobs.client, job, {"PENDING"}, 30).name
    assert shown == HOSTILE_NAME  # Slurm kept the name byte for byte
    session = f"dlq-{uuid.uuid4().hex[:8]}"
    cmd = " ".join(shlex.quote(a) for a in [DLQUEUE, "--watch", "--iterations", "3", "--interval",
                                             "1", "-j", str(job), "--snapshot", NO_SNAPSHOT])
    shell = f"{cmd}; echo DLQ-EXIT=$?; sleep 120"
    env = dict(os.environ, LANG="C.UTF-8")
    # a tmux server of the test's own (-L): a session of a running server takes the server's
    # environment, which may be another cluster's PATH and SLURM_CONF (./test.sh runs two)
    tmux = ["tmux", "-L", session]
    subprocess.run([*tmux, "-u", "new-session", "-d", "-s", session, "-x", "160", "-y", "40",
                    shell], check=True, env=env, timeout=30)
    try:
        def screen() -> str | None:
            text = subprocess.run([*tmux, "capture-pane", "-p", "-t", session], check=True,
                                  capture_output=True, text=True, timeout=10).stdout
            return text if "DLQ-EXIT=" in text else None
        text = wait_for(screen, 60, "dlqueue --watch to finish in tmux")
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, timeout=10)
    assert "DLQ-EXIT=0" in text
    row = [ln for ln in text.splitlines() if ln.startswith(f"{job} ")]
    assert len(row) == 1, text  # one row: the newline is shown as \n, nothing wrapped
    assert visible(HOSTILE_NAME) in row[0] and "\\n" in row[0]
    assert "PENDING" in row[0] and "BeginTime (eligible in" in row[0]
    assert "daemon snapshot not found" in text


@pytest.mark.parametrize("filters", [
    [], ["--me"], ["-u", "root"], ["-u", "0,root", "-p", "gpu,gpu"], ["-t", "PD,R,CG"],
    ["-j", "1,2,3"], ["--me", "-u", "root", "-p", "gpu", "-t", "all", "-j", "7"],
])
def test_watch_reads_slurm_once_per_refresh_whatever_the_filters(filters: list[str],
                                                                  tmp_path: Path) -> None:
    """Each refresh is ONE squeue read of every job (the filters apply in dlqueue;
    22.05's squeue --json ignores -u/--me, and a cluster of users each watching must not load
    slurmctld). The only other calls are one ``squeue --version`` per run (local: it never
    reaches slurmctld) and, with ``-p``, one ``scontrol --all show partition`` per run (the
    partitions' names checked)."""
    path, log = logging_path(tmp_path)
    refreshes = 3
    proc = subprocess.run([DLQUEUE, "--watch", "--iterations", str(refreshes), "--interval", "1",
                           "--snapshot", NO_SNAPSHOT, *filters], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PATH=path))
    assert proc.returncode == 0, proc.stderr
    calls = logged_calls(log)
    partitions = "scontrol --all show partition --oneliner"
    reads = [c for c in calls if c not in ("squeue --version", partitions)]
    assert len(reads) == refreshes, calls
    assert all(c.startswith("squeue --noheader --all --states=all --Format=") for c in reads), calls
    assert calls.count("squeue --version") == 1, calls
    assert calls.count(partitions) == ("-p" in filters), calls


def test_partitions_hidden_ones_too_and_unknown_ones_refused(jobs: Jobs) -> None:
    """``-p`` names partitions: a hidden one (``Hidden=YES``, which scontrol and squeue show
    a user only with ``--all``) selects its jobs for a user who is not root; a name that is
    no partition exits 2 naming it (squeue would show an empty table, read as "no jobs")."""
    user = per_cluster_user("dlq")
    created = subprocess.run(["useradd", "--no-create-home", "--shell=/bin/bash", user],
                             capture_output=True, text=True).returncode == 0
    jobs.client.create_partition("dlq_hidden", ["Nodes=ALL", "Hidden=YES", "State=UP"])
    job = jobs.submit("--partition=dlq_hidden", "--begin=now+2hours", gpus=1)
    try:
        as_user = ["runuser", "-u", user, "--", DLQUEUE, "--snapshot", NO_SNAPSHOT, "--json"]
        proc = subprocess.run([*as_user, "-p", "dlq_hidden"], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert [r["job_id"] for r in json.loads(proc.stdout)] == [job]
        proc = subprocess.run([*as_user, "-p", "gpu,dlq_nosuch,dlq_nosuch"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == ("dlqueue: -p/--partition: unknown partition 'dlq_nosuch' "
                               "(scontrol show partition lists them)\n"), proc.stderr
        assert proc.stdout == ""
    finally:
        jobs.client.cancel([job])
        wait_for(lambda: not [x for x in jobs.client.jobs(job_ids=jobs.ids) if x.is_active],
                 60, "the hidden partition's job to end")
        jobs.client.delete_partition("dlq_hidden")
        if created:
            subprocess.run(["userdel", user], check=False)


def test_one_refresh_and_json_read_slurm_once(tmp_path: Path) -> None:
    path, log = logging_path(tmp_path)
    for args in ([], ["--json"]):
        log.write_text("")
        proc = subprocess.run([DLQUEUE, "--snapshot", NO_SNAPSHOT, "--me", "-t", "PD", *args],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PATH=path))
        assert proc.returncode == 0, proc.stderr
        reads = [c for c in logged_calls(log) if c != "squeue --version"]
        assert len(reads) == 1 and reads[0].startswith("squeue --noheader --all"), reads


def test_watch_default_refresh_is_at_least_five_seconds() -> None:
    out = subprocess.run([DLQUEUE, "--help"], capture_output=True, text=True, timeout=60).stdout
    text = " ".join(out.split())  # whatever width argparse wrapped the help at
    found = re.search(r"--interval INTERVAL seconds between refreshes with --watch \(default (\d+)", text)
    assert found and int(found.group(1)) >= 5, out
