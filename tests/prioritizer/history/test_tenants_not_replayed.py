"""``dlprio history check`` and ``dlprio tune`` replay every job under the policy alone: with
``virtual_clusters`` in ``--config`` they say so in one note on stderr, and say nothing of
tenants without them (the daemon's ``auto_tune``: tests/prioritizer/daemon/test_auto_tune.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main as dlprio
from prioritizer.history import cli as history_cli
from prioritizer.history.trace import HistoryRow, write_rows
from slurm_plugin.slurm.client import SlurmUnreachable

TENANTS = ("virtual_clusters:\n  nlp: {account: nlp, guaranteed_gpus: 4}\n"
           "  vision: {account: vision, guaranteed_gpus: 4}\n")


class _NoSlurm:
    def __init__(self, timeout_s: float) -> None:
        pass

    def show_config(self) -> dict:
        raise SlurmUnreachable(["scontrol"], "no answer")


def _history(path: Path) -> None:
    """Thirty 1-GPU jobs of 600 s, one every 4 hours (five days of submissions)."""
    with open(path, "w", newline="") as handle:
        write_rows((HistoryRow(str(i + 1), "u", "nlp", "gpu", i * 14400.0, i * 14400.0, 1, 1,
                               600.0, 600.0, i * 14400.0 + 600, 600.0, "COMPLETED", 1, "self")
                    for i in range(30)), handle)


@pytest.mark.parametrize(("command", "name"), [
    (["history", "check", "--start-latency", "0"], "dlprio history check"),
    (["tune", "--grid", "knob=4,8"], "dlprio tune"),
    (["tune", "--grid", "knob=4,8", "--walk-forward", "2"], "dlprio tune"),
], ids=["history-check", "tune", "tune-walk-forward"])
@pytest.mark.parametrize("tenants", [True, False], ids=["tenants", "none"])
def test_a_replay_says_it_leaves_the_virtual_clusters_out(
        command: list[str], name: str, tenants: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    trace, config = tmp_path / "h.csv", tmp_path / "dlprio.yaml"
    _history(trace)
    config.write_text("policy: {policy: tiresias-las}\n" + (TENANTS if tenants else ""))
    monkeypatch.setattr(history_cli, "SlurmClient", _NoSlurm)
    assert dlprio([*command, "--nodes", "1", "--gpus-per-node", "8", "--trace", str(trace),
                   "--config", str(config)]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "virtual_clusters" in line]
    assert notes == ([f"{name}: note: {config}: virtual_clusters: not replayed; the replay "
                      "orders all jobs by the policy alone (dlprio simulate --tenants FILE "
                      "replays them)"] if tenants else [])
