"""The ledger's schema version: ordered migrations from ``PRAGMA user_version``.

``tests/fixtures/ledger/main-a99a6b1.sqlite`` is a regression fixture: a ledger written
before schema versions existed (``PRAGMA user_version`` 0), made by the script beside it.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from prioritizer.daemon.ledger import SCHEMA_VERSION, Ledger, LedgerVersionError

FIXTURE = Path(__file__).parents[2] / "fixtures" / "ledger" / "main-a99a6b1.sqlite"
TABLES = ("meta", "jobs", "runs", "intents")


def _dump(path: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in TABLES}
    finally:
        conn.close()


def test_ledger_of_todays_main_upgrades_without_losing_a_row(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    shutil.copy(FIXTURE, path)
    before = _dump(path)
    assert [len(before[t]) for t in TABLES] == [2, 3, 3, 2]
    with Ledger(path) as ledger:
        assert ledger.migrated == list(range(1, SCHEMA_VERSION + 1))
        # every old value is still there, new columns take their defaults
        assert ledger.job(101).restart_count == 1 and ledger.job(101).queue == 1
        assert ledger.job(102).applied == "site_factor:12345"
        assert ledger.job(103).ended_at == 1700000300.0
        assert (ledger.job(102).refusals, ledger.job(102).retry_at) == (0, None)
        assert ledger.service(101, now=1700001000.0)[0] == 2 * 200 + 2 * 400
        assert [i.outcome for i in ledger.intents(101)] == ["requeued", None]
        assert ledger.meta("cycle") == "41"
    after = _dump(path)
    for table in TABLES:
        width = len(before[table][0])
        assert [row[:width] for row in after[table]] == before[table], table
    with Ledger(path) as again:                      # already current: nothing to apply
        assert again.migrated == []


def test_read_only_views_read_an_old_ledger_without_changing_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    shutil.copy(FIXTURE, path)
    with Ledger(path, readonly=True) as ledger:
        assert ledger.job(102).refusals == 0 and len(ledger.jobs()) == 3
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 0


def test_newer_ledger_is_refused_with_one_clear_line_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    shutil.copy(FIXTURE, path)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    for readonly in (False, True):
        with pytest.raises(LedgerVersionError) as err:
            Ledger(path, readonly=readonly)
        message = str(err.value)
        assert "\n" not in message
        assert f"schema version {SCHEMA_VERSION + 1} is newer" in message and str(path) in message
    assert path.read_bytes() == before


def test_cli_says_so_and_exits_2(tmp_path: Path) -> None:
    import subprocess
    import sys
    import yaml
    path = tmp_path / "ledger.sqlite"
    shutil.copy(FIXTURE, path)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    cfg = tmp_path / "dlprio.yaml"
    cfg.write_text(yaml.safe_dump({"ledger_path": str(path), "metrics_port": 0}))
    proc = subprocess.run([sys.executable, "-m", "prioritizer.cli", "status", "--config", str(cfg)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("dlprio: ledger: ")
    assert "is newer than this dlprio reads" in proc.stderr and proc.stderr.count("\n") == 1
