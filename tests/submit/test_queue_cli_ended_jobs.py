"""``dlqueue -j ID`` for a job that has ended or that the table does not show: the view says
so instead of ending silently after the header (with a fake client and a fresh snapshot)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from prioritizer.daemon import snapshot as public_snapshot
from slurm_plugin.common.exits import Exit
from slurm_plugin.slurm.records import filter_jobs
from submit import queue_cli
from queue_helpers import make_job, pub, snapshot

NOW = 1_000_000.0
JOBS = [
    make_job(6, state="COMPLETED", reason="None", gpus=4, gpus_per_node=4, nodes="node2",
             node_list=("node2",), submit_time=int(NOW) - 100, start_time=int(NOW) - 77,
             end_time=int(NOW) - 50),
    make_job(12, reason="Resources", gpus=4, gpus_per_node=4, submit_time=int(NOW) - 20),
]
#: made 5 s ago: job 12 starts in 25 min in the median draw
FORECAST = {"made_at": NOW - 5, "draws": 20, "horizon_s": 86400.0, "stale_after_s": 17.0,
            "jobs": {"12": {"start": [NOW + 600, NOW + 1500, NOW + 3600],
                            "finish": [NOW + 900, NOW + 2000, NOW + 9000],
                            "preempt_chance": 0.0, "ahead": 0, "first_ahead": []}}}


class FakeClient:
    def jobs(self, **filters):
        return filter_jobs(JOBS, **filters)


@pytest.fixture
def snap_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(queue_cli, "SlurmClient", FakeClient)
    monkeypatch.setattr(queue_cli.time, "time", lambda: NOW)
    path = tmp_path / "snap.json"
    snap = snapshot(pub(12, 0, 0, rank=0), generated_at=NOW - 2)
    public_snapshot.write_snapshot(path, dataclasses.replace(snap, forecast=FORECAST))
    return str(path)


def test_an_ended_job_shown_with_t_all_says_it_has_no_forecast(
        snap_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert queue_cli.main(["--snapshot", snap_path, "-t", "all", "-j", "6,12"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out.index("job 6:") + 1 == out.index("  forecast: none (the job has ended: COMPLETED)")
    assert "    start: ~10m to ~60m (median ~25m)" in out


def test_an_id_the_table_leaves_out_is_named_under_it(
        snap_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert queue_cli.main(["--snapshot", snap_path, "-j", "6,999,12"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[1:2]] == ["12"] and out[2] == (
        "job 6: not in the table: no such job, or it ended, or -u/-p/-t leave it out "
        "(-t all adds jobs that ended within Slurm's MinJobAge, sacct -j 6 older ones)")
    assert out[3].startswith("job 999: not in the table:") and out[4] == "job 12:"


def test_no_named_job_in_the_table_is_not_found(snap_path: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """As ``squeue -j ID`` exits 1 ("Invalid job id specified"), so that a script can tell a
    job that is gone; one job of two in the table is success."""
    assert queue_cli.main(["--snapshot", snap_path, "-j", "999,998"]) == 5
    out = capsys.readouterr().out
    assert "job 999: not in the table" in out and "job 998: not in the table" in out
    assert queue_cli.main(["--snapshot", snap_path, "-j", "999,12"]) == 0


def test_with_json_the_note_goes_to_stderr(snap_path: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert queue_cli.main(["--snapshot", snap_path, "--json", "-j", "999_3"]) == Exit.NOT_FOUND
    captured = capsys.readouterr()
    assert json.loads(captured.out) == []
    assert captured.err.startswith("dlqueue: job 999_3: not in the table:")
    assert "sacct -j 999 older ones" in captured.err


def test_without_a_snapshot_each_job_says_it_has_no_forecast(
        snap_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "none.json")
    assert queue_cli.main(["--snapshot", missing, "-t", "all", "-j", "6,12"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-4:] == ["job 12:", "  forecast: none (no current dlprio snapshot of this "
                        "cluster: see the note above)",
                        "job 6:", "  forecast: none (the job has ended: COMPLETED)"]
    assert any(line.startswith(f"daemon snapshot not found at {missing}") for line in out)
