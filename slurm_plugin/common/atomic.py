"""The one atomic file writer of every tiresias-slurm command (history export, tune, the
daemon's snapshot, tune's array tasks, dlcluster's config files).

:func:`write_atomically` writes a temporary file beside the target and renames it over the
target (``rename(2)`` is atomic within one file system), so a reader never sees a half-written
file. What the target is decides how:

- **missing or a regular file**: temporary file + rename; an existing file keeps its permission
  bits (``mode`` only applies to a new file; without ``mode`` a new file gets ``0666 & ~umask``,
  as ``open(path, "w")`` would, not ``mkstemp``'s ``0600``).
- **a symbolic link**: the file it points to is replaced (the link stays a link), by the same
  rules; a dangling link creates its target.
- **anything else that exists** (character or block device such as ``/dev/null`` or
  ``/dev/stdout``, FIFO, socket): written in place with ``open(path, "w")``, never renamed
  over; a rename would replace ``/dev/null`` by a regular file for every process on the machine
  (seen as root: ``dlprio history export -o /dev/null``).

Part of :mod:`slurm_plugin.common` (where it sits and why: its package doc).
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def is_special(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` (links followed) exists and is not a regular file or directory:
    a device, FIFO or socket, written in place."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def save_figure(fig: Any, path: str | os.PathLike[str], **savefig: Any) -> None:
    """A matplotlib figure written by :func:`write_atomically`: rendered in memory in the
    format of ``path``'s suffix (``png`` without one), then written. Raises OSError."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=Path(path).suffix.lstrip(".").lower() or "png", **savefig)
    write_atomically(path, buffer.getvalue())


def write_atomically(path: str | os.PathLike[str], data: str | bytes, *,
                     mode: int | None = None, newline: str | None = None) -> None:
    """Replace the file at ``path`` with ``data`` (``str``: UTF-8 text, ``newline`` as
    :func:`open`'s; ``bytes``: as is) by the rules in the module docstring.

    Raises:
        OSError: the directory is missing or not writable, the target is a directory, the
            disk is full (the temporary file is removed; the target is untouched).
    """
    binary = isinstance(data, bytes)
    how = {"mode": "wb"} if binary else {"mode": "w", "encoding": "utf-8", "newline": newline}
    if is_special(path):   # stat(2) on the path as given: /dev/stdout's /proc magic link too
        with open(path, **how) as handle:
            handle.write(data)  # type: ignore[arg-type]  # str in mode "w", bytes in "wb" (how)
        return
    target = Path(os.path.realpath(path))   # a symlink: its target is what gets replaced
    try:
        keep = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        keep = mode if mode is not None else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, **how) as handle:
            handle.write(data)  # type: ignore[arg-type]  # str in mode "w", bytes in "wb" (how)
            handle.flush()
            os.fchmod(handle.fileno(), keep)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
