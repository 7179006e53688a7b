"""Which columns a ``dlqueue --watch`` screen shows at a terminal's width, and how wide.

Place in the pipeline: :func:`submit.queue_view.build_queue_table` (``fit=True``) and the
``--watch`` shell (:func:`submit.queue_cli._screen`, for its note) call :func:`fit` with the
headers and the cells as shown; nothing here runs a command or reads a clock. Widths are
terminal display cells (:func:`rich.cells.cell_len`: a CJK character takes two), with two cells
between columns as in :mod:`prioritizer.tables`.

The rule, so that a narrow terminal stays readable:

* JOBID, USER and STATE are always shown, at their natural width, never wrapped or cut;
  every other shown column but NAME and REASON is at its natural width too (numbers, clocks,
  node lists: a cell spelled down a column is unreadable).
* NAME and REASON (free text) may wrap onto extra lines inside their column, at spaces where
  possible, long words folded, every character kept; each keeps at least :data:`WRAP_MIN`
  cells (or its natural width when that is smaller). The room left is shared between them:
  the narrower one gets up to its natural width first.
* When even that does not fit, whole columns are hidden in the order of :data:`HIDE_ORDER`
  (the least needed first) until it does; the shell names the hidden ones in a note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.cells import cell_len

#: Columns that may wrap inside their width (free text).
WRAP = ("NAME", "REASON")
#: The fewest cells a wrapping column is given before columns are hidden instead.
WRAP_MIN = 12
#: Columns hidden when the screen is too narrow, first hidden first. JOBID, USER and STATE
#: are never hidden.
HIDE_ORDER = ("PREEMPTS", "ATTAINED(GPU·s)", "WAIT", "START", "QUEUE", "NODES", "GPUS",
              "NAME", "REASON")
_GAP = 2   # cells between two columns


@dataclass(frozen=True)
class Fit:
    """A screen's layout.

    Attributes:
        shown: the headers shown, in the caller's order.
        hidden: the headers hidden, in the caller's order (empty when all fit).
        widths: cells given to each wrapping column that is narrower than its natural width
            (empty when the table fits at its natural width).
    """

    shown: tuple[str, ...]
    hidden: tuple[str, ...] = ()
    widths: dict[str, int] = field(default_factory=dict)


def _smallest(natural: int) -> int:
    return min(natural, WRAP_MIN)


def fit(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> Fit:
    """The layout of a table of ``headers`` and ``rows`` (cells as shown, one line each) on a
    screen ``width`` cells wide (see the module docstring for the rule).

    When JOBID, USER and STATE alone are wider than ``width`` (a very narrow screen or a very
    long user name), every other column is hidden and rich cuts those three to fit.
    """
    natural = {h: max([cell_len(h), *(cell_len(r[i]) for r in rows)])
               for i, h in enumerate(headers)}

    def need(cols: list[str]) -> int:
        return (sum(_smallest(natural[h]) if h in WRAP else natural[h] for h in cols)
                + _GAP * (len(cols) - 1))

    shown = list(headers)
    if sum(natural.values()) + _GAP * (len(shown) - 1) <= width:
        return Fit(tuple(shown))
    for h in HIDE_ORDER:
        if need(shown) <= width:
            break
        if h in shown:
            shown.remove(h)
    wrapping = sorted((h for h in shown if h in WRAP), key=lambda h: natural[h])
    room = width - need([h for h in shown if h not in WRAP]) - _GAP * len(wrapping)
    widths: dict[str, int] = {}
    for left, h in zip(range(len(wrapping), 0, -1), wrapping):
        w = max(_smallest(natural[h]), min(natural[h], room // left))
        room -= w
        if w < natural[h]:
            widths[h] = w
    return Fit(tuple(shown), tuple(h for h in headers if h not in shown), widths)
