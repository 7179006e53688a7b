"""The daemon's own files as an admin meets them: ``dlprio status`` and ``explain`` read a ledger
without writing beside it, a file that is no ledger is refused before anything touches it, a
stdout failure is not a ledger failure, a clock set back is not "fresh", and a snapshot or a
config slip is one line. Ledgers are built by hand with :class:`Ledger`; no Slurm is needed.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from prioritizer.daemon import explain
from prioritizer.cli import main
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.forecast_text import detail_lines
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.snapshot import SNAPSHOT_MAX_BYTES, SnapshotError, read_snapshot
from prioritizer.policy.config import PolicyConfig

BIN = Path(sys.executable).parent


def _ledger(path: Path, queue: int = 1) -> Path:
    """A closed ledger at ``path``: job 40 pending in ``queue`` after one 15 s run on 4 GPUs,
    and a last cycle at epoch 1,000."""
    with Ledger(path) as led:
        with led.transaction():
            led.upsert_job(40, user="alice", account="a", partition="gpu", state="PENDING",
                           gpus=4, submit_time=0, restart_count=0, now=0)
            led.start_run(40, 0, 4, now=0)
            led.close_run(40, 0, 15, "requeue")
            led.set_queue(40, queue, 10, 0.0, "demoted", now=10, promoted=False)
        led.set_meta("observed_at", "1000")
    return path


def _config(tmp_path: Path, ledger: Path, extra: str = "") -> Path:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"ledger_path: {ledger}\nsnapshot_path: {tmp_path}/snap.json\n"
                   f"metrics_port: 0\n{extra}")
    return cfg


@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["explain", "40"]])
def test_status_and_explain_create_nothing_beside_the_ledger(tmp_path: Path, command) -> None:
    """A WAL ledger read with ``mode=ro`` alone gets ``-wal`` and ``-shm`` files created beside
    it, and fails outright in a read-only directory; read as immutable it gets neither."""
    ledger = _ledger(tmp_path / "led")
    cfg = _config(tmp_path, ledger)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([*command, "--config", str(cfg)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == before == ["c.yaml", "led"]


def test_status_reads_a_ledger_in_a_read_only_directory(tmp_path: Path) -> None:
    """The case an admin inspects a stuck ledger in: a directory this user cannot write. Root
    writes anywhere, so as root the command runs as ``nobody`` (setpriv(1)) on a ledger that
    user owns, in a directory of root's; otherwise the directory is made read-only."""
    base = Path(tempfile.mkdtemp(dir="/tmp"))   # pytest's own tmp dirs are root's alone (0700)
    try:
        base.chmod(0o755)
        ledger = _ledger(base / "led")
        cfg = _config(base, ledger)
        cfg.chmod(0o644)
        if os.geteuid() == 0:
            os.chown(ledger, 65534, 65534)
            argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        else:
            base.chmod(0o555)
            argv = []
        proc = subprocess.run([*argv, str(BIN / "dlprio"), "status", "--config", str(cfg)],
                              capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stderr) == (0, "")
        assert proc.stdout.startswith("ledger as of 1970-01-01 00:16:40 UTC")
        assert "alice" in proc.stdout
        assert sorted(p.name for p in base.iterdir()) == ["c.yaml", "led"]
    finally:
        base.chmod(0o755)
        shutil.rmtree(base)


@pytest.mark.parametrize("command", [["status"], ["once", "--dry-run"]])
def test_a_ledger_this_user_may_not_read_is_a_one_line_refusal(tmp_path: Path,
                                                               command: list[str]) -> None:
    """The daemon writes its ledger 0600: another user's ``dlprio status`` or ``once --dry-run``
    (which reads it as status does: a copy in memory, no lock) is refused with exit 2 and the
    fix (run it as the daemon's user, or read the queue with dlqueue), before Slurm is asked;
    not the storage failure (7) that SQLite's "unable to open database file" would give. As
    root the command runs as ``nobody`` (setpriv(1)) on root's ledger; otherwise the ledger is
    made mode 0."""
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        base.chmod(0o755)
        ledger = _ledger(base / "led")
        cfg = _config(base, ledger)
        cfg.chmod(0o644)
        argv = (["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
                if os.geteuid() == 0 else [])
        if not argv:
            ledger.chmod(0)
        proc = subprocess.run([*argv, str(BIN / "dlprio"), *command, "--config", str(cfg)],
                              capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr == (
            f"dlprio: ledger: {ledger}: this user may not read the ledger (mode 0600, the "
            "daemon's user's): run dlprio status, explain and once --dry-run as that user or "
            "root; dlqueue shows the queue to every user\n")
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("make, words", [
    (lambda p: p.write_text("hello\n"), "not a dlprio ledger (not an SQLite database)"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE jobs(x)").connection.commit(),
     "not a dlprio ledger (an SQLite database with the tables jobs)"),
], ids=["text", "foreign-sqlite"])
@pytest.mark.parametrize("command", [["status"], ["explain", "40"], ["once", "--dry-run"],
                                     ["once"]])
def test_a_file_that_is_no_ledger_is_refused_untouched(tmp_path: Path, capsys, monkeypatch, make,
                                                       words, command) -> None:
    """Exit 2 (a wrong ``ledger_path``, the operator's call: not the storage failure, 7, that
    systemd restarts on), one line naming the file and the fix; the file keeps its bytes and
    its mode, and no lock, -wal or -shm appears beside it, also for a real ``once`` (which
    would otherwise chmod it to 0600 and migrate a foreign database half-way)."""
    target = tmp_path / "notes"
    make(target)
    target.chmod(0o644)
    data = target.read_bytes()
    cfg = _config(tmp_path, target)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-slurm.conf"))   # no Slurm is asked
    rc = main([*command, "--config", str(cfg)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err == (f"dlprio: ledger: {target}: {words}; give ledger_path another file, or "
                   "move this one away\n")
    assert target.read_bytes() == data and (target.stat().st_mode & 0o777) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "notes"]


def test_a_damaged_ledger_names_the_file_and_the_way_out(tmp_path: Path, capsys) -> None:
    ledger = _ledger(tmp_path / "led")
    raw = bytearray(ledger.read_bytes())
    raw[4096:8192] = b"\xff" * 4096          # the second page, the first table's root
    ledger.write_bytes(bytes(raw))
    assert main(["status", "--config", str(_config(tmp_path, ledger))]) == 2   # no restart loop
    err = capsys.readouterr().err
    assert err.startswith(f"dlprio: ledger: {ledger}: the ledger is damaged (")
    assert err.endswith("restore it from a backup, or move it away to start a new one (the "
                        "attained service it holds is then lost)\n")


@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["explain", "40"]])
def test_a_reader_that_closes_the_pipe_is_no_ledger_failure(tmp_path: Path, command) -> None:
    """``dlprio explain 40 | head -1``: exit 0 and nothing on stderr, as every command."""
    cfg = _config(tmp_path, _ledger(tmp_path / "led"))
    proc = subprocess.run(["bash", "-c", '"$@" | head -c 1 >/dev/null; echo "${PIPESTATUS[0]}"',
                           "bash", str(BIN / "dlprio"), *command, "--config", str(cfg)],
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout == "0\n"
    assert "dlprio:" not in proc.stderr   # (--json says how old the ledger is on stderr)


@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["explain", "40"]])
def test_a_full_stdout_is_reported_as_stdout(tmp_path: Path, command) -> None:
    cfg = _config(tmp_path, _ledger(tmp_path / "led"))
    with open("/dev/full", "w") as full:
        proc = subprocess.run([str(BIN / "dlprio"), *command, "--config", str(cfg)],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 1   # (--json says how old the ledger is on stderr first)
    assert proc.stderr.endswith("\ndlprio: cannot write to stdout: No space left on device\n"
                                if "--json" in command else
                                "dlprio: cannot write to stdout: No space left on device\n")
    assert proc.stderr.count("dlprio:") == 1


def test_explain_a_queue_the_settings_no_longer_have(tmp_path: Path) -> None:
    """Job 40 was put in queue 2 of three; the thresholds were then cut to one (two queues)."""
    with Ledger(_ledger(tmp_path / "led", queue=2), readonly=True) as led:
        cfg = DaemonConfig(policy=PolicyConfig(thresholds_gpu_s=(5000.0,)))
        lines = explain.explain(40, led, cfg, now=1010).splitlines()
    assert lines[2] == ("queue: 2, decided under earlier settings with more queues than the 2 "
                        "now (0..1, policy tiresias-las); the daemon's next cycle places it "
                        "again")


def test_a_ledger_written_ahead_of_the_clock_is_stale(tmp_path: Path) -> None:
    """The daemon's last cycle at epoch 1,000 read at 900 (the clock set back 100 s)."""
    with Ledger(_ledger(tmp_path / "led"), readonly=True) as led:
        assert explain.freshness(led, now=900, interval_s=30) == (
            "ledger as of 1970-01-01 00:16:40 UTC, 100 s ahead of this host's clock; STALE: "
            "the clock was set back since the daemon's last cycle, or runs behind the daemon "
            "host's: states and service are as last seen, their age unknown")
        # within the slack (60 s) two clocks may differ: as of 0 s ago, current
        assert explain.freshness(led, now=950, interval_s=30) == (
            "ledger as of 1970-01-01 00:16:40 UTC (0 s ago)")


def test_a_forecast_made_ahead_of_the_clock_is_not_shown() -> None:
    forecast = {"made_at": 4000.0, "stale_after_s": 600.0, "horizon_s": 86400.0, "draws": 20,
                "jobs": {}}
    assert detail_lines(forecast, 40, now=400.0, running=False) == [
        "forecast: STALE (made at 01:06:40 UTC, 60m ahead of this host's clock: the clock was "
        "set back since, or runs behind the daemon's): not shown"]


@pytest.mark.parametrize("content, why", [
    (b"\xff\xfe{}", "1: malformed snapshot (not UTF-8 text (byte 0xff))"),
])
def test_a_snapshot_that_is_not_utf8_is_one_reason(tmp_path: Path, content: bytes,
                                                   why: str) -> None:
    snap = tmp_path / "snap.json"
    snap.write_bytes(content)
    with pytest.raises(SnapshotError) as err:
        read_snapshot(snap)
    assert str(err.value) == f"{snap}:{why}"


def test_a_snapshot_past_the_bound_is_refused_unread(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    with open(snap, "wb") as f:
        f.truncate(SNAPSHOT_MAX_BYTES + 1)   # sparse: no disk, and never read whole
    with pytest.raises(SnapshotError) as err:
        read_snapshot(snap)
    assert str(err.value) == (f"{snap}: cannot read (larger than {SNAPSHOT_MAX_BYTES} bytes "
                              "(128 MiB))")


def test_explain_with_a_non_utf8_snapshot_ends_well(tmp_path: Path, capsys) -> None:
    cfg = _config(tmp_path, _ledger(tmp_path / "led"))
    (tmp_path / "snap.json").write_bytes(b"\xcf\x00")
    assert main(["explain", "40", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (f"forecast: none (snapshot {tmp_path}/snap.json:1: malformed snapshot "
                       "(not UTF-8 text (byte 0xcf)))")


@pytest.mark.parametrize("side", ["", "-wal", ".lock"])
def test_snapshot_path_may_not_be_the_ledger_or_beside_it(tmp_path: Path, capsys,
                                                          side: str) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"ledger_path: {tmp_path}/led\nsnapshot_path: {tmp_path}/led{side}\n")
    assert main(["status", "--config", str(cfg)]) == 2
    assert capsys.readouterr().err == (
        f"dlprio: config: {cfg}: snapshot_path: must name another file than ledger_path and "
        "the files kept beside it (-wal, -shm, -journal, .lock): each cycle replaces the "
        f"snapshot, which would replace that file (got {tmp_path}/led{side}, ledger_path "
        f"{tmp_path}/led)\n")


def test_a_dangling_system_config_link_is_named_not_replaced(tmp_path: Path, monkeypatch,
                                                            capsys) -> None:
    """``/etc/dlprio/dlprio.yaml`` a link to a file that is gone: the site's config is missing,
    and the packaged settings must not silently stand in for it."""
    from prioritizer import config_file
    link = tmp_path / "dlprio.yaml"
    link.symlink_to(tmp_path / "gone" / "dlprio.yaml")
    monkeypatch.setattr(config_file, "SYSTEM_PATH", link)
    assert config_file.default_path() == link
    assert main(["status"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dlprio: config: {link}: ") and err.count("\n") == 1
    monkeypatch.setattr(config_file, "SYSTEM_PATH", tmp_path / "absent.yaml")
    assert config_file.default_path() == config_file.PACKAGED_PATH


def test_a_writer_during_the_immutable_copy_makes_it_be_taken_again(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """A daemon cycle that writes the ledger while ``status`` copies it (here: right after the
    first copy, before its file state is compared) changes the file's modification time, so
    that copy, which may hold half-written pages, is dropped and a second one taken: the
    reader sees the cycle's write."""
    from prioritizer.daemon import ledger as ledger_module
    path = _ledger(tmp_path / "led")
    real, calls = ledger_module._file_state, []

    def state(p: Path) -> tuple[int, int, int, bool]:
        calls.append(p)
        if len(calls) == 2:
            with Ledger(p) as writer:
                writer.set_meta("observed_at", "2000")
        return real(p)

    monkeypatch.setattr(ledger_module, "_file_state", state)
    with Ledger(path, readonly=True) as led:
        assert led.observed_at() == 2000.0
    # before and after each of the reader's two copies, and the writer's own check of the
    # file before it writes (Ledger's check_file: before and after its copy)
    assert len(calls) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["led"]


def _hand_edit(path: Path, *sql: str) -> None:
    """Run ``sql`` on the ledger at ``path`` as an admin's sqlite3 shell would."""
    conn = sqlite3.connect(path)
    try:
        for statement in sql:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


#: Hand edits that SQLite accepts (it keeps any value in any column) and the cell each names.
NONSENSE = [
    (["UPDATE meta SET value='1e300' WHERE key='observed_at'"],
     "meta key observed_at: value '1e300' is not an epoch time in seconds from 0 to "
     "253402214400"),
    (["UPDATE runs SET gpus='four'"],
     "runs row job_id=40 start=0.0: gpus is 'four', not a GPU count from 0 to 4294967295"),
    (["UPDATE jobs SET gpus=-4"], "jobs row job_id=40: gpus is -4, not a GPU count from 0 to "
                                  "4294967295"),
    (["UPDATE jobs SET submit_time=9e999"],   # SQLite reads 9e999 as infinity
     "jobs row job_id=40: submit_time is inf, not an epoch time in seconds from 0 to "
     "253402214400 or NULL"),
    (["UPDATE jobs SET queue=1.5"], "jobs row job_id=40: queue is 1.5, not a whole number >= 0 "
                                    "or NULL"),
    (["UPDATE runs SET end_time='nan'"], "runs row job_id=40 start=0.0: end_time is 'nan', not "
                                         "an epoch time in seconds from 0 to 253402214400 or "
                                         "NULL"),
    (["UPDATE intents SET grace_s=-1"], "intents row id=1: grace_s is -1.0, not a number of "
                                        "seconds from 0 to 253402214400"),
    (["UPDATE jobs SET user=x'00ff'"], "jobs row job_id=40: user is b'\\x00\\xff', not text"),
    # a NULL where a number must be: possible only once the schema lost its NOT NULL
    (["PRAGMA writable_schema=ON",
      "UPDATE sqlite_master SET sql=replace(sql, 'gpus INTEGER NOT NULL', 'gpus INTEGER')"
      " WHERE name='runs'"], None),
    (["INSERT INTO meta VALUES('tenant_rows', '[[\"a\", 1, 2, 1, 0, \"x\"]]')"],
     "meta key tenant_rows: value '[[\"a\", 1, 2, 1, 0, \"x\"]]' is JSON but item 0 is not "
     "[tenant, guaranteed, used, borrowed, waiting, fair_share] (a text and five finite "
     "numbers)"),
    (["INSERT INTO meta VALUES('tenant_why', '{\"40\": 7}')"],
     "meta key tenant_why: value '{\"40\": 7}' is JSON but job 40 is not a list"),
]


@pytest.mark.parametrize("edits, cell", NONSENSE,
                         ids=["observed_at", "run-gpus-text", "gpus-negative", "submit-inf",
                              "queue-fraction", "end-nan-text", "grace-negative", "user-blob",
                              "gpus-null", "tenant-rows", "tenant-why"])
@pytest.mark.parametrize("command", [["status"], ["status", "--json", "--all"], ["explain", "40"],
                                     ["once", "--dry-run"], ["once"]])
def test_a_hand_edited_value_is_one_line_naming_the_cell(tmp_path: Path, capsys, monkeypatch,
                                                         edits, cell, command) -> None:
    """Exit 2, one line: the file, table, row, column and value, what it should be and the way
    out; for ``once`` before the lock, the lease or Slurm (none here), the file untouched."""
    ledger = _ledger(tmp_path / "led")
    with Ledger(ledger) as led:
        led.add_intent(40, None, "USR2", 10, 0, now=20)
    _hand_edit(ledger, *edits)
    if cell is None:   # the NOT NULL is gone: now a NULL can be written
        _hand_edit(ledger, "UPDATE runs SET gpus=NULL")
        cell = ("runs row job_id=40 start=0.0: gpus is None, not a GPU count from 0 to "
                "4294967295")
    data = ledger.read_bytes()
    cfg = _config(tmp_path, ledger)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-slurm.conf"))   # no Slurm is asked
    rc = main([*command, "--config", str(cfg)])
    captured = capsys.readouterr()
    assert (rc, captured.out) == (2, "")
    assert captured.err == (f"dlprio: ledger: {ledger}: the ledger is damaged ({cell}); set that "
                            "value right, restore the ledger from a backup, or move it away to "
                            "start a new one (the attained service it holds is then lost)\n")
    assert ledger.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "led"]


def test_every_column_and_meta_value_the_code_reads_has_a_rule(tmp_path: Path) -> None:
    """A column added to the schema, or a number or JSON kept in ``meta`` by a new key, needs
    its rule in ``ledger_values`` (else a hand edit of it is read unchecked)."""
    from prioritizer.daemon import auto_tune, tenants_view
    from prioritizer.daemon.ledger_values import META, TABLES
    with Ledger(tmp_path / "led") as led:
        for table, (_, rules) in TABLES.items():
            columns = [r[1] for r in led.conn.execute(f"PRAGMA table_info({table})")]
            assert sorted(rules) == sorted(columns), table
    assert {tenants_view.ROWS_KEY, tenants_view.WHY_KEY, tenants_view.USAGE_KEY,
            auto_tune.META_LAST, auto_tune.META_SWITCHES, auto_tune.META_STARTED, "observed_at",
            "cycle", "pruned_at", "order_backlog", "order_ref"} <= set(META)


def test_values_the_daemon_writes_pass_the_check(tmp_path: Path, capsys) -> None:
    """The check refuses nonsense only: a shard job's half GPU, times at 0, an open run and
    intent, the meta values each writer stores, and empty meta values are read as they are."""
    ledger = _ledger(tmp_path / "led")
    with Ledger(ledger) as led:
        with led.transaction():
            led.upsert_job(41, user="bob", account="a", partition="gpu", state="RUNNING",
                           gpus=0.5, submit_time=None, restart_count=3, now=0)
            led.start_run(41, 0, 0.5, now=0)
        led.add_intent(40, 41, None, 0, 0, now=0)
        for key, value in [("cycle", "7"), ("pruned_at", repr(5.5)), ("order_backlog", ""),
                           ("order_ref", repr(-30.0)), ("auto_tune_switches", "0"),
                           ("tenant_rows", '[["a", 4, 2, 0, 1, 0.5]]'),
                           ("tenant_why", '{"40": ["guarantee", "a", 2, 4, 0.5], '
                                          '"41": ["victim", "its GPUs go to job 40"]}'),
                           ("tenant_usage", '{"at": 10.0, "usage": {"a": [1, 2.5, 0]}}'),
                           ("auto_tune_last", '{"at": 1.0, "outcome": "kept", "reason": "r"}')]:
            led.set_meta(key, value)
    assert main(["status", "--all", "--config", str(_config(tmp_path, ledger))]) == 0
    assert capsys.readouterr().err == ""
