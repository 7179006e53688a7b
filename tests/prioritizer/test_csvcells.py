"""Every CSV reader (traces of each format, history exports, cluster specs, Gittins samples)
reads lines, headers and number cells alike (prioritizer.csvcells): the file's own line
numbers, a column named twice refused on line 1, and the same number rule."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prioritizer.cli import main
from prioritizer.csvcells import start_lines
from prioritizer.history.trace import COLUMNS, HistoryError, read_rows
from prioritizer.policy.durations import parse_samples
from prioritizer.sim.traces import TraceError, read_cluster_spec, read_trace

HISTORY_ROW = "1,u,a,p,10,10,2,1,20,10,20,10,COMPLETED,1,self,0"


@given(st.text(alphabet="a,\"\n\r 1", max_size=30))
def test_start_lines_are_the_csv_modules_line_numbers(text: str) -> None:
    reader = csv.reader(io.StringIO(text, newline=""))
    rows, starts, before = [], [], 0
    try:
        for row in reader:
            rows.append(row)
            starts.append(before + 1)
            before = reader.line_num
    except csv.Error:   # an unclosed quote at the end: the readers refuse the file
        return
    assert start_lines(rows) == starts


def _trace(path: str) -> object:
    return read_trace(path)


def _history(path: str) -> object:
    return read_rows(path)


def _spec(path: str) -> object:
    return read_cluster_spec(path)


@pytest.mark.parametrize("read, error, header, row", [
    (_trace, TraceError, "job_id,num_gpu,submit_time,duration,duration", "a,1,0,5,6"),
    (_trace, TraceError, "job_id,submission_time,duration,num_gpu,num_gpu", "a,0,5,1,2"),
    (_trace, TraceError, "u_id,user,gpu_num,interval,run_time,user", "1,a,1,0,5,b"),
    (_trace, TraceError, ",".join(COLUMNS) + ",duration", HISTORY_ROW + ",10"),
    (_history, HistoryError, ",".join(COLUMNS) + ",duration", HISTORY_ROW + ",10"),
    (_spec, TraceError, "num_switch,num_node_p_switch,num_gpu_p_node,num_gpu_p_node", "1,1,4,8"),
], ids=["tiresias", "itp", "philly", "history-as-trace", "history", "cluster-spec"])
def test_a_column_named_twice_is_refused_on_line_1(
        tmp_path: Path, read: Callable[[str], object], error: type[Exception], header: str,
        row: str) -> None:
    """With two copies of a column a reader would take one and silently drop the other."""
    path = tmp_path / "t.csv"
    path.write_text(f"{header}\n{row}\n")
    twice = header.rsplit(",", 1)[1]
    with pytest.raises(error) as exc:
        read(str(path))
    assert str(exc.value) == (f"{path}:1: the header names column {twice!r} twice; keep one (a "
                              "reader would use one copy and drop the other)")


def test_simulate_and_history_check_refuse_a_repeated_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration,duration\na,1,0,5,6\n")
    history = tmp_path / "h.csv"
    history.write_text(",".join(COLUMNS) + ",num_gpu\n" + HISTORY_ROW + ",2\n")
    cluster = ["--nodes", "1", "--gpus-per-node", "4"]
    assert main(["simulate", "--trace", str(trace), *cluster]) == 2
    assert capsys.readouterr() == ("", f"dlprio: {trace}:1: the header names column 'duration' "
                                   "twice; keep one (a reader would use one copy and drop the "
                                   "other)\n")
    assert main(["history", "check", "--trace", str(history), *cluster]) == 2
    assert capsys.readouterr() == ("", f"dlprio: {history}:1: the header names column 'num_gpu' "
                                   "twice; keep one (a reader would use one copy and drop the "
                                   "other)\n")


@pytest.mark.parametrize("read, error, text, message", [
    (_trace, TraceError, 'job_id,num_gpu,submit_time,duration\n"a\nb",1,0,5\nc,1,0,nan\n',
     "4: duration must be finite, got 'nan'"),
    (_trace, TraceError, 'job_id,num_gpu,submit_time,duration\n"a\r\nb",1,0,5\n\nc,1,0\n',
     "5: 3 columns, the header has 4"),
    (_history, HistoryError,
     ",".join(COLUMNS) + '\n"x\ny",u,a,p,10,10,2,1,20,10,20,10,COMPLETED,1,self,0\n'
     + HISTORY_ROW.replace("2,1,20", "x,1,20") + "\n", "4: num_gpu is not a number: 'x'"),
    (_spec, TraceError, 'num_switch,num_node_p_switch,num_gpu_p_node,name\n1,1,4,"a\nb"\n2,1,4,c\n',
     "4: a cluster spec has one row under the header (one cluster); remove the others"),
], ids=["trace", "trace-crlf-and-blank", "history", "cluster-spec"])
def test_an_error_names_the_line_of_the_file(
        tmp_path: Path, read: Callable[[str], object], error: type[Exception], text: str,
        message: str) -> None:
    """A quoted cell with a line break takes two lines of the file: the rows after it are
    named by the line an editor shows, as the csv module counts them."""
    path = tmp_path / "t.csv"
    path.write_bytes(text.encode())
    with pytest.raises(error) as exc:
        read(str(path))
    assert str(exc.value) == f"{path}:{message}"


def test_trace_jobs_keep_the_line_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('job_id,num_gpu,submit_time,duration\n"a\nb",1,0,5\nc,1,1,5\n')
    assert [(j.name, j.line) for j in read_trace(path).jobs] == [("a\nb", 2), ("c", 4)]


def test_cluster_spec_row_with_too_few_cells_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("num_switch,num_node_p_switch,num_gpu_p_node\n1,1\n")
    with pytest.raises(TraceError) as exc:
        read_cluster_spec(path)
    assert str(exc.value) == (f"{path}:2: the row is short: 2 cells, the header has 3 "
                              "(num_switch,num_node_p_switch,num_gpu_p_node); give one value "
                              "per column")


@pytest.mark.parametrize("cell", ["1_000", "\u0663\u0660\u0660", "\uff18"],
                         ids=["underscore", "arabic-indic", "full-width"])
def test_a_samples_file_reads_numbers_as_trace_cells(tmp_path: Path, cell: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """float() reads these as 1000, 300 and 8; a trace cell refuses them, so does a sample."""
    with pytest.raises(ValueError) as exc:
        parse_samples(f"duration\n5\n{cell}\n", "s.csv")
    assert str(exc.value) == (f"s.csv:3: duration is not a plain decimal number: {cell!r} "
                              "(ASCII digits, an optional '.' and exponent; no '_' separators)")
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\na,1,0,5\n")
    samples = tmp_path / "s.csv"
    samples.write_text(f'duration\n"5\n"\n{cell}\n')
    assert main(["simulate", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "4",
                 "--policy", "tiresias-gittins", "--durations", str(samples)]) == 2
    assert capsys.readouterr() == ("", f"dlprio: {samples}:4: duration is not a plain decimal "
                                   f"number: {cell!r} (ASCII digits, an optional '.' and "
                                   "exponent; no '_' separators)\n")
