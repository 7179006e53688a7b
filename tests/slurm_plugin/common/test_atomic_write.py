"""slurm_plugin.common.atomic.write_atomically and its callers: a device or FIFO target is written in
place, never renamed over (`dlprio history export -o /dev/null` as root replaced /dev/null by a
regular file); a symlink's target is replaced; an existing file keeps its mode.

A FIFO in tmp_path stands in for /dev/null (a rename over it would turn it into a regular file
just as it did /dev/null); /dev/null itself is never a target here."""

from __future__ import annotations

import io
import json
import os
import stat
import threading
from pathlib import Path

import pytest

from prioritizer.daemon.snapshot import PublicSnapshot, write_snapshot
from prioritizer.history import cli as history_cli
from prioritizer.history.trace import read_rows, write_rows
from prioritizer.tune import task as tune_task
from slurm_plugin.localcluster import provision
from slurm_plugin.common.atomic import write_atomically

CSV = ("job_id,user,account,partition,submit_time,eligible_time,num_gpu,num_nodes,work_gpu_s,"
       "duration,end_time,jct,state,attempts,ended_by,preemptions\n"
       "1,u,a,gpu,100,100,1,1,10,10,110,10,COMPLETED,1,self,0\n")


def _drain(fifo: Path) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as handle:
            got.append(handle.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader, got


def _fifo(tmp_path: Path) -> Path:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    return fifo


def _assert_still_fifo(fifo: Path, reader: threading.Thread) -> None:
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in fifo.parent.iterdir()] == [fifo.name]   # no temporary file left


def test_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    reader, got = _drain(fifo)
    write_atomically(fifo, "hello\n")
    _assert_still_fifo(fifo, reader)
    assert got == [b"hello\n"]


def test_history_export_to_a_fifo_keeps_the_fifo(tmp_path: Path) -> None:
    rows = read_rows(_csv(tmp_path))
    (tmp_path / "h.csv").unlink()
    fifo = _fifo(tmp_path)
    reader, got = _drain(fifo)
    text = io.StringIO()
    write_rows(rows, text)
    history_cli._write_atomically(str(fifo), text.getvalue())
    _assert_still_fifo(fifo, reader)
    assert got[0].decode().splitlines()[0].startswith("job_id,user")


def test_snapshot_tune_task_and_dlcluster_to_a_fifo_keep_the_fifo(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    writers = [lambda: write_snapshot(fifo, PublicSnapshot(1.0, 1, "enforce", (), ())),
               lambda: provision._write_atomic(fifo, "x\n", 0o600)]
    for write in writers:
        reader, got = _drain(fifo)
        write()
        _assert_still_fifo(fifo, reader)
        assert got and got[0]


def test_tune_task_result_fifo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tasks.json").write_text(json.dumps([{}]))
    monkeypatch.setattr(tune_task, "Task", lambda **kw: kw)
    monkeypatch.setattr(tune_task, "run_task", lambda t: {"avg_jct": 1.0})
    fifo = tmp_path / "result-0.json"
    os.mkfifo(fifo)
    reader, got = _drain(fifo)
    assert tune_task.main([str(tmp_path), "0"]) == 0
    reader.join(timeout=10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(got[0]) == {"avg_jct": 1.0}


def test_symlink_target_is_replaced_and_link_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    write_atomically(link, "new\n")
    assert link.is_symlink()
    assert real.read_text() == "new\n"


def test_existing_mode_is_kept_and_new_file_follows_umask(tmp_path: Path) -> None:
    old = tmp_path / "old.csv"
    old.write_text("old\n")
    old.chmod(0o640)
    write_atomically(old, "new\n")
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    mask = os.umask(0o022)
    try:
        write_atomically(tmp_path / "new.csv", "x\n")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o644


def test_failed_write_leaves_target_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "t.csv"
    target.write_text("old\n")

    with pytest.raises(TypeError):
        write_atomically(target, 42)   # type: ignore[arg-type]
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def _csv(tmp_path: Path) -> Path:
    path = tmp_path / "h.csv"
    path.write_text(CSV)
    return path


def test_simulate_outputs_to_a_fifo_keep_the_fifo(tmp_path: Path) -> None:
    """--jobs-csv and --plot (and tune's plot) go through the same writer."""
    from prioritizer.cli import main as dlprio

    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\n1,1,0,10\n2,2,5,20\n")
    for option in ("--jobs-csv", "--plot"):
        fifo = tmp_path / f"out{option}"
        os.mkfifo(fifo)
        reader, got = _drain(fifo)
        assert dlprio(["simulate", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "4",
                       "--policy", "fifo", "--json", option, str(fifo)]) == 0
        reader.join(timeout=30)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and got and got[0]
    assert got[0].startswith(b"\x89PNG")


def test_a_device_is_written_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/dev/null is seen as special (a read-only stat); writing to a target taken for a device
    keeps its inode (written in place), where a regular file gets a new one (renamed over)."""
    from slurm_plugin.common import atomic

    assert atomic.is_special("/dev/null") and not atomic.is_special(tmp_path)
    target = tmp_path / "dev"
    target.write_text("old\n")
    inode = target.stat().st_ino
    monkeypatch.setattr(atomic, "is_special", lambda path: Path(path) == target)
    write_atomically(target, "new\n")
    assert target.stat().st_ino == inode and target.read_text() == "new\n"
    monkeypatch.undo()
    write_atomically(target, "newer\n")
    assert target.stat().st_ino != inode


def test_dev_stdout_is_written_in_place(tmp_path: Path) -> None:
    """/dev/stdout links to /proc/self/fd/1, which for a pipe reads ``pipe:[N]``, a name
    realpath() cannot follow: the device check is made on the path as given, so
    ``-o /dev/stdout | wc`` writes into the pipe."""
    read_end, write_end = os.pipe()
    try:
        write_atomically(f"/proc/self/fd/{write_end}", "via fd\n")
        os.close(write_end)
        write_end = -1
        with os.fdopen(read_end, "rb") as handle:
            read_end = -1
            assert handle.read() == b"via fd\n"
    finally:
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)
