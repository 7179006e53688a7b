"""Accounting that does not track GPUs (``gres/gpu`` missing from ``AccountingStorageTRES``,
slurm.conf(5)): sacct then names no ``gres/gpu`` in a job's TRES, requested or allocated.

The inputs are *derived* from the real captures (tests/data/sample-sacct.json, 22.05,
v0.0.38; capture-24.11.5/26.05.5-sacct-v0.0.42.json): the same records with every ``gres``
TRES entry removed, as slurmdbd stores them on such a cluster. The rules here are pure (the
export's Slurm calls are replaced by a recorder, the daemon's by FakeSlurm);
tests/live/test_gpu_untracked_live.py checks a real slurmdbd without ``gres/gpu`` on every release.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from daemon_unit_helpers import unit
from log_helpers import captured

from prioritizer.cli import main as dlprio
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.rebuild import rebuild_stale_runs
from prioritizer.history import cli as history_cli
from prioritizer.history.export import history_rows
from slurm_plugin.slurm.accounting import GPU_TRES_FIX, fold_jobs, records_from_json, tracks_gpus
from slurm_plugin.slurm.shapes import job_from_json
from slurm_plugin.slurm.shapes import RELEASES

DATA = Path(__file__).parents[2] / "data"
CAPTURES = {"22.05-v0.0.38": ("sample-sacct.json", (22, 5)),
            "24.11.5-v0.0.42": ("capture-24.11.5-sacct-v0.0.42.json", (24, 11)),
            "26.05.5-v0.0.42": ("capture-26.05.5-sacct-v0.0.42.json", (26, 5))}
FIX = ("add gres/gpu to AccountingStorageTRES in slurm.conf (AccountingStorageTRES=gres/gpu) and "
       "restart slurmctld; only jobs that start after that are counted")


def derived_without_gpu_tres(name: str) -> bytes:
    """The capture ``name`` with every ``gres`` TRES entry removed (jobs and steps)."""
    data = copy.deepcopy(json.loads((DATA / name).read_bytes()))
    for job in data["jobs"]:
        for holder in [job, *job.get("steps", [])]:
            tres = holder.get("tres") or {}
            for key in ("allocated", "requested"):
                if isinstance(tres.get(key), list):
                    tres[key] = [t for t in tres[key] if t["type"] != "gres"]
    return json.dumps(data).encode()


def _records(capture: str, derived: bool) -> list:
    name, release = CAPTURES[capture]
    raw = derived_without_gpu_tres(name) if derived else (DATA / name).read_bytes()
    return records_from_json(raw, RELEASES[release])


@pytest.mark.parametrize("capture", list(CAPTURES))
def test_records_without_gpu_tres_say_so(capture: str) -> None:
    real = _records(capture, derived=False)
    derived = _records(capture, derived=True)
    gpu_jobs = {r.job_id for r in real if r.gpus}
    assert gpu_jobs and all(r.gpu_tres for r in real if r.job_id in gpu_jobs)
    assert all(not r.gpu_tres and r.gpus == 0 for r in derived)
    # everything else is read as before
    assert [(r.job_id, r.start, r.end, r.nodes) for r in derived] == [
        (r.job_id, r.start, r.end, r.nodes) for r in real]


@pytest.mark.parametrize(("value", "expected"), [
    ("cpu,mem,energy,node,billing,fs/disk,vmem,pages", False),
    ("cpu,mem,energy,node,billing,fs/disk,vmem,pages,gres/gpu", True),
    ("cpu,mem,node,gres/gpu:a100", True),
    ("cpu,mem,node,gres/gpumem,gres/gpuutil", False),
    (None, None),
], ids=["default", "gres-gpu", "typed", "gpumem-only", "missing"])
def test_tracks_gpus_from_show_config(value: str | None, expected: bool | None) -> None:
    conf = {} if value is None else {"AccountingStorageTRES": value}
    assert tracks_gpus(conf) is expected


@pytest.mark.parametrize("capture", ["22.05-v0.0.38", "26.05.5-v0.0.42"])
def test_export_counts_unknown_gpus_never_cpu_only(capture: str) -> None:
    jobs = fold_jobs(_records(capture, derived=True))
    ran = [j.job_id for j in jobs if j.finished and any(a.start for a in j.attempts)]
    rows, report = history_rows(jobs, gpus_tracked=False)
    assert rows == [] and "cpu_only" not in report.left_out
    assert sorted(report.left_out["unknown_gpus"]) == sorted(ran)
    assert report.untracked_line() == (
        f"Slurm accounting does not track GPUs (no gres/gpu in AccountingStorageTRES): "
        f"{len(ran)} job(s) with unknown GPU counts left out, 0 with GPU counts from squeue or "
        f"the dlprio ledger; to count them, {FIX}")


def test_export_takes_gpus_slurm_showed_and_only_those() -> None:
    real = {j.job_id: j for j in fold_jobs(_records("22.05-v0.0.38", derived=False))}
    jobs = fold_jobs(_records("22.05-v0.0.38", derived=True))
    rows, report = history_rows(jobs, gpus_tracked=False, known_gpus={1: 2, 3: 16})
    assert [(r.job_id, r.num_gpu, r.work_gpu_s) for r in rows] == [
        ("1", 2, real[1].attained_gpu_s), ("3", 16, real[3].attained_gpu_s)]
    assert report.gpus_from_slurm == [1, 3] and 2 in report.left_out["unknown_gpus"]


def test_config_unknown_but_slurm_showed_gpus_is_untracked() -> None:
    jobs = fold_jobs(_records("22.05-v0.0.38", derived=True))
    _, report = history_rows(jobs, gpus_tracked=None, known_gpus={1: 2})
    assert report.gpus_untracked and "cpu_only" not in report.left_out
    tracked = fold_jobs(_records("22.05-v0.0.38", derived=False))
    _, plain = history_rows(tracked, gpus_tracked=None, known_gpus={})
    assert not plain.gpus_untracked and plain.left_out["cpu_only"] == [2]


class _Slurm:
    """sacct (the derived 22.05 records), ``scontrol show config`` and squeue, as recorded."""

    squeue: list = []

    def __init__(self, timeout_s: float) -> None:
        pass

    def accounting(self, start: str, end: str) -> list:
        return _records("22.05-v0.0.38", derived=True)

    def show_config(self) -> dict:
        return {"AccountingStorageTRES": "cpu,mem,energy,node,billing,fs/disk,vmem,pages"}

    def jobs(self) -> list:
        return list(_Slurm.squeue)


def test_export_cli_says_what_is_missing_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(history_cli, "SlurmClient", _Slurm)
    _Slurm.squeue = []
    assert dlprio(["history", "export"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("dlprio: no finished job with a known GPU count: Slurm accounting does "
                       "not track GPUs (no gres/gpu in AccountingStorageTRES): 9 job(s) with "
                       "unknown GPU counts left out, 0 with GPU counts from squeue or the "
                       f"dlprio ledger; to count them, {FIX}")
    assert not any("widen" in line or "CPU-only" in line for line in err)


def test_export_cli_uses_squeue_for_jobs_slurmctld_still_knows(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(history_cli, "SlurmClient", _Slurm)
    _Slurm.squeue = [job_from_json({"job_id": 1, "job_state": "COMPLETED", "node_count": 1,
                                    "tres_per_node": "gres:gpu:2"})]
    assert dlprio(["history", "export"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].startswith("1,") and len(out.splitlines()) == 2
    assert ("dlprio history export: Slurm accounting does not track GPUs (no gres/gpu in "
            "AccountingStorageTRES): 8 job(s) with unknown GPU counts left out, 1 with GPU "
            f"counts from squeue or the dlprio ledger; to count them, {FIX}") in err.splitlines()


class _Sacct:
    def __init__(self, records: list) -> None:
        self.records = records

    def accounting_jobs(self, ids: list[int]) -> list:
        return [r for r in self.records if r.unit_id in ids]


def test_rebuild_takes_gpus_from_the_ledger_and_says_why(tmp_path: Path) -> None:
    # job 6 of the 22.05 capture: 1 GPU, requeued once; the daemon lost its ledger and sees
    # the second run (from squeue) now; sacct names no GPUs for either run
    records = [r for r in _records("22.05-v0.0.38", derived=True) if r.job_id == 6]
    first, second = sorted(records, key=lambda r: r.start)
    u = unit(6, start=float(second.start), gpus=1, restart=1)
    with Ledger(tmp_path / "l.sqlite") as ledger, captured() as (log, out):
        with ledger.transaction():
            ledger.upsert_job(6, user="u", account="a", partition="gpu", state="RUNNING",
                              gpus=1, submit_time=50.0, restart_count=1, now=2e9)
            ledger.start_run(6, float(second.start), 1, 2e9)
            done = rebuild_stale_runs(_Sacct(records), ledger, {6: u}, 2e9, log)
        runs = ledger.runs(6)
    assert (done.jobs, done.runs, done.gpus_from_ledger, done.gpus_unknown) == (1, 1, 1, 0)
    assert [(r.start, r.end, r.gpus) for r in runs] == [
        (first.start, first.end, 1), (second.start, None, 1)]
    text = out.getvalue()
    assert "event=ledger_rebuilt jobs=1 runs=1 source=sacct gpus_from_ledger=1" in text
    assert "ledger_rebuild_gpus_untracked" in text and GPU_TRES_FIX in text


def test_rebuild_never_adds_a_zero_gpu_run(tmp_path: Path) -> None:
    records = [r for r in _records("22.05-v0.0.38", derived=True) if r.job_id == 6]
    u = unit(6, start=None, state="PENDING", gpus=0, restart=1)
    with Ledger(tmp_path / "l.sqlite") as ledger, captured() as (log, out):
        with ledger.transaction():
            done = rebuild_stale_runs(_Sacct(records), ledger, {6: u}, 2e9, log)
        assert ledger.runs(6) == []
    assert (done.jobs, done.runs, done.gpus_unknown) == (0, 0, 2)
    assert "runs_gpus_unknown=2" in out.getvalue() and "ledger_rebuilt " not in out.getvalue()


@pytest.mark.parametrize("command", [
    ["history", "check", "--nodes", "1", "--gpus-per-node", "8", "--start-latency", "0"],
    ["tune", "--nodes", "1", "--gpus-per-node", "8", "--grid", "knob=4"],
], ids=["history-check", "tune"])
def test_replays_of_a_history_name_the_fix(command: list[str], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from prioritizer.history.trace import HistoryRow, write_rows
    path = tmp_path / "h.csv"
    with open(path, "w") as handle:   # a job whose GPUs accounting lost, exported as CPU-only
        write_rows([HistoryRow("1", "u", "a", "p", 0, 0, 0, 1, 10, 10, 10, 10, "COMPLETED", 1,
                               "self")], handle)
    monkeypatch.setattr(history_cli, "SlurmClient", _Slurm)
    dlprio([*command, "--trace", str(path)])
    name = "dlprio " + " ".join(command[:2] if command[0] == "history" else command[:1])
    assert (f"{name}: note: this cluster's Slurm accounting does not track GPUs (no gres/gpu in "
            "AccountingStorageTRES): histories exported here leave out the jobs whose GPU "
            f"counts are unknown, so replays miss their load; to count them, {FIX}"
            ) in capsys.readouterr().err.splitlines()
