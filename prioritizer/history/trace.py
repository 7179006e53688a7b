"""The history trace format: one CSV row per finished GPU job of the cluster (our format).

Written by ``dlprio history export``, read by ``dlprio simulate`` (by its header, format
``history``, see :mod:`prioritizer.sim.traces`) and ``dlprio history check``. Columns, in order
(:data:`COLUMNS`; times epoch seconds, work GPU·seconds):

============== ==========================================================================
job_id         Slurm job id (a hetjob's leader id; an array element's own id)
user, account  as in accounting, or stable hashes with ``--anonymise``
partition      the last attempt's partition
submit_time    when the job was submitted (its first attempt)
eligible_time  when it could first start (``--begin``, dependencies); the replay's arrival
num_gpu        GPUs (allocated TRES ``gres/gpu``; hetjob components summed)
num_nodes      nodes of the last attempt
work_gpu_s     GPU·seconds actually needed: runs summed, minus runs lost to a requeue
duration       ``work_gpu_s / num_gpu``: seconds the job runs at its GPU count (the replay's)
end_time       when the last attempt ended (the real outcome ``history check`` compares with)
jct            ``end_time - eligible_time``, seconds
state          the last attempt's state (COMPLETED, FAILED, TIMEOUT, CANCELLED, ...)
attempts       number of runs (1 + requeues that ran)
ended_by       ``self`` (the job's own end), ``timelimit`` (TIMEOUT/DEADLINE) or ``cancelled``
preemptions    preemptions by dlprio (from its ledger, ``--ledger``); 0 without a ledger
============== ==========================================================================

``timelimit`` and ``cancelled`` rows have a duration that is a lower bound of what the job
wanted; the replay runs them for exactly that long (the limit or the cancel would stop them at
the same amount of work).

Cells, lines and header are read as every trace of the project is
(:mod:`prioritizer.csvcells`), with the bounds ``dlprio simulate``'s readers apply
(:mod:`prioritizer.numbers`): a time at most ``MAX_TIME_S``, a duration at most
``MAX_DURATION_S``, GPUs at most ``MAX_TRACE_GPUS`` (:data:`BOUNDS`).
"""

from __future__ import annotations

import csv
import re
import io
from collections.abc import Iterable
from dataclasses import astuple, dataclass, fields

from prioritizer.csvcells import cell_number, repeated_column, repeated_column_message, start_lines
from prioritizer.window import FORMS, WindowError, epoch
from prioritizer.numbers import (MAX_COUNT, MAX_DURATION_S, MAX_NODES, MAX_TIME_S,
                                 MAX_TRACE_GPUS, looks_numeric, parse_float)
from slurm_plugin.common.readfile import BadText, UnreadableFile, csv_rows

COLUMNS = ("job_id", "user", "account", "partition", "submit_time", "eligible_time", "num_gpu",
           "num_nodes", "work_gpu_s", "duration", "end_time", "jct", "state", "attempts",
           "ended_by", "preemptions")
#: The columns that tell this format apart from the other trace formats.
SIGNATURE = frozenset({"job_id", "eligible_time", "num_gpu", "work_gpu_s", "ended_by"})
ENDED_BY = ("self", "timelimit", "cancelled")


@dataclass(frozen=True)
class HistoryRow:
    """One row of the format (see the module doc for each column)."""

    job_id: str
    user: str
    account: str
    partition: str
    submit_time: float
    eligible_time: float
    num_gpu: int
    num_nodes: int
    work_gpu_s: float
    duration: float
    end_time: float
    jct: float
    state: str
    attempts: int
    ended_by: str
    preemptions: int = 0


assert tuple(f.name for f in fields(HistoryRow)) == COLUMNS


class HistoryError(ValueError):
    """A history file that cannot be read; the message names ``file:line`` and the column."""


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return str(int(value)) if value == int(value) else f"{value:.3f}"
    return str(value)


def replay_order(row: HistoryRow) -> tuple[float, float, tuple[int, ...], str]:
    """Sort key of the rows a replay reads, the order ``dlprio history export`` writes them in
    as far as the rows tell it: arrival (``eligible_time``, what the replay sorts by, ties kept
    in file order), then submit time, then Slurm's job id as numbers (job 9 before job 10, as
    Slurm numbers them; ``12_3`` and ``40+1`` by their parts)."""
    return (row.eligible_time, row.submit_time,
            tuple(int(n) for n in re.findall(r"\d+", row.job_id)), row.job_id)


def write_rows(rows: Iterable[HistoryRow], handle: io.TextIOBase) -> int:
    """Write the header and ``rows`` as CSV to ``handle``; return the number of rows."""
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow(COLUMNS)
    count = 0
    for row in rows:
        writer.writerow([_fmt(v) for v in astuple(row)])
        count += 1
    return count


#: each number column: its type and the largest value it may hold, the bounds of the
#: simulate trace readers (times; ``jct``, a difference of two times; durations; GPUs; the
#: GPU·s of the largest job running the longest duration)
BOUNDS: dict[str, tuple[type[int] | type[float], float]] = {
    "submit_time": (float, MAX_TIME_S), "eligible_time": (float, MAX_TIME_S),
    "num_gpu": (int, MAX_TRACE_GPUS), "num_nodes": (int, MAX_NODES),
    "work_gpu_s": (float, MAX_TRACE_GPUS * MAX_DURATION_S), "duration": (float, MAX_DURATION_S),
    "end_time": (float, MAX_TIME_S), "jct": (float, MAX_TIME_S),
    "attempts": (int, MAX_COUNT), "preemptions": (int, MAX_COUNT)}


def read_rows(path: str) -> list[HistoryRow]:
    """Every row of a history CSV, in file order.

    Raises:
        HistoryError: unreadable file, a header without the format's columns or naming one
            twice, a row of another length, a cell that is not a plain number from 0 to its
            column's bound (:data:`BOUNDS`), a fraction in a whole-number column, an unknown
            ``ended_by``, an end before the eligible time, a ``jct`` or ``duration`` that
            disagrees with the columns it is derived from (``file:line: column``, the
            line the row starts on).
    """
    try:
        lines = csv_rows(path)
    except BadText as exc:
        raise HistoryError(f"{path}:{exc.line}: {exc.reason}") from None
    except UnreadableFile as exc:
        raise HistoryError(f"{path}: cannot read ({exc.reason})") from None
    return parse_rows(path, lines)


def _check_derived(path: str, line: int, row: HistoryRow) -> None:
    """The columns the format derives from others agree with them (as ``history export``
    writes them, to the 3 decimals it writes): the end comes no earlier than the eligible
    time, ``jct`` is ``end_time - eligible_time`` and ``duration`` is ``work_gpu_s /
    num_gpu`` (``work_gpu_s`` for a CPU-only job). A row that contradicts itself would skew the real figures
    ``history check`` compares with. Raises HistoryError naming the line and columns."""
    if row.end_time < row.eligible_time - _DERIVED_SLACK:
        raise HistoryError(f"{path}:{line}: end_time {row.end_time:g} is before eligible_time "
                           f"{row.eligible_time:g}: a job ends after it may start (history "
                           "export leaves such a job out); fix the row or export the history "
                           "again")
    jct = max(row.end_time - row.eligible_time, 0.0)
    if abs(row.jct - jct) > _DERIVED_SLACK:
        raise HistoryError(f"{path}:{line}: jct {row.jct:g} is not end_time - eligible_time "
                           f"({jct:g}); fix the row or export the history again")
    duration = row.work_gpu_s / row.num_gpu if row.num_gpu else row.work_gpu_s
    if abs(row.duration - duration) > max(_DERIVED_SLACK, 1e-9 * duration):
        raise HistoryError(f"{path}:{line}: duration {row.duration:g} is not work_gpu_s / "
                           f"num_gpu ({duration:g}); fix the row or export the history again")


#: seconds two derived values may differ by: each is written to 3 decimals (rounded by at
#: most 0.0005), so a difference above 0.01 s is not rounding
_DERIVED_SLACK = 0.01


def parse_rows(path: str, lines: list[list[str]]) -> list[HistoryRow]:
    """:func:`read_rows` on CSV cells already read (``path`` only names them in errors); also
    how ``history export`` checks a trace before writing it. Raises HistoryError."""
    if not lines:
        raise HistoryError(f"{path}:1: empty file; expected the history header")
    header = [h.strip() for h in lines[0]]
    twice = repeated_column(header)
    if twice is not None:
        raise HistoryError(f"{path}:1: {repeated_column_message(twice)}")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise HistoryError(f"{path}:1: not a history trace: lacks column(s) {', '.join(missing)}"
                           "; write one with `dlprio history export`")
    index = {c: header.index(c) for c in COLUMNS}
    rows = []
    first_line: dict[str, int] = {}
    for line, cells in zip(start_lines(lines)[1:], lines[1:]):
        if not cells:
            continue
        if len(cells) != len(header):
            raise HistoryError(f"{path}:{line}: {len(cells)} columns, the header has {len(header)}")
        values: dict[str, object] = {}
        for column in COLUMNS:
            text = cells[index[column]].strip()
            bound = BOUNDS.get(column)
            if bound is None:
                values[column] = text
                continue
            try:
                number = cell_number(text, column, bound[1])
            except ValueError as exc:
                raise HistoryError(f"{path}:{line}: {exc}") from None
            if bound[0] is int and number != int(number):
                raise HistoryError(f"{path}:{line}: {column} must be a whole number, got {text}"
                                   + ("; history check replays whole GPUs (dlprio simulate "
                                      "reads a num_gpu below 1 as a shard job)"
                                      if column == "num_gpu" else ""))
            values[column] = bound[0](number)
        if values["ended_by"] not in ENDED_BY:
            raise HistoryError(f"{path}:{line}: ended_by must be one of {', '.join(ENDED_BY)}, "
                               f"got {values['ended_by']!r}")
        job_id = str(values["job_id"])
        if job_id in first_line:
            raise HistoryError(f"{path}:{line}: job_id {job_id!r} repeats line {first_line[job_id]}; "
                               "each job is one row (export again, or drop one)")
        first_line[job_id] = line
        row = HistoryRow(**values)  # type: ignore[arg-type]
        _check_derived(path, line, row)
        rows.append(row)
    return rows


def trace_point(option: str, value: str, path: str, now: float, *, rebased: bool,
                high: float = MAX_TIME_S) -> float:
    """Seconds of trace time that ``option`` names: SECONDS as given (0 to ``high``), or a TIME
    of :data:`prioritizer.window.FORMS` (local time, read as ``history export --since``
    reads it; ``now`` is the clock) on the history trace ``path``: its epoch seconds, less the
    trace's first replayed arrival when ``rebased`` (the replay's clock, whose first job
    arrives at 0), else as they are (the trace's own times).

    Raises:
        ValueError: one line naming ``option``: a number out of range, another form, or a
            TIME on a trace that is not a history trace.
    """
    if looks_numeric(value):
        try:
            return parse_float(value, 0.0, high)
        except ValueError as exc:
            raise ValueError(f"{option}: {exc} (SECONDS of trace time, or a time: {FORMS})") from None
    try:
        at = epoch(option, value, now)
    except WindowError:
        raise ValueError(f"{option}: expected SECONDS of trace time or, on a history trace, a "
                         f"time: {FORMS}; got {value!r}") from None
    try:
        rows = read_rows(path)
    except HistoryError:
        raise ValueError(f"{option} {value}: a time needs a history trace (epoch times); give "
                         f"SECONDS of trace time for {path}") from None
    if not rebased:
        return at
    return at - min((r.eligible_time for r in rows if r.num_gpu > 0 and r.duration > 0), default=0.0)
