"""The one check of the output files a command was told to write (``--jobs-csv``, ``--plot``,
``--output``), made before any work: a replay or a grid takes minutes, and an output that
cannot be written must not be found out after it. A command that writes several outputs
checks them together (:func:`check_outputs`), so two that name one file are refused: the
second write would silently replace the first.

Used by ``dlprio simulate``, ``dlprio tune`` and ``dlprio history export``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from prioritizer.command import CliError
from slurm_plugin.common.cli import visible


def check_output(option: str, path: str | None, inputs: Iterable[tuple[str, str | None]] = (),
                 figure: bool = False) -> None:
    """Refuse ``path`` (given with ``option``) before any work, or return.

    Args:
        option: the option's name, for the message (``--jobs-csv``).
        path: the output path; None, ``""`` or ``-`` (stdout) are not checked.
        inputs: ``(option, path)`` of the files the command reads; writing over one of them
            (the same file, by any name: :func:`os.path.samefile`) is refused.
        figure: the output is a matplotlib figure; its suffix must name a format matplotlib
            writes (none: PNG, :func:`slurm_plugin.common.atomic.save_figure`).

    Raises:
        CliError: exit 2, one line naming the option, the path and the fix: the directory does
            not exist, the path is a directory, no file can be made in the directory (as the
            atomic write makes its temporary file there: read-only or permission-denied
            directories, pseudo file systems such as /proc), it is an input, or the figure
            format is unknown.
    """
    if not path or path == "-":
        return
    parent = Path(path).parent
    if not parent.is_dir():
        raise CliError(f"{option} {visible(path)}: directory {visible(str(parent))} does not "
                       "exist; create it first")
    if os.path.isdir(path):
        raise CliError(f"{option} {visible(path)}: is a directory; give a file name")
    try:   # the write makes a temporary file beside the target, then renames it
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{Path(path).name}.", suffix=".probe")
    except OSError as exc:
        raise CliError(f"{option} {visible(path)}: cannot write in directory "
                       f"{visible(str(parent))} ({exc.strerror or exc}); give a path in a "
                       "writable directory") from None
    os.close(fd)
    os.unlink(probe)
    for source_option, source in inputs:
        if source and source != "-" and os.path.exists(path) and os.path.exists(source) \
                and os.path.samefile(path, source):
            raise CliError(f"{option} {visible(path)}: is the file given with {source_option}; "
                           "writing it would overwrite that input: give another file name")
    if figure:
        suffix = Path(path).suffix.lstrip(".").lower()
        if suffix:
            from matplotlib.backend_bases import FigureCanvasBase   # only with a figure
            formats = FigureCanvasBase.get_supported_filetypes()
            if suffix not in formats:
                raise CliError(f"{option} {visible(path)}: unknown figure format {suffix!r}; "
                               f"use one of .{', .'.join(sorted(formats))}")


def check_outputs(outputs: Sequence[tuple[str, str | None, bool]],
                  inputs: Sequence[tuple[str, str | None]] = ()) -> None:
    """:func:`check_output` of each of ``outputs`` (``(option, path, figure)``; a path None,
    ``""`` or ``-`` is not written) against ``inputs``, then refuse two outputs that name the
    same file: the same path once resolved (``./a.png`` and ``a.png``, a directory reached
    through a link) or, when both exist, one file by two names (:func:`os.path.samefile`).

    Raises:
        CliError: exit 2, one line: :func:`check_output`'s, or ``OPTION2 PATH: is also the
            file given with OPTION1; ...`` naming both options.
    """
    for option, path, figure in outputs:
        check_output(option, path, inputs, figure)
    written = [(option, path) for option, path, _ in outputs if path and path != "-"]
    for i, (option, path) in enumerate(written):
        for first_option, first in written[:i]:
            if _same_file(first, path):
                raise CliError(f"{option} {visible(path)}: is also the file given with "
                               f"{first_option}; one would overwrite the other: give each "
                               "output its own file name")


def _same_file(a: str, b: str) -> bool:
    """Whether the paths ``a`` and ``b`` name one file (existing or to be made)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:   # one of them does not exist yet: two names of one file both exist
        return False
