"""Captures of each declared release read with its declared shapes (pure).

``tests/data/capture-<release>-squeue-v0.0.42.json`` and ``...-sacct-v0.0.42.json`` were
recorded on ``dlcluster --slurm 24.11`` (24.11.5) and ``--slurm 26.05`` (26.05.5), 4 nodes of
8 a100 GPUs, with ``squeue --json=v0.0.42`` and ``sacct --duplicates --allusers
--json=v0.0.42``, after these ``sbatch -o /dev/null`` jobs (ids 24.11.5 / 26.05.5):

=====================================================  =========  =================
request                                                24.11.5    26.05.5
=====================================================  =========  =================
``--gres=gpu:2 -N2 --comment 'dl:v1;...'``             1          34
``--gres=gpu``                                         2          35
``--gpus-per-socket=1 --sockets-per-node=2``           3          36
``--gpus=3 --time=10``                                 4          37
``--gres=gpu:a100:8 --no-requeue --begin=now+1hour``   5          38
``--array=1-3 --gpus-per-node=1``                      6 (10 11)  39 (44 45)
hetjob ``--gres=gpu:1`` + ``--gres=gpu:2``             7 (8)      40 (41)
``--ntasks=2 --gpus-per-task=1``                       9          42
``--gres=gpu:1``, then ``scontrol requeue``            —          43
=====================================================  =========  =================

On 24.11.5 the array ran ``sleep 1`` and had ended before squeue was read; on 26.05.5 every
job ran ``sleep 120``, squeue was read a few seconds after submission (``-squeue-v0.0.42``) and
one second after ``scontrol requeue 43`` (``-requeued``), each with the formatted read of
:data:`slurm_plugin.slurm.records.SQUEUE_FIELDS` taken right after it
(``capture-26.05.5-squeue-formatted*.txt``, fields ending in ``\\x1fFS\\x1f`` and records in
``\\x1eRS\\x1e``; it also shows jobs of others that had ended, which squeue's JSON leaves out),
and sacct (``-j`` of the ids above) after ``scancel`` of every job. The expected GPU counts are
the requests above, counted by hand.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest

from slurm_plugin.slurm.accounting import fold_jobs, records_from_json
from slurm_plugin.slurm.records import Job, job_from_fields
from slurm_plugin.slurm.shapes import RELEASES, Release, jobs_from_json

DATA = Path(__file__).parents[2] / "data"
V24, V26 = RELEASES[(24, 11)], RELEASES[(26, 5)]


def _squeue(name: str, release: Release) -> dict[int, Job]:
    return {j.job_id: j for j in jobs_from_json((DATA / name).read_bytes(), release)}


#: job id → (state, GPUs per node, GPUs, nodes, time limit s), from the request table
SQUEUE_24 = {1: ("RUNNING", 2, 4, 2, None), 2: ("RUNNING", 1, 1, 1, None),
             3: ("RUNNING", 2, 2, 1, None), 4: ("RUNNING", 3, 3, 1, 600),
             5: ("PENDING", 8, 8, 1, None), 7: ("RUNNING", 1, 1, 1, None),
             8: ("RUNNING", 2, 2, 1, None), 9: ("RUNNING", 2, 2, 1, None)}
SQUEUE_26 = {34: ("RUNNING", 2, 4, 2, None), 35: ("RUNNING", 1, 1, 1, None),
             36: ("RUNNING", 2, 2, 1, None), 37: ("RUNNING", 3, 3, 1, 600),
             38: ("PENDING", 8, 8, 1, None), 44: ("RUNNING", 1, 1, 1, None),
             45: ("RUNNING", 1, 1, 1, None), 39: ("RUNNING", 1, 1, 1, None),
             40: ("RUNNING", 1, 1, 1, None), 41: ("RUNNING", 2, 2, 1, None),
             42: ("RUNNING", 2, 2, 1, None), 43: ("RUNNING", 1, 1, 1, 365 * 86400)}


@pytest.mark.parametrize(("name", "release", "expected"), [
    ("capture-24.11.5-squeue-v0.0.42.json", V24, SQUEUE_24),
    ("capture-26.05.5-squeue-v0.0.42.json", V26, SQUEUE_26)], ids=["24.11", "26.05"])
def test_squeue_jobs_states_and_gpus(name: str, release: Release, expected: dict) -> None:
    jobs = _squeue(name, release)
    assert {i: (j.state, j.gpus_per_node, j.gpus, j.node_count, j.time_limit_s)
            for i, j in jobs.items()} == expected
    assert all(sum(map(len, j.gpu_indices)) == j.gpus for j in jobs.values() if j.state == "RUNNING")


def test_squeue_24_11_fields() -> None:
    jobs = _squeue("capture-24.11.5-squeue-v0.0.42.json", V24)
    two = jobs[1]
    assert (two.name, two.nodes, two.node_list, two.gpu_indices) == (
        "two nodes", "node[1-2]", ("node1", "node2"), ((0, 1), (0, 1)))
    assert (two.submit_time, two.start_time, two.end_time) == (1796280929, 1796280929, None)
    assert (two.comment, two.priority, two.requeue, two.batch, two.batch_host) == (
        "dl:v1;signal=USR2;grace=5", 2053, True, True, "node1")
    assert jobs[3].gpu_indices == ((3, 6),) and jobs[4].gpu_indices == ((4, 6, 7),)
    assert jobs[4].end_time == 1796281529               # start + 10 min
    pending = jobs[5]
    assert (pending.reason, pending.requeue, pending.start_time, pending.eligible_time,
            pending.end_time, pending.nodes, pending.gpu_indices) == (
        "BeginTime", False, 1796284529, 1796284529, None, "", ())
    assert [(jobs[i].het_job_id, jobs[i].het_job_offset, jobs[i].unit_id) for i in (7, 8)] == [
        (7, 0, 7), (7, 1, 7)]
    assert all(j.array_job_id is None and j.array_task_id is None for j in jobs.values())


def test_squeue_26_05_array_elements_and_requeue() -> None:
    jobs = _squeue("capture-26.05.5-squeue-v0.0.42.json", V26)
    assert [(jobs[i].array_job_id, jobs[i].array_task_id) for i in (44, 45, 39)] == [
        (39, 1), (39, 2), (39, 3)]
    assert [(jobs[i].het_job_id, jobs[i].het_job_offset) for i in (40, 41)] == [(40, 0), (40, 1)]
    requeued = _squeue("capture-26.05.5-squeue-v0.0.42-requeued.json", V26)[43]
    assert (requeued.state, requeued.reason, requeued.restart_count, requeued.start_time,
            requeued.nodes, requeued.gpu_indices) == ("PENDING", "BeginTime", 1, 1796281093, "", ())


def _formatted(name: str) -> list[Job]:
    """The captured records; they were taken before ``TimeUsed`` (the last field) was read,
    so it is given as squeue's unset ``N/A``."""
    text = (DATA / name).read_text()
    return [job_from_fields(r.lstrip("\n").split("\x1fFS\x1f") + ["N/A"])
            for r in text.split("\x1eRS\x1e") if r.strip()]


@pytest.mark.parametrize(("json_name", "text_name"), [
    ("capture-26.05.5-squeue-v0.0.42.json", "capture-26.05.5-squeue-formatted.txt"),
    ("capture-26.05.5-squeue-v0.0.42-requeued.json",
     "capture-26.05.5-squeue-formatted-requeued.txt")], ids=["running", "requeued"])
def test_json_job_equals_the_formatted_read_of_the_same_job(json_name: str, text_name: str) -> None:
    by_json = _squeue(json_name, V26)
    formatted = [j for j in _formatted(text_name) if j.job_id in by_json]
    assert sorted(j.job_id for j in formatted) == sorted(by_json)
    for job in formatted:
        # the formatted captures hold no TimeUsed (N/A, :func:`_formatted`): not compared
        same = replace(by_json[job.job_id], gpu_indices=(), stdout_path=job.stdout_path,
                       time_used_s=None)
        assert asdict(same) == asdict(job), job.job_id


def test_sacct_24_11_attempts() -> None:
    recs = records_from_json((DATA / "capture-24.11.5-sacct-v0.0.42.json").read_bytes(), V24)
    assert [(r.job_id, r.state, r.gpus, r.nodes) for r in recs] == [
        (1, "RUNNING", 4, 2), (2, "RUNNING", 1, 1), (3, "RUNNING", 2, 1), (4, "RUNNING", 3, 1),
        (7, "RUNNING", 1, 1), (8, "RUNNING", 2, 1), (9, "RUNNING", 2, 1),
        (10, "COMPLETED", 1, 1), (11, "COMPLETED", 1, 1), (6, "COMPLETED", 1, 1)]
    assert all(r.end is None and r.start for r in recs if r.state == "RUNNING")
    assert [(r.time_limit_s, r.submit, r.start) for r in recs[3:4]] == [(600, 1796280929, 1796280929)]
    jobs = {j.job_id: j for j in fold_jobs(recs)}
    assert 8 not in jobs and jobs[7].gpus == 3 and jobs[7].nodes == 2
    assert [(jobs[i].array_job_id, jobs[i].array_task_id, jobs[i].attempts[0].run_s)
            for i in (10, 11, 6)] == [(6, 1, 2), (6, 2, 2), (6, 3, 2)]


def test_sacct_24_11_job_of_a_user_sacct_cannot_name() -> None:
    """``capture-24.11.5-sacct-user-null.json``: ``sacct --duplicates --allusers
    --json=v0.0.42 -j 78`` on ``dlcluster --slurm 24.11`` for a ``--gres=gpu:2`` job of uid
    1001, cancelled pending, read where uid 1001 has no passwd entry (sacct's text prints
    ``User`` as ``1001``): ``"user": null``. It reads as no user; the read of the whole
    history (the learned Gittins distribution, ``dlprio history export``) goes on."""
    (rec,) = records_from_json((DATA / "capture-24.11.5-sacct-user-null.json").read_bytes(), V24)
    assert (rec.job_id, rec.user, rec.account, rec.state, rec.gpus, rec.start) == (
        78, "", "", "CANCELLED", 2, None)


def test_sacct_26_05_requeue_and_never_ran() -> None:
    recs = records_from_json((DATA / "capture-26.05.5-sacct-v0.0.42.json").read_bytes(), V26)
    jobs = {j.job_id: j for j in fold_jobs(recs)}
    assert sorted(jobs) == [34, 35, 36, 37, 38, 39, 40, 42, 43, 44, 45]
    assert {i: j.gpus for i, j in jobs.items()} == {
        34: 4, 35: 1, 36: 2, 37: 3, 38: 8, 39: 1, 40: 3, 42: 2, 43: 1, 44: 1, 45: 1}
    requeued = jobs[43]
    assert [(a.state, a.start, a.end) for a in requeued.attempts] == [
        ("REQUEUED", 1796281079, 1796281082), ("CANCELLED", 1796281105, 1796281111)]
    assert requeued.submit == 1796281074 and requeued.attained_gpu_s == 3 + 6
    never = jobs[38]                                     # cancelled pending: start is NO_VAL
    assert (never.state, never.attempts[0].start, never.attempts[0].run_s, never.time_limit_s,
            never.eligible) == ("CANCELLED", None, 0, None, 1796284674)
    assert jobs[37].time_limit_s == 600 and jobs[34].time_limit_s is None
    assert all(j.state == "CANCELLED" and j.finished for i, j in jobs.items() if i != 43)
