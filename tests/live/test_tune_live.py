"""``dlprio tune --executor slurm`` live: the 18-point grid (plus the current config) runs as
ONE Slurm job array on the dlcluster, and gives exactly the figures of the local process pool."""

from __future__ import annotations

from pathlib import Path

import pytest
from live_helpers import wait_cluster_idle

from prioritizer.cli import main
from slurm_plugin.slurm.client import SlurmClient

TRACE = Path(__file__).resolve().parents[2] / "data" / "traces" / "tiresias" / "60_job.csv"
GRID = "thresholds=1000/5000,3250/7200,10000/40000;knob=4,8,16;queues=2,3"


def _ranking(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("rank"))
    return lines[start:start + 20]


@pytest.mark.live
@pytest.mark.releases
def test_tune_on_a_slurm_job_array_matches_local(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    wait_cluster_idle(SlurmClient())
    args = ["tune", "--trace", str(TRACE), "--nodes", "4", "--gpus-per-node", "4", "--grid", GRID]
    assert main(args + ["--executor", "slurm", "--workdir", str(tmp_path / "array")]) == 0
    captured = capsys.readouterr()
    slurm = _ranking(captured.out)
    assert "submitted job array" in captured.err
    results = sorted((tmp_path / "array").glob("result-*.json"))
    assert len(results) == 19                             # 18 grid points + the current config
    assert main(args + ["--executor", "local", "--workers", "2"]) == 0
    local = _ranking(capsys.readouterr().out)
    assert slurm == local
    assert sum(1 for line in slurm[1:] if "thresholds=" in line) == 18
