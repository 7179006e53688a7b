"""The files a dlsubmit user names (job spec, site config, secrets): read safely by the shared
reader :func:`slurm_plugin.common.readfile.read_regular` (regular files only, never blocking on
a FIFO, read up to a limit) and parsed by the shared YAML/JSON reader
(:mod:`slurm_plugin.common.yamlfile`), every refusal as dlsubmit's one-line :class:`SpecError`.

A file is JSON when its name ends in ``.json``/``.jsonc`` (or, for other names, when its first
non-blank character is ``{``), otherwise YAML. Real OpenPAI v1 files carry ``//`` line comments
(e.g. microsoft/pai examples/mpi/cntk-mpi.json), so JSON is read after blanking ``//`` and
``/* */`` comments outside strings (columns stay where they were). Syntax errors are reported as
``FILE:LINE:COLUMN: ...`` (1-based).
"""

from __future__ import annotations

import json
import os
from typing import Any

import yaml

from slurm_plugin.common import yamlfile
from slurm_plugin.common.cli import visible
from slurm_plugin.common.readfile import UnreadableFile, read_regular
from submit.errors import SpecError

MAX_SPEC_BYTES = 8 * 1024 * 1024
"""Largest spec file read, bytes (8 MiB: twice Slurm's default 4 MiB batch script, which holds
every command of the spec; real OpenPAI specs are a few KiB)."""
MAX_SMALL_BYTES = 1024 * 1024
"""Largest site config or secrets file read, bytes (1 MiB)."""


def read_limited(path: str | os.PathLike[str], what: str, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``path`` (at most ``limit``) and its stat
    (:func:`slurm_plugin.common.readfile.read_regular`). Raises :class:`SpecError` (one line,
    ``"<what> <path>: ..."`` with the name escaped) when it cannot be opened, is not a regular
    file, or is larger than ``limit`` bytes."""
    try:
        return read_regular(path, limit)
    except UnreadableFile as exc:
        where = f"{what}{visible(path)}"
        raise SpecError([f"{where}: {exc.reason}, the most dlsubmit reads" if exc.too_big
                         else f"{where}: cannot read: {exc.reason}"]) from None


def strip_json_comments(text: str) -> str:
    """``text`` with ``//`` and ``/* */`` comments outside strings replaced by spaces
    (newlines kept, so line and column numbers of what remains do not move)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_json(name: str, text: str) -> bool:
    low = name.lower()
    if low.endswith((".json", ".jsonc")):
        return True
    if low.endswith((".yaml", ".yml")):
        return False
    return strip_json_comments(text).lstrip().startswith("{")


def parse_text(text: str, name: str = "<spec>") -> Any:
    """Parse spec text (JSON with comments, or YAML) into plain Python data.

    Raises :class:`SpecError` with ``name:line:column`` for syntax errors.
    """
    if is_json(name, text):
        try:
            return yamlfile.load_json(strip_json_comments(text))
        except yamlfile.DuplicateKeys as exc:
            raise SpecError(yamlfile.duplicate_lines(name, exc)) from None
        except yamlfile.TooLarge as exc:
            raise SpecError([f"{name}: {exc}"]) from None
        except json.JSONDecodeError as exc:
            raise SpecError([f"{name}:{exc.lineno}:{exc.colno}: JSON syntax error: {exc.msg}"]) from None
        except RecursionError:
            raise SpecError([f"{name}: JSON nested too deeply"]) from None
    try:
        return yamlfile.load_yaml(text)
    except yamlfile.DuplicateKeys as exc:
        raise SpecError(yamlfile.duplicate_lines(name, exc)) from None
    except yamlfile.TooLarge as exc:
        raise SpecError([f"{name}: {exc}"]) from None
    except yaml.MarkedYAMLError as exc:
        hint = ""
        if "{{" in text:
            hint = " (the file holds {{...}} template placeholders: fill them in first)"
        raise SpecError([yamlfile.syntax_message(name, exc) + hint]) from None
    except yaml.YAMLError as exc:   # a character YAML does not allow (ReaderError), ...
        raise SpecError([yamlfile.syntax_message(name, exc, text)]) from None
    except RecursionError:
        raise SpecError([f"{name}: YAML syntax error: nested too deeply"]) from None
