"""Where the replays of a tuning grid run: ``local`` (a process pool, one worker per core, a
progress bar on stderr) or ``slurm`` (one Slurm job array on the cluster itself, one replay per
array task, results gathered when the array has ended). No distribution layer of our own:
``concurrent.futures`` and ``sbatch --array`` (sbatch(1)).

The Slurm executor writes ``tasks.json`` into a work directory that every node must see (the
same path; on dlcluster all nodes are this machine), submits ``python -m
prioritizer.tune.task WORKDIR`` as ``--array=0-(N-1)`` with the running interpreter, waits
for the array to leave squeue, and reads ``result-<i>.json``; a task without a result is an
error naming its index and its Slurm output file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.progress import Progress

from prioritizer.tune.rank import Task, run_task
from slurm_plugin.common.atomic import write_atomically
from slurm_plugin.slurm.client import SlurmClient


class ExecutorError(RuntimeError):
    """Replays could not be run or gathered (message says which task and why)."""


def run_local(tasks: Sequence[Task], workers: int | None = None,
              progress: bool = True) -> list[dict[str, Any]]:
    """Run ``tasks`` in a process pool (``workers`` default: one per core); results in order."""
    workers = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    with ProcessPoolExecutor(max_workers=workers) as pool, \
            Progress(transient=True, disable=not progress) as bar:
        bar_id = bar.add_task(f"{len(tasks)} replays", total=len(tasks))
        futures = {pool.submit(run_task, t): i for i, t in enumerate(tasks)}
        for future, i in futures.items():
            try:
                results[i] = future.result()
            except ValueError as exc:
                raise ExecutorError(str(exc)) from None
            bar.advance(bar_id)
    return [r for r in results if r is not None]


def array_script(workdir: Path, count: int) -> str:
    """The batch script of the array (every path quoted for bash)."""
    python = shlex.quote(sys.executable)
    return ("#!/bin/bash\n"
            f"#SBATCH --array=0-{count - 1}\n"
            f"#SBATCH --output={_sbatch_path(workdir / 'task-%a.out')}\n"
            f"exec {python} -m prioritizer.tune.task {shlex.quote(str(workdir))} "
            "\"$SLURM_ARRAY_TASK_ID\"\n")


def _sbatch_path(path: Path) -> str:
    text = str(path)
    if any(c in text for c in "\"\n\\#"):
        raise ExecutorError(f"work directory {text!r}: sbatch cannot take this path in "
                            "--output; choose a plainer --workdir")
    return f'"{text}"'


def run_slurm(tasks: Sequence[Task], workdir: Path, client: SlurmClient | None = None,
              poll_s: float = 2.0, timeout_s: float = 3600.0,
              say: Callable[[str], None] = lambda s: None) -> list[dict[str, Any]]:
    """Run ``tasks`` as one job array; raise :class:`ExecutorError` naming failed tasks."""
    client = client or SlurmClient()
    workdir.mkdir(parents=True, exist_ok=True)
    write_atomically(workdir / "tasks.json", json.dumps([dataclasses.asdict(t) for t in tasks]))
    job_id = client.submit(array_script(workdir.resolve(), len(tasks)),
                           [f"--chdir={workdir.resolve()}", "--job-name=dlprio-tune"])
    say(f"submitted job array {job_id} ({len(tasks)} tasks) from {workdir}")
    deadline = time.monotonic() + timeout_s
    while client.jobs(job_ids=[job_id], states={"PENDING", "RUNNING", "COMPLETING",
                                                "CONFIGURING"}):
        if time.monotonic() > deadline:
            raise ExecutorError(f"job array {job_id} still running after {timeout_s:g} s")
        time.sleep(poll_s)
    results, missing = [], []
    for i in range(len(tasks)):
        path = workdir / f"result-{i}.json"
        if not path.exists():
            missing.append(i)
            continue
        data = json.loads(path.read_text())
        if "error" in data:
            raise ExecutorError(f"array task {i}: {data['error']}")
        results.append(data)
    if missing:
        raise ExecutorError(f"job array {job_id}: no result from task(s) "
                            f"{', '.join(map(str, missing))}; see {workdir}/task-<i>.out")
    return results
