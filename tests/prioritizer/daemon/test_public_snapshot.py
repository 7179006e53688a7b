"""The daemon's public snapshot file: round trip, atomic mode 0644, malformed files named."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from prioritizer.daemon.snapshot import PublicJob, PublicSnapshot, SnapshotError, read_snapshot, write_snapshot


def test_round_trip_and_world_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))   # no ClusterName to add
    job = PublicJob(job_id=7, user="ana", state="PENDING", queue=1, attained_gpu_s=3300.0, preemptions=1,
                    promotions=0, restart_count=1, rank=0, reason="demoted: 3300 GPU·s >= 3250")
    snap = PublicSnapshot(generated_at=100.0, cycle=3, mode="priority", thresholds_gpu_s=(3250.0, 7200.0),
                          jobs=(job,))
    path = tmp_path / "sub" / "snapshot.json"
    write_snapshot(path, snap)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert read_snapshot(path) == snap
    assert read_snapshot(path).by_id()[7].queue == 1  # type: ignore[union-attr]


def test_missing_file_means_no_daemon(tmp_path: Path) -> None:
    assert read_snapshot(tmp_path / "absent.json") is None


@pytest.mark.parametrize("text", ["[1]", "{not json", '{"version": 2, "jobs": []}', '{"version": 1}',
                                  '{"version": 1, "generated_at": 1, "cycle": 1, "jobs": [{"job_id": 1}]}'])
def test_malformed_snapshot_names_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "snapshot.json"
    path.write_text(text)
    with pytest.raises(SnapshotError, match="snapshot.json"):
        read_snapshot(path)
