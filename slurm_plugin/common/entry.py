"""The five console scripts (pyproject.toml ``[project.scripts]``): each imports its command's
module only once it runs, so that a Ctrl-C while that module loads (the second or so that
``dlsubmit`` or ``dlprio`` spends importing on a busy machine) ends the command with one line
and exit 130, never a traceback. A ``KeyboardInterrupt`` that a command's own ``main`` lets
through ends it the same way; the commands that must report what an interrupt left half-done
(``dlsubmit``'s batch, ``dlprio``'s daemon) catch it themselves first.

Only the standard library and :mod:`.exits` (itself standard library only) are imported here:
this module is what the console script loads before anything else.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from slurm_plugin.common.exits import Exit


def run(program: str, target: str) -> int:
    """Import ``target`` (``"module:function"``), call the function and return its exit code;
    a ``KeyboardInterrupt`` before or during the call (or an error it caused,
    :func:`_interrupted`) prints ``PROGRAM: interrupted`` on stderr and returns
    :attr:`.Exit.SIGINT` (130)."""
    module, _, attribute = target.partition(":")
    try:
        main: Callable[[], int] = getattr(importlib.import_module(module), attribute)
        return main()
    except BaseException as exc:   # re-raised unless an interrupt caused it
        if not _interrupted(exc):
            raise
        print(f"{program}: interrupted", file=sys.stderr)
        return Exit.SIGINT


def _interrupted(exc: BaseException | None) -> bool:
    """``exc`` is a ``KeyboardInterrupt``, or was raised while one was being handled (a
    ``finally`` of the library the interrupt came through failing in turn, as argparse's does
    when interrupted while it saves its usage line)."""
    seen = 0
    while exc is not None and seen < 100:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc, seen = exc.__context__, seen + 1
    return False


def dlsubmit() -> int:
    """``dlsubmit``: :func:`submit.cli.main`."""
    return run("dlsubmit", "submit.cli:main")


def dlqueue() -> int:
    """``dlqueue``: :func:`submit.queue_cli.main`."""
    return run("dlqueue", "submit.queue_cli:main")


def dlprio() -> int:
    """``dlprio``: :func:`prioritizer.cli.entry`."""
    return run("dlprio", "prioritizer.cli:entry")


def dlgres() -> int:
    """``dlgres``: :func:`slurm_plugin.gres.cli.main`."""
    return run("dlgres", "slurm_plugin.gres.cli:main")


def dlcluster() -> int:
    """``dlcluster``: :func:`slurm_plugin.localcluster.cli.main`."""
    return run("dlcluster", "slurm_plugin.localcluster.cli:main")
