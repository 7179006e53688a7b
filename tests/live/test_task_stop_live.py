"""A gang being stopped retries no healthy task and leaves no process behind, on real Slurm.

``taskRetryCount`` reruns a failed instance's command in its task (submit/runtime.py). When the
job is being stopped (role a fails and minFailed decides the job, so the batch shell stops every
srun and srun kills the step; or scancel), role b's command dies with its step: b has not failed,
and its shell must not start the command again (a command started then outlives the job under
proctrack/linuxproc, which dlcluster uses). After the job ends, no process whose environment
names the job remains on the node. The same behaviours without Slurm:
tests/submit/test_task_stop.py.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from live_helpers import cluster_name, wait_file, wait_for
from test_submit_live import Submitter, role, spec, submit  # noqa: F401

pytestmark = pytest.mark.live


def job_processes(job_id: int, ckpt_dir: Path) -> list[str]:
    """``pid args`` of every process of this machine (the dlcluster nodes) whose environment is
    the job's: ``SLURM_JOB_ID`` is the job's on this cluster (``SLURM_CLUSTER_NAME``: ./test.sh
    runs two clusters at once, whose job ids overlap), or ``DL_CHECKPOINT_DIR`` its checkpoint
    dir."""
    job = {f"SLURM_JOB_ID={job_id}".encode(), f"SLURM_CLUSTER_NAME={cluster_name()}".encode()}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = set(Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"))
            args = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if job <= env or f"DL_CHECKPOINT_DIR={ckpt_dir}".encode() in env:
            found.append(f"{entry} {args.decode(errors='replace')[:120]}")
    return found


def no_job_process_left(job_id: int, ckpt_dir: Path) -> None:
    left: list[str] = []

    def probe() -> bool | None:
        left[:] = job_processes(job_id, ckpt_dir)
        return True if not left else None
    try:
        wait_for(probe, 30, f"the processes of job {job_id} to end", interval_s=1)
    except Exception:
        pytest.fail(f"processes of job {job_id} outlived it: {left}")


def final_sacct_state(submit: Submitter, job_id: int) -> str:
    def probe() -> str | None:
        runs = submit.client.accounting_runs(job_id)
        return runs[-1].state if runs and runs[-1].state not in {"RUNNING", "PENDING"} else None
    return wait_for(probe, 30, f"sacct's final record of job {job_id}", interval_s=1)


@pytest.mark.releases
def test_a_policy_stop_retries_no_healthy_role(submit: Submitter) -> None:
    """Role a fails; the gang stop kills role b's ``sleep 60`` (srun ends its step with SIGKILL
    on the batch shell's SIGTERM) and b is never run again. ``&&``: Slurm kills a step's
    processes one at a time, so after ``sleep 60; echo`` the shell may echo in between."""
    roles = {"a": role('sleep 3; echo "a fails now"; exit 1'),
             "b": role('echo "b start try=$DL_TASK_RETRY"; sleep 60 && echo "b end"', taskRetryCount=3)}
    job_id, log = submit(spec("taskstop", roles))
    final = submit.ended(job_id, 120)
    no_job_process_left(job_id, submit.tmp / "ckpt" / str(job_id))
    text = log.read_text()
    assert final.state == "FAILED", text
    assert "a fails now" in text
    assert text.count("b start try=") == 1, text
    assert "task retry" not in text
    assert "b end" not in text
    assert "end: failed: 1 failed instance(s) of role a (minFailed 1)" in text
    assert final_sacct_state(submit, job_id) == "FAILED"


@pytest.mark.releases
def test_a_command_killed_as_the_gang_stops_is_not_retried(submit: Submitter) -> None:
    """b's command is SIGKILLed while b's shell lives on, as role a fails: the kill comes first,
    the batch shell's decision a second later; b's shell waits for it and starts no retry."""
    roles = {"a": role('sleep 3; kill -KILL "$(cat "$DL_CHECKPOINT_DIR/b.pid")"; exit 1'),
             "b": role('echo "$DL_TASK_RETRY" >> "$DL_CHECKPOINT_DIR/b.runs"; echo "b start try=$DL_TASK_RETRY"; '
                       'sleep 60 & echo $! > "$DL_CHECKPOINT_DIR/b.pid"; wait $!', taskRetryCount=3)}
    job_id, log = submit(spec("taskkill", roles))
    final = submit.ended(job_id, 120)
    no_job_process_left(job_id, submit.tmp / "ckpt" / str(job_id))
    text = log.read_text()
    assert final.state == "FAILED", text
    assert text.count("b start try=") == 1, text
    assert "task retry" not in text
    # srun's output may end before b's shell says why it stops: b's own record of its runs
    assert (submit.tmp / "ckpt" / str(job_id) / "b.runs").read_text() == "0\n", text


def test_a_policy_stop_retries_no_healthy_rank_of_one_role(submit: Submitter) -> None:
    """One role of 2 instances: rank 1 fails on every attempt; rank 0 is stopped with the gang
    and never retried, on both attempts (jobRetryCount 1 requeues the gang once)."""
    cmd = ('echo "RUN rank=$RANK try=$DL_TASK_RETRY restart=$DL_RESTART_COUNT"\n'
           'if [ "$RANK" = 1 ]; then sleep 2; exit 7; fi\nsleep 60')
    job_id, log = submit(spec("taskstop1", {"w": role(cmd, instances=2, taskRetryCount=2)},
                              jobRetryCount=1))
    final = submit.ended(job_id, 180)
    no_job_process_left(job_id, submit.tmp / "ckpt" / str(job_id))
    text = log.read_text()
    assert (final.state, final.restart_count) == ("FAILED", 1), text
    runs = [line for line in text.splitlines() if line.startswith("RUN rank=0")]
    assert runs == ["RUN rank=0 try=0 restart=0", "RUN rank=0 try=0 restart=1"], text
    assert not re.search(r"^\[dlsubmit\] w 0: exit \d+, task retry", text, re.M), text
    assert "w 1: exit 7, task retry 2 of 2" in text


def test_scancel_retries_nothing_and_leaves_no_process(submit: Submitter) -> None:
    cmd = 'echo "RUN try=$DL_TASK_RETRY"; sleep 300'
    job_id, log = submit(spec("taskcancel", {"w": role(cmd, instances=2, taskRetryCount=3)}))
    wait_file(log, r"^RUN try=0$", 60)
    submit.client.cancel([job_id])
    final = submit.ended(job_id, 60)
    no_job_process_left(job_id, submit.tmp / "ckpt" / str(job_id))
    text = log.read_text()
    assert final.state == "CANCELLED", text
    assert "task retry" not in text
    assert text.count("RUN try=") <= 2 and "RUN try=1" not in text, text
