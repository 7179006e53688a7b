"""Job-trace readers for ``dlprio simulate``: Tiresias, Philly/Helios excerpt and ITP CSVs.

Each reader turns one CSV into :class:`TraceJob` records (seconds, whole GPUs) sorted by
submit time (stable: ties keep file order, as the Tiresias reference simulator sorts).
Formats (issue 4, "Inputs"; data/README.md):

* ``tiresias``: ``job_id,num_gpu,submit_time,...,duration`` (reference simulator's input).
* ``philly``: ``u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status``
  (the Philly 15k excerpt and the Helios excerpt); submit = running sum of ``interval`` over
  all rows, the first row at 0; duration = ``run_time``.
* ``itp``: ``job_id,submission_time,duration,num_gpu`` (ElasticFlow's ITP 2021 release).
* ``history``: a cluster's own jobs as ``dlprio history export`` writes them
  (``prioritizer.history.trace``); arrival = ``eligible_time``, duration = ``duration``.

Rows with zero GPUs (CPU-only jobs) or zero duration are skipped and counted. A malformed
row raises :class:`TraceError` naming ``file:line``. After ``since`` filtering the trace is
re-based so that the first kept job arrives at 0.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

FORMATS: dict[str, tuple[str, str, str, str]] = {
    # format: (id column, GPUs column, submit column or "" (from interval), duration column)
    "tiresias": ("job_id", "num_gpu", "submit_time", "duration"),
    "philly": ("u_id", "gpu_num", "", "run_time"),
    "itp": ("job_id", "num_gpu", "submission_time", "duration"),
    "history": ("job_id", "num_gpu", "eligible_time", "duration"),
}


class TraceError(ValueError):
    """A trace that cannot be read; the message names the file and line and the fix."""


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace: ``job_id`` is its 0-based position after sorting by submit time,
    ``name`` the id the file gives, ``line`` its line in the file (1 = header)."""

    job_id: int
    name: str
    line: int
    submit: float
    num_gpus: int
    duration: float


@dataclass(frozen=True)
class Trace:
    """Jobs of one file, sorted by submit time, and how many rows were skipped."""

    path: str
    format: str
    jobs: tuple[TraceJob, ...]
    skipped_jobs: int


def detect_format(header: list[str], path: str) -> str:
    """The format whose columns the header has (see :data:`FORMATS`).

    Raises:
        TraceError: no known format matches.
    """
    names = set(header)
    if {"job_id", "eligible_time", "num_gpu", "work_gpu_s", "ended_by"} <= names:
        return "history"
    if {"u_id", "gpu_num", "interval", "run_time"} <= names:
        return "philly"
    if {"job_id", "submission_time", "duration", "num_gpu"} <= names:
        return "itp"
    if {"job_id", "num_gpu", "submit_time", "duration"} <= names:
        return "tiresias"
    raise TraceError(f"{path}:1: unknown trace header {','.join(header)!r}; expected the "
                     "tiresias, philly, itp or history columns, or pass --format")


def read_trace(path: str | Path, fmt: str | None = None, since: float | None = None) -> Trace:
    """Read a trace file.

    Args:
        path: CSV file with a header line.
        fmt: ``tiresias``, ``philly`` or ``itp``; None detects it from the header.
        since: keep jobs submitted at or after this trace time (seconds), then re-base.

    Raises:
        TraceError: unreadable file, unknown format, missing column, a non-number, a
            negative GPU count or duration (message ``file:line: ...``).
    """
    name = str(path)
    rows = _csv_rows(path)
    if not rows:
        raise TraceError(f"{name}:1: empty file; expected a header line")
    header = [h.strip() for h in rows[0]]
    fmt = fmt or detect_format(header, name)
    if fmt not in FORMATS:
        raise TraceError(f"unknown trace format {fmt!r}; valid: {', '.join(FORMATS)}")
    id_col, gpu_col, submit_col, dur_col = FORMATS[fmt]
    needed = [c for c in (id_col, gpu_col, submit_col or "interval", dur_col)]
    missing = [c for c in needed if c not in header]
    if missing:
        raise TraceError(f"{name}:1: {fmt} trace lacks column(s) {', '.join(missing)}")
    col = {c: header.index(c) for c in needed}
    jobs: list[TraceJob] = []
    skipped: list[float] = []   # submit times of skipped rows (counted inside the window)
    clock = 0.0
    first_line: dict[str, int] = {}
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) < len(header):
            raise TraceError(f"{name}:{line}: {len(row)} columns, the header has "
                             f"{len(header)}")
        job_id = row[col[id_col]].strip()
        if job_id in first_line:
            raise TraceError(f"{name}:{line}: {id_col} {job_id!r} repeats line {first_line[job_id]}; "
                             "each job is one row (drop or rename one)")
        first_line[job_id] = line
        gpus = _number(row[col[gpu_col]], gpu_col, name, line)
        duration = _number(row[col[dur_col]], dur_col, name, line)
        if submit_col:
            submit = _number(row[col[submit_col]], submit_col, name, line)
        else:
            gap = _number(row[col["interval"]], "interval", name, line)
            clock = clock + gap if line > 2 else 0.0
            submit = clock
        if gpus != int(gpus):
            raise TraceError(f"{name}:{line}: {gpu_col} must be a whole number, got {gpus}")
        if gpus == 0 or duration == 0:
            skipped.append(submit)
            continue
        jobs.append(TraceJob(0, job_id, line, submit, int(gpus), duration))
    jobs.sort(key=lambda j: j.submit)
    if since is not None:
        jobs = [j for j in jobs if j.submit >= since]
        skipped = [s for s in skipped if s >= since]
    base = jobs[0].submit if jobs else 0.0
    jobs = [TraceJob(i, j.name, j.line, j.submit - base, j.num_gpus, j.duration)
            for i, j in enumerate(jobs)]
    return Trace(name, fmt, tuple(jobs), len(skipped))


def _number(text: str, column: str, name: str, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{name}:{line}: {column} is not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise TraceError(f"{name}:{line}: {column} must be finite, got {text!r}")
    if value < 0:
        raise TraceError(f"{name}:{line}: {column} must be >= 0, got {text!r}")
    return value


def read_cluster_spec(path: str | Path) -> tuple[int, int]:
    """(nodes, GPUs per node) from a Tiresias cluster spec CSV
    (``num_switch,num_node_p_switch,num_gpu_p_node,...``); nodes = switches × nodes/switch.

    Raises:
        TraceError: unreadable file, missing column or non-positive value.
    """
    name = str(path)
    lines = _csv_rows(path)
    rows = [dict(zip([h.strip() for h in lines[0]], line)) for line in lines[1:]] if lines else []
    if not rows:
        raise TraceError(f"{name}:2: no cluster row under the header")
    row = rows[0]
    values = []
    for column in ("num_switch", "num_node_p_switch", "num_gpu_p_node"):
        if row.get(column) is None:
            raise TraceError(f"{name}:1: cluster spec lacks column {column}")
        value = _number(row[column], column, name, 2)
        if value <= 0 or value != int(value):
            raise TraceError(f"{name}:2: {column} must be a whole number > 0")
        values.append(int(value))
    return values[0] * values[1], values[2]


def _csv_rows(path: str | Path) -> list[list[str]]:
    """All rows of a CSV text file. Raises TraceError naming the file when it cannot be read."""
    try:
        with open(path, newline="") as handle:
            return list(csv.reader(handle))
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"{path}: not a CSV text file ({exc})") from None
