"""`dlprio history export` option values: the window forms we
document, an empty window, empty option values, control characters in paths.

SlurmClient is replaced by a recorder: these tests are about what reaches sacct (or that nothing
does); the client turns sacct's empty-window answer into no records
(tests/slurm_plugin/slurm/test_sacct_nothing_found.py; tests/live/test_history_live.py runs the
real thing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main as dlprio
from prioritizer.history import cli as history_cli
from prioritizer.window import resolve, sacct_window
from slurm_plugin.slurm.client import SlurmRefused, SlurmUnreachable


class Recorder:
    calls: list[tuple[str, str]] = []
    reply: Exception | list = []

    def __init__(self, timeout_s: float) -> None:
        pass

    def accounting(self, start: str, end: str) -> list:
        Recorder.calls.append((start, end))
        if isinstance(Recorder.reply, Exception):
            raise Recorder.reply
        return Recorder.reply


@pytest.fixture(autouse=True)
def recorder(monkeypatch: pytest.MonkeyPatch) -> type[Recorder]:
    Recorder.calls, Recorder.reply = [], []
    monkeypatch.setattr(history_cli, "SlurmClient", Recorder)
    return Recorder


@pytest.mark.parametrize("argv", [["--since=--"], ["--since="], ["--until="],
                                  ["--since=garbage"], ["--since=-5"], ["--since", "now\n"],
                                  ["--since", "now-1_0days"], ["--until", "2026-02-30"],
                                  ["--since", "now", "--until", "now-1day"]])
def test_bad_window_is_exit_2_before_sacct(argv: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert dlprio(["history", "export", *argv]) == 2
    err = capsys.readouterr().err
    assert Recorder.calls == []
    assert err.startswith("dlprio: --since") or err.startswith("dlprio: --until"), err
    assert len(err.strip().splitlines()) == 1


def test_window_forms_reach_sacct_as_timestamps() -> None:
    now = 1_764_570_000.0   # 2025-12-01T06:20:00Z, printed in local time as sacct reads it
    start, end = sacct_window("now-2days", "now", now)
    assert resolve("--until", "now", now).timestamp() - resolve("--since", "now-2days",
                                                                  now).timestamp() == 2 * 86400
    assert len(start) == len(end) == 19 and start[10] == "T"
    assert sacct_window("2026-11-30", "2026-11-30T01:02:03", now) == (
        "2026-11-30T00:00:00", "2026-11-30T01:02:03")


def test_empty_window_is_exit_2_widen(capsys: pytest.CaptureFixture[str]) -> None:
    Recorder.reply = []   # the client's answer to sacct's "Nothing found with query"
    assert dlprio(["history", "export", "--since", "now-2seconds"]) == 2
    err = capsys.readouterr().err
    assert "widen --since/--until" in err and "sacct failed" not in err


def test_other_sacct_failure_is_exit_4_refused(capsys: pytest.CaptureFixture[str]) -> None:
    Recorder.reply = SlurmRefused(["sacct"], "sacct: error: something else")
    assert dlprio(["history", "export"]) == 4   # Exit.SLURM_REFUSED
    assert "sacct failed" in capsys.readouterr().err


def test_sacct_unreachable_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    Recorder.reply = SlurmUnreachable(["sacct"], "sacct: error: slurm_persist_conn_open: failed")
    assert dlprio(["history", "export"]) == 3   # Exit.SLURM_UNREACHABLE
    assert "sacct failed" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "option"), [
    (["history", "export", "--ledger="], "--ledger"),
    (["history", "export", "-o", ""], "-o/--output"),
    (["history", "check", "--trace", "t.csv", "--ledger="], "--ledger"),
    (["history", "check", "--trace", "t.csv", "--config="], "--config"),
    (["history", "check", "--trace="], "--trace")])
def test_empty_option_value_is_exit_2_naming_it(argv: list[str], option: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert dlprio(argv) == 2
    assert capsys.readouterr().err.startswith(f"dlprio: {option}: empty value")
    assert Recorder.calls == []


def test_control_characters_in_output_path_are_escaped(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    bad = str(tmp_path / "no\x1b[2Jdir" / "x\n.csv")
    assert dlprio(["history", "export", "-o", bad]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and len(err.strip().splitlines()) == 1 and "\\x1b" in err


@pytest.mark.parametrize(("command", "option"), [
    (c, o) for c, options in (
        ("simulate", ("--trace", "--config", "--durations", "--durations-from", "--jobs-csv",
                      "--plot", "--thresholds", "--cluster", "--policy")),
        ("tune", ("--trace", "--config", "--output", "--plot", "--workdir", "--validate-from",
                  "--policy")))
    for o in options])
def test_empty_values_of_simulate_and_tune_are_refused(command: str, option: str,
                                                       tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\n1,1,0,10\n")
    argv = [command, "--trace", str(trace)]
    if option == "--trace":
        argv = [command]
    argv += ["--grid", "knob=4"] if command == "tune" else []
    if option != "--cluster":
        argv += ["--nodes", "1", "--gpus-per-node", "8"]
    assert dlprio([*argv, f"{option}="]) == 2
    assert capsys.readouterr().err.startswith(f"dlprio: {option}: empty value")
