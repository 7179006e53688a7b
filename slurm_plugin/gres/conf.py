"""Read gres.conf (gres.conf(5) of Slurm 22.05, 24.11 or 26.05) into one record per line, with the line's own faults.

Each logical line (as :mod:`slurm_plugin.gres.slurm_lines` reads it: comments, continuations,
quotes and ``Include`` as Slurm's parser has them) becomes a :class:`GresLine`: an ``AutoDetect``
line, a GRES line (``Name=``), or a line slurmd cannot use at all (``usable`` False: its fault is
in ``faults``).
Rules read here are those a line breaks on its own; rules across lines are in
:mod:`slurm_plugin.gres.check`; the values each release takes are in
:mod:`slurm_plugin.gres.release`. Host lists and ``File=/dev/nvidia[0-3]`` ranges are expanded by
python-hostlist (:mod:`slurm_plugin.hostlist`), so ``gpu[01-02]`` keeps its leading zeros.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from slurm_plugin import hostlist
from slurm_plugin.common.cli import visible
from slurm_plugin.gres.generate import type_problem
from slurm_plugin.gres.release import AUTODETECT_SINCE, ENV_FLAGS, FLAG_SINCE, SHOWS_FLAGS_SINCE, Release
from slurm_plugin.gres.slurm_lines import Line, Where, read_text

KNOWN_KEYS = {
    "autodetect", "count", "cores", "cpus", "file", "flags", "links", "multiplefiles",
    "name", "nodename", "type",
}
ALIASES = {"files": "file", "link": "links"}
"""gres.c's option table also takes ``Files`` and ``Link``; when both spellings are on a line,
slurmd takes ``File`` over ``Files`` and ``Link`` over ``Links`` (``_parse_gres_config``)."""
_LOSES_TO = {"files": "file", "links": "link"}
AUTODETECT = set(AUTODETECT_SINCE)   # of any release; which release takes which: gres_release
FLAGS = set(FLAG_SINCE)
OLDEST = Release("22.05", "default")
DEFAULT_ENV = frozenset({"nvidia_gpu_env", "amd_gpu_env", "intel_gpu_env", "opencl_env"})
SHARED = {"mps", "shard"}  # Count is per device for these (gres.conf(5), File)
_COUNT_RE = re.compile(r"^([+-]?\d+)([A-Za-z]*)$")
_SUFFIX = {"": 1, "k": 1024, "kib": 1024, "kb": 1000, "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
           "g": 1024**3, "gib": 1024**3, "gb": 1000**3, "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
           "p": 1024**5, "pib": 1024**5, "pb": 1000**5}
"""Count suffixes, any case, as Slurm's ``suffix_mult`` takes them (the one Debian's 22.05.8
libslurmfull exports answers exactly these): ``K``/``KiB`` 1024, ``KB`` 1000, and so on up to
``P``; any other suffix is refused."""
INT64_MAX = (1 << 63) - 1
NO_VAL64 = (1 << 64) - 2


def parse_count(text: str) -> int | None:
    """``"4"`` → 4, ``"10G"`` → 10·1024³, ``"2KB"`` → 2000; None where slurmd stops with "invalid
    count": not a number with a :data:`_SUFFIX`, at or beyond ``strtoll``'s limit (2⁶³-1), negative,
    or at least ``NO_VAL64`` once multiplied (gres.c ``_parse_gres_config``). A product past 2⁶⁴,
    which Slurm's unsigned multiplication wraps, is refused here too."""
    m = _COUNT_RE.match(text.lstrip())   # strtoll skips leading blanks only
    if not m or m.group(2).lower() not in _SUFFIX:
        return None
    n = int(m.group(1))
    if n < 0 or n >= INT64_MAX:
        return None
    n *= _SUFFIX[m.group(2).lower()]
    return n if n < NO_VAL64 else None


@dataclass
class GresLine:
    """One line of gres.conf.

    Attributes:
        line: 1-based line number in its file.
        fields: key (lower case, aliases as their main key) → value as written, quotes removed.
        nodes: the NodeName hosts, or None when the line names no node (applies to every node).
        files: File= or MultipleFiles= device paths, expanded; None when neither is given.
        count: the GRES count this line gives (Count=, else the number of files, else 1).
        flags: Flags= values in lower case.
        usable: False when slurmd ignores or refuses the whole line (then ``faults`` says why);
            such a line takes no part in checks across lines.
        faults: findings of this line alone, as messages.
        where: the file and line (:class:`~slurm_plugin.gres.slurm_lines.Where`), for findings.
    """

    line: int
    fields: dict[str, str]
    where: Where = Where(0, 0)
    nodes: list[str] | None = None
    files: list[str] | None = None
    count: int = 1
    flags: set[str] = field(default_factory=set)
    usable: bool = True
    faults: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.fields.get("name", "").lower()

    @property
    def type(self) -> str:
        return self.fields.get("type", "")

    @property
    def is_autodetect_only(self) -> bool:
        return "autodetect" in self.fields and "name" not in self.fields

    def refuse(self, message: str) -> None:
        """Record a fault that makes slurmd drop or refuse the line."""
        self.faults.append(message)
        self.usable = False


MAX_FILES_PER_NODE = 1024
"""gres.conf(5), File: "Count is limited in size (currently 1024) for each node". slurmd -G of
22.05, 24.11 and 26.05 takes more (4096 files on one line, 65538 in two ranges); its limit is a
range's (:data:`MAX_RANGE`), so more per node is a finding of :mod:`slurm_plugin.gres.check`,
not a line refused."""
MAX_RANGE = 65536
"""Most names one ``lo-hi`` range of a File= or MultipleFiles= may give (Slurm's hostlist.c
``MAX_RANGE``, 64K): slurmd -G of 22.05, 24.11 and 26.05 stop on ``File=/dev/x[0-65536]`` with
"error: _parse_single_range: Too many hosts in range `0-65536'" and "fatal: can't parse
File=/dev/x[0-65536]" (the same words for ``MultipleFiles=``); ``[0-65535,65536-65537]`` is taken."""
MAX_FILES_PER_LINE = 65536
"""Most device files one line may name for dlgres to check it (its bound, not slurmd's)."""
MAX_NODES = 65536
"""Most names a NodeName= expands to: more than any Slurm cluster has (the largest have tens of
thousands of nodes); the bound keeps ``n[0-99999],m[0-99999],...`` from filling memory."""
_RANGE_RE = re.compile(r"\[([^\[\]]*)\]")


def _long_range(expr: str) -> str | None:
    """The first ``lo-hi`` inside brackets of ``expr`` that names more than :data:`MAX_RANGE`."""
    for group in _RANGE_RE.findall(expr):
        for part in group.split(","):
            m = re.fullmatch(r"\s*(\d+)-(\d+)\s*", part)
            if m and int(m.group(2)) - int(m.group(1)) + 1 > MAX_RANGE:
                return part.strip()
    return None


def _expand(rec: GresLine, key: str, what: str) -> list[str] | None:
    value = rec.fields[key]
    if key != "nodename" and (long := _long_range(value)) is not None:
        rec.refuse(f"{what}={value[:60]}: the range {long} names more than {MAX_RANGE} files: slurmd stops "
                   f"('_parse_single_range: Too many hosts in range `{long}'', then 'can't parse File={value[:60]}')")
        return None
    limit = MAX_NODES if key == "nodename" else MAX_FILES_PER_LINE
    try:
        return hostlist.expand(value, limit=limit, duplicates=key != "nodename")
    except ValueError as e:
        if "more than" in str(e):
            rec.refuse(f"{what}= names more than {limit} " + ("nodes" if key == "nodename" else "files")
                       + ", more than dlgres checks")
        else:
            rec.refuse(f"{what}={value[:60]}: {e}; write ranges as name[0-3] or name[0,2-3]")
        return None


def _check_files(rec: GresLine) -> None:
    f = rec.fields
    if "file" in f and "multiplefiles" in f:
        rec.refuse("File= and MultipleFiles= on one line: they are mutually exclusive (MultipleFiles is "
                   "for MIG cards); keep one")
        return
    key = "file" if "file" in f else "multiplefiles" if "multiplefiles" in f else None
    if key is None:
        return
    what = "File" if key == "file" else "MultipleFiles"
    rec.files = _expand(rec, key, what)
    if rec.files is None:
        return
    relative = [p for p in rec.files if not p.startswith("/")]
    if relative:
        rec.refuse(f"{what}={f[key]}: {relative[0]!r} is not a fully qualified path (write /dev/...)")
    if key == "multiplefiles" and len(rec.files) < 2:
        rec.refuse(f"MultipleFiles={f[key]} names one file: slurmd stops ('MultipleFiles does not contain "
                   "multiple files. Use File instead'); write File=")
    if key == "multiplefiles":
        rec.files = [",".join(rec.files)]  # one GRES made of several device files


def _check_count(rec: GresLine) -> None:
    f = rec.fields
    if "count" in f:
        n = parse_count(f["count"])
        if n is None:
            rec.refuse(f"Count={f['count']}: not a number below 2^63 with an optional K, M, G, T, P (1024s) or KB, "
                       "MB, GB, TB, PB (1000s) suffix (slurmd stops: 'invalid count')")
            return
        if rec.files is not None and rec.name not in SHARED and n != len(rec.files):
            rec.refuse(f"Count={f['count']} but File= names {len(rec.files)} file(s): with File, leave Count "
                       f"out or set it to {len(rec.files)}")
        rec.count = n if rec.name in SHARED or rec.files is None else len(rec.files)
    elif rec.files is not None:
        rec.count = len(rec.files)


def _check_flags(rec: GresLine, release: Release) -> None:
    if "flags" not in rec.fields:
        return
    vals = {v.strip().lower() for v in rec.fields["flags"].split(",") if v.strip()}
    unknown = sorted(vals - FLAGS)
    if unknown:
        rec.faults.append(f"Flags={rec.fields['flags']}: unknown flag {unknown[0]!r} (slurmd ignores it; "
                          f"gres.conf(5) flags: CountOnly, {', '.join(sorted(release.flags - {'countonly'}))})")
    for flag in sorted(vals & FLAGS - release.flags):
        rec.faults.append(f"Flags={rec.fields['flags']}: {flag} was added in Slurm {FLAG_SINCE[flag]}; "
                          f"Slurm {release.name} does not know it (slurmd ignores it)")
    env = vals & ENV_FLAGS
    if "no_gpu_env" in env and len(env) > 1:
        rec.refuse(f"Flags={rec.fields['flags']}: no_gpu_env excludes every other *_env flag; keep one")
    if {"one_sharing", "all_sharing"} <= vals:   # slurmd -G: starts, and 24.11 and 26.05 show ONE_SHARING
        took = " and takes one_sharing" if release.has(SHOWS_FLAGS_SINCE) else ""
        rec.faults.append(f"Flags={rec.fields['flags']}: one_sharing and all_sharing are not compatible (slurmd "
                          f"{release.name} starts with both{took}); keep one")
        vals = vals - {"all_sharing"}
    rec.flags = vals & release.flags


def _check_autodetect(rec: GresLine, release: Release) -> None:
    value = rec.fields["autodetect"]
    since = AUTODETECT_SINCE.get(value.lower())
    known = ", ".join(release.autodetect)
    if since is None:
        rec.faults.append(f"AutoDetect={value}: unknown ({known} in Slurm {release.name}); slurmd ignores it")
    elif not release.has(since):
        rec.faults.append(f"AutoDetect={value}: added in Slurm {since}; Slurm {release.name} takes {known}: "
                          "slurmd logs 'unknown autodetect flag' and ignores it; give File= lines (dlgres writes them)")


def _fields(rec: GresLine, line: Line) -> bool:
    """Fill ``rec.fields`` from the pairs of ``line``; False when the line is refused as a whole."""
    keys = line.keys
    for p in line.pairs:
        key = p.key.lower()
        if _LOSES_TO.get(key) in keys:
            continue
        rec.fields[ALIASES.get(key, key)] = p.value
    if line.rest:
        empty = re.match(r"([A-Za-z0-9_.]+)\s*=\s*$", line.rest)
        if empty:
            rec.refuse(f"{empty.group(1)}= has no value: slurmd stops on it ('Parse error in file'); give a value "
                       "or drop it")
        elif not line.pairs:
            rec.refuse(f"the line starts with {line.rest.split()[0].lower()[:40]!r}: a gres.conf line starts with "
                       "NodeName=, Name= or AutoDetect= (slurmd cannot parse it and does not start)")
        else:
            rec.refuse(f"Slurm cannot read {line.rest[:40]!r}: slurmd stops on it ('Parse error in file')")
        return False
    taker = next((p for p in line.pairs if p.next_word), None)
    if taker is not None:
        rec.refuse(f"{taker.key}= is empty, so Slurm takes the next word {taker.value!r} as its value"
                   + (" and the line applies to no node" if taker.key.lower() == "nodename" else "")
                   + f"; give {taker.key} a value")
        return False
    return True


def parse_record(line: Line, release: Release = OLDEST) -> GresLine:
    """One logical gres.conf line (:func:`slurm_plugin.gres.slurm_lines.read_bytes`) → a record,
    by the rules of ``release``."""
    rec = GresLine(line.where.line, {}, where=line.where)
    if not _fields(rec, line):
        return rec
    keys = [ALIASES.get(k, k) for k in line.keys]
    first = keys[0]
    if first not in ("nodename", "name", "autodetect"):
        rec.refuse(f"the line starts with {line.pairs[0].key.lower()!r}: a gres.conf line starts with "
                   "NodeName=, Name= or AutoDetect= (slurmd cannot parse it and does not start)")
        return rec
    if first == "autodetect" and len(keys) > 1:
        rec.refuse(f"AutoDetect= then {line.pairs[1].key}= on one line: at the top of a line AutoDetect is a "
                   "setting of its own, so slurmd stops on the rest ('Parse error in file'); put AutoDetect on "
                   "its own line, or after NodeName= for those nodes")
        return rec
    if "nodename" in keys[1:]:
        rec.refuse("NodeName= must be the first key of its line (slurmd: 'unrecognized key: NodeName', "
                   "and it does not start); move it to the front")
        return rec
    unknown = [k for k in rec.fields if k not in KNOWN_KEYS]
    if unknown:
        rec.refuse(f"unknown key {unknown[0]!r} (gres.conf(5) keys: {', '.join(sorted(KNOWN_KEYS))})")
    if "nodename" in rec.fields:
        rec.nodes = _expand(rec, "nodename", "NodeName")
    if "autodetect" in rec.fields:
        _check_autodetect(rec, release)
    if "name" not in rec.fields and not rec.is_autodetect_only:
        rec.refuse("no Name=: slurmd ignores a GRES line without a name (e.g. Name=gpu)")
        return rec
    if "type" in rec.fields and type_problem(rec.fields["type"]):
        rec.faults.append(f"Type={visible(rec.fields['type'])}: {type_problem(rec.fields['type'])} "
                          f"(dlgres --type refuses it too); rename the type here and in slurm.conf Gres=")
    _check_files(rec)
    if rec.usable:
        _check_count(rec)
    _check_flags(rec, release)
    return rec


def parse_line(lineno: int, raw: str, release: Release = OLDEST) -> GresLine | None:
    """One gres.conf line given as text → a record (None for a blank or comment-only line)."""
    lines = read_text(raw)
    if not lines:
        return None
    rec = parse_record(lines[0], release)
    rec.line, rec.where = lineno, Where(0, lineno)
    return rec


MAX_NODE_LINES = 1 << 20
"""Most (node, line) pairs one file may name (65536 nodes with 16 lines each): the node names
of all NodeName= together. A bigger file is refused with :class:`TooLarge` as soon as it is
reached, instead of expanding names without bound and taking minutes to check."""


class TooLarge(ValueError):
    """The gres.conf names more (node, line) pairs than :data:`MAX_NODE_LINES`."""


def parse_gres_conf(text: str | list[Line], release: Release = OLDEST) -> list[GresLine]:
    """All records of a gres.conf, in reading order, by the rules of ``release``: ``text`` is the
    content, or its lines as :func:`slurm_plugin.gres.slurm_lines.read_file` gives them (with
    what it includes).

    Raises:
        TooLarge: the NodeName= lists, or the File= lists, of the lines add up to more than
            :data:`MAX_NODE_LINES`.
        ConfReadError: (text only) as :func:`slurm_plugin.gres.slurm_lines.read_bytes`.
    """
    out = []
    names = files = 0
    for line in read_text(text) if isinstance(text, str) else text:
        rec = parse_record(line, release)
        names += len(rec.nodes or ())
        if names > MAX_NODE_LINES:
            raise TooLarge(f"{line.where}: the NodeName= lists up to here name {names} nodes in all, more "
                           f"than the {MAX_NODE_LINES} dlgres checks")
        files += len(rec.files or ())
        if files > MAX_NODE_LINES:
            raise TooLarge(f"{line.where}: the File= lists up to here name {files} device files in all, more "
                           f"than the {MAX_NODE_LINES} dlgres checks")
        out.append(rec)
    return out
