"""Job arrays on the live cluster. ``dlprio explain`` of array tasks: a task is explained under
the job id squeue gives it (``squeue -h -o %A -j ARRAY_TASK``, the truth here, asked
independently), the tasks waiting in the array's pending record under that record's id, and
tasks of several jobs are listed with their ids (exit 2). The daemon's order reaches the
pending record once a task has ended."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import Jobs, dlprio, live_jobs, write_config
from live_helpers import wait_for

pytestmark = pytest.mark.live


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    with live_jobs(tmp_path) as j:
        yield j


def _squeue_ids(job: str) -> list[tuple[str, str]]:
    """``(job id, array name)`` of every record squeue lists for ``job``: %A and %i."""
    out = subprocess.run(["squeue", "-h", "-o", "%A %i", "-j", job], capture_output=True,
                         text=True, check=True).stdout
    return [tuple(line.split()) for line in out.splitlines()]  # type: ignore[misc]


@pytest.mark.releases
def test_array_tasks_are_explained_under_the_ids_squeue_gives_them(jobs: Jobs,
                                                                   tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "dlprio.yaml")
    array, _ = jobs.submit("arr", nodes=1, gpus_per_node=8, steps=120, extra=("--array=0-3%1",))
    records = wait_for(lambda: len(r := _squeue_ids(str(array))) == 2 and r, 60,
                       "task 0 running beside the pending record of tasks 1-3")
    [(running, _)] = _squeue_ids(f"{array}_0")
    [(pending, shown)] = [r for r in records if r[1].startswith(f"{array}_[")]
    assert shown.startswith(f"{array}_[1-3")
    once = subprocess.run(dlprio("once", "--config", str(cfg)), capture_output=True, text=True,
                          timeout=60)
    assert once.returncode == 0, once.stderr

    def explain(job: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(dlprio("explain", job, "--config", str(cfg)), capture_output=True,
                              text=True, timeout=60)

    one = explain(f"{array}_0")
    assert one.returncode == 0, one.stderr
    first, second = one.stdout.splitlines()[:2]
    assert first == f"array task {array}_0 is job {running}"
    assert second.startswith(f"job {running} (") and second.endswith("): RUNNING")
    waiting = explain(f"{array}_[2-3]")
    assert waiting.returncode == 0, waiting.stderr
    assert waiting.stdout.splitlines()[0] == f"array tasks {array}_[2-3] are job {pending}"
    assert waiting.stdout.splitlines()[1].startswith(f"job {pending} (")
    both = explain(f"{array}_[0-3]")
    assert both.returncode == 2 and both.stdout == ""
    assert both.stderr.startswith(f"dlprio: JOBID {array}_[0-3]: these array tasks are 2 jobs: ")
    assert f"{running} ({array}_0)" in both.stderr and f"{pending} ({array}_[1-3" in both.stderr


@pytest.mark.releases
def test_the_order_reaches_an_arrays_pending_tasks_after_one_has_ended(jobs: Jobs,
                                                                       tmp_path: Path) -> None:
    """``scontrol update jobid=ARRAY`` names every task, and once one has ended Slurm answers
    "Job has already finished" (exit 1): the daemon's update names the pending tasks, is
    accepted, and squeue shows the value on the record."""
    cfg = write_config(tmp_path / "dlprio.yaml", priority_field="priority")
    array, _ = jobs.submit("arr", nodes=1, gpus_per_node=1, steps=1,
                           extra=("--array=0-5%1",))
    wait_for(lambda: not _squeue_ids(f"{array}_0"), 60, "task 0 to end")
    once = subprocess.run(dlprio("once", "--config", str(cfg), "--log-format", "json"),
                          capture_output=True, text=True, timeout=60)
    assert once.returncode == 0, once.stderr
    assert "update_refused" not in once.stderr
    record = next(j for j in jobs.client.jobs(job_ids=[array])
                  if j.array_task_string and j.state == "PENDING")
    assert f'"job_id": {record.job_id}, "event": "order_set", "value": "priority:{record.priority}"' \
        in once.stderr
