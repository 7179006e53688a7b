"""Reading a small input file the user named (spec, site config, secrets) safely: the shared
reader :func:`slurm_plugin.readfile.read_regular` (regular files only, never blocking on a FIFO,
read up to a limit), its refusals as dlsubmit's one-line :class:`SpecError`.
"""

from __future__ import annotations

import os

from slurm_plugin.cli_util import visible
from slurm_plugin.readfile import UnreadableFile, read_regular
from submit.errors import SpecError

MAX_SPEC_BYTES = 8 * 1024 * 1024
"""Largest spec file read, bytes (8 MiB: twice Slurm's default 4 MiB batch script, which holds
every command of the spec; real OpenPAI specs are a few KiB)."""
MAX_SMALL_BYTES = 1024 * 1024
"""Largest site config or secrets file read, bytes (1 MiB)."""


def read_limited(path: str | os.PathLike[str], what: str, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``path`` (at most ``limit``) and its stat
    (:func:`slurm_plugin.readfile.read_regular`). Raises :class:`SpecError` (one line,
    ``"<what> <path>: ..."`` with the name escaped) when it cannot be opened, is not a regular
    file, or is larger than ``limit`` bytes."""
    try:
        return read_regular(path, limit)
    except UnreadableFile as exc:
        where = f"{what}{visible(path)}"
        raise SpecError([f"{where}: {exc.reason}, the most dlsubmit reads" if exc.too_big
                         else f"{where}: cannot read: {exc.reason}"]) from None
