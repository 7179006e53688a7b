"""The one check of an output file a command was told to write (``--jobs-csv``, ``--plot``,
``--output``), made before any work: a replay or a grid takes minutes, and an output that
cannot be written must not be found out after it.

Used by ``dlprio simulate``, ``dlprio tune`` and ``dlprio history export``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
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
