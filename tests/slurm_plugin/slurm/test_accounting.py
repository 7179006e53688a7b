"""Parsing and folding of real ``sacct --duplicates --json`` output (Slurm 22.05.8).

``tests/data/sample-sacct.json`` was recorded on ``dlcluster up --with-dbd`` (4 × 8 fake GPUs)
after: 1 = 2-GPU job, 2 = CPU-only job, 3 = ``-N2 --gres=gpu:8``, 4 = hetjob (component 0
without GPUs, component 1 (id 5) ``gpu:4``), 6 = 1-GPU job requeued once by ``scontrol
requeue``, 7 = 1-GPU job with ``-t 1`` running ``sleep 100`` (TIMEOUT), 8 = ``--array=0-1``
(ids 11 and 8), 10 = 3-GPU job cancelled while running. ``sample-sacct-never-ran.json`` is
job 9: ``gpu:2`` with ``--begin=now+1hour``, cancelled while pending. The expected numbers
below are the ones ``sacct -X -o jobid,state,start,end,alloctres,reqtres`` printed as text for
the same jobs.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from slurm_plugin.slurm.accounting import fold_jobs, record_from_json, records_from_json
from slurm_plugin.slurm.client import AccountingDisabled, SlurmClient, SlurmShapeUnknown, SlurmUnreachable
from slurm_plugin.slurm.records import ShapeError
from slurm_plugin.slurm.shapes import RELEASES

DATA = Path(__file__).parents[2] / "data"
V22 = RELEASES[(22, 5)]


@pytest.fixture(scope="module")
def recs() -> list:
    return records_from_json((DATA / "sample-sacct.json").read_bytes(), V22)


@pytest.fixture(scope="module")
def jobs(recs: list) -> dict:
    return {j.job_id: j for j in fold_jobs(recs)}


def test_every_attempt_is_a_record(recs: list) -> None:
    # job 6 has two records (REQUEUED, then COMPLETED); the hetjob two components (4, 5)
    assert sorted(r.job_id for r in recs) == [1, 2, 3, 4, 5, 6, 6, 7, 8, 10, 11]
    first6 = [r for r in recs if r.job_id == 6 and r.state == "REQUEUED"][0]
    assert (first6.start, first6.end, first6.gpus) == (1796077040, 1796077042, 1)


def test_gpus_from_allocated_tres(jobs: dict) -> None:
    assert (jobs[1].gpus, jobs[1].nodes) == (2, 1)
    assert (jobs[3].gpus, jobs[3].nodes) == (16, 2)     # AllocTRES gres/gpu=16, node=2
    assert jobs[2].gpus == 0                             # CPU-only
    assert jobs[1].attempts[0].run_s == 3               # 22:17:17 → 22:17:20


def test_hetjob_folds_into_leader(jobs: dict) -> None:
    assert 5 not in jobs
    het = jobs[4]
    assert het.gpus == 4 and het.nodes == 2             # 0 + 4 GPUs, one node each
    assert len(het.attempts) == 1
    assert het.attempts[0].gpu_s == 3 * 4


def test_requeued_job_has_every_attempt(jobs: dict) -> None:
    job = jobs[6]
    assert [a.state for a in job.attempts] == ["REQUEUED", "COMPLETED"]
    assert job.submit == 1796077037                     # the first attempt's, not the requeue's
    assert [a.run_s for a in job.attempts] == [2, 20]
    assert job.attained_gpu_s == 22
    assert job.finished and job.state == "COMPLETED"


def test_timeout_and_cancelled_states(jobs: dict) -> None:
    assert jobs[7].state == "TIMEOUT" and jobs[7].time_limit_s == 60
    assert jobs[10].state == "CANCELLED" and jobs[10].gpus == 3


def test_array_elements_are_jobs(jobs: dict) -> None:
    assert jobs[8].array_job_id == 8 and jobs[8].array_task_id == 1
    assert jobs[11].array_job_id == 8 and jobs[11].array_task_id == 0


def test_never_ran_takes_requested_gpus() -> None:
    data = (DATA / "sample-sacct-never-ran.json").read_bytes()
    (job,) = fold_jobs(records_from_json(data, V22))
    assert job.job_id == 9 and job.gpus == 2            # ReqTRES gres/gpu=2, nothing allocated
    assert job.attempts[0].start is None and job.attempts[0].run_s == 0
    assert job.state == "CANCELLED"


def test_typed_gpu_entries_are_summed_without_plain() -> None:
    rec = record_from_json({"job_id": 3, "state": {"current": "COMPLETED"},
                            "time": {"start": 10, "end": 20},
                            "tres": {"allocated": [
                                {"type": "gres", "name": "gpu:a100", "count": 2},
                                {"type": "gres", "name": "gpu:v100", "count": 1},
                                {"type": "node", "name": None, "count": 1}]}})
    assert (rec.gpus, rec.nodes, rec.run_s) == (3, 1, 10)
    rec = record_from_json({"job_id": 3, "state": {"current": "COMPLETED"},
                            "time": {"start": 10, "end": 20},
                            "tres": {"allocated": [
                                {"type": "gres", "name": "gpu", "count": 4},
                                {"type": "gres", "name": "gpu:a100", "count": 4}]}})
    assert rec.gpus == 4                                # the plain total, not 8


def test_time_suspended_is_not_run_time() -> None:
    # ran 10..100 and was suspended 30 s of it (sacct Suspended): 60 s run, 4 GPUs
    rec = record_from_json({"job_id": 3, "state": {"current": "COMPLETED"},
                            "time": {"start": 10, "end": 100, "suspended": 30},
                            "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 4}]}})
    assert (rec.suspended_s, rec.run_s) == (30, 60)
    job, = fold_jobs([rec])
    assert (job.attempts[0].suspended_s, job.ran_s, job.attained_gpu_s) == (30, 60, 240)


def test_record_of_another_shape_is_an_error() -> None:
    with pytest.raises(ShapeError, match="job_id"):
        record_from_json({"name": "x", "state": {"current": "COMPLETED"}})
    with pytest.raises(ShapeError, match="job 4: job state 'DONE'"):
        record_from_json({"job_id": 4, "state": {"current": "DONE"}})
    data = json.loads((DATA / "sample-sacct.json").read_text())
    data["jobs"][1]["time"]["start"] = "1796077037"
    with pytest.raises(ShapeError, match=r"\$\.jobs\[1\]\.time\.start"):
        records_from_json(json.dumps(data), V22)
    with pytest.raises(ShapeError, match=r"'openapi/dbv0\.0\.38' \(Slurm 22\.05\.8\), expected "
                                         r"'data_parser/v0\.0\.42'"):
        records_from_json((DATA / "sample-sacct.json").read_bytes(), RELEASES[(24, 11)])


def _fake_sacct(tmp_path: Path, text: str, rc: int, version: str = "slurm 22.05.8") -> SlurmClient:
    """A stand-in ``sacct`` (and the ``squeue --version`` that tells the release): the live
    cluster has slurmdbd, so it cannot show the answer of a cluster without accounting (text
    recorded from a dlcluster without --with-dbd)."""
    for name, out, code in (("sacct", text, rc), ("squeue", version, 0)):
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\nprintf '%s' '{out}'\nexit {code}\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return SlurmClient(bin_dir=str(tmp_path))


def test_no_slurmdbd_is_accounting_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    client = _fake_sacct(tmp_path, "Slurm accounting storage is disabled", 1)
    with pytest.raises(AccountingDisabled):
        client.accounting("now-1day")


def test_slurmdbd_down_is_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    client = _fake_sacct(tmp_path, "sacct: error: slurm_persist_conn_open_without_init: "
                         "failed to open persistent connection", 1)
    with pytest.raises(SlurmUnreachable):
        client.accounting("now-1day")


def test_sacct_is_pinned_to_the_release_parser(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    sample = (DATA / "sample-sacct-never-ran.json").read_text()
    client = _fake_sacct(tmp_path, sample, 0, "slurm-wlm 24.11.5")
    with pytest.raises(SlurmShapeUnknown, match="expected 'data_parser/v0.0.42'"):
        client.accounting_runs(9)
    client = _fake_sacct(tmp_path, sample, 0)
    (run,) = client.accounting_runs(9)
    assert (run.job_id, run.state, run.start, run.gpus) == (9, "CANCELLED", None, 2)

