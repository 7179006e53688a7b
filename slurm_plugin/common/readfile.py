"""The one safe reader of a small file a user named (a job spec, a site config, a secrets file,
dlprio's YAML configs), and the words for what a path is when it is not a regular file.

A path may name anything: ``/dev/zero`` (endless, so reading it all grows without bound),
``/dev/urandom``, a FIFO (opening it blocks until a writer comes), a directory. The file is
opened with ``O_NONBLOCK`` (open(2): a FIFO then opens at once instead of waiting for a writer;
a regular file is not affected), checked with ``fstat`` on the open descriptor (so nothing can
be swapped in between the check and the read), refused unless it is a regular file, and read up
to a limit: one byte more than the limit is read, so a larger file is refused, never truncated.

Part of :mod:`slurm_plugin.common` (where it sits and why: its package doc).
"""

from __future__ import annotations

import csv
import io
import os
import stat
import sys

PATH_MAX = 4096
"""The longest path Linux takes, in bytes with the final NUL (``PATH_MAX``; path_resolution(7):
a longer one fails with ``ENAMETOOLONG``). Slurm's own limit on paths (``MAXPATHLEN``) is the
same number."""


class UnreadableFile(ValueError):
    """The file cannot be read: ``reason`` says why in a few words (``No such file or
    directory``, ``a FIFO; give a regular file``); ``too_big`` when it is over the limit
    (``reason`` is then ``larger than N bytes (M MiB)``)."""

    def __init__(self, reason: str, too_big: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.too_big = reason, too_big


class BadText(UnreadableFile):
    """The file was read but is not what a text reader takes: ``line`` (1-based) is where,
    ``reason`` what (``not UTF-8 text (byte 0xff); save the file as UTF-8``)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line = line


def kind_of(mode: int) -> str:
    """What a non-regular file is, for a message: ``a directory``, ``a FIFO``, ``a device``,
    ``a socket`` or ``not a regular file`` (``mode`` is an ``st_mode``)."""
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def not_regular(path: str | os.PathLike[str]) -> str | None:
    """Why the existing ``path`` (links followed) cannot be a file to read or replace (``a
    directory``, ``a FIFO``, ...), or None: it is a regular file or does not exist. Never opens
    it, so a FIFO cannot block."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return f"cannot stat ({getattr(exc, 'strerror', None) or exc})"
    return None if stat.S_ISREG(mode) else kind_of(mode)


def read_regular(path: str | os.PathLike[str], limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``path`` (at most ``limit`` bytes) and its stat.

    Raises:
        UnreadableFile: it cannot be opened or read (``reason``: the OS's words), is not a
            regular file (``<kind>; give a regular file``) or is larger than ``limit`` bytes.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError) as exc:   # ValueError: a NUL byte in the path
        raise UnreadableFile(getattr(exc, "strerror", None) or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(f"{kind_of(st.st_mode)}; give a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UnreadableFile(f"larger than {limit} bytes ({limit // (1 << 20)} MiB)",
                                 too_big=True)
        return b"".join(chunks), st
    except OSError as exc:
        raise UnreadableFile(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def decode_utf8(data: bytes, encoding: str = "utf-8") -> str:
    """``data`` as text (``encoding``: ``utf-8``, or ``utf-8-sig`` to drop a byte-order mark).

    Raises:
        BadText: at the first byte that is not UTF-8, with its line (1-based) and the reason
            ``not UTF-8 text (byte 0xff)``; the caller adds the fix that fits its file.
    """
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise BadText(data.count(b"\n", 0, exc.start) + 1,
                      f"not UTF-8 text (byte {data[exc.start]:#04x})") from None


def csv_rows(path: str | os.PathLike[str]) -> list[list[str]]:
    """Every row of the CSV text file ``path`` (UTF-8; a byte-order mark, as spreadsheet
    programs write it, is dropped; line ends as written, ``\r\n`` included), read as
    :func:`read_regular` reads, without a size limit (a trace of months of history is large,
    and a regular file ends).

    Raises:
        BadText: bytes that are not UTF-8, or text the csv module refuses (a NUL byte), with
            the line where.
        UnreadableFile: as :func:`read_regular`.
    """
    data, _ = read_regular(path, sys.maxsize)
    try:
        text = decode_utf8(data, "utf-8-sig")
    except BadText as exc:
        raise BadText(exc.line, f"{exc.reason}; save the file as UTF-8") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        return list(reader)
    except csv.Error as exc:
        raise BadText(reader.line_num, f"not CSV text ({exc})") from None
