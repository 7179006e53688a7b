"""The one table layout of every command a person reads (dlprio status/once/simulate/history/tune,
dlqueue): rows of cells → rich table, styled on a terminal, plain otherwise.

Layout (both modes): a header row, then one line per row; each column as wide as its widest cell
in terminal display cells (:func:`rich.cells.cell_len`: a CJK character takes two), two spaces
between columns, right-aligned numeric columns, nothing cropped or wrapped (the table is laid
out at its natural width even when that is wider than the terminal), trailing spaces stripped.
It is the layout of a borderless :class:`rich.table.Table` (``box=None``); a terminal gets the
same table with a bold header and the cells' styles (rich, which honours ``NO_COLOR``); a file
or pipe gets plain text with no escape code, column order fixed by the caller, so scripts can
split on whitespace. ``--json`` outputs never come through here.

Every cell is text shown literally (never rich markup); control and invisible formatting
characters are written as visible escapes by :func:`visible`, so a row stays one line.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from rich.cells import cell_len

from slurm_plugin.common.cli import visible

if TYPE_CHECKING:  # rich's console and table load when a rich table is made (dlqueue start-up)
    from rich.table import Table
    from rich.text import Text

def plain_text(headers: Sequence[str], rows: Iterable[Sequence[str]],
               right: Collection[str] = ()) -> str:
    """The table as plain text (what a file or pipe gets), fast enough for 10,000 rows.

    Args:
        headers: column headers, units in them (``ATTAINED(GPU·s)``, ``avg JCT s``).
        rows: cells as shown, one sequence per row, as many cells as headers (escape user
            text with :func:`visible` first).
        right: the headers of the columns aligned right (numbers).
    Returns:
        Lines ending in ``\\n``, the layout of :func:`rich_table` printed by
        :func:`render_table` (a test compares them); rendering a rich table of 10,000 rows
        takes about 25 s, this well under one.
    """
    table = [list(headers)] + [list(r) for r in rows]
    # printable ASCII is one cell per character: len() (10,000 rows), rich's rule for the rest
    lens = [[len(c) if c.isascii() and c.isprintable() else cell_len(c) for c in line]
            for line in table]
    widths = [max(col) for col in zip(*lens)]
    align = [h in right for h in headers]
    out = []
    for line, ls in zip(table, lens):
        parts = [(" " * (w - n) + c) if r else (c + " " * (w - n))
                 for c, n, w, r in zip(line, ls, widths, align)]
        out.append("  ".join(parts).rstrip())
    return "\n".join(out) + "\n"


def rich_table(headers: Sequence[str], rows: Iterable[Sequence[str | Text]],
               right: Collection[str] = (), fold: Collection[str] = (),
               widths: Mapping[str, int] | None = None) -> Table:
    """A borderless rich table (bold header) of the same layout as :func:`plain_text`.

    ``fold``: headers of free-text columns that may wrap inside their column (at spaces, long
    words folded) when the table is given less than its natural width (``dlqueue --watch``);
    every other column never wraps or crops. ``widths``: a fixed width in cells for some of
    the ``fold`` columns (:func:`submit.queue_fit.fit`). ``str`` cells become :class:`Text`
    (no markup).
    """
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold",
                  collapse_padding=False)
    for h in headers:
        if h in right:   # numbers; rich ignores justify with overflow "ignore"
            table.add_column(h, justify="right", no_wrap=True)
        else:
            table.add_column(h, no_wrap=h not in fold, overflow="fold" if h in fold else "ignore",
                             width=(widths or {}).get(h))
    for r in rows:
        table.add_row(*(c if isinstance(c, Text) else Text(c) for c in r))
    return table


def natural_width(table: Table) -> int:
    """Cells the table needs so that no cell is shrunk (measured on an unbounded console)."""
    from rich.console import Console
    from rich.measure import Measurement

    console = Console(file=io.StringIO(), width=1 << 20, color_system=None)
    return Measurement.get(console, console.options, table).maximum


def render_table(table: Table, width: int = 0, *, styled: bool = False) -> str:
    """``table`` as text at ``max(width, natural width)``, lines right-stripped.

    ``styled``: with ANSI styles (rich's terminal colours; none when ``NO_COLOR`` is set);
    otherwise plain text with no escape code.
    """
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, width=max(width, natural_width(table)),
                      color_system="standard" if styled else None, force_terminal=styled,
                      highlight=False, emoji=False, markup=False)
    console.print(table, crop=False)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"


def is_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default stdout) is a terminal, so a person reads it styled."""
    stream = sys.stdout if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):   # a closed or fake stream
        return False


def render(headers: Sequence[str], rows: Iterable[Sequence[str]], right: Collection[str] = (),
           *, styled: bool = False) -> str:
    """The table as text: styled (:func:`rich_table` through :func:`render_table`) for a
    terminal, else :func:`plain_text`. Cells are passed through :func:`visible` here."""
    cells = [[visible(str(c)) for c in r] for r in rows]
    if styled:
        return render_table(rich_table(headers, cells, right), styled=True)
    return plain_text(headers, cells, right)


def write(headers: Sequence[str], rows: Iterable[Sequence[str]], right: Collection[str] = (),
          stream: TextIO | None = None) -> None:
    """Write :func:`render` to ``stream`` (default stdout), styled when it is a terminal."""
    stream = sys.stdout if stream is None else stream
    stream.write(render(headers, rows, right, styled=is_terminal(stream)))
