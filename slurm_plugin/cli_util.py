"""Shared behaviour of every tiresias-slurm command line (dlsubmit, dlqueue, dlprio, dlgres,
dlcluster): a reader that closes stdout early (``dlprio simulate | head -1``) is not an error.

The recipe is the one in Python's documentation (``signal`` module, "Note on SIGPIPE"): catch
:class:`BrokenPipeError`, point file descriptor 1 at ``/dev/null`` so the interpreter's final
flush cannot fail again, and exit. The exit status is **0**, not 141 (128 + SIGPIPE): the
command did what the reader asked for, and ``set -o pipefail`` scripts that stop reading early
should not see a failure (this matches what ``dlqueue`` always did). Nothing is printed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable

EXIT_CLOSED_STDOUT = 0

Main = Callable[[list[str] | None], int]


def quiet_on_closed_stdout(main: Main) -> Main:
    """Wrap a ``main(argv) -> int`` so a closed stdout ends it quietly with status 0.

    stdout is flushed inside the wrapper, so a pipe closed before the buffered output was written
    is caught here too rather than at interpreter exit. Other exceptions pass through unchanged.
    """

    @functools.wraps(main)
    def wrapper(argv: list[str] | None = None) -> int:
        try:
            rc = main(argv)
            sys.stdout.flush()
            return rc
        except BrokenPipeError:
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
            return EXIT_CLOSED_STDOUT

    return wrapper
