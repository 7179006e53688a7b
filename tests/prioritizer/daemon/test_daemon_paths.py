"""The paths dlprio's daemon commands read (``--config``, ``--log-config`` and the config's
``ledger_path`` / ``snapshot_path``) are checked as every other path option is: a missing file,
a directory, a FIFO or a device is one line naming it, exit 2 (a missing ledger: exit 5, "has
the daemon run?"), nothing hangs, and control characters in a path are escaped. A ledger whose
path holds ``?``, ``#`` or ``%`` (which a SQLite URI would read as query, fragment and escape)
is read by status, explain and history, and a read-only command creates no file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from prioritizer.cli import main as dlprio
from prioritizer.daemon.ledger import Ledger, readonly_uri
from prioritizer.history import ledger_read
from prioritizer.history.export import LedgerFacts

HISTORY = ("job_id,user,account,partition,submit_time,eligible_time,num_gpu,num_nodes,work_gpu_s,"
           "duration,end_time,jct,state,attempts,ended_by,preemptions\n"
           "6,u,a,gpu,100,100,1,1,10,10,110,10,COMPLETED,1,self,0\n")


def _ledger(path: Path) -> Path:
    """Job 6 (2 GPUs, ran 0..15 s, preempted once and requeued), observed at t=100."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with Ledger(path) as ledger:
        with ledger.transaction():
            ledger.upsert_job(6, user="bob", account="a", partition="gpu", state="PENDING",
                              gpus=2, submit_time=0, restart_count=1, now=0)
            ledger.start_run(6, 0, 2, now=0)
            ledger.close_run(6, 0, 15, "requeue")
            ledger.note_observed(100.0)
        intent = ledger.add_intent(6, None, "USR2", 10, 0, 100)
        ledger.mark_signal(intent, 100, 110)
        ledger.mark_requeue(intent, 107)
    return path


def _config(tmp_path: Path, **keys: str) -> str:
    path = tmp_path / "dlprio.yaml"
    path.write_text(yaml.safe_dump({"metrics_port": 0, **keys}))
    return str(path)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name", ["d?mode=rw#f/l.sqlite", "d/l?x#y%41.sqlite",
                                  "d%3F/l?mode=rwc.sqlite"])
def test_ledger_at_a_path_with_uri_characters_is_read(tmp_path: Path, name: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    ledger = _ledger(tmp_path / name)
    config = _config(tmp_path, ledger_path=str(ledger))
    before = _tree(tmp_path)
    assert dlprio(["status", "--json", "--config", config]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["job_id"], r["attained_gpu_s"], r["preemptions"]) for r in rows] == [(6, 30.0, 1)]
    assert dlprio(["explain", "6", "--config", config]) == 0
    out = capsys.readouterr().out
    assert out.startswith("job 6 (bob, gpu): PENDING") and "30 GPU·s over 1 run(s)" in out
    facts = ledger_read.ledger_facts(str(ledger))
    assert list(facts) == [6] and facts[6] == LedgerFacts(1, 7.0, True, gpus=2)
    assert ledger_read.cycle_time(str(ledger)) == 100.0
    trace = tmp_path / "h.csv"
    trace.write_text(HISTORY)
    assert dlprio(["history", "check", "--trace", str(trace), "--nodes", "1", "--gpus-per-node",
                   "8", "--start-latency", "0", "--ledger", str(ledger)]) == 0
    capsys.readouterr()
    # a read-only open made no file (the old URI opened, so created, the file "d" read-write),
    # only SQLite's WAL side files beside the ledger itself
    side = {f"{name}-wal", f"{name}-shm"}
    assert [p for p in _tree(tmp_path) if p not in side] == sorted(before + ["h.csv"])


def test_readonly_uri_encodes_the_path_bytes(tmp_path: Path) -> None:
    assert readonly_uri("/a b/c?d#e%f") == "file:///a%20b/c%3Fd%23e%25f?mode=ro"
    assert readonly_uri("//srv/l") == "file:////srv/l?mode=ro"        # no authority "srv"
    assert readonly_uri("/x/\udcff") == "file:///x/%FF?mode=ro"       # a non-UTF-8 byte
    os.chdir(tmp_path)
    assert readonly_uri("rel?.sqlite") == f"file://{tmp_path}/rel%3F.sqlite?mode=ro"


@pytest.mark.parametrize("command", [["status"], ["explain", "6"], ["once", "--dry-run"],
                                     ["run"]])
@pytest.mark.parametrize("key", ["ledger_path", "snapshot_path"])
def test_a_config_path_that_is_not_a_file_is_exit_2_naming_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], key: str) -> None:
    """Before any Slurm call or ledger open (no Slurm answers here: SLURM_CONF names none)."""
    os.environ["SLURM_CONF"] = str(tmp_path / "none.conf")   # restored by conftest
    os.mkfifo(tmp_path / "fifo")
    paths = {"ledger_path": str(_ledger(tmp_path / "ok" / "l.sqlite")),
             "snapshot_path": str(tmp_path / "s.json")}
    for target, kind in ((tmp_path, "a directory"), (tmp_path / "fifo", "a FIFO"),
                         (Path("/dev/null"), "a device")):
        config = _config(tmp_path, **{**paths, key: str(target)})
        rc = dlprio([*command, "--config", config])
        err = capsys.readouterr().err
        if key == "snapshot_path" and command[0] in ("status", "explain"):
            assert rc == 0, err       # they do not touch the snapshot
            continue
        assert (rc, err) == (2, f"dlprio: config: {config}: {key}: {kind}; give a file path "
                                f"(got {target})\n")


@pytest.mark.parametrize("option", ["--config", "--log-config"])
@pytest.mark.parametrize("make", ["fifo", "device", "directory", "missing"])
def test_config_files_that_are_not_regular_files_are_refused_at_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, make: str) -> None:
    """A FIFO or /dev/zero as --config or --log-config is refused at once, never read."""
    target = {"fifo": tmp_path / "fifo", "device": Path("/dev/zero"),
              "directory": tmp_path, "missing": tmp_path / "none.yaml"}[make]
    if make == "fifo":
        os.mkfifo(target)
    argv = ["once", "--dry-run", "--config"]
    argv += ([str(target)] if option == "--config"
             else [_config(tmp_path, ledger_path=str(tmp_path / "l.sqlite")), option, str(target)])
    why = {"fifo": "a FIFO; give a regular file", "device": "a device; give a regular file",
           "directory": "a directory; give a regular file",
           "missing": "No such file or directory"}[make]
    prefix = "log-config: " if option == "--log-config" else ""
    assert dlprio(argv) == 2
    assert capsys.readouterr().err == f"dlprio: config: {prefix}{target}: cannot read ({why})\n"


def test_control_characters_in_daemon_paths_are_escaped(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "a\nb\x1b[2J"
    assert dlprio(["status", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == f"dlprio: config: {tmp_path}/a\\nb\\x1b[2J: cannot read (No such file or directory)\n"
    config = _config(tmp_path, ledger_path=str(bad / "l.sqlite"))
    assert dlprio(["status", "--config", config]) == 5          # no ledger yet (NOT_FOUND)
    err = capsys.readouterr().err
    assert err == f"dlprio: {tmp_path}/a\\nb\\x1b[2J/l.sqlite: no ledger (has the daemon run?)\n"
    bad.mkdir()
    config = _config(tmp_path, ledger_path=str(bad))
    assert dlprio(["explain", "6", "--config", config]) == 2
    err = capsys.readouterr().err
    assert err == (f"dlprio: config: {config}: ledger_path: a directory; give a file path "
                   f"(got {tmp_path}/a\\nb\\x1b[2J)\n")
