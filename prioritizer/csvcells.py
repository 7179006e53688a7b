"""The one reading of the CSV files a user gives ``dlprio``: where a row is, what its header
names, and what a number cell may hold.

Every CSV reader of the project goes through here: the job traces of ``dlprio simulate`` and
``tune`` (:mod:`prioritizer.sim.traces`), the history traces of ``dlprio history check``
(:mod:`prioritizer.history.trace`), the Tiresias cluster spec and the Gittins samples file
(:func:`prioritizer.policy.durations.parse_samples`). So a cell, a header or a line number means
the same to all of them:

* **line numbers** are the file's own lines (what an editor shows, and the csv module's
  ``line_num``): a row whose quoted cell holds a line break takes several lines, and the rows
  after it are numbered past them (:func:`start_lines`);
* **a header names each column once** (:func:`repeated_column`): with two copies a reader
  would use one and silently drop the other;
* **a number cell** is plain ASCII decimal text (``12``, ``0.5``, ``1e3``), finite, ``>= 0`` and
  at most the column's bound (:func:`cell_number`); Python's ``float`` also reads ``1_000``,
  non-ASCII digits (``٣٠٠``), ``nan`` and ``1e308``, which no export of ours writes.

Pure and standard library only: the policy's samples parser imports it (the policy reaches
nothing outside ``prioritizer.policy`` but pure helpers, ``.importlinter``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

#: a plain decimal number: ASCII digits, an optional '.', an optional exponent (options and cells)
FLOAT_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")

#: the line ends the csv module counts (``io.StringIO(newline="")`` splits on each)
_LINE_END = re.compile(r"\r\n|\r|\n")


def start_lines(rows: Sequence[Sequence[str]]) -> list[int]:
    """The line of the file (1-based) each of ``rows`` starts on.

    ``rows`` are every row of a file as :func:`csv.reader` read it with its line ends kept
    (``newline=""``, as :func:`slurm_plugin.common.readfile.csv_rows` reads), blank lines
    included (they are empty rows): a row takes one line plus one per line end inside its
    quoted cells, so this is the csv module's ``line_num`` before the row, plus 1.

    >>> start_lines([["job_id"], ["a\\nb", "1"], ["c", "2"]])
    [1, 2, 4]
    """
    out, line = [], 1
    for row in rows:
        out.append(line)
        line += 1 + sum(len(_LINE_END.findall(cell)) for cell in row if "\n" in cell or "\r" in cell)
    return out


def repeated_column(header: Sequence[str]) -> str | None:
    """The first column name ``header`` (cells already stripped) gives twice, or None."""
    seen: set[str] = set()
    for name in header:
        if name in seen:
            return name
        seen.add(name)
    return None


def repeated_column_message(column: str) -> str:
    """The fix for a header that names ``column`` twice (after ``FILE:1: ``)."""
    return (f"the header names column {column!r} twice; keep one (a reader would use one copy "
            "and drop the other)")


def cell_number(text: str, column: str, high: float = math.inf) -> float:
    """The number of one cell of ``column``: plain decimal text (:data:`FLOAT_TEXT`, spaces
    around it ignored), finite, ``>= 0`` and at most ``high``.

    Raises:
        ValueError: the message starts with the column and gives the rule and the cell:
            ``num_gpu is not a number: 'x'``, ``submit_time must be finite, got 'nan'``,
            ``duration is not a plain decimal number: '1_000' (ASCII digits, ...)``,
            ``duration must be >= 0, got '-5'``, ``num_gpu must be at most 102,400,000, got
            '1e30'``.
    """
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{column} is not a number: {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{column} must be finite, got {text!r}")
    if not FLOAT_TEXT.match(text.strip()):
        raise ValueError(f"{column} is not a plain decimal number: {text!r} (ASCII digits, an "
                         "optional '.' and exponent; no '_' separators)")
    if value < 0:
        raise ValueError(f"{column} must be >= 0, got {text!r}")
    if value > high:
        raise ValueError(f"{column} must be at most {high:,.0f}, got {text!r}")
    return value
