"""Job-trace readers for ``dlprio simulate``: Tiresias, Philly/Helios excerpt and ITP CSVs.

Each reader turns one CSV into :class:`TraceJob` records (seconds, whole GPUs) sorted by
submit time (stable: ties keep file order, as the Tiresias reference simulator sorts).
Formats (data/README.md):

* ``tiresias``: ``job_id,num_gpu,submit_time,...,duration`` (reference simulator's input).
* ``philly``: ``u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status``
  (the Philly 15k excerpt and the Helios excerpt); submit = running sum of ``interval`` over
  all rows, the first row at 0; duration = ``run_time``.
* ``itp``: ``job_id,submission_time,duration,num_gpu`` (ElasticFlow's ITP 2021 release).
* ``history``: a cluster's own jobs as ``dlprio history export`` writes them
  (``prioritizer.history.trace``); arrival = ``eligible_time``, duration = ``duration``.

GPU sharing (``prioritizer.sim.shared``): a GPU count below 1 (``0.5``) is a shard job's
share of one GPU; an optional ``opportunistic`` column (``1``/``true``, else ``0``/``false``
or empty) marks opportunistic jobs. ``prioritizer.sim.mix`` derives such a trace from Philly.

Rows with zero GPUs (CPU-only jobs) or zero duration are skipped and counted. A malformed
row raises :class:`TraceError` naming ``file:line``: the line of the file the row starts on
(a quoted cell with a line break takes several), as every CSV reader of the project names it
(:mod:`prioritizer.csvcells`, which also reads the number cells and refuses a header that
names a column twice). After ``since`` filtering the trace is re-based so that the first kept
job arrives at 0.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from prioritizer.csvcells import cell_number, repeated_column, repeated_column_message, start_lines
from prioritizer.numbers import MAX_DURATION_S, MAX_TIME_S, MAX_TRACE_GPUS as MAX_GPUS
from slurm_plugin.common.readfile import BadText, UnreadableFile, csv_rows

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
    ``name`` the id the file gives, ``line`` its line in the file (1 = header); ``user``,
    ``account``, ``partition`` as the file gives them (``""`` where it has no such column):
    what ``--tenants`` reads a job's tenant from."""

    job_id: int
    name: str
    line: int
    submit: float
    num_gpus: int
    duration: float
    user: str = ""
    account: str = ""
    partition: str = ""
    #: fraction of one GPU of a shard job (0 < share < 1, ``num_gpus`` = 1), 0.0 for whole GPUs
    share: float = 0.0
    #: an opportunistic job (``prioritizer.policy.sharing``): runs only on GPUs production
    #: leaves free
    opportunistic: bool = False


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
    twice = repeated_column(header)
    if twice is not None:
        raise TraceError(f"{name}:1: {repeated_column_message(twice)}")
    fmt = fmt or detect_format(header, name)
    if fmt not in FORMATS:
        raise TraceError(f"unknown trace format {fmt!r}; valid: {', '.join(FORMATS)}")
    id_col, gpu_col, submit_col, dur_col = FORMATS[fmt]
    needed = [c for c in (id_col, gpu_col, submit_col or "interval", dur_col)]
    missing = [c for c in needed if c not in header]
    if missing:
        raise TraceError(f"{name}:1: {fmt} trace lacks column(s) {', '.join(missing)}")
    id_at, gpu_at, dur_at = header.index(id_col), header.index(gpu_col), header.index(dur_col)
    submit_at = header.index(submit_col or "interval")
    width = len(header)
    who = [header.index(c) if c in header else -1 for c in ("user", "account", "partition")]
    owners: dict[int, tuple[str, str, str]] = {}   # line -> (user, account, partition)
    opp_at = header.index("opportunistic") if "opportunistic" in header else -1
    sharing: dict[int, tuple[float, bool]] = {}    # line -> (share, opportunistic)
    kept: list[tuple[float, str, int, int, float]] = []   # (submit, name, line, GPUs, s)
    skipped: list[float] = []   # submit times of skipped rows (counted inside the window)
    clock: float | None = None   # philly: the running sum of interval, from the first job row
    first_line: dict[str, int] = {}
    for line, row in zip(start_lines(rows)[1:], rows[1:]):
        if not row:
            continue
        if len(row) != width:
            raise TraceError(f"{name}:{line}: {len(row)} columns, the header has {width}")
        job_id = row[id_at].strip()
        if job_id in first_line:
            raise TraceError(f"{name}:{line}: {id_col} {job_id!r} repeats line {first_line[job_id]}; "
                             "each job is one row (drop or rename one)")
        first_line[job_id] = line
        try:   # the common case inline; _number words what is wrong with a bad cell
            gpus, duration, value = float(row[gpu_at]), float(row[dur_at]), float(row[submit_at])
            # float() also reads "1_000" and non-ASCII digits: those go to _number too
            cells = row[gpu_at] + row[dur_at] + row[submit_at]
            if "_" in cells or not cells.isascii():
                gpus = -1.0
        except ValueError:
            gpus = duration = value = -1.0
        if not (0 <= gpus <= MAX_GPUS and 0 <= duration <= MAX_DURATION_S and 0 <= value <= MAX_TIME_S):
            gpus = _number(row[gpu_at], gpu_col, name, line, MAX_GPUS)
            duration = _number(row[dur_at], dur_col, name, line, MAX_DURATION_S)
            value = _number(row[submit_at], submit_col or "interval", name, line, MAX_TIME_S)
        if submit_col:
            submit = value
        else:
            clock = 0.0 if clock is None else clock + value
            if clock > MAX_TIME_S:
                raise TraceError(f"{name}:{line}: {clock:.6g}: the submit time, the running sum "
                                 f"of interval, is over {MAX_TIME_S:.0e} s; check the intervals")
            submit = clock
        if gpus != int(gpus) and gpus > 1:
            raise TraceError(f"{name}:{line}: {gpu_col} must be a whole number or a fraction "
                             f"of one GPU below 1 (a shard job), got {gpus}")
        if gpus == 0 or duration == 0:
            skipped.append(submit)
            continue
        kept.append((submit, job_id, line, max(int(gpus), 1), duration))
        if who != [-1, -1, -1]:
            owners[line] = tuple(row[i].strip() if i >= 0 else "" for i in who)  # type: ignore[assignment]
        if gpus < 1 or opp_at >= 0:
            sharing[line] = (gpus if gpus < 1 else 0.0,
                             _flag(row[opp_at], name, line) if opp_at >= 0 else False)
    kept.sort(key=lambda k: k[0])   # stable: ties keep file order
    if since is not None:
        kept = [k for k in kept if k[0] >= since]
        skipped = [s for s in skipped if s >= since]
    base = kept[0][0] if kept else 0.0
    none = ("", "", "")
    jobs = tuple(TraceJob(i, job_id, line, submit - base, gpus, duration,
                          *owners.get(line, none), *sharing.get(line, (0.0, False)))
                 for i, (submit, job_id, line, gpus, duration) in enumerate(kept))
    return Trace(name, fmt, jobs, len(skipped))


def _flag(text: str, name: str, line: int) -> bool:
    """An ``opportunistic`` cell: ``1``/``true``/``yes`` or ``0``/``false``/``no``/empty."""
    word = text.strip().lower()
    if word in ("1", "true", "yes"):
        return True
    if word in ("", "0", "false", "no"):
        return False
    raise TraceError(f"{name}:{line}: opportunistic must be 1/true/yes or 0/false/no/empty, "
                     f"got {text!r}")


def _number(text: str, column: str, name: str, line: int, high: float = math.inf) -> float:
    """:func:`prioritizer.csvcells.cell_number`, its refusal a TraceError naming ``name:line``."""
    try:
        return cell_number(text, column, high)
    except ValueError as exc:
        raise TraceError(f"{name}:{line}: {exc}") from None


def read_cluster_spec(path: str | Path) -> tuple[int, int]:
    """(nodes, GPUs per node) from a Tiresias cluster spec CSV
    (``num_switch,num_node_p_switch,num_gpu_p_node,...``); nodes = switches × nodes/switch.

    Raises:
        TraceError: unreadable file, a header that lacks a column or names one twice, a row
            of another length than the header, a value that is not a whole number > 0
            (``file:line: ...``, the line the row starts on).
    """
    name = str(path)
    lines = _csv_rows(path)
    if not lines:
        raise TraceError(f"{name}:1: empty file; expected the header "
                         "num_switch,num_node_p_switch,num_gpu_p_node and one cluster row")
    header = [h.strip() for h in lines[0]]
    twice = repeated_column(header)
    if twice is not None:
        raise TraceError(f"{name}:1: {repeated_column_message(twice)}")
    for column in SPEC_COLUMNS:
        if column not in header:
            raise TraceError(f"{name}:1: cluster spec lacks column {column}")
    numbered = [(line, cells) for line, cells in zip(start_lines(lines)[1:], lines[1:])
                if any(cell.strip() for cell in cells)]
    if not numbered:
        raise TraceError(f"{name}:2: no cluster row under the header")
    if len(numbered) > 1:
        raise TraceError(f"{name}:{numbered[1][0]}: a cluster spec has one row under the header "
                         "(one cluster); remove the others")
    line, cells = numbered[0]
    if len(cells) != len(header):
        short = "short" if len(cells) < len(header) else "long"
        raise TraceError(f"{name}:{line}: the row is {short}: {len(cells)} cells, the header "
                         f"has {len(header)} ({','.join(header)}); give one value per column")
    values = []
    for column in SPEC_COLUMNS:
        value = _number(cells[header.index(column)], column, name, line)
        if value <= 0 or value != int(value):
            raise TraceError(f"{name}:{line}: {column} must be a whole number > 0")
        values.append(int(value))
    return values[0] * values[1], values[2]


#: the columns of a Tiresias cluster spec that :func:`read_cluster_spec` reads
SPEC_COLUMNS = ("num_switch", "num_node_p_switch", "num_gpu_p_node")


def _csv_rows(path: str | Path) -> list[list[str]]:
    """All rows of a CSV text file (:func:`slurm_plugin.common.readfile.csv_rows`: UTF-8, a
    byte-order mark dropped, a regular file only). Raises TraceError naming the file (and
    the line, for bytes that are not UTF-8 text)."""
    try:
        return csv_rows(path)
    except BadText as exc:
        raise TraceError(f"{path}:{exc.line}: {exc.reason}") from None
    except UnreadableFile as exc:
        raise TraceError(f"{path}: cannot read ({exc.reason})") from None
