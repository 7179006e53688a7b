"""``dlprio once --dry-run`` writes nothing: no ledger (nor its directory) when there is none,
the ledger unchanged byte for byte when there is one, so ``status`` and ``explain`` afterwards
see what the daemon last recorded, not a dry run's half cycle. Slurm is
:class:`daemon_unit_helpers.FakeSlurm`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from daemon_unit_helpers import FakeSlurm, sinfo_node, squeue_job
from prioritizer.cli import main as dlprio
from prioritizer.daemon import cli as daemon_cli
from prioritizer.daemon.ledger import Ledger


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = FakeSlurm(sinfo=[sinfo_node("node1", 8)])
    fake.squeue = [squeue_job(1, "RUNNING", nodes="node1", start=100),
                   squeue_job(2, "PENDING", reason="Resources")]
    monkeypatch.setattr(daemon_cli, "SlurmClient", lambda **kw: fake)
    return fake


def _config(tmp_path: Path, ledger: Path) -> str:
    path = tmp_path / "dlprio.yaml"
    path.write_text(yaml.safe_dump({"metrics_port": 0, "ledger_path": str(ledger),
                                    "snapshot_path": str(tmp_path / "snap" / "s.json")}))
    return str(path)


def _files(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_dry_run_without_a_ledger_creates_none(tmp_path: Path, slurm: FakeSlurm,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "var" / "ledger.sqlite"
    config = _config(tmp_path, ledger)
    assert dlprio(["once", "--dry-run", "--config", config]) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dlprio.yaml"]
    rows = [line.split()[:4] for line in out.splitlines()[1:3]]
    assert rows == [["0", "2", "PENDING", "Q0"], ["-", "1", "RUNNING", "Q2"]]
    assert out.splitlines()[-1] == (f"dry run: nothing written; no ledger at {ledger}, decided "
                                    "as a first cycle")
    assert dlprio(["status", "--config", config]) == 5     # still no ledger (NOT_FOUND)
    assert slurm.calls == []                                # and nothing sent to Slurm


def test_dry_run_leaves_the_ledger_as_it_was(tmp_path: Path, slurm: FakeSlurm,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "var" / "ledger.sqlite"
    ledger.parent.mkdir()
    with Ledger(ledger) as led:
        led.set_meta("cycle", "41")
        with led.transaction():
            led.upsert_job(1, user="alice", account="acct", partition="gpu", state="RUNNING",
                           gpus=8, submit_time=10, restart_count=0, now=50)
            led.set_queue(1, 1, 60.0, 0.0, "demoted", 60.0, False)
    before = _files(tmp_path / "var")
    config = _config(tmp_path, ledger)
    assert dlprio(["once", "--dry-run", "--config", config]) == 0
    out = capsys.readouterr().out
    assert _files(tmp_path / "var") == before
    assert os.listdir(tmp_path / "var") == ["ledger.sqlite"]
    assert not (tmp_path / "snap").exists()
    assert out.splitlines()[-1] == f"dry run: nothing written; decided on a copy of the ledger {ledger}"
    with Ledger(ledger, readonly=True) as led:
        assert led.meta("cycle") == "41" and [j.job_id for j in led.jobs()] == [1]
        assert led.job(1).queue == 1


def test_a_misspelt_partition_is_exit_2_not_an_empty_table(
        tmp_path: Path, slurm: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    """``partitions: [gpux]`` on a cluster of partition gpu would manage nothing: the first
    cycle refuses it in one line naming the file, the key and the partitions there are."""
    config = Path(_config(tmp_path, tmp_path / "ledger.sqlite"))
    config.write_text(config.read_text() + "partitions: [gpux]\n")
    assert dlprio(["once", "--dry-run", "--config", str(config)]) == 2
    assert capsys.readouterr() == ("", f"dlprio: config: {config}: partitions: 'gpux' is not a "
                                       "partition of the cluster (it has: gpu); fix the name\n")
    assert slurm.calls == []
