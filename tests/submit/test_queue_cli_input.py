"""dlqueue's command line refuses what it cannot use (exit 2 naming the option or file) and
selects what it prints (numeric options, empty filters, JOBID
forms, snapshot files that are not files, another cluster's snapshot, a stale snapshot's age
in --watch). Slurm is replaced by a filtering fake: these are argument and printing rules."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from prioritizer.daemon import snapshot as public_snapshot
from queue_helpers import make_job, pub, snapshot
from slurm_plugin.slurm.records import filter_jobs
from submit import queue_cli


class FakeClient:
    def __init__(self, jobs=()) -> None:
        self._jobs, self.calls = list(jobs), []

    def jobs(self, **filters):
        self.calls.append(filters)
        return filter_jobs(self._jobs, **filters)


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A fake Slurm holding a hetjob 683 (+0, +1), an array element 700_3, the array's
    pending elements folded as squeue shows them (700_[5-9,12%3]) and job 800."""
    fake = FakeClient([
        make_job(683, het_job_id=683, het_job_offset=0),
        make_job(684, het_job_id=683, het_job_offset=1),
        make_job(701, array_job_id=700, array_task_id=3),
        make_job(700, array_job_id=700, array_task_string="5-9,12%3"),
        make_job(800)])
    monkeypatch.setattr(queue_cli, "SlurmClient", lambda: fake)
    monkeypatch.setattr(queue_cli, "_user_name", lambda n: n if n in {"alice", "bob"} else None)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    (tmp_path / "slurm.conf").write_text("# test\nClusterName=mine\n")
    return fake


def usage_error(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    with pytest.raises(SystemExit) as exc:
        queue_cli.main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(("option", "value"), [
    ("--interval", "nan"), ("--interval", "inf"), ("--interval", "-inf"),
    ("--interval", "1e308"), ("--interval", "9" * 400), ("--interval", "1e-9"),
    ("--interval", "0.5"), ("--interval", "0"), ("--interval", "-5"), ("--interval", "86401"),
    ("--iterations", "0"), ("--iterations", "-1"), ("--iterations", "9" * 30),
    ("--iterations", "1.5"), ("--iterations", "nan"),
    ("--interval", "1_0"), ("--iterations", "1_0"), ("--iterations", "0x10")])
def test_numeric_options_out_of_range_exit_2(client, capsys, option: str, value: str) -> None:
    """The rules of prioritizer.numbers (plain decimal forms, finite, bounded): Python's own
    float()/int() would take 1_0 as 10."""
    # --iterations 1 first: a later --iterations replaces it; an accepted value ends at once
    err = usage_error(["--watch", "--snapshot", "/nonexistent", "--iterations", "1",
                       f"{option}={value}"], capsys)
    rule = ("expected a number >= 1 and <= 86400" if option == "--interval"
            else "expected a whole number from 1 to 1,000,000,000")
    assert err.startswith(f"dlqueue: {option}: {rule}, got ") and err.count("\n") == 1
    assert client.calls == []


def test_interval_range_and_default(client, capsys, monkeypatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(queue_cli.time, "sleep", slept.append)
    assert queue_cli.main(["--watch", "--iterations", "2", "--interval", "1",
                           "--snapshot", "/nonexistent"]) == 0
    assert slept == [1.0]
    assert queue_cli.build_parser().parse_args(["--watch"]).interval == 5.0


@pytest.mark.parametrize(("argv", "option"), [
    (["-u", ""], "-u/--user"), (["-u", ","], "-u/--user"), (["-u", "alice,"], "-u/--user"),
    (["-p", ""], "-p/--partition"), (["-p", "gpu,,cpu"], "-p/--partition"),
    (["-j", "1,,2"], "-j/--jobs"), (["-j", ""], "-j/--jobs"), (["-j", "0"], "-j/--jobs"),
    (["-j", "12+"], "-j/--jobs"), (["-j", "a_1"], "-j/--jobs"),
    (["--snapshot="], "--snapshot"), (["--interval", "3"], "--interval"),
    (["--iterations", "3"], "--iterations")])
def test_empty_or_lone_filters_exit_2(client, capsys, argv: list[str], option: str) -> None:
    err = usage_error(argv, capsys)
    assert option in err and client.calls == []


@pytest.mark.parametrize(("value", "bad"), [
    (v, v) for v in ("0", "12+", "a_1", "700_[5", "700_[9-5]", "700_[5-]", "700_[x]", "700_[1:2]",
                     "700_[1-9:0]", "700_[1-3%x]", "700_[]", "700_[1-4000001]", "700_4000001",
                     "1_99999999999999999999", "700_[1]]", "0_[1]", "00", "00_[1]",
                     "4294967294", "12+4294967294")
] + [("1,,2", ""), ("700,", ""), ("700_[5-9,12],x", "x")])
def test_bad_job_ids_are_one_line(client, capsys, value: str, bad: str) -> None:
    """One line naming the option, the first bad id and the forms, exit 2, Slurm not asked
    (was argparse's usage text); an element index over Slurm's largest (MaxArraySize is at most
    4000001) is no job id."""
    assert usage_error(["-j", value], capsys) == (
        f"dlqueue: -j/--jobs: {bad!r} is not a job id (ids are 12, 12+1 for a hetjob component, "
        "12_3 for an array element or 12_[1-5] for its pending elements, comma-separated: "
        "-j 12,15+1)\n")
    assert client.calls == []


ID_FORMS = ("(ids are 12, 12+1 for a hetjob component, 12_3 for an array element or 12_[1-5] "
            "for its pending elements, comma-separated: -j 12,15+1)")


@pytest.mark.parametrize(("value", "echo"), [
    # the echo is the first 60 characters of the quoted id (quote included), then its length
    ("9" * 5000, "'" + "9" * 59 + "… (5,000 characters)"),
    ("1_" + "9" * 5000, "'1_" + "9" * 57 + "… (5,002 characters)"),
    ("1+" + "9" * 5000, "'1+" + "9" * 57 + "… (5,002 characters)"),
    ("9" * 5000 + "_[1]", "'" + "9" * 59 + "… (5,004 characters)"),
    ("0" * 5000 + "1_" + "9" * 5000, "'" + "0" * 59 + "… (10,002 characters)"),
    ("12,\x1b[31m" + "7" * 100, "'\\x1b[31m" + "7" * 51 + "… (105 characters)")])
def test_long_bad_job_ids_are_echoed_bounded(client, capsys, value: str, echo: str) -> None:
    """A bad id is echoed as dlprio explain echoes a JOBID (validation.shown): a 5,000-digit id
    printed all 5,000 digits; an escape sequence is written as its escape, never sent."""
    err = usage_error(["-j", value], capsys)
    assert err == f"dlqueue: -j/--jobs: {echo} is not a job id {ID_FORMS}\n"
    assert client.calls == []


@pytest.mark.parametrize(("argv", "message"), [
    (["-u", "a" * 5000 + ","], "-u/--user: '" + "a" * 59 + "… (5,001 characters): empty name in "
     "the list (comma-separated names, e.g. alice,bob)"),
    (["-p", ",\n" + "p" * 300], "-p/--partition: ',\\n" + "p" * 56 + "… (302 characters): empty "
     "name in the list (comma-separated names, e.g. alice,bob)"),
    (["-t", "PD," + "X" * 5000], "-t/--states: unknown job state '" + "X" * 59 + "… (5,000 characters); "
     "use codes such as BF, CA, CD, CF, CG, DL, F, NF, OOM, PD, PR, R, RD, RF, RH, RQ, RS, RV, S, SE, "
     "SI, SO, ST, TO or 'all' (squeue(1))"),
    (["-u", ",".join(f"nobody{i}" for i in range(7))], "-u/--user: unknown user 'nobody0', "
     "'nobody1', 'nobody2', 'nobody3', 'nobody4' and 2 more (not in the passwd database)"),
    (["-u", "alice,\x1b]0;x\x07" + "z" * 200], "-u/--user: unknown user '\\x1b]0;x\\x07"
     + "z" * 47 + "… (206 characters) (not in the passwd database)")])
def test_other_filters_echo_bad_values_bounded(client, capsys, argv: list[str], message: str) -> None:
    """Every dlqueue filter echoes a bad value as -j does: quoted, escaped, cut to 60 characters
    with its length, at most five unknown users named."""
    assert usage_error(argv, capsys) == f"dlqueue: {message}\n"   # one line, no usage block
    assert client.calls == []


@pytest.mark.parametrize(("selector", "ids"), [
    ("683+1", [684]), ("683+0", [683]), ("683", [683, 684]), ("684", [684]),
    ("700_3", [701]), ("700", [700, 701]), ("683+1,800", [684, 800]), ("700_4", []),
    # a pending element is in the folded row 700_[5-9,12%3] (3 is the throttle, not a task)
    ("700_5", [700]), ("700_9", [700]), ("700_12", [700]), ("700_10", []), ("700_13", []),
    ("700_3,700_7", [700, 701]), ("800_5", []), ("683_5", []),
    # the folded id itself, as dlqueue prints it, and other element lists of that form
    ("700_[5-9,12%3]", [700]), ("700_[5-9,12]", [700]), ("700_[12]", [700]), ("700_[3]", [701]),
    ("700_[1-12:2]", [700, 701]), ("700_[10-11]", []), ("700_[13-4000000]", []),
    ("700_[10-11],800", [800]), ("800_[1-3]", []),
    # leading zeros, as squeue reads numbers (strtol): 0683+1 is 683+1, 700_07 is 700_7
    ("0683+1", [684]), ("0683", [683, 684]), ("700_07", [700]), ("0700_[005-006]", [700]),
    # the largest id Slurm can give (uint32 below NO_VAL: a federated cluster's ids)
    ("4294967293", []), ("700_4000000", [])])
def test_jobid_forms_dlqueue_prints_are_accepted(client, capsys, selector: str,
                                                 ids: list[int]) -> None:
    found = 0 if ids else 5   # NOT_FOUND: no job it names is in the table
    assert queue_cli.main(["-j", selector, "--json", "--snapshot", "/nonexistent"]) == found
    assert sorted(r["job_id"] for r in json.loads(capsys.readouterr().out)) == ids


def _fifo(tmp_path: Path) -> str:
    os.mkfifo(tmp_path / "fifo")
    return str(tmp_path / "fifo")


@pytest.mark.parametrize("make", [lambda p: "/dev/zero", lambda p: "/dev/urandom", _fifo,
                                  lambda p: str(p)])
def test_snapshot_that_is_not_a_regular_file_exit_2(client, capsys, tmp_path, make) -> None:
    path = make(tmp_path)
    err = usage_error(["--snapshot", path], capsys)
    assert f"--snapshot {path}: not a regular file" in err and client.calls == []


def test_snapshot_over_the_size_cap_exit_2(client, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(queue_cli, "MAX_SNAPSHOT_BYTES", 100)
    (tmp_path / "big.json").write_text(" " * 101)
    assert "over the" in usage_error(["--snapshot", str(tmp_path / "big.json")], capsys)


def test_control_characters_in_a_path_are_escaped(client, capsys, tmp_path) -> None:
    bad = tmp_path / "a\x1b[31mred\nb"
    bad.mkdir()
    err = usage_error(["--snapshot", str(bad)], capsys)
    assert "\x1b" not in err and err.startswith("dlqueue: --snapshot ") and err.count("\n") == 1
    assert "\\x1b[31mred\\nb: not a regular file" in err.splitlines()[-1]


def test_snapshot_of_another_cluster_is_ignored(client, capsys, tmp_path) -> None:
    path = tmp_path / "s.json"
    queue_cli_snap = snapshot(generated_at=queue_cli.time.time())
    public_snapshot.write_snapshot(path, type(queue_cli_snap)(**{**vars(queue_cli_snap),
                                                                   "cluster": "other"}))
    assert queue_cli.main(["--snapshot", str(path)]) == 0
    out = capsys.readouterr().out
    assert "QUEUE" not in out and "for cluster 'other', not 'mine': ignored" in out
    assert out.count("\n") == 7   # header, 5 rows, one note


@pytest.mark.parametrize(("conf", "stamped"), [
    ("ClusterName=mine\n", "mine"), ("clustername = Mine # ours\n", "mine"), ("", None)])
def test_snapshot_of_this_cluster_or_of_an_older_daemon_is_used(client, capsys, tmp_path,
                                                                conf: str, stamped) -> None:
    """The writer stamps the ClusterName of its slurm.conf ("" : it knows none, as an older
    daemon): the file holds exactly that; this cluster's reader uses the snapshot, another
    cluster's reader ignores a stamped one and uses an unstamped one."""
    (tmp_path / "slurm.conf").write_text(conf)
    path = tmp_path / "s.json"
    public_snapshot.write_snapshot(path, snapshot(generated_at=queue_cli.time.time()))
    assert json.loads(path.read_text()).get("cluster") == stamped
    (tmp_path / "slurm.conf").write_text("ClusterName=mine\n")
    assert queue_cli.main(["--snapshot", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("JOBID") and "QUEUE" in out.splitlines()[0]
    (tmp_path / "slurm.conf").write_text("ClusterName=other\n")
    assert queue_cli.main(["--snapshot", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("QUEUE" in out.splitlines()[0]) == (stamped is None)
    assert ("for cluster 'mine', not 'other': ignored" in out) == (stamped is not None)


def test_writer_stamps_its_cluster(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    (tmp_path / "slurm.conf").write_text("SlurmctldPort=7500\nCLUSTERNAME=Alpha\n")
    public_snapshot.write_snapshot(tmp_path / "s.json", snapshot())
    assert json.loads((tmp_path / "s.json").read_text())["cluster"] == "alpha"
    assert public_snapshot.read_snapshot(tmp_path / "s.json").cluster == "alpha"


def test_watch_into_a_pipe_does_not_print_a_stale_snapshots_age(client, capsys, tmp_path,
                                                                monkeypatch) -> None:
    clock = [1_000_000.0]
    monkeypatch.setattr(queue_cli.time, "time", lambda: clock[0])
    monkeypatch.setattr(queue_cli.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    path = tmp_path / "s.json"
    public_snapshot.write_snapshot(path, snapshot(generated_at=clock[0] - 3600))
    assert queue_cli.main(["--watch", "--iterations", "4", "--interval", "7",
                           "--snapshot", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("--- dlqueue") == 1 and out.count("(1:00:00 ago, cycle 7)") == 1


STOPPED = ("no dlprio daemon has updated its snapshot since 2027-01-15 07:00:00 UTC "
           "(1:00:00 ago, cycle 7)")


def test_old_snapshot_of_none_of_the_jobs_shown_leaves_the_queue_columns_out(
        client, capsys, tmp_path, monkeypatch) -> None:
    """A daemon stopped after its jobs ended (the demo's): its snapshot holds nothing of what
    is shown now, so dlqueue shows what it shows without a daemon and says why."""
    monkeypatch.setattr(queue_cli.time, "time", lambda: 1_800_000_000.0)
    path = tmp_path / "s.json"
    public_snapshot.write_snapshot(path, snapshot(pub(42, 1, 900.0), generated_at=1_799_996_400))
    assert queue_cli.main(["--snapshot", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["JOBID", "USER", "NAME", "STATE", "GPUS", "NODES", "WAIT",
                                "PREEMPTS", "REASON"]
    assert lines[-1] == (STOPPED + " and none of these jobs is in it: queue and attained "
                         "service are not shown")
    assert queue_cli.main(["--json", "--snapshot", str(path)]) == 0
    out, err = capsys.readouterr()
    assert {row["queue"] for row in json.loads(out)} == {None}
    assert err == "dlqueue: " + lines[-1] + "\n"


def test_old_snapshot_holding_a_job_shown_keeps_its_queue_and_says_since_when(
        client, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(queue_cli.time, "time", lambda: 1_800_000_000.0)
    path = tmp_path / "s.json"
    public_snapshot.write_snapshot(path, snapshot(pub(800, 1, 900.0), generated_at=1_799_996_400))
    assert queue_cli.main(["--snapshot", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "QUEUE" in lines[0].split()
    assert [line.split()[4] for line in lines[1:] if line.startswith("800 ")] == ["Q1"]
    assert lines[-1] == (STOPPED + ": QUEUE and ATTAINED are from then, blank for jobs it had "
                         "not seen")


@pytest.mark.parametrize("interval_s, age_s, stale", [
    (30.0, 89.0, False),    # within three of the daemon's 30 s cycles
    (30.0, 91.0, True),     # three cycles missed: the daemon stopped or waits on Slurm
    (600.0, 1_700.0, False),   # a slow cycle: 300 s is no limit for it
    (None, 299.0, False),   # a file of a daemon that does not write its cycle: 300 s
    (None, 301.0, True),
])
def test_a_snapshot_is_stale_after_three_of_its_daemons_cycles(
        client, capsys, tmp_path, monkeypatch, interval_s, age_s, stale) -> None:
    now = 1_800_000_000.0
    monkeypatch.setattr(queue_cli.time, "time", lambda: now)
    path = tmp_path / "s.json"
    snap = dataclasses.replace(snapshot(pub(800, 1, 900.0), generated_at=now - age_s),
                               interval_s=interval_s)
    public_snapshot.write_snapshot(path, snap)
    assert public_snapshot.read_snapshot(path).interval_s == interval_s
    assert queue_cli.main(["--snapshot", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("no dlprio daemon has updated its snapshot since" in out) == stale


@pytest.mark.parametrize("value", ["0", "-30", "\"30\"", "1e999", "true"])
def test_a_malformed_cycle_in_the_snapshot_names_the_field(tmp_path, value) -> None:
    path = tmp_path / "s.json"
    public_snapshot.write_snapshot(path, snapshot())
    text = path.read_text()
    path.write_text(text[:-1] + f', "interval_s": {value}}}')
    with pytest.raises(public_snapshot.SnapshotError, match=r"malformed snapshot \(interval_s: "
                       r"expected seconds above 0\)"):
        public_snapshot.read_snapshot(path)
