"""Every time option of ``dlprio tune``, ``dlprio history`` and ``dlprio simulate`` reads a TIME
with the one parser of ``history export --since`` (prioritizer/window.py, local time): ``tune
--validate-from``, ``tune --since``, ``history check --since`` and ``simulate --since`` take
SECONDS of trace time
as before, or on a history trace a TIME such as ``2026-12-05T15:30`` (no seconds) or
``now-1day``, which ``--validate-from`` once refused for lack of seconds."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prioritizer.cli import main as dlprio
from prioritizer.history import cli as history_cli
from prioritizer.history.trace import HistoryRow, trace_point, write_rows

#: 2026-12-01T00:00:00Z; the trace's 20 jobs arrive every minute from then on
E = 1796083200


@pytest.fixture(autouse=True)
def one_hour_east(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC+1 (a POSIX TZ string: no time zone database needed), so that local
    01:10 is 00:10Z = E + 600 s, ten jobs in."""
    monkeypatch.setenv("TZ", "XYZ-1")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def history(tmp_path: Path) -> Path:
    rows = [HistoryRow(str(i), "u", "a", "p", E + 60 * i, E + 60 * i, 2, 1, 2 * (30 + i), 30 + i,
                       E + 60 * i + 30 + i, 30 + i, "COMPLETED", 1, "self") for i in range(20)]
    path = tmp_path / "h.csv"
    with open(path, "w") as handle:
        write_rows(rows, handle)
    return path


def test_trace_point_reads_seconds_and_export_times(history: Path, tmp_path: Path) -> None:
    now = E + 86400 + 600
    assert trace_point("--x", "900", str(history), now, rebased=True) == 900.0
    assert trace_point("--x", "2026-12-01T01:10", str(history), now, rebased=True) == 600.0
    assert trace_point("--x", "2026-12-01T01:10:30", str(history), now, rebased=True) == 630.0
    assert trace_point("--x", "2026-12-01T01:10", str(history), now, rebased=False) == E + 600
    assert trace_point("--x", "now-1day", str(history), now, rebased=True) == 600.0
    other = tmp_path / "t.csv"
    other.write_text("job_id,num_gpu,submit_time,duration\n1,1,0,10\n")
    with pytest.raises(ValueError) as err:
        trace_point("--x", "2026-12-01T01:10", str(other), now, rebased=True)
    assert str(err.value) == (f"--x 2026-12-01T01:10: a time needs a history trace (epoch "
                              f"times); give SECONDS of trace time for {other}")
    with pytest.raises(ValueError) as err:
        trace_point("--x", "tomorrow", str(history), now, rebased=True)
    assert str(err.value) == ("--x: expected SECONDS of trace time or, on a history trace, a "
                              "time: now, today, now-N or now+N [seconds|minutes|hours|days|"
                              "weeks] (no unit: seconds), YYYY-MM-DD[THH:MM[:SS]]; got 'tomorrow'")


def test_tune_validate_from_takes_a_time_without_seconds(history: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    rc = dlprio(["tune", "--trace", str(history), "--nodes", "1", "--gpus-per-node", "8",
                 "--grid", "knob=4,8", "--validate-from", "2026-12-01T01:10", "--workers", "1"])
    assert rc == 0
    assert "validation on jobs from 2026-12-01T01:10 on (10 jobs)" in capsys.readouterr().out


def test_tune_since_takes_a_time(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = dlprio(["tune", "--trace", str(history), "--nodes", "1", "--gpus-per-node", "8",
                 "--grid", "knob=4,8", "--walk-forward", "0.002", "--since", "2026-12-01T01:10",
                 "--workers", "1", "--json"])
    assert rc == 0
    assert [(r["policy"], r["jobs"]) for r in json.loads(capsys.readouterr().out)] == [
        ("fifo-fit", 10), ("fixed", 10), ("walk-forward", 10)]


def test_history_check_since_takes_a_time(history: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    seen = []

    def fake_check(trace: Any, *args: Any, **kwargs: Any) -> list[Any]:
        seen.append([j.name for j in trace.jobs])
        raise ValueError("stop here")
    monkeypatch.setattr(history_cli, "check_forecasts", fake_check)
    assert dlprio(["history", "check", "--forecasts", "--trace", str(history), "--nodes", "1",
                   "--gpus-per-node", "8", "--since", "2026-12-01T01:10"]) == 2
    assert seen == [[str(i) for i in range(10, 20)]]


def test_simulate_since_takes_a_time(history: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--nodes", "1", "--gpus-per-node", "8", "--policy", "fifo-fit", "--json"]
    assert dlprio([*argv, "--trace", str(history), "--since", "2026-12-01T01:10"]) == 0
    assert [r["jobs"] for r in json.loads(capsys.readouterr().out)] == [10]
    assert dlprio([*argv, "--trace", str(history), "--since", str(E + 900)]) == 0   # seconds
    assert [r["jobs"] for r in json.loads(capsys.readouterr().out)] == [5]
    other = tmp_path / "t.csv"
    other.write_text("job_id,num_gpu,submit_time,duration\n1,1,0,10\n")
    assert dlprio([*argv, "--trace", str(other), "--since", "now-1day"]) == 2
    assert capsys.readouterr().err == (f"dlprio: --since: a time needs a history trace (epoch "
                                       f"times); give SECONDS of trace time for {other}\n")


@pytest.mark.parametrize("argv", [
    ["tune", "--grid", "knob=4", "--validate-from", "2026-12-01 01:10"],
    ["simulate", "--since", "yesterday"],
    ["tune", "--grid", "knob=4", "--walk-forward", "1", "--since", "yesterday"],
    ["history", "check", "--forecasts", "--since", "-5"],
])
def test_a_bad_time_is_one_line_naming_the_option(argv: list[str], history: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert dlprio([*argv, "--trace", str(history), "--nodes", "1", "--gpus-per-node", "8"]) == 2
    err = capsys.readouterr().err
    option = next(a for a in argv if a in ("--validate-from", "--since"))
    assert err.startswith(f"dlprio: {option}: expected ") and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("argv", [["tune", "--trace", "t.csv", "--grid", "k=4"],
                                  ["history", "check", "--trace", "h.csv"],
                                  ["simulate", "--trace", "t.csv"]])
def test_help_names_the_time_forms(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert dlprio([*argv, "--help"]) == 0
    text = "".join(capsys.readouterr().out.split())   # argparse wraps at any hyphen
    assert "--sinceSECONDS|TIME" in text and "YYYY-MM-DD[THH:MM[:SS]]" in text
