"""Read slurm.conf and gres.conf into logical lines of key=value pairs, as Slurm's one config
parser does (src/common/parse_config.c of 22.05-24.11: ``s_p_parse_file``, ``_get_next_line``,
``_parse_include_directive``, ``_keyvalue_regex``); :mod:`slurm_plugin.gres.conf` and
:mod:`slurm_plugin.gres.slurmconf` read their files through it.

* A line ends at ``\\n`` only (``fgets``); form feed, ``\\x1c``-``\\x1e``, ``\\x85`` or U+2028 do
  not end one. A NUL byte ends what ``strlen`` sees of its line.
* ``#`` starts a comment unless an odd number of backslashes precede it (``_strip_comments``).
  The comment is cut from each physical line before continuation is looked at.
* A line whose last non-blank characters are an odd run of backslashes continues on the next
  (``_strip_continuation``); the logical line has the number of its first physical line, as
  Slurm's "Parse error in file F line N" has.
* Then each backslash escapes the next character (``_strip_escapes``: ``\\#`` is ``#``,
  ``\\\\`` is ``\\``).
* ``Include FILE`` (the keyword in any case at the start of the line, then blanks and a file
  name) reads FILE in place. A relative FILE is looked for in the directory of the file that
  includes it (``_add_full_path``; slurm.conf(5), INCLUDE MODIFIERS: "in the same directory as
  the slurm.conf file"). The name is taken as written, except that a name with ``*`` is
  refused: 22.05 expands no glob pattern (Debian's 22.05.8 stats ``inc*.conf`` literally),
  and Debian's 24.11.5 and 26.05.5, built without glob support, stop on any such name, even
  one a file has ("Slurm does not support glob parsing. ... will be skipped over", then
  "\"Include\" failed", with ``DebugFlags=GLOB_SILENCE`` too; ``scontrol`` of each, checked
  by hand): no release here takes it as a pattern, and 24.11 and 26.05 not even as a name.
  Its one modifier, ``%c``, is the
  ClusterName read so far in the same file, lower-cased (``_parse_for_format``; without one,
  "Did not get ClusterName for include path" and the daemons stop: in gres.conf, which has no
  ClusterName, always). A file that cannot be read is
  fatal in Slurm ("Include" failed in file F line N), and refused here.
* Pairs follow Slurm's pattern ``^[[:space:]]*([[:alnum:]_.]+)[[:space:]]*([-*+/]?)=
  [[:space:]]*(("([^"]*)")|([^[:space:]]+))([[:space:]]|$)``: blanks may stand around ``=``, a
  quoted value loses its quotes, and a value is never empty: ``Key=`` at the end of a line
  stops the pattern (what is left is a parse error, fatal for slurmd and slurmctld), and
  ``Key= Other=x`` gives Key the value ``Other=x``.
* Slurm does not decode bytes. Here each logical line is decoded as UTF-8 after its comments
  are cut, so a byte of another encoding in a comment does no harm, and one in a value is
  refused with its file and line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace

from slurm_plugin.common.readfile import UnreadableFile, read_regular

_BLANK = " \t\n\v\f\r"   # isspace() in the C locale: [[:space:]]
_PAIR = re.compile(rf"[{_BLANK}]*([A-Za-z0-9_.]+)[{_BLANK}]*[-*+/]?=([{_BLANK}]*)"
                   rf"(?:\"([^\"]*)\"|([^{_BLANK}]+))(?=[{_BLANK}]|\Z)")
_INCLUDE = re.compile(rb"include[ \t\n\v\f\r]", re.IGNORECASE)
_INCLUDE_NAME = re.compile(rf"[{_BLANK}]*([^{_BLANK}]*)(.*)", re.DOTALL)
MAX_BYTES = 16 * 1024 * 1024
"""Most bytes read for one file with all it includes (dlgres's bound on any input file,
:data:`slurm_plugin.gres.cli.MAX_INPUT_BYTES`)."""
MAX_INCLUDE_DEPTH = 16
"""Deepest nesting of Include read (Slurm sets none; no real configuration comes near)."""


class ConfReadError(ValueError):
    """A file cannot be read as Slurm reads it (an Include that cannot be read or that loops, a
    byte that is not UTF-8, too much text): the message names ``FILE:LINE``."""


@dataclass(frozen=True, order=True)
class Where:
    """Where a logical line is: ``seq`` orders the lines of one read across included files;
    ``path`` is None for the file the caller named, else the included file as resolved; ``of``
    names the file in messages that refer to the line (None when the file includes nothing, so
    "line 3" is plain)."""

    seq: int
    line: int = field(compare=False)
    path: str | None = field(default=None, compare=False)
    of: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"line {self.line}" if self.of is None else f"line {self.line} of {self.of}"

    def at(self, top: str) -> str:
        """``FILE:LINE``, ``top`` standing for the file the caller named."""
        return f"{self.path or top}:{self.line}"


@dataclass(frozen=True)
class Pair:
    """One key=value of a line: ``key`` as written, ``value`` without its quotes;
    ``next_word``: blanks followed ``=`` and the value holds ``=``, so the key was written
    empty and took the next word (``NodeName= Name=gpu``)."""

    key: str
    value: str
    next_word: bool = False


@dataclass(frozen=True)
class Line:
    """A logical line: ``text`` after comments, continuations and escapes; its ``pairs``; and
    ``rest``, what the pattern could not read (stripped; "" when the whole line was read)."""

    where: Where
    text: str
    pairs: tuple[Pair, ...]
    rest: str

    @property
    def keys(self) -> list[str]:
        return [p.key.lower() for p in self.pairs]


def split_pairs(text: str) -> tuple[tuple[Pair, ...], str]:
    """The key=value pairs of ``text`` in order, and the rest the pattern stops at."""
    pairs, pos = [], 0
    while (m := _PAIR.match(text, pos)) is not None:
        value = m.group(3) if m.group(3) is not None else m.group(4)
        pairs.append(Pair(m.group(1), value, bool(m.group(2)) and "=" in value and m.group(3) is None))
        pos = m.end()
    return tuple(pairs), text[pos:].strip(_BLANK)


def _strip_comment(phys: bytes) -> bytes:
    """``phys`` up to its first "#" that an even number of backslashes precede."""
    i = phys.find(b"#")
    while i != -1:
        if (i - len(phys[:i].rstrip(b"\\"))) % 2 == 0:
            return phys[:i]
        i = phys.find(b"#", i + 1)
    return phys


def _continues(phys: bytes) -> bytes | None:
    """The line without its continuation backslash, or None when it does not continue."""
    body = phys.rstrip(_BLANK.encode())
    run = len(body) - len(body.rstrip(b"\\"))
    return body[:-1] if run % 2 else None


def _unescape(raw: bytes) -> bytes:
    return re.sub(rb"\\(.?)", rb"\1", raw, flags=re.DOTALL)


class _Reader:
    def __init__(self, limit: int, includes: bool = True) -> None:
        self.limit, self.total, self.includes = limit, 0, includes
        self.lines: list[Line] = []
        self.cluster: str | None = None   # the last ClusterName= read so far (for %c)

    def read(self, data: bytes, path: str | None, shown: str, real: str | None, stack: tuple[str, ...]) -> None:
        self.total += len(data)
        if self.total > self.limit:
            raise ConfReadError(f"{shown}: the files read through Include add up to more than {self.limit} bytes, "
                                "more than dlgres reads")
        phys = data.split(b"\n")
        if phys and phys[-1] == b"":
            phys.pop()
        i = 0
        while i < len(phys):
            first, buf = i + 1, b""
            while i < len(phys):
                part = _strip_comment(phys[i].split(b"\0", 1)[0])
                i += 1
                cut = _continues(part)
                if cut is None:
                    buf += part
                    break
                buf += cut
            raw = _unescape(buf)
            where = Where(len(self.lines), first, path, path)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ConfReadError(f"{where.at(shown)}: byte {raw[e.start]:#04x} is not UTF-8 text (outside a "
                                    "comment); dlgres reads values as UTF-8: write them in ASCII") from None
            if _INCLUDE.match(raw):
                if self.includes:
                    self._include(text, where, shown, path, real, stack)
                continue
            if text.strip(_BLANK):
                pairs, rest = split_pairs(text)
                self.lines.append(Line(where, text, pairs, rest))
                if pairs and pairs[0].key.lower() == "clustername":
                    self.cluster = pairs[0].value

    def _include(self, text: str, where: Where, shown: str, path: str | None, real: str | None,
                 stack: tuple[str, ...]) -> None:
        m = _INCLUDE_NAME.match(text, len("include"))
        name, after = (m.group(1), m.group(2)) if m else ("", "")
        here = where.at(shown)
        if not name or after.strip(_BLANK):
            raise ConfReadError(f"{here}: Include takes one file name (slurmd and slurmctld stop on this line)")
        if "%c" in name:   # _parse_for_format: the ClusterName read so far, lower-cased
            if self.cluster is None:
                raise ConfReadError(f"{here}: Include {name}: %c needs a ClusterName= line before "
                                    "it in this file (slurmd and slurmctld stop: 'Did not get "
                                    "ClusterName for include path')")
            name = name.replace("%c", self.cluster.lower())
        if "*" in name:   # _handle_include's '*' branch (module doc)
            raise ConfReadError(f"{here}: Include {name}: a '*' in the name stops slurmd and slurmctld on "
                                "24.11 and 26.05 as Debian builds them ('Slurm does not support glob "
                                "parsing', then '\"Include\" failed'), and 22.05 reads it as a file name; "
                                "write one Include line per file")
        base = os.path.dirname(real) if real else os.getcwd()
        target = name if name.startswith("/") else os.path.join(base, name)
        resolved = os.path.realpath(target)
        if resolved in stack:
            chain = " -> ".join([*stack[stack.index(resolved):], resolved])
            raise ConfReadError(f"{here}: Include {name} loops ({chain}); Slurm would read it without end")
        if len(stack) > MAX_INCLUDE_DEPTH:
            raise ConfReadError(f"{here}: Include nested more than {MAX_INCLUDE_DEPTH} deep, more than dlgres reads")
        try:
            data, _ = read_regular(target, self.limit)
        except UnreadableFile as e:
            raise ConfReadError(f"{here}: Include {name}: cannot read {target}: {e.reason} (slurmd and slurmctld "
                                "stop: '\"Include\" failed')") from None
        self.read(data, target, shown, target, (*stack, resolved))


def read_bytes(data: bytes, path: str | None = None, limit: int = MAX_BYTES,
               shown: str | None = None, includes: bool = True) -> list[Line]:
    """The logical lines of the file content ``data`` (blank and comment-only lines left out),
    Include lines replaced by the lines of their files. ``path``: where ``data`` was read from
    (relative Include names are looked for in its directory; None: the current directory);
    ``shown``: the name messages give the file (default ``path``); ``limit``: most bytes read in
    all, the file and what it includes; ``includes`` False: Include lines are skipped, not read.

    Raises:
        ConfReadError: an Include that cannot be read, loops or nests too deep; a byte that is not
            UTF-8 outside a comment; more than ``limit`` bytes in all.
    """
    reader = _Reader(limit, includes)
    real = os.path.realpath(path) if path else None
    top = shown or path or "<text>"
    reader.read(data, None, top, path, (real,) if real else ())
    if not any(line.where.path for line in reader.lines):
        return reader.lines
    return [replace(line, where=replace(line.where, of=line.where.path or top)) for line in reader.lines]


def read_text(text: str, path: str | None = None) -> list[Line]:
    """:func:`read_bytes` of a text already in memory (surrogate escapes kept as their bytes)."""
    return read_bytes(text.encode("utf-8", "surrogateescape"), path)


def read_file(path: str, limit: int) -> list[Line]:
    """:func:`read_bytes` of the regular file ``path`` (read by
    :func:`slurm_plugin.common.readfile.read_regular`, at most ``limit`` bytes).

    Raises:
        UnreadableFile: ``path`` itself cannot be read.
        ConfReadError: as :func:`read_bytes`.
    """
    data, _ = read_regular(path, limit)
    return read_bytes(data, path, limit)
