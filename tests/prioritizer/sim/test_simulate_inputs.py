"""Inputs a command cannot use are refused with one line and exit 2:
an empty --compare, a negative --since, --durations for a policy that does not use it or with
the wrong columns, a trace with one job_id twice (simulate's reader and the history reader)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.history.trace import HistoryError, HistoryRow, read_rows, write_rows

TRACE = str(Path(__file__).resolve().parents[3] / "data" / "traces" / "tiresias" / "60_job.csv")
CLUSTER = ["--nodes", "2", "--gpus-per-node", "4"]


def _err(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    return err


@pytest.mark.parametrize("extra, message", [
    (["--compare", ""], "--compare: empty value; give a value or leave the option out"),
    (["--compare", " , "], "--compare needs at least one policy name"),
    (["--since", "-100"], "--since must be >= 0 (seconds of trace time), got -100"),
    (["--durations", "/nonexistent.csv"],
     "--durations only applies to tiresias-gittins or --preempt-gain (running tiresias-las); drop "
     "--durations or add tiresias-gittins to --policy/--compare"),
    (["--compare", "fifo,las", "--durations-from", TRACE],
     "--durations-from only applies to tiresias-gittins or --preempt-gain (running fifo, las, "
     "fifo-fit); drop --durations-from or add tiresias-gittins to --policy/--compare"),
    (["--policy", "tiresias-gittins", "--durations", "/nonexistent.csv"],
     "/nonexistent.csv: cannot read (No such file or directory)"),
], ids=["compare-empty", "compare-commas", "since-negative", "durations-unused", "durations-from-unused",
        "durations-missing"])
def test_simulate_refuses(capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    assert _err(capsys, ["simulate", "--trace", TRACE, *CLUSTER, *extra]) == f"dlprio: {message}\n"


@pytest.mark.parametrize("text, message", [
    ("a,b,c\n1,2,3\n", "{f}:1: expected the one-column header 'duration' (GPU·s), found 'a,b,c'"),
    ("duration,extra\n5,6\n", "{f}:1: expected the one-column header 'duration' (GPU·s), found 'duration,extra'"),
    ("1,2,3\n", "{f}:1: expected one column (duration, GPU·s), found 3"),
    ("duration\n5\n6,7\n", "{f}:3: expected one column (duration, GPU·s), found 2"),
])
def test_durations_file_columns_are_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str,
                                            message: str) -> None:
    f = tmp_path / "d.csv"
    f.write_text(text)
    err = _err(capsys, ["simulate", "--trace", TRACE, *CLUSTER, "--policy", "tiresias-gittins",
                        "--durations", str(f)])
    assert err == "dlprio: " + message.format(f=f) + "\n"


def test_durations_with_its_header_still_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("duration\n10\n100\n1000\n")
    assert main(["simulate", "--trace", TRACE, *CLUSTER, "--policy", "tiresias-gittins", "--durations", str(f),
                 "--json"]) == 0


def test_trace_with_a_repeated_job_id_names_the_second_line(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("job_id,num_gpu,submit_time,duration\n1,1,0,10\n2,1,0,10\n1,2,5,10\n")
    assert _err(capsys, ["simulate", "--trace", str(f), *CLUSTER]) == (
        f"dlprio: {f}:4: job_id '1' repeats line 2; each job is one row (drop or rename one)\n")


def _row(job_id: str) -> HistoryRow:
    return HistoryRow(job_id, "u", "a", "p", 0, 0, 1, 1, 10, 10, 10, 10, "COMPLETED", 1, "self")


def test_history_trace_with_a_repeated_job_id_names_the_second_line(tmp_path: Path) -> None:
    buf = io.StringIO()
    write_rows([_row("40"), _row("41"), _row("42"), _row("41")], buf)
    f = tmp_path / "h.csv"
    f.write_text(buf.getvalue())
    with pytest.raises(HistoryError) as err:
        read_rows(str(f))
    assert str(err.value) == f"{f}:5: job_id '41' repeats line 3; each job is one row (export again, or drop one)"
