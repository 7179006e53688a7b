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


@pytest.mark.parametrize(("text", "reason"), [
    pytest.param('{"version": 1, "generated_at": 1, "cycle": 1e400, "jobs": []}',
                 "cycle: expected a count", id="infinite-cycle"),
    pytest.param('{"version": 1, "generated_at": 1, "cycle": 2.5, "jobs": []}',
                 "cycle: expected a count", id="fractional-cycle"),
    pytest.param('{"version": 1, "generated_at": 1, "cycle": 1, "jobs": [], '
                 '"thresholds_gpu_s": [3250, 1e400]}',
                 "thresholds_gpu_s: expected a list of finite numbers", id="infinite-threshold"),
    pytest.param("[" * 100_000, "nested too deeply", id="deep-json"),
])
def test_a_value_python_cannot_hold_is_a_malformed_snapshot(tmp_path: Path, text: str,
                                                            reason: str) -> None:
    """JSON's 1e400 is infinity to Python and 100,000 brackets pass its recursion limit: each
    is a SnapshotError naming the file and the field (dlqueue's note), not an OverflowError or
    RecursionError."""
    path = tmp_path / "snapshot.json"
    path.write_text(text)
    with pytest.raises(SnapshotError) as err:
        read_snapshot(path)
    assert str(err.value) == f"{path}: malformed snapshot ({reason})"


_GOOD_FORECAST = ('{"made_at": 1000, "draws": 3, "horizon_s": 86400, "stale_after_s": 900, '
                  '"jobs": {"7": {"start": [1000, 1100, 1200], "finish": null, '
                  '"preempt_chance": 0, "ahead": 0, "first_ahead": []}}}')


@pytest.mark.parametrize(("swap", "field"), [
    (('"generated_at": 1000', '"generated_at": NaN'), "generated_at: expected epoch seconds"),
    (('"generated_at": 1000', '"generated_at": Infinity'), "generated_at: expected epoch"),
    (('"generated_at": 1000', '"generated_at": -1e300'), "generated_at: expected epoch"),
    (('"made_at": 1000', '"made_at": NaN'), r"forecast\.made_at: expected epoch seconds"),
    (('"made_at": 1000', '"made_at": 1e300'), r"forecast\.made_at: expected epoch seconds"),
    (('"horizon_s": 86400', '"horizon_s": Infinity'), r"forecast\.horizon_s: expected a number"),
    (('"stale_after_s": 900', '"stale_after_s": NaN'), r"forecast\.stale_after_s: expected"),
    (("[1000, 1100, 1200]", "[1000, NaN, 1200]"), r"forecast\.jobs\.7\.start: expected"),
    (("[1000, 1100, 1200]", "[1000, 1e300, 1200]"), r"forecast\.jobs\.7\.start: expected"),
    (('"finish": null', '"finish": [-1, 0, 1]'), r"forecast\.jobs\.7\.finish: expected"),
    (('"preempt_chance": 0', '"preempt_chance": 1.5'),
     r"forecast\.jobs\.7\.preempt_chance: expected a share from 0 to 1"),
    (('"preempt_chance": 0', '"preempt_chance": -0.1'), r"forecast\.jobs\.7\.preempt_chance"),
    (('"ahead": 0', '"ahead": -3'), r"forecast\.jobs\.7\.ahead: expected a count"),
    (('"ahead": 0', '"ahead": true'), r"forecast\.jobs\.7\.ahead: expected a count"),
    (('"first_ahead": []', '"first_ahead": ["x"]'), r"forecast\.jobs\.7\.first_ahead"),
    (('"first_ahead": []', '"first_ahead": [], "sharing": "half"'),
     r"forecast\.jobs\.7\.sharing: expected one of 'shard', 'opportunistic', 'opportunistic shard'"),
    (('"draws": 3', '"draws": 3, "sharing_jobs": -1'), r"forecast\.sharing_jobs: expected a count"),
], ids=["gen-nan", "gen-inf", "gen-huge-negative", "made-nan", "made-huge", "horizon-inf",
        "stale-nan", "start-nan", "start-huge", "finish-negative", "chance-above-1",
        "chance-negative", "ahead-negative", "ahead-bool", "first-ahead-text", "sharing-unknown",
        "sharing-jobs-negative"])
def test_a_time_that_is_no_date_is_named(tmp_path: Path, swap: tuple[str, str],
                                         field: str) -> None:
    # JSON as Python writes and reads it takes NaN and Infinity; a view then writes the time
    # as a date or a span, which fails on such a value, so the reader names it instead
    text = ('{"version": 1, "generated_at": 1000, "cycle": 1, "jobs": [], '
            f'"forecast": {_GOOD_FORECAST}}}')
    path = tmp_path / "snapshot.json"
    path.write_text(text)
    assert read_snapshot(path).forecast["jobs"]["7"]["start"] == [1000, 1100, 1200]
    assert swap[0] in text
    path.write_text(text.replace(swap[0], swap[1]))
    with pytest.raises(SnapshotError, match=field):
        read_snapshot(path)
