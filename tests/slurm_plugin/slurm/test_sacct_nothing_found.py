"""sacct's answer for a selection that holds no job is no records, not a failure.

Slurm 22.05's ``sacct --duplicates --json`` answers a window or job id without jobs with exit
status 0, an empty ``jobs`` list and the error "Nothing found with query" (captured on a
dlcluster with slurmdbd whose accounting held no job yet). Every caller (the daemon's learned
Gittins samples and ledger rebuild, ``dlprio history export``, auto_tune's replay) reads that
as "no jobs", and slurmctld is not asked about it (sacct needs slurmdbd only).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_plugin.slurm.client import SlurmClient, SlurmRefused

#: sacct 22.05.8's whole answer for an empty window (its text, as printed)
EMPTY_22_05 = """{
  "meta": {
    "plugin": {"type": "openapi\\/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"},
    "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}
  },
  "errors": [
    {
      "description": "Nothing found",
      "error_number": 9003,
      "error": "Nothing found with query",
      "source": "slurmdb_jobs_get"
    }
  ],
  "jobs": [
  ]
}"""


def _fake_slurm(tmp_path: Path, sacct_json: str, ctld_up: bool = False) -> None:
    """``squeue --version`` says 22.05.8; ``sacct`` prints ``sacct_json``; ``scontrol ping``
    fails (slurmctld down: an empty answer must not depend on it) unless ``ctld_up``."""
    (tmp_path / "answer.json").write_text(sacct_json)
    scripts = {
        "squeue": 'echo "slurm-wlm 22.05.8"\n',
        "sacct": f'cat "{tmp_path}/answer.json"\n',
        "scontrol": ('echo "Slurmctld(primary) at x is UP"\n' if ctld_up
                     else 'echo "Slurmctld(primary) at x is DOWN"; exit 1\n'),
    }
    for name, body in scripts.items():
        path = tmp_path / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)


@pytest.fixture(autouse=True)
def _no_slurm_conf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)


def test_an_empty_window_is_no_records(tmp_path: Path) -> None:
    _fake_slurm(tmp_path, EMPTY_22_05)
    client = SlurmClient(timeout_s=5, bin_dir=str(tmp_path))
    assert client.accounting("now-30days") == []
    assert client.accounting_jobs([7, 8]) == []
    assert client.accounting_runs(7) == []


def test_another_sacct_error_still_raises(tmp_path: Path) -> None:
    other = EMPTY_22_05.replace('"Nothing found with query"', '"Invalid user id"')
    _fake_slurm(tmp_path, other, ctld_up=True)
    with pytest.raises(SlurmRefused) as info:
        SlurmClient(timeout_s=5, bin_dir=str(tmp_path)).accounting("now-30days")
    assert "Invalid user id" in info.value.message
