"""Regression fixtures: the per-job CSV (``--jobs-csv``) of ``dlprio simulate`` is
byte-identical to what the simulator that called ``decide()`` from scratch at
every event produced, stored in tests/fixtures/regression/
(generated once by ``scripts/regression_fixtures.py make``; see the README there).

By default this checks every ``60_job.csv`` case (6 policies × n2g4/n4g4 × both placements
× zero cost/costs) and a few ITP cluster04 cases that exercise preemption, promotion,
checkpoint grace and requeue delays; the whole matrix (Philly window and ITP, all cases) is
``scripts/regression_fixtures.py check`` (minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main
from regression_helpers import DEFAULT, Case, read_fixture


@pytest.mark.parametrize("case", DEFAULT, ids=[c.name for c in DEFAULT])
def test_jobs_csv_is_byte_identical(case: Case, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "jobs.csv"
    assert main(case.argv(str(out))) == 0
    capsys.readouterr()
    assert out.read_bytes() == read_fixture(case.fixture), f"{case.name} differs"
