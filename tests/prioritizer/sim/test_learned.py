"""--durations-from: the Gittins distribution learned from a trace's finished jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.policy.durations import load_samples
from prioritizer.sim.learned import learned_distribution, samples_from_trace
from prioritizer.sim.traces import read_trace


def _itp(path: Path, rows: list[tuple[int, int, int]]) -> Path:
    path.write_text("job_id,submission_time,duration,num_gpu\n"
                    + "".join(f"j{i},{s},{d},{g}\n" for i, (s, d, g) in enumerate(rows)))
    return path


def test_samples_are_gpu_seconds_of_each_job(tmp_path: Path) -> None:
    trace = read_trace(_itp(tmp_path / "t.csv", [(0, 10, 2), (5, 7, 4), (6, 3, 0)]))
    assert samples_from_trace(trace) == [20, 28]      # the 0-GPU row is not a sample


def test_too_few_samples_fall_back_to_packaged_with_a_note() -> None:
    dist, note = learned_distribution([5.0, 6.0], min_samples=3, source="x.csv")
    assert dist.samples == tuple(sorted(load_samples()))
    assert "only 2 finished job(s) in x.csv (minimum 3)" in note
    dist, note = learned_distribution([5.0, 6.0, 7.0], min_samples=3)
    assert dist.samples == (5.0, 6.0, 7.0) and "learned from 3" in note


def test_simulate_durations_from(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trace = _itp(tmp_path / "t.csv", [(i * 10, 30 + i, 1 + i % 4) for i in range(12)])
    args = ["simulate", "--trace", str(trace), "--nodes", "2", "--gpus-per-node", "4",
            "--policy", "tiresias-gittins", "--durations-from", str(trace)]
    assert main(args + ["--durations-min", "10"]) == 0
    assert "learned from 12 finished job(s)" in capsys.readouterr().err
    assert main(args) == 0
    assert "using the packaged distribution" in capsys.readouterr().err
    assert main(args + ["--durations", str(trace)]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(args + ["--durations-min", "0"]) == 2
