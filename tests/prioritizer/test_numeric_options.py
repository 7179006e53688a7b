"""Every numeric option of dlprio simulate / history check / tune: a value that is not a plain
finite number inside its bound (nan, inf, 1e308, 1_0, a 30-digit node count) is exit 2 with one
line naming the option, before any replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main as dlprio
from prioritizer.numbers import parse_float, parse_int

HISTORY = ("job_id,user,account,partition,submit_time,eligible_time,num_gpu,num_nodes,work_gpu_s,"
           "duration,end_time,jct,state,attempts,ended_by,preemptions\n"
           "1,u,a,gpu,100,100,1,1,10,10,110,10,COMPLETED,1,self,0\n"
           "2,u,a,gpu,100,100,1,1,20,20,120,20,COMPLETED,1,self,0\n")
BAD = ["nan", "inf", "-inf", "1e308", "1_0", "0x10", "１", "9" * 30]


def _base(command: str, trace: Path) -> list[str]:
    cluster = ["--nodes", "1", "--gpus-per-node", "8"]
    if command == "simulate":
        return ["simulate", "--trace", str(trace), *cluster, "--policy", "fifo"]
    if command == "history":
        return ["history", "check", "--trace", str(trace), *cluster, "--start-latency", "0",
                "--dispatch-latency", "0"]
    return ["tune", "--trace", str(trace), *cluster, "--grid", "knob=4,8"]


OPTIONS = ([("simulate", o) for o in ("--nodes", "--gpus-per-node", "--since", "--starve-knob",
                                      "--min-run", "--gittins-quantum", "--checkpoint-overhead",
                                      "--requeue-delay", "--decision-interval",
                                      "--durations-min", "--window-jobs")]
           + [("history", o) for o in ("--nodes", "--gpus-per-node", "--start-latency",
                                       "--dispatch-latency", "--window-jobs")]
           + [("tune", o) for o in ("--nodes", "--gpus-per-node", "--max-p95-ratio",
                                    "--workers", "--validate-from")])


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize(("command", "option"), OPTIONS)
def test_bad_numeric_option_is_one_line_exit_2(command: str, option: str, value: str,
                                               tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "h.csv"
    trace.write_text(HISTORY)
    argv = _base(command, trace)
    if option in argv:
        del argv[argv.index(option):argv.index(option) + 2]
    argv.append(f"{option}={value}")   # '=': '-inf' alone would read as an option
    assert dlprio(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dlprio: {option}") and len(err.strip().splitlines()) == 1, err


def test_bounds_are_inclusive_and_plain_forms_pass() -> None:
    assert parse_int("100000", 1, 100_000) == 100_000
    assert parse_float("1e3", 0, 1e9) == 1000.0
    assert parse_float(".5", 0, 1) == 0.5
    with pytest.raises(ValueError):
        parse_int("100001", 1, 100_000)
    with pytest.raises(ValueError):
        parse_float("0", 0, 1, low_open=True)


@pytest.mark.parametrize("grid", ["knob=1e308", "knob=1_0", "knob=nan", "thresholds=1000/1e300",
                                  "knob=0x10", "knob=99999999999999999999"])
def test_bad_grid_number_is_exit_2_naming_grid(grid: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "h.csv"
    trace.write_text(HISTORY)
    assert dlprio(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "8",
                   "--grid", grid]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dlprio: --grid: ") and len(err.strip().splitlines()) == 1, err
