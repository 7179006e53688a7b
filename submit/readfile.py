"""Reading a small input file the user named (spec, site config, secrets) safely.

A spec path may name anything: ``/dev/zero`` (endless, so reading it all grows without bound),
``/dev/urandom``, a FIFO (opening it blocks until a writer comes), a directory. The file is
opened with ``O_NONBLOCK`` (open(2): a FIFO then opens at once instead of waiting for a writer;
a regular file is not affected), checked with ``fstat`` on the open descriptor (so nothing can
be swapped in between the check and the read), refused unless it is a regular file, and read up
to a limit: one byte more than the limit is read, so a larger file is refused, never truncated.
"""

from __future__ import annotations

import os
import stat

from slurm_plugin.cli_util import visible
from submit.errors import SpecError

MAX_SPEC_BYTES = 8 * 1024 * 1024
"""Largest spec file read, bytes (8 MiB: twice Slurm's default 4 MiB batch script, which holds
every command of the spec; real OpenPAI specs are a few KiB)."""
MAX_SMALL_BYTES = 1024 * 1024
"""Largest site config or secrets file read, bytes (1 MiB)."""


def read_limited(path: str | os.PathLike[str], what: str, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``path`` (at most ``limit``) and its stat. Raises
    :class:`SpecError` (one line, ``"<what> <path>: ..."`` with the name escaped) when it cannot
    be opened, is not a regular file, or is larger than ``limit`` bytes."""
    where = f"{what}{visible(path)}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SpecError([f"{where}: cannot read: {exc.strerror or exc}"]) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                    else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise SpecError([f"{where}: cannot read: {kind}; give a regular file"])
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise SpecError([f"{where}: larger than {limit} bytes ({limit // (1 << 20)} MiB), "
                             "the most dlsubmit reads"])
        return b"".join(chunks), st
    except OSError as exc:
        raise SpecError([f"{where}: cannot read: {exc.strerror or exc}"]) from None
    finally:
        os.close(fd)
