"""The shared table layout (:mod:`prioritizer.tables`) and every command that prints a table:
plain when stdout is not a terminal (no escape code, no box drawing, header row, columns in a
fixed order, nothing cropped), the rich table styled on a terminal."""

from __future__ import annotations

import dataclasses
import io
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from prioritizer import tables
from prioritizer.cli import main
from prioritizer.daemon import explain
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import LOGGER, CycleAdapter
from prioritizer.daemon.loop import DECISION_HEADERS, Daemon
from prioritizer.daemon.observe import Observation
from prioritizer.history.trace import HistoryRow, write_rows
from prioritizer.policy.model import (Decisions, JobPhase, JobView, Preemption, QueueState,
                                      Snapshot)
from prioritizer.tune.rank import RANKING_HEADERS, Ranked, format_ranking

ANSI = re.compile(r"\x1b\[[0-9;]*m")
BOX = re.compile(r"[\u2500-\u257f]")     # box-drawing block (─ │ ┃ ┏ ...)


def assert_plain(text: str) -> list[str]:
    """No escape code and no box drawing; returns the lines."""
    assert "\x1b" not in text and not BOX.search(text), text
    return text.splitlines()


# ---------------------------------------------------------------- the helper
HEADS = ("ID", "NAME", "GPU·s")
ROWS = [["1", "训练-job", "12"], ["1234", "b", "7"]]


def test_plain_text_is_the_rich_layout_in_display_cells() -> None:
    plain = tables.plain_text(HEADS, ROWS, right={"ID", "GPU·s"})
    assert plain == tables.render_table(tables.rich_table(HEADS, ROWS, right={"ID", "GPU·s"}))
    # widest cells: "1234" (4), "训练-job" (2 + 2 + 4 = 8 cells), "GPU·s" (5); two spaces apart
    assert plain.splitlines() == ["  ID  NAME      GPU·s",
                                  "   1  训练-job     12",
                                  "1234  b             7"]


def test_styled_is_the_same_table_with_escape_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    styled = tables.render(HEADS, ROWS, {"ID", "GPU·s"}, styled=True)
    assert "\x1b[1m" in styled                         # bold header
    assert ANSI.sub("", styled) == tables.render(HEADS, ROWS, {"ID", "GPU·s"})


def test_nothing_cropped_and_user_text_stays_one_line() -> None:
    long = "x" * 500
    lines = assert_plain(tables.render(("A", "B"), [[long, "a\nb[red]c"]]))
    assert lines[1] == long + "  a\\nb[red]c"


def test_is_terminal_of_files_and_pipes(tmp_path: Path) -> None:
    assert not tables.is_terminal(io.StringIO())
    with open(tmp_path / "f", "w") as handle:
        assert not tables.is_terminal(handle)


# ---------------------------------------------------------------- dlprio status
def test_status_non_tty_is_plain_never_cropped(tmp_path: Path) -> None:
    user = "a-user-name-much-longer-than-twelve"
    with Ledger(tmp_path / "l.sqlite") as led, led.transaction():
        for now in (1000.0, 1030.0):       # 3 GPUs seen running from 1000 to 1030: 90 GPU·s
            led.upsert_job(7, user=user, account="a", partition="gpu", state="RUNNING", gpus=3,
                           submit_time=990, restart_count=0, now=now)
            led.start_run(7, 1000.0, 3, now)
            led.note_observed(now)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"ledger_path": str(tmp_path / "l.sqlite"), "metrics_port": 0}))
    out = subprocess.run([sys.executable, "-m", "prioritizer.cli", "status", "--config", str(cfg)],
                         capture_output=True, text=True, check=True).stdout
    lines = assert_plain(out)
    assert lines[1].split() == list(explain.STATUS_HEADERS)
    assert lines[2].split() == ["7", user, "RUNNING", "-", f"{3 * 30:.1f}", "0", "0", "0", "0"]


# ---------------------------------------------------------------- dlprio once --dry-run
def test_once_decisions_non_tty_is_plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The decisions table of two jobs; ``act.targets`` (tested with Slurm in the live
    tests) is replaced by fixed values: only the layout is under test here."""
    views = (JobView(11, JobPhase.PENDING, (2,), 0.0, attained_gpu_s=0.0),
             JobView(5, JobPhase.RUNNING, (4,), 0.0, attained_gpu_s=4 * 3600.4))
    decisions = Decisions(order=(11,), states={
        11: QueueState(11, 0, 0.0, 0.0, False, "new job"),
        5: QueueState(5, 1, 0.0, 0.0, True, "demoted: 14402 >= 3250")},
        preemptions=(Preemption(11, (5,)),))
    obs = Observation(100.0, Snapshot((), views), {}, ())
    monkeypatch.setattr("prioritizer.daemon.act.targets", lambda *a: {11: "partition:gpu-q0"})
    cfg = dataclasses.replace(DaemonConfig(), mode="partition",
                              queue_partitions=("gpu-q0", "gpu-q1", "gpu-q2"))
    out = io.StringIO()
    with Ledger(tmp_path / "l.sqlite") as led:
        Daemon(cfg, None, led, CycleAdapter(logging.getLogger(LOGGER)), dry_run=True,
               out=out).print_decisions(decisions, obs)
    lines = assert_plain(out.getvalue())
    assert lines[0].split() == list(DECISION_HEADERS)
    assert lines[1].split() == ["0", "11", "PENDING", "Q0", "0", "partition:gpu-q0", "new",
                                "job"]
    assert lines[2].split() == ["-", "5", "RUNNING", "Q1", f"{4 * 3600.4:.0f}", "-",
                                "demoted:", "14402", ">=", "3250"]
    assert lines[3:] == ["preempt 5 for 11", "dry run: nothing sent to Slurm"]


# ---------------------------------------------------------------- dlprio simulate
def test_simulate_summary_non_tty_is_plain(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"      # two 2-GPU jobs on 4 GPUs: both start on arrival
    trace.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                     "0,2,0,100,vgg19,100,1\n1,2,10,50,vgg11,50,1\n")
    rc = main(["simulate", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "4",
               "--placement", "count", "--zero-cost", "--policy", "fifo"])
    lines = assert_plain(capsys.readouterr().out)
    assert rc == 0 and len(lines) == 2
    assert lines[0].split() == ["policy", "jobs", "avg", "JCT", "s", "median", "s", "p95", "s",
                                "p99", "s", "makespan", "s", "avg", "queue", "s", "preempt",
                                "promote", "GPU", "util", "wall", "s"]
    # JCTs 100 and 50 s; makespan 100 s (0 → 100); held 2·100 + 2·50 GPU·s of 4·100
    assert lines[1].split()[:-1] == ["fifo", "2", "75.0", "75.0", "100.0", "100.0", "100",
                                     "0.0", "0", "0", f"{300 / 400:.3f}"]


# ---------------------------------------------------------------- dlprio history check
def test_history_check_non_tty_is_plain(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    def row(job_id: str, eligible: float, gpus: int, duration: float, jct: float) -> HistoryRow:
        return HistoryRow(job_id, "u", "a", "p", eligible, eligible, gpus, 1, gpus * duration,
                          duration, eligible + jct, jct, "COMPLETED", 1, "self")
    path = tmp_path / "h.csv"       # both fit at once on 8 GPUs: replay JCT = run time
    with open(path, "w") as handle:
        write_rows([row("7", 1000, 4, 30, 30), row("9", 1005, 4, 10, 12)], handle)
    rc = main(["history", "check", "--trace", str(path), "--nodes", "1", "--gpus-per-node", "8",
               "--start-latency", "0"])
    lines = assert_plain(capsys.readouterr().out)
    assert rc == 0
    assert lines[0].split() == ["job", "GPUs", "real", "JCT", "s", "replay", "JCT", "s", "diff"]
    err = (10 - 12) / 12 * 100
    assert lines[1].split() == ["7", "4", "30.0", "30.0", "+0.0", "%"]
    assert lines[2].split() == ["9", "4", "12.0", "10.0", f"{err:+.1f}", "%"]
    assert lines[3] == ""
    assert lines[4].split() == ["real", "replay", "diff"]
    assert lines[5].split() == ["avg", "JCT", "s", "21.0", "20.0", f"{(20 - 21) / 21 * 100:+.1f}",
                                "%"]


# ---------------------------------------------------------------- dlprio tune
def test_tune_ranking_is_plain_in_column_order() -> None:
    ranked = [Ranked("thresholds=100/200 knob=4", {"avg_jct_s": 1234.5, "p95_jct_s": 2000,
                                                   "max_wait_s": 10}, False, True),
              Ranked("(current config)", {"avg_jct_s": 1300, "p95_jct_s": 1900,
                                          "max_wait_s": 12.5}, True, True),
              Ranked("knob=16", {"avg_jct_s": 900, "p95_jct_s": 5000, "max_wait_s": 1},
                     False, False)]
    lines = assert_plain(format_ranking(ranked))
    assert lines[0].split() == ["rank", "avg", "JCT", "s", "p95", "JCT", "s", "max", "wait",
                                "s", "config"]
    assert [h in lines[0] for h in RANKING_HEADERS] == [True] * 5
    # no thousands separator in any column, as in simulate's table
    assert lines[1].split() == ["1", "1234.5", "2000.0", "10.0", "thresholds=100/200",
                                "knob=4"]
    assert lines[2].split() == ["2", "1300.0", "1900.0", "12.5", "(current", "config)",
                                "*current"]
    assert lines[3].split() == ["x", "900.0", "5000.0", "1.0", "knob=16"]
