"""Trace readers (prioritizer.sim.traces): formats, skipping, --since, errors naming file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.sim.traces import TraceError, read_cluster_spec, read_trace

DATA = Path(__file__).resolve().parents[3] / "data" / "traces"
PHILLY_HEADER = "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"


def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_tiresias_60_jobs() -> None:
    trace = read_trace(DATA / "tiresias" / "60_job.csv")
    assert trace.format == "tiresias" and len(trace.jobs) == 60 and trace.skipped_jobs == 0
    first = trace.jobs[0]   # row "0,1,0,606,vgg19,164,30"
    assert (first.name, first.num_gpus, first.submit, first.duration, first.line) == (
        "0", 1, 0.0, 164.0, 2)


def test_philly_dense_window_has_the_issue_job_count() -> None:
    trace = read_trace(DATA / "philly-15k" / "philly_data_training.csv", since=4147200)
    assert trace.format == "philly" and len(trace.jobs) == 14237
    assert trace.jobs[0].submit == 0.0


def test_itp_cluster04_all_jobs() -> None:
    trace = read_trace(DATA / "itp-2021" / "cluster04.csv")
    assert trace.format == "itp" and len(trace.jobs) == 15802
    assert trace.jobs[0].submit == 0.0 and trace.jobs[0].num_gpus == 16   # 5810 re-based


def test_philly_submit_is_running_sum_and_skips_are_counted(tmp_path: Path) -> None:
    path = write(tmp_path, PHILLY_HEADER
                 + "1,a,1,0,1,7,100,0,Pass\n"     # first row: submit 0 whatever the interval
                 + "2,a,0,4,1,10,50,0,Pass\n"     # CPU-only: skipped, its interval counts
                 + "3,a,2,0,1,5,30,0,Pass\n"      # submit 15
                 + "4,a,4,0,1,5,0,0,Killed\n"     # zero duration: skipped
                 + "5,a,8,0,1,1,9,0,Pass\n")      # submit 21
    trace = read_trace(path)
    assert [(j.name, j.submit, j.num_gpus, j.duration) for j in trace.jobs] == [
        ("1", 0.0, 1, 100.0), ("3", 15.0, 2, 30.0), ("5", 21.0, 8, 9.0)]
    assert trace.skipped_jobs == 2


def test_philly_blank_lines_before_the_first_job_do_not_shift_the_clock(tmp_path: Path) -> None:
    """The first job row is at 0 whatever lines come before it: were a blank line after the
    header to take that place, the first job's interval (500) would shift every submit time
    and --since would keep the wrong jobs."""
    rows = ("1,a,2,0,1,500,100,0,Pass\n2,b,2,0,1,10,50,0,Pass\n3,c,4,0,1,20,30,0,Pass\n")
    plain = read_trace(write(tmp_path, PHILLY_HEADER + rows, "plain.csv"), since=10)
    blank = read_trace(write(tmp_path, PHILLY_HEADER + "\n" + rows, "blank.csv"), since=10)
    assert [(j.name, j.submit) for j in plain.jobs] == [("2", 0.0), ("3", 20.0)]
    assert [(j.name, j.submit) for j in blank.jobs] == [("2", 0.0), ("3", 20.0)]


def test_philly_submit_past_the_bound_names_its_line(tmp_path: Path) -> None:
    """Each interval is within 10¹¹ s; their running sum, the submit time, is bounded too."""
    path = write(tmp_path, PHILLY_HEADER + "1,a,1,0,1,0,100,0,Pass\n"
                 + "2,b,1,0,1,90000000000,100,0,Pass\n3,c,1,0,1,90000000000,100,0,Pass\n")
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert str(err.value) == (f"{path}:4: 1.8e+11: the submit time, the running sum of "
                              "interval, is over 1e+11 s; check the intervals")


def test_since_keeps_and_rebases(tmp_path: Path) -> None:
    path = write(tmp_path, "job_id,submission_time,duration,num_gpu\n"
                 "a,100,10,1\nb,200,10,0\nc,300,10,2\nd,450,10,4\n")
    trace = read_trace(path, since=200)
    assert [(j.name, j.submit, j.job_id) for j in trace.jobs] == [("c", 0.0, 0), ("d", 150.0, 1)]
    assert trace.skipped_jobs == 1   # "b" is inside the window


def test_equal_submit_times_keep_file_order(tmp_path: Path) -> None:
    path = write(tmp_path, "job_id,num_gpu,submit_time,duration\n"
                 "x,1,5,1\ny,1,0,1\nz,1,5,1\n")
    assert [j.name for j in read_trace(path).jobs] == ["y", "x", "z"]


def test_format_can_be_forced(tmp_path: Path) -> None:
    # both submit_time (tiresias) and submission_time (itp) present: detection picks itp
    path = write(tmp_path, "job_id,num_gpu,submit_time,duration,submission_time\n"
                 "1,1,5,7,9\n2,1,6,7,100\n")
    assert [j.submit for j in read_trace(path).jobs] == [0.0, 91.0]
    assert [j.submit for j in read_trace(path, fmt="tiresias").jobs] == [0.0, 1.0]


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("job_id,num_gpu,submit_time,duration\n1,1,0,5\n2,x,3,5\n",
                 r"t\.csv:3: num_gpu is not a number: 'x'", id="non-number"),
    pytest.param("job_id,num_gpu,submit_time,duration\n1,1,0,-5\n",
                 r"t\.csv:2: duration must be >= 0", id="negative-duration"),
    pytest.param("job_id,num_gpu,submit_time,duration\n1,1,0\n",
                 r"t\.csv:2: 3 columns, the header has 4", id="missing-column-in-row"),
    pytest.param("job_id,num_gpu,duration\n1,1,0\n", r"t\.csv:1: unknown trace header",
                 id="unknown-header"),
    pytest.param("job_id,num_gpu,submit_time,duration\n1,1.5,0,5\n",
                 r"t\.csv:2: num_gpu must be a whole number", id="fractional-gpus"),
    pytest.param("job_id,num_gpu,submit_time,duration\n1,1,nan,5\n",
                 r"t\.csv:2: submit_time must be finite", id="nan"),
    pytest.param("", r"t\.csv:1: empty file", id="empty"),
    # float() reads these; a trace number is ASCII digits, an optional '.' and exponent
    pytest.param("job_id,num_gpu,submit_time,duration\n1,1,0,1_000\n",
                 r"t\.csv:2: duration is not a plain decimal number: '1_000' \(ASCII digits",
                 id="underscore"),
    pytest.param("job_id,num_gpu,submit_time,duration\n1,1,0,5\n2,\uff18,3,5\n",
                 r"t\.csv:3: num_gpu is not a plain decimal number: '\uff18'",
                 id="full-width-digit"),
    pytest.param("job_id,num_gpu,submit_time,duration\n1,1,\u0661\u0662,5\n",
                 r"t\.csv:2: submit_time is not a plain decimal number", id="arabic-indic"),
])
def test_malformed_rows_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        read_trace(write(tmp_path, text))


def test_forced_format_missing_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "job_id,num_gpu,submit_time,duration\n1,1,0,5\n")
    with pytest.raises(TraceError, match=r"t\.csv:1: philly trace lacks column\(s\) u_id"):
        read_trace(path, fmt="philly")


def test_missing_file() -> None:
    with pytest.raises(TraceError, match="nope.csv: cannot read"):
        read_trace("nope.csv")


def test_cluster_specs() -> None:
    assert read_cluster_spec(DATA / "tiresias" / "n2g4.csv") == (2, 4)
    assert read_cluster_spec(DATA / "tiresias" / "n4g4.csv") == (4, 4)


def test_bad_cluster_spec(tmp_path: Path) -> None:
    path = write(tmp_path, "num_switch,num_node_p_switch\n1,2\n")
    with pytest.raises(TraceError, match="lacks column num_gpu_p_node"):
        read_cluster_spec(path)


def test_cluster_spec_nodes_are_switches_times_nodes_per_switch(tmp_path: Path) -> None:
    spec = tmp_path / "c.csv"
    spec.write_text("num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n3,2,4,40,256\n")
    assert read_cluster_spec(spec) == (6, 4)


def test_binary_cluster_spec_is_a_named_error(tmp_path: Path) -> None:
    spec = tmp_path / "bin.csv"
    spec.write_bytes(b"\xff\xfe\x00bin")
    with pytest.raises(TraceError, match=r"bin.csv:1: not UTF-8 text \(byte 0xff\); save the file as UTF-8"):
        read_cluster_spec(spec)


def test_bytes_that_are_not_utf8_are_named_by_line(tmp_path: Path) -> None:
    """A byte that is not UTF-8 on the third line: the message names line 3, not an offset."""
    trace = tmp_path / "t.csv"
    trace.write_bytes(b"job_id,num_gpu,submit_time,duration\n1,1,0,10\n2,1,\xe9,10\n")
    with pytest.raises(TraceError, match=r"t.csv:3: not UTF-8 text \(byte 0xe9\)"):
        read_trace(trace)


def test_a_row_with_more_cells_than_the_header_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\n1,1,0,10\n2,1,5,10,7\n")
    with pytest.raises(TraceError, match="t.csv:3: 5 columns, the header has 4"):
        read_trace(trace)


def test_an_empty_cluster_spec_says_so(tmp_path: Path) -> None:
    spec = tmp_path / "c.csv"
    spec.write_text("")
    with pytest.raises(TraceError, match="c.csv:1: empty file; expected the header"):
        read_cluster_spec(spec)
