"""`dlprio history export/check --ledger`: a ledger that is valid SQLite with bad cells is exit
2 naming the ledger, row and column; a directory, a missing file or a name
with control characters is one clear line; the "in phase with the daemon cycles"
line appears only when the replay has decision ticks to phase."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from prioritizer.cli import main as dlprio
from prioritizer.daemon.ledger import Ledger
from prioritizer.history import cli as history_cli
from prioritizer.history import ledger_read
from slurm_plugin.slurm.accounting import AccountingRecord

HISTORY = ("job_id,user,account,partition,submit_time,eligible_time,num_gpu,num_nodes,work_gpu_s,"
           "duration,end_time,jct,state,attempts,ended_by,preemptions\n"
           "6,u,a,gpu,100,100,1,1,10,10,110,10,COMPLETED,1,self,0\n"
           "7,u,a,gpu,100,100,1,1,20,20,120,20,COMPLETED,1,self,0\n")


def _ledger(path: Path) -> Path:
    with Ledger(path) as ledger:
        with ledger.transaction():
            ledger.upsert_job(6, user="u", account="a", partition="gpu", state="RUNNING", gpus=1,
                              submit_time=0, restart_count=0, now=0)
            ledger.note_observed(100.0)
        intent = ledger.add_intent(6, None, "USR2", 10, 0, 100)
        ledger.mark_signal(intent, 100, 110)
        ledger.mark_requeue(intent, 107)
    return path


def _damage(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql)
    conn.close()


@pytest.mark.parametrize(("sql", "where"), [
    ("UPDATE intents SET signal_at='x'", "intents row id=1: signal_at is 'x', not an epoch"),
    ("UPDATE intents SET requeue_at='nan'", "intents row id=1: requeue_at is 'nan', not an epoch"),
    ("UPDATE jobs SET preemptions=-5", "jobs row job_id=6: preemptions is -5, not a whole"),
    ("UPDATE jobs SET preemptions=1.5", "jobs row job_id=6: preemptions is 1.5, not a whole")])
def test_export_refuses_a_damaged_ledger(sql: str, where: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = _ledger(tmp_path / "l.sqlite")
    _damage(path, sql)
    with pytest.raises(history_cli.CliError) as err:
        ledger_read.ledger_facts(str(path))
    assert err.value.exit_code == 2
    assert str(err.value).startswith(f"--ledger {path}: the ledger is damaged ({where}")


@pytest.mark.parametrize(("sql", "where"), [
    ("UPDATE meta SET value='garbage' WHERE key='observed_at'",
     "meta key observed_at: value 'garbage' is not an epoch"),
    ("UPDATE meta SET value='inf' WHERE key='observed_at'",
     "meta key observed_at: value 'inf' is not an epoch"),
    ("UPDATE intents SET created='x'", "intents row id=1: created is 'x', not an epoch")])
def test_check_refuses_a_damaged_ledger(sql: str, where: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = _ledger(tmp_path / "l.sqlite")
    if "meta" in sql:
        _damage(path, "DELETE FROM intents")
    _damage(path, sql)
    trace = tmp_path / "h.csv"
    trace.write_text(HISTORY)
    rc = dlprio(["history", "check", "--trace", str(trace), "--nodes", "1", "--gpus-per-node",
                 "8", "--start-latency", "0", "--ledger", str(path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"dlprio: --ledger {path}: the ledger is damaged "
                                      f"({where}"), err
    assert err.count("\n") == 1


def test_export_never_writes_a_trace_the_check_refuses(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Even a value no ledger check foresaw: the trace is parsed as `check` would before it is
    written (here a negative preemption count from a stubbed ledger reader)."""
    from prioritizer.history.export import LedgerFacts

    record = AccountingRecord(job_id=6, het_job_id=None, het_offset=0, array_job_id=None,
                              array_task_id=None, name="n", user="u", account="a",
                              partition="gpu", comment="", state="COMPLETED", submit=100,
                              eligible=100, start=100, end=110, time_limit_s=None, gpus=1,
                              nodes=1, ran=True)

    class Client:
        def __init__(self, timeout_s: float) -> None:
            pass

        def accounting(self, start: str, end: str) -> list:
            return [record]

        def accounting_jobs(self, ids: list[int]) -> list:   # submitted before the window
            return [record]

    monkeypatch.setattr(history_cli, "SlurmClient", Client)
    monkeypatch.setattr(history_cli, "ledger_facts",
                        lambda path: {6: LedgerFacts(-5, 0.0, False)})
    out = tmp_path / "h.csv"
    rc = dlprio(["history", "export", "--ledger", str(tmp_path / "l.sqlite"), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "preemptions" in err and "nothing written" in err, err
    assert not out.exists()


@pytest.mark.parametrize("name", ["dir", "missing.sqlite", "new\nline.sqlite", "\x1b[2Jx.sqlite"])
def test_bad_ledger_path_is_one_clean_line(name: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "dir").mkdir()
    trace = tmp_path / "h.csv"
    trace.write_text(HISTORY)
    path = str(tmp_path / name)
    rc = dlprio(["history", "check", "--trace", str(trace), "--nodes", "1", "--gpus-per-node",
                 "8", "--start-latency", "0", "--ledger", path])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "\x1b" not in err, err
    assert "disk I/O" not in err
    reason = "is a directory" if name == "dir" else "no such file"
    assert f": {reason}" in err and err.count(reason) == 1 and err.count("sqlite") <= 1


def test_control_characters_in_trace_path_are_escaped(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    rc = dlprio(["simulate", "--trace", str(tmp_path / "\x1b[2Jx.csv"), "--nodes", "1",
                 "--gpus-per-node", "8"])
    err = capsys.readouterr().err
    assert rc == 2 and "\x1b" not in err and "\\x1b" in err, err


@pytest.mark.parametrize(("config", "phased"), [
    (None, False),                                              # fifo-fit: Slurm alone
    ("policy:\n  policy: tiresias-las\n  decision_interval_s: 0\n", False),
    ("policy:\n  policy: tiresias-las\n  decision_interval_s: 5\n", True)])
def test_phase_line_only_when_ticks_exist(config: str | None, phased: bool, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _ledger(tmp_path / "l.sqlite")
    trace = tmp_path / "h.csv"
    trace.write_text(HISTORY)
    argv = ["history", "check", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "8",
            "--start-latency", "0", "--ledger", str(path), "--summary-only"]
    if config:
        (tmp_path / "c.yaml").write_text(config)
        argv += ["--config", str(tmp_path / "c.yaml")]
    assert dlprio(argv) == 0
    captured = capsys.readouterr()
    assert ("in phase with the daemon cycles" in captured.out) is phased
    assert ("has no decision ticks" in captured.err) is not phased


FIX = "give the daemon's ledger file (ledger_path in its dlprio.yaml)"


def _yaml(path: Path) -> Path:
    path.write_text("ledger_path: /var/lib/dlprio/ledger.sqlite\n")
    return path


def _other_db(path: Path) -> Path:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE notes (x)")
    conn.close()
    return path


@pytest.mark.parametrize("command", [["history", "export", "-o", "out.csv"],
                                     ["history", "check", "--trace", "h.csv", "--nodes", "1",
                                      "--gpus-per-node", "8", "--start-latency", "0"]])
@pytest.mark.parametrize(("make", "name", "what"), [
    (_yaml, "dlprio.yaml", "not a dlprio ledger (not an SQLite database); " + FIX),
    (_other_db, "notes.db", "not a dlprio ledger (an SQLite database with the tables notes); "
                            + FIX),
    (lambda p: _damage(_ledger(p), "UPDATE jobs SET preemptions=-5") or p, "l.sqlite",
     "the ledger is damaged (jobs row job_id=6: preemptions is -5, not a whole number >= 0); "
     + FIX + ", a sound copy of it (from a backup), or leave out --ledger")])
def test_a_ledger_option_naming_another_file_says_to_give_the_daemons_ledger(
        command: list[str], make, name: str, what: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--ledger dlprio.yaml`` (the config given for the ledger), another SQLite database, a
    damaged ledger: one line naming --ledger and the fix, never "ledger_path another file" (a
    config key) nor moving the user's file away; the file is left as it was, before Slurm is
    asked."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h.csv").write_text(HISTORY)
    path = make(tmp_path / name)
    data = path.read_bytes()
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-slurm.conf"))
    rc = dlprio([*command, "--ledger", str(path)])
    err = capsys.readouterr().err
    assert (rc, err) == (2, f"dlprio: --ledger {path}: {what}\n")
    assert path.read_bytes() == data and not (tmp_path / "out.csv").exists()
