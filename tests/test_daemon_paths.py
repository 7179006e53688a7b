"""A ledger whose path holds ``?``, ``#`` or ``%`` (which a SQLite URI would read as query,
fragment and escape) is read by status, explain and history, and a read-only command creates
no file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from prioritizer.cli import main as dlprio
from prioritizer.daemon.ledger import Ledger, readonly_uri
from prioritizer.history import cli as history_cli
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
    facts = history_cli.ledger_facts(str(ledger))
    assert list(facts) == [6] and facts[6] == LedgerFacts(1, 7.0, True)
    assert history_cli.cycle_time(str(ledger)) == 100.0
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
