"""The formatted squeue read and ``squeue --json`` find identical records.

The daemon and dlqueue read jobs through one ``squeue --Format`` call (about 20× cheaper than
``squeue --json`` at 10,000 jobs). This live test puts every kind of job the product meets on
the cluster that SLURM_CONF names (running and pending, a hetjob, an array with pending and
running elements, a finished job, a multi-node gang, ``--gpus``/``--gpus-per-task`` requests, a
``--no-requeue`` job, a time limit) with hostile names and comments (separators, newlines,
unicode, the ``(null)`` lookalike aside), then reads the same cluster both ways and compares
every field. The differences the formatted read documents (``gpu_indices``: JSON only;
``stdout_path``: 22.05's JSON leaves it empty; ``end_time`` of a job not finished: a
projection, which JSON computes where squeue prints ``NONE``, e.g. for a hetjob without a time
limit) are the only ones allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from hostile import HOSTILE
from live_helpers import wait_for, wait_state
from slurm_plugin.slurm.client import SlurmClient

pytestmark = [pytest.mark.live, pytest.mark.releases]

PREFIX = "fmt-"
ALLOWED = {"gpu_indices", "stdout_path"}


@pytest.fixture
def client() -> Iterator[SlurmClient]:
    c = SlurmClient(timeout_s=30)
    mine: list[int] = []
    c.submitted = mine  # type: ignore[attr-defined]
    yield c
    if mine:
        c.cancel(mine)


def sub(c: SlurmClient, body: str, *opts: str) -> int:
    script = "#!/bin/bash\n" + "".join(f"#SBATCH {o}\n" for o in opts if o.startswith("hetjob")) + body + "\n"
    args = [o for o in opts if not o.startswith("hetjob")]
    if not any(o.startswith("--output=") for o in args):
        args.append("--output=/dev/null")   # never slurm-N.out in pytest's directory
    job_id = c.submit(script, args)
    c.submitted.append(job_id)  # type: ignore[attr-defined]
    return job_id


def test_formatted_and_json_reads_find_identical_records(client: SlurmClient) -> None:
    later = "--begin=now+1hour"
    ids = []
    for i, text in enumerate(HOSTILE + ["sep\x1fsep\x1e|,:;", "x" * 300]):
        ids.append(sub(client, "sleep 300", f"--job-name={PREFIX}{text}", f"--comment={text}",
                       "--gres=gpu:1", "--output=/dev/null", *([later] if i % 2 else [])))
    running = sub(client, "sleep 300", f"--job-name={PREFIX}gang", "--nodes=2", "--gres=gpu:2",
                  "--output=/dev/null", "--time=90", "--no-requeue")
    gpus = sub(client, "sleep 300", f"--job-name={PREFIX}gpus", "--gpus=3", "--output=/dev/null")
    per_task = sub(client, "true", f"--job-name={PREFIX}pertask", "--gpus-per-task=1", "--ntasks=2",
                   "--output=/dev/null", later)
    array = sub(client, "sleep 300", f"--job-name={PREFIX}array", "--array=0-3%2", "--gres=gpu:1",
                "--output=/dev/null")
    done = sub(client, "true", f"--job-name={PREFIX}done", "--output=/dev/null")
    het = client.submit("#!/bin/bash\n#SBATCH --gres=gpu:1 --output=/dev/null --job-name="
                        f"{PREFIX}het\n#SBATCH hetjob\n#SBATCH --gres=gpu:2\nsleep 300\n")
    client.submitted.append(het)  # type: ignore[attr-defined]
    wait_state(client, done, {"COMPLETED"}, 60)
    wait_state(client, running, {"RUNNING"}, 60)
    wait_for(lambda: any(j.array_job_id == array and j.state == "RUNNING" for j in client.jobs()),
             60, "array elements running")

    wait_state(client, het, {"RUNNING"}, 60)

    def mine(jobs: list) -> dict:
        # an active job's time used grows with the clock between two reads
        return {j.job_id: dataclasses.replace(j, time_used_s=None) if j.is_active else j
                for j in jobs if j.name.startswith(PREFIX)}

    def stable_reads() -> tuple[dict, dict] | None:
        """A JSON read between two equal formatted reads: no job changed meanwhile."""
        before, slow, after = mine(client.jobs()), mine(client.jobs(detail=True)), mine(client.jobs())
        return (after, slow) if before == after else None
    fast, slow = wait_for(stable_reads, 60, "two equal reads around a JSON read")
    assert set(fast) == set(slow)
    assert set(ids + [running, gpus, per_task, done, het]) <= set(fast)
    kinds = {j.state for j in fast.values()}
    assert {"RUNNING", "PENDING", "COMPLETED"} <= kinds
    assert any(j.array_task_string for j in fast.values()) and any(j.het_job_offset for j in fast.values())
    for job_id, f in fast.items():
        s = slow[job_id]
        a, b = dataclasses.asdict(f), dataclasses.asdict(s)
        skip = ALLOWED | ({"end_time"} if f.is_active else set())
        diff = {k: (a[k], b[k]) for k in a if k not in skip and a[k] != b[k]}
        assert not diff, f"job {job_id} ({f.name!r}, {f.state}): formatted vs json differ: {diff}"
    names = {j.name for j in fast.values()}
    assert {PREFIX + t for t in HOSTILE} <= names and PREFIX + "sep\x1fsep\x1e|,:;" in names
    assert fast[gpus].gpus == 3 and fast[per_task].gpus == 2 and fast[running].gpus == 4
    assert not fast[running].requeue and fast[running].time_limit_s == 90 * 60
