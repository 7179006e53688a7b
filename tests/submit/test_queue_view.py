"""Unit tests of dlqueue's pure core (submit/queue_view.py) and its shell with a fake client.

Expected tables are written out by hand: column width = the widest of header and cells, two
spaces between columns, numbers right-aligned, trailing spaces stripped.
"""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from prioritizer.daemon import snapshot as public_snapshot
from slurm_plugin.slurm.client import SlurmRefused, SlurmUnreachable
from slurm_plugin.slurm.records import filter_jobs
from submit import queue_cli
from submit import queue_view as qv
from hostile import HOSTILE, HOSTILE_IDS
from queue_helpers import make_job, pub, snapshot

NOW = 10_000

JOBS = [
    make_job(104, user="dave", name="cpu-prep", gpus=0, gpus_per_node=0, submit_time=9000),
    make_job(102, user="bob", name="[red]x[/red]", reason="Resources", gpus=16, gpus_per_node=8,
             node_count=2, submit_time=9500, priority=500),
    make_job(101, name="train-a", state="RUNNING", reason="None", gpus=8, gpus_per_node=8,
             nodes="node1", node_list=("node1",), submit_time=9000, start_time=9600),
    make_job(103, user="carol", name="eval", reason="BeginTime", restart_count=1,
             submit_time=9990, eligible_time=10_011, start_time=10_011),
]
SNAP = snapshot(pub(101, 1, 14_400, preemptions=2, state="RUNNING"),
                pub(102, 0, 0, rank=1, user="bob"), pub(103, 0, 1800, rank=0, preemptions=1))


def render(rows, width=100, **kw) -> list[str]:
    """What dlqueue prints (the fast text renderer); the rich Table of --watch must agree."""
    text = qv.render_text(rows, show_service=kw.get("show_service", True))
    assert text == qv.render_table(qv.build_queue_table(rows, width, **kw), width)
    return text.splitlines()


# ------------------------------------------------------------------ table rendering

def test_table_with_snapshot_literal_lines() -> None:
    lines = render(qv.build_rows(JOBS, SNAP, NOW), show_service=True)
    assert lines == [
        "JOBID  USER   NAME          STATE    QUEUE  ATTAINED(GPU·s)  GPUS  NODES   WAIT  PREEMPTS  REASON",
        "101    alice  train-a       RUNNING  Q1               14400     8  node1  10:00         2",
        "103    carol  eval          PENDING  Q0                1800     2  1       0:10         1  "
        "requeue delay (starts in ~11s)",
        "102    bob    [red]x[/red]  PENDING  Q0                   0    16  2       8:20         0  Resources",
        "104    dave   cpu-prep      PENDING                             0  1      16:40         -  Priority",
    ]   # 104: not the daemon's (no GPU): no queue, service or preemptions of its


def test_table_without_snapshot_has_no_service_columns() -> None:
    lines = render(qv.build_rows(JOBS, None, NOW), show_service=False)
    assert lines == [
        "JOBID  USER   NAME          STATE    GPUS  NODES   WAIT  PREEMPTS  REASON",
        "101    alice  train-a       RUNNING     8  node1  10:00         0",
        "102    bob    [red]x[/red]  PENDING    16  2       8:20         0  Resources",
        "104    dave   cpu-prep      PENDING     0  1      16:40         0  Priority",
        "103    carol  eval          PENDING     2  1       0:10         1  "
        "requeue delay (starts in ~11s)",
    ]  # without ranks: priority 500 first, then equal priorities by submit time


def test_markup_is_not_interpreted_on_a_colour_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system="truecolor")
    table = qv.build_queue_table(qv.build_rows(JOBS, SNAP, NOW), 100)
    console.width = qv.natural_width(table)  # as dlqueue does on a terminal
    console.print(table, crop=False)
    text = out.getvalue()
    assert "[red]x[/red]" in text
    assert "\x1b[31m" not in text and "38;2;128;0;0" not in text  # no red foreground anywhere


@pytest.mark.parametrize("name", HOSTILE, ids=HOSTILE_IDS)
@pytest.mark.parametrize("width", [100, 30])
def test_hostile_names_shown_whole_on_one_line(name: str, width: int) -> None:
    job = make_job(7, name=name, user=name, reason=name)
    lines = render(qv.build_rows([job], None, NOW), width, show_service=False)
    assert len(lines) == 2  # header + exactly one row: no wrap, no embedded newline
    shown = name.replace("\n", "\\n").replace("\t", "\\t")
    assert lines[1].count(shown) == 3  # USER, NAME and REASON, each whole
    assert "\x1b" not in lines[1] and "…" not in lines[1]


@given(st.text(max_size=60))
def test_any_name_is_one_row_holding_its_visible_form(name: str) -> None:
    lines = render(qv.build_rows([make_job(5, name=name)], None, NOW), 80, show_service=False)
    assert len(lines) == 2 and qv.visible(name) in lines[1]
    assert not any(ch in lines[1] for ch in "\n\r\x1b\x7f\u202e\u2028")


def test_visible_escapes_controls_and_invisible_characters() -> None:
    assert qv.visible("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert qv.visible("\x1b[31mred") == "\\x1b[31mred"
    assert qv.visible("x\u202ey\u200bz") == "x\\u202ey\\u200bz"
    assert qv.visible("[red]x[/red] ünï 训练 🚀 -a $(id) #SBATCH") == (
        "[red]x[/red] ünï 训练 🚀 -a $(id) #SBATCH")


def test_ansi_escape_in_name_cannot_reach_the_terminal() -> None:
    job = make_job(8, name="\x1b]0;title\x07\x1b[2J")
    lines = render(qv.build_rows([job], None, NOW), show_service=False)
    assert "\\x1b]0;title\\x07\\x1b[2J" in lines[1]
    assert "\x1b" not in "".join(lines) and "\x07" not in "".join(lines)


def test_fit_folds_long_cells_keeping_every_character() -> None:
    name = "n" * 50 + "-end"
    rows = qv.build_rows([make_job(9, name=name, user="bob")], None, NOW)
    out = io.StringIO()
    Console(file=out, width=60, color_system=None).print(
        qv.build_queue_table(rows, 60, show_service=False, fit=True))
    lines = out.getvalue().splitlines()
    assert max(len(x) for x in lines) <= 60 and len(lines) > 2  # folded, not past the screen
    # every character survives: 50 n's of the name + the n of "-end"; nothing else has an "n"
    assert out.getvalue().count("n") == 51 and "…" not in out.getvalue()


def _watch_lines(rows, width: int, **kw) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(
        qv.build_queue_table(rows, width, fit=True, **kw))
    return [line.rstrip() for line in out.getvalue().splitlines()]


def test_watch_at_70_columns_hides_the_least_needed_and_wraps_reason() -> None:
    """Natural widths: JOBID 5, USER 5, NAME 12, STATE 7, QUEUE 5, ATTAINED 15, GPUS 4, NODES 5,
    WAIT 5, PREEMPTS 8, REASON 30; with NAME and REASON at their least (12 each) and 2 cells
    between columns: 103 > 70; without PREEMPTS 93, without ATTAINED too 76, without WAIT
    too 69 <= 70. REASON gets the rest: 70 - 57 = 13 cells."""
    lines = _watch_lines(qv.build_rows(JOBS, SNAP, NOW), 70)
    assert lines == [
        "JOBID  USER   NAME          STATE    QUEUE  GPUS  NODES  REASON",
        "101    alice  train-a       RUNNING  Q1        8  node1",
        "103    carol  eval          PENDING  Q0        2  1      requeue delay",
        "                                                         (starts in",
        "                                                         ~11s)",
        "102    bob    [red]x[/red]  PENDING  Q0       16  2      Resources",
        "104    dave   cpu-prep      PENDING            0  1      Priority",
    ]
    assert qv.watch_layout(qv.build_rows(JOBS, SNAP, NOW), 70).hidden == (
        "ATTAINED(GPU·s)", "WAIT", "PREEMPTS")


def test_watch_at_80_columns_keeps_wait() -> None:
    """As at 70 columns, 76 <= 80 once PREEMPTS and ATTAINED(GPU·s) are out: WAIT stays,
    REASON gets 80 - 64 = 16 cells."""
    lines = _watch_lines(qv.build_rows(JOBS, SNAP, NOW), 80)
    assert lines[:4] == [
        "JOBID  USER   NAME          STATE    QUEUE  GPUS  NODES   WAIT  REASON",
        "101    alice  train-a       RUNNING  Q1        8  node1  10:00",
        "103    carol  eval          PENDING  Q0        2  1       0:10  requeue delay",
        "                                                                (starts in ~11s)",
    ]


@pytest.mark.parametrize("width", [70, 80])
def test_watch_on_a_narrow_terminal_shows_id_user_state_whole(width: int) -> None:
    """The user's cluster: long names and reasons, node lists, array and hetjob ids."""
    jobs = [
        make_job(39, user="root", name="resnet50-imagenet-baseline-run-with-a-long-name",
                 state="RUNNING", reason="None", gpus=8, nodes="node2", node_list=("node2",),
                 submit_time=9000, start_time=9100),
        make_job(41, user="researcher7", name="small1", reason="Resources", gpus=32,
                 node_count=4),
        make_job(701, user="root", array_job_id=700, array_task_string="5-9,12%3",
                 reason="QOSMaxGRESPerUser"),
        make_job(684, user="bob", het_job_id=683, het_job_offset=1,
                 reason="ReqNodeNotAvail, UnavailableNodes:node[1-4]"),
    ]
    rows = qv.build_rows(jobs, SNAP, NOW)
    lines = _watch_lines(rows, width)
    assert max(len(line) for line in lines) <= width
    for jid, user, state in [("39", "root", "RUNNING"), ("41", "researcher7", "PENDING"),
                             ("700_[5-9,12%3]", "root", "PENDING"), ("683+1", "bob", "PENDING")]:
        assert any(line.split()[:2] == [jid, user] and state in line.split() for line in lines), jid
    if width == 80:   # 14 + 11 + 12 + 7 + 5 + 4 + 5 + 12 and 7 gaps of 2 = 84 > 80 with QUEUE
        assert "node2" in "".join(lines)


def _screen_lines(rows: list, width: int, height: int) -> list[str]:
    """One --watch frame of ``rows`` on a ``width`` x ``height`` terminal, as lines."""
    class View:   # the one I/O of a refresh, faked
        args = type("Args", (), {"interval": 5.0})()

        def fetch(self):
            return rows, SNAP, []

    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(
        queue_cli._screen(View(), width, height))
    return [line.rstrip() for line in out.getvalue().splitlines()]


def test_watch_screen_names_the_columns_it_leaves_out() -> None:
    lines = _screen_lines(qv.build_rows(JOBS, SNAP, NOW), 70, 30)
    assert lines[1] == "JOBID  USER   NAME          STATE    QUEUE  GPUS  NODES  REASON"
    assert lines[-2:] == [
        "not shown at 70 columns: ATTAINED(GPU·s), WAIT, PREEMPTS (widen the",
        "terminal or run dlqueue without --watch)"]


def test_watch_screen_counts_the_lines_wrapped_names_take() -> None:
    """70 x 9: four jobs whose long names wrap onto three lines each. The frame is the title,
    the header, as many whole jobs as fit, ``... N more`` and the note of the columns left out
    (two lines at 70 columns), in 9 lines at most: rows are counted by the lines they take."""
    long = "a-long-job-name-for-a-narrow-terminal"
    jobs = [make_job(20 + i, user="root", name=long, reason="Resources") for i in range(4)]
    lines = _screen_lines(qv.build_rows(jobs, SNAP, NOW), 70, 9)
    assert len(lines) <= 9, lines
    assert [line.split()[0] for line in lines[2:] if line.split() and line.split()[0].isdigit()
            ] == ["20"]
    assert lines[-3:] == [
        "... 3 more (dlqueue without --watch lists all)",
        "not shown at 70 columns: ATTAINED(GPU·s), WAIT, PREEMPTS (widen the",
        "terminal or run dlqueue without --watch)"]


def test_without_fit_wide_rows_are_never_cropped() -> None:
    name = "x" * 150
    lines = render(qv.build_rows([make_job(9, name=name)], None, NOW), 100, show_service=False)
    assert name in lines[1]


# ------------------------------------------------------------------ order

def test_order_running_then_rank_then_priority_submit_id() -> None:
    jobs = [
        make_job(1, priority=900, submit_time=100),            # unranked, top priority
        make_job(2, priority=100, submit_time=50),             # unranked, low priority, old
        make_job(3, priority=100, submit_time=40),             # same priority, older → first
        make_job(4, priority=100, submit_time=40),             # same priority+time → id 3 first
        make_job(5, state="RUNNING", start_time=300),
        make_job(6, state="RUNNING", start_time=200),
        make_job(7, priority=1),                               # rank 0 beats any priority
        make_job(8, priority=2),                               # rank 1
        make_job(9, state="COMPLETED", end_time=400),
    ]
    snap = snapshot(pub(7, 0, 0, rank=0), pub(8, 1, 5000, rank=1))
    assert [r.job_id for r in qv.build_rows(jobs, snap, NOW)] == [6, 5, 7, 8, 1, 3, 4, 2, 9]
    # Without the daemon: Slurm's order only.
    assert [r.job_id for r in qv.build_rows(jobs, None, NOW)] == [6, 5, 1, 3, 4, 2, 8, 7, 9]


def test_hetjob_components_stay_together_under_the_leader() -> None:
    jobs = [
        make_job(21, het_job_id=20, het_job_offset=1, priority=10),
        make_job(30, priority=300),
        make_job(20, het_job_id=20, het_job_offset=0, priority=400),
    ]
    rows = qv.build_rows(jobs, None, NOW)
    assert [r.display_id for r in rows] == ["20+0", "20+1", "30"]
    # the daemon ranks the unit by the leader id; both components inherit its queue
    rows = qv.build_rows(jobs, snapshot(pub(30, 0, 0, rank=0), pub(20, 1, 4000, rank=1)), NOW)
    assert [(r.display_id, r.queue) for r in rows] == [("30", 0), ("20+0", 1), ("20+1", 1)]


def test_array_element_id_form() -> None:
    rows = qv.build_rows([make_job(41, array_job_id=40, array_task_id=3),
                          make_job(40, array_job_id=40, array_task_string="4-9:2")], None, NOW)
    assert [(r.display_id, r.job_id) for r in rows] == [("40_[4-9:2]", 40), ("40_3", 41)]
    assert [(r["job_id"], r["display_id"]) for r in qv.json_rows(rows)] == [
        (40, "40_[4-9:2]"), (41, "40_3")]


def test_a_long_array_expression_is_cut_in_the_cell_only() -> None:
    """The task expression is read whole; the JOBID cell shows its first 64 characters as
    squeue's default SLURM_BITSTR_LEN does, ending in "...", and --json the whole."""
    tasks = ",".join(str(i) for i in range(0, 200, 2))
    [row] = qv.build_rows([make_job(40, array_job_id=40, array_task_string=tasks)], None, NOW)
    assert row.display_id == f"40_[{tasks}]" == qv.json_rows([row])[0]["display_id"]
    assert qv.cell_texts(row, False)[0] == "40_[" + tasks[:61] + "...]"
    assert qv.cell_texts(row, False)[0] == "40_[0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40,42,...]"
    short = "0-1000%4"
    [row] = qv.build_rows([make_job(40, array_job_id=40, array_task_string=short)], None, NOW)
    assert qv.cell_texts(row, False)[0] == "40_[0-1000%4]"


# ------------------------------------------------------------------ wait and reason

@pytest.mark.parametrize(("job", "expected"), [
    (make_job(1, submit_time=9000), 1000),                                   # pending: now - submit
    (make_job(1, state="RUNNING", submit_time=9000, start_time=9400), 400),  # waited before run
    (make_job(1, state="COMPLETED", submit_time=100, start_time=150, end_time=900), 50),
    (make_job(1, state="CANCELLED", submit_time=100, start_time=None, end_time=130), 30),
    (make_job(1, submit_time=None), 0),
    (make_job(1, submit_time=NOW + 5), 0),                                   # clock skew
], ids=["pending", "running", "completed", "cancelled-pending", "no-submit", "skew"])
def test_wait_seconds(job, expected: int) -> None:
    assert qv.wait_seconds(job, NOW) == expected


@pytest.mark.parametrize(("job", "daemon", "expected"), [
    (make_job(1, reason="BeginTime", restart_count=2, eligible_time=NOW + 121), "",
     "requeue delay (starts in ~121s)"),
    (make_job(1, reason="BeginTime", restart_count=1, eligible_time=NOW - 3), "",
     "requeue delay (starts in ~0s)"),
    (make_job(1, reason="BeginTime", restart_count=0, eligible_time=NOW + 7200), "",
     "BeginTime (eligible in 2:00:00)"),
    (make_job(1, reason="Resources"), "", "Resources"),
    (make_job(1, reason="Priority"), "Q1 behind 3 jobs", "Priority; Q1 behind 3 jobs"),
    (make_job(1, state="RUNNING", reason="None"), "", ""),
    (make_job(1, state="RUNNING", reason="None"), "preempting: grace until 12:00", "preempting: grace until 12:00"),
], ids=["requeue-delay", "requeue-due", "begin", "resources", "daemon", "running", "running-daemon"])
def test_reason_text(job, daemon: str, expected: str) -> None:
    p = pub(1, 0, 0, reason=daemon) if daemon else None
    assert qv.reason_text(job, p, NOW) == expected


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0:00"), (59, "0:59"), (61, "1:01"), (3600, "1:00:00"), (86_400 + 3661, "1-01:01:01"),
    (-5, "0:00")])
def test_format_duration(seconds: int, text: str) -> None:
    assert qv.format_duration(seconds) == text


def test_parse_states() -> None:
    assert qv.parse_states("pd,R,completed") == {"PENDING", "RUNNING", "COMPLETED"}
    assert qv.parse_states("PD,all") is None
    with pytest.raises(ValueError, match="'XX'"):
        qv.parse_states("R,XX")


# ------------------------------------------------------------------ JSON

def test_json_rows_keys_and_values() -> None:
    rows = qv.json_rows(qv.build_rows(JOBS, SNAP, NOW))
    assert all(list(r) == list(qv.JSON_KEYS) for r in rows)
    assert qv.JSON_KEYS == ("job_id", "display_id", "user", "name", "state", "queue", "attained_gpu_s", "gpus",
                            "nodes", "wait_s", "preemptions", "reason", "shards", "job_class", "forecast")
    assert rows[0] == {"job_id": 101, "display_id": "101", "user": "alice", "name": "train-a", "state": "RUNNING",
                       "queue": 1, "attained_gpu_s": 14_400, "gpus": 8, "nodes": 1,
                       "wait_s": 600, "preemptions": 2, "reason": "", "shards": 0,
                       "job_class": "production", "forecast": None}
    assert rows[3]["queue"] is None and rows[3]["attained_gpu_s"] is None
    no_daemon = qv.json_rows(qv.build_rows(JOBS, None, NOW))
    assert all(r["queue"] is None and r["attained_gpu_s"] is None for r in no_daemon)


# ------------------------------------------------------------------ the shell, with a fake client

class FakeClient:
    def __init__(self, jobs=(), error: Exception | None = None) -> None:
        self._jobs, self.error, self.calls = list(jobs), error, []

    def jobs(self, **filters):
        self.calls.append(filters)
        if self.error:
            raise self.error
        return filter_jobs(self._jobs, **filters)

    def show_partitions(self):
        if self.error:
            raise self.error
        return {"gpu": {"PartitionName": "gpu"}, "debug": {"PartitionName": "debug"}}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    def install(jobs=(), error=None) -> FakeClient:
        client = FakeClient(jobs, error)
        monkeypatch.setattr(queue_cli, "SlurmClient", lambda: client)
        # the test users are not in this machine's passwd database
        monkeypatch.setattr(queue_cli, "_user_name", lambda n: n if n in {"alice", "bob", "carol", "dave"} else None)
        return client
    return install


def test_cli_json_with_snapshot_file(fake, tmp_path, capsys) -> None:
    path = tmp_path / "snap.json"
    public_snapshot.write_snapshot(path, snapshot(*SNAP.jobs, generated_at=4e9))
    fake(JOBS)
    assert queue_cli.main(["--json", "--snapshot", str(path), "-u", "bob,carol"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["job_id"], r["queue"], r["attained_gpu_s"]) for r in out] == [(103, 0, 1800), (102, 0, 0)]


def test_cli_without_snapshot_says_so(fake, tmp_path, capsys) -> None:
    fake(JOBS)
    assert queue_cli.main(["--snapshot", str(tmp_path / "none.json"), "-j", "102"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["JOBID", "USER", "NAME", "STATE", "GPUS", "NODES", "WAIT",
                              "PREEMPTS", "REASON"]
    assert out[1].split()[:3] == ["102", "bob", "[red]x[/red]"] and len(out) == 5
    assert "snapshot not found" in out[2] and "not shown" in out[2]
    assert out[3:] == ["job 102:", "  forecast: none (no current dlprio snapshot of this "
                       "cluster: see the note above)"]


@pytest.mark.parametrize("content", ["[1, 2", "[1]", '{"version": 9}', '{"version": 1}'],
                         ids=["truncated", "list", "version", "no-jobs"])
def test_cli_malformed_snapshot_is_a_note_not_a_crash(fake, tmp_path, capsys, content) -> None:
    bad = tmp_path / "snap.json"
    bad.write_text(content)
    fake(JOBS)
    assert queue_cli.main(["--json", "--snapshot", str(bad)]) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)) == 4 and "unreadable" in captured.err


def test_cli_me_and_state_filters_reach_the_client(fake, monkeypatch, capsys) -> None:
    monkeypatch.setattr(queue_cli.getpass, "getuser", lambda: "carol")
    client = fake(JOBS)
    assert queue_cli.main(["--json", "--me", "-t", "PD", "-p", "gpu", "--snapshot", "/nonexistent"]) == 0
    assert client.calls[0]["users"] == ["carol"] and client.calls[0]["states"] == {"PENDING"}
    assert [r["job_id"] for r in json.loads(capsys.readouterr().out)] == [103]


def test_cli_unknown_partition_exits_2_naming_it(fake, capsys) -> None:
    client = fake(JOBS)
    assert queue_cli.main(["-p", "debug,gpu-a100,gpu-a100,x y", "--snapshot", "/nonexistent"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and client.calls == []   # refused before squeue is read
    assert err == ("dlqueue: -p/--partition: unknown partition 'gpu-a100', 'x y' "
                   "(scontrol show partition lists them)\n")


@pytest.mark.parametrize("argv", [[], ["-p", "gpu"]])
@pytest.mark.parametrize(("error", "code", "text"), [
    (SlurmUnreachable(["squeue"], "Unable to contact slurm controller"), 3, "unreachable"),
    (SlurmRefused(["squeue"], "Invalid user\nsecond line"), 4, "Invalid user\\nsecond line"),
])
def test_cli_slurm_errors_are_one_line(fake, capsys, error, code: int, text: str,
                                      argv: list[str]) -> None:
    fake(error=error)
    assert queue_cli.main(["--snapshot", "/nonexistent", *argv]) == code
    err = capsys.readouterr().err
    assert text in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv", [["-j", "abc"], ["-t", "bogus"], ["--json", "--watch"],
                                  ["--iterations", "2"], ["--watch", "--interval", "0"]])
def test_cli_bad_arguments_exit_2(fake, capsys, argv) -> None:
    fake(JOBS)
    with pytest.raises(SystemExit) as exc:
        queue_cli.main(argv)
    err = capsys.readouterr().err.splitlines()
    assert exc.value.code == 2 and err[-1].startswith("dlqueue: ") and "Traceback" not in err


def test_cli_watch_stops_after_iterations(fake, capsys, monkeypatch) -> None:
    client = fake(JOBS)
    slept: list[float] = []
    monkeypatch.setattr(queue_cli.time, "sleep", slept.append)
    assert queue_cli.main(["--watch", "--iterations", "3", "--interval", "1",
                           "--snapshot", "/nonexistent"]) == 0
    assert len(client.calls) == 3 and slept == [1.0, 1.0]
    assert "[red]x[/red]" in capsys.readouterr().out


def test_default_snapshot_path_from_daemon_config(tmp_path) -> None:
    cfg = tmp_path / "dlprio.yaml"
    assert queue_cli.default_snapshot_path(str(cfg)) == (public_snapshot.DEFAULT_PATH, "")
    cfg.write_text("snapshot_path: /srv/dlprio/snap.json\n")
    assert queue_cli.default_snapshot_path(str(cfg)) == ("/srv/dlprio/snap.json", "")
    cfg.write_text("daemon:\n  snapshot_path: /x/s.json\n")
    assert queue_cli.default_snapshot_path(str(cfg)) == ("/x/s.json", "")
    # a relative path is the config file's directory's, whatever the working directory
    cfg.write_text("snapshot_path: run/s.json\n")
    assert queue_cli.default_snapshot_path(str(cfg)) == (f"{tmp_path}/run/s.json", "")
    cfg.write_text("daemon: [unclosed\n")
    path, note = queue_cli.default_snapshot_path(str(cfg))
    assert path == public_snapshot.DEFAULT_PATH and "unreadable" in note
    # a link to a config that is gone: the note says so (the daemon's config is not silently
    # taken as absent)
    link = tmp_path / "link.yaml"
    link.symlink_to(tmp_path / "gone.yaml")
    assert queue_cli.default_snapshot_path(str(link)) == (
        public_snapshot.DEFAULT_PATH, f"{link} unreadable (FileNotFoundError)")


def test_missing_snapshot_note() -> None:
    snap, note, _ = queue_cli.load_snapshot("/nonexistent/x.json", NOW)
    assert snap is None and "not found" in note


def test_old_snapshot_says_since_when_no_daemon_updated_it(tmp_path) -> None:
    path = tmp_path / "s.json"
    public_snapshot.write_snapshot(path, snapshot(generated_at=NOW - 600))
    snap, note, _ = queue_cli.load_snapshot(str(path), NOW)
    assert snap is not None and "(10:00 ago, cycle 7): QUEUE and ATTAINED are from then" in note
    public_snapshot.write_snapshot(path, snapshot(generated_at=NOW - 20))
    assert queue_cli.load_snapshot(str(path), NOW)[1] == ""


def test_a_snapshot_written_ahead_of_the_clock_is_not_taken_as_fresh(tmp_path) -> None:
    """Written 600 s after ``now`` (the clock set back since): stale, its age unknown; 30 s
    ahead is within the 60 s two clocks may differ by, and current."""
    path = tmp_path / "s.json"
    public_snapshot.write_snapshot(path, snapshot(generated_at=NOW + 600))
    snap, note, _ = queue_cli.load_snapshot(str(path), NOW)
    assert snap is not None and note == (
        "the dlprio daemon's snapshot was written at 1970-01-01 02:56:40 UTC, 10:00 ahead of "
        "this host's clock (cycle 7; the clock was set back since, or runs behind the "
        "daemon's), so its age is not known: QUEUE and ATTAINED are from then, blank for jobs "
        "it had not seen")
    public_snapshot.write_snapshot(path, snapshot(generated_at=NOW + 30))
    assert queue_cli.load_snapshot(str(path), NOW)[1] == ""


def test_cli_watch_survives_slurm_errors(fake, capsys, monkeypatch) -> None:
    client = fake(error=SlurmUnreachable(["squeue"], "Unable to contact slurm controller"))
    monkeypatch.setattr(queue_cli.time, "sleep", lambda s: None)
    assert queue_cli.main(["--watch", "--iterations", "2", "--interval", "1",
                           "--snapshot", "/nonexistent"]) == 0
    out = capsys.readouterr().out
    # into a pipe only changes are printed: the same error twice is one line
    assert len(client.calls) == 2 and out.count("Slurm error: Unable to contact") == 1


def test_columns_are_measured_in_display_cells() -> None:
    """CJK characters take two terminal cells: the columns after a CJK name stay aligned."""
    jobs = [make_job(1, name="训练任务", user="alice"), make_job(2, name="ab", user="bob"),
            make_job(3, name="ｆｕｌｌ", user="carol")]
    lines = render(qv.build_rows(jobs, None, NOW), show_service=False)
    # STATE starts at the same display cell on every line: JOBID(5)+2, USER(5)+2, NAME(8)+2
    from rich.cells import cell_len
    starts = {cell_len(line[:line.index("PENDING" if i else "STATE")]) for i, line in enumerate(lines)}
    assert starts == {5 + 2 + 5 + 2 + 8 + 2}


def test_watch_into_a_pipe_prints_only_changes() -> None:
    a = make_job(1, name="a", user="alice", submit_time=9000)
    b = make_job(2, name="b", user="bob", submit_time=9000)
    state, first = qv.changes(None, qv.build_rows([a, b], None, NOW), show_service=False)
    assert first.splitlines()[0].startswith("JOBID") and len(first.splitlines()) == 3
    # 5 s later: WAIT moved for both, nothing else: nothing to print
    state, text = qv.changes(state, qv.build_rows([a, b], None, NOW + 5), show_service=False)
    assert text == ""
    # a starts, b leaves, c arrives: a and c as rows under the header, b as gone
    a2 = make_job(1, name="a", user="alice", state="RUNNING", reason="None", submit_time=9000,
                  start_time=NOW + 8, nodes="node1", node_list=("node1",))
    c = make_job(3, name="c", user="carol", submit_time=NOW + 9)
    state, text = qv.changes(state, qv.build_rows([a2, c], None, NOW + 10), show_service=False)
    lines = text.splitlines()
    assert lines[0].startswith("JOBID") and [ln.split()[0] for ln in lines[1:3]] == ["1", "3"]
    assert lines[1].split()[3] == "RUNNING" and lines[3] == "gone: 2" and len(lines) == 4


def test_cli_watch_default_interval_is_five_seconds() -> None:
    assert queue_cli.build_parser().parse_args(["--watch"]).interval >= 5


def test_cli_unknown_user_is_a_usage_error(monkeypatch, capsys) -> None:
    client = FakeClient(JOBS, None)
    monkeypatch.setattr(queue_cli, "SlurmClient", lambda: client)
    with pytest.raises(SystemExit) as info:  # the real passwd lookup: root exists, nosuchuser not
        queue_cli.main(["-u", "root,nosuchuser", "--snapshot", "/nonexistent"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and client.calls == []
    # one line, without argparse's usage block
    assert err == "dlqueue: -u/--user: unknown user 'nosuchuser' (not in the passwd database)\n"


def test_cli_known_user_by_name_or_uid(monkeypatch, capsys) -> None:
    client = FakeClient(JOBS, None)
    monkeypatch.setattr(queue_cli, "SlurmClient", lambda: client)
    assert queue_cli.main(["--json", "-u", "root,0", "--snapshot", "/nonexistent"]) == 0
    # uid 0 is root by definition; squeue -u takes uids too, the client filters by name
    assert client.calls[0]["users"] == ["root", "root"] and json.loads(capsys.readouterr().out) == []


def test_docs_example_is_what_dlqueue_prints_for_the_same_jobs() -> None:
    """docs/dlqueue.md's example shows these JOBS and SNAP (alice's 8-GPU job has run 30 min over
    its runs: 14,400 GPU·s): the header and units there must be the real ones."""
    from pathlib import Path

    import dataclasses

    doc = (Path(__file__).resolve().parents[2] / "docs" / "dlqueue.md").read_text(encoding="utf-8")
    example = doc.split("```console\n$ dlqueue\n", 1)[1].split("```", 1)[0]
    # with a forecast made 30 s ago: 103 starts in 25 min, 102 in 3 h (medians)
    forecast = {"made_at": NOW - 30, "draws": 20, "horizon_s": 86400.0, "stale_after_s": 900.0,
                "jobs": {"103": {"start": [NOW + 600, NOW + 1500, NOW + 3600],
                                 "finish": [NOW + 700, NOW + 2000, NOW + 9000],
                                 "preempt_chance": 0.0, "ahead": 0, "first_ahead": []},
                         "102": {"start": [NOW + 3600, NOW + 3 * 3600, NOW + 6 * 3600],
                                 "finish": [NOW + 4000, NOW + 4 * 3600, None],
                                 "preempt_chance": 0.0, "ahead": 1, "first_ahead": [103]}}}
    rows = qv.build_rows(JOBS, dataclasses.replace(SNAP, forecast=forecast), NOW)
    text = qv.render_text(rows, show_service=True, show_start=True)
    assert text == qv.render_table(qv.build_queue_table(rows, 110, show_start=True), 110)
    assert example.splitlines() == text.splitlines()
    assert example.splitlines()[0].split()[5] == "ATTAINED(GPU·s)"


def test_shard_and_opportunistic_jobs_show_their_share_and_class() -> None:
    jobs = [make_job(201, name="half", state="RUNNING", reason="None", gpus=0, gpus_per_node=0,
                     shards_per_node=2, nodes="node1", node_list=("node1",), submit_time=9000,
                     start_time=9600),
            make_job(202, name="spare", gpus=1, gpus_per_node=1, submit_time=9900,
                     comment="dl:v1;signal=USR2;grace=60;class=opportunistic")]
    rows = qv.build_rows(jobs, None, NOW)
    assert [(r.shards, r.job_class) for r in rows] == [(2, "production"), (0, "opportunistic")]
    assert render(rows, show_service=False) == [
        "JOBID  USER   NAME   STATE       GPUS  NODES   WAIT  PREEMPTS  REASON",
        "201    alice  half   RUNNING  shard:2  node1  10:00         0",
        "202    alice  spare  PENDING        1  1       1:40         0  opportunistic; Priority",
    ]


def test_cli_a_stopped_daemons_forecast_is_blank_and_said_stale(fake, tmp_path, capsys,
                                                                monkeypatch) -> None:
    """The snapshot is 400 s old (past 300 s, the limit of a file that does not give the
    daemon's cycle: the daemon stopped); its
    forecast, made 410 s ago and stale only after 900 s by its own measure, is not shown."""
    now = 1_000_000.0
    monkeypatch.setattr(queue_cli.time, "time", lambda: now)
    forecast = {"made_at": now - 410, "draws": 20, "horizon_s": 86400.0, "stale_after_s": 900.0,
                "jobs": {"102": {"start": [now + 60, now + 1500, now + 3600],
                                 "finish": [now + 100, now + 2000, now + 9000],
                                 "preempt_chance": 0.0, "ahead": 1, "first_ahead": [103]}}}
    path = tmp_path / "snap.json"
    snap = snapshot(*SNAP.jobs, generated_at=now - 400)
    public_snapshot.write_snapshot(path, dataclasses.replace(snap, forecast=forecast))
    fake(JOBS)
    assert queue_cli.main(["--snapshot", str(path), "-j", "102"]) == 0
    out = capsys.readouterr().out.splitlines()
    heads = out[0].split()
    assert "START" in heads and out[1].split()[heads.index("START")] == "0"   # blank: PREEMPTS next
    assert any("the start-time forecast was made at" in line and "START is blank" in line
               for line in out)
    assert "  forecast: STALE (made at 13:39:50 UTC, 7m ago; the daemon is stopped or late): " \
           "not shown" in out
