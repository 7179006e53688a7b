"""Read gres.conf (gres.conf(5) of Slurm 22.05, 24.11 or 26.05) into one record per line, with the line's own faults.

Each non-blank, non-comment line becomes a :class:`GresLine`: an ``AutoDetect`` line, a GRES line
(``Name=``), or a line slurmd cannot use at all (``usable`` False: its fault is in ``faults``).
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
from slurm_plugin.gres.release import AUTODETECT_SINCE, ENV_FLAGS, FLAG_SINCE, Release

KNOWN_KEYS = {
    "autodetect", "count", "cores", "cpus", "file", "flags", "links", "multiplefiles",
    "name", "nodename", "type",
}
AUTODETECT = set(AUTODETECT_SINCE)   # of any release; which release takes which: gres_release
FLAGS = set(FLAG_SINCE)
OLDEST = Release("22.05", "default")
DEFAULT_ENV = frozenset({"nvidia_gpu_env", "amd_gpu_env", "intel_gpu_env", "opencl_env"})
SHARED = {"mps", "shard"}  # Count is per device for these (gres.conf(5), File)
_COUNT_RE = re.compile(r"^(\d+)([KMGTP]?)$", re.IGNORECASE)
_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def parse_count(text: str) -> int | None:
    """``"4"`` → 4, ``"10G"`` → 10·1024³ (gres.conf(5) and slurm.conf(5) Count suffixes); None if malformed."""
    m = _COUNT_RE.match(text.strip())
    return int(m.group(1)) * _SUFFIX[m.group(2).upper()] if m else None


@dataclass
class GresLine:
    """One line of gres.conf.

    Attributes:
        line: 1-based line number.
        fields: key (lower case) → value as written.
        nodes: the NodeName hosts, or None when the line names no node (applies to every node).
        files: File= or MultipleFiles= device paths, expanded; None when neither is given.
        count: the GRES count this line gives (Count=, else the number of files, else 1).
        flags: Flags= values in lower case.
        usable: False when slurmd ignores or refuses the whole line (then ``faults`` says why);
            such a line takes no part in checks across lines.
        faults: findings of this line alone, as messages.
    """

    line: int
    fields: dict[str, str]
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


def _tokens(body: str) -> list[tuple[str, str]]:
    out = []
    for tok in body.split():
        key, _, val = tok.partition("=")
        out.append((key.lower(), val))
    return out


MAX_FILES_PER_NODE = 1024
"""gres.conf(5), File: "Count is limited in size (currently 1024) for each node"; a File= or
MultipleFiles= of more is refused before it is expanded further."""
MAX_NODES = 65536
"""Most names a NodeName= expands to: more than any Slurm cluster has (the largest have tens of
thousands of nodes); the bound keeps ``n[0-99999],m[0-99999],...`` from filling memory."""


def _expand(rec: GresLine, key: str, what: str) -> list[str] | None:
    limit = MAX_NODES if key == "nodename" else MAX_FILES_PER_NODE
    try:
        return hostlist.expand(rec.fields[key], limit=limit)
    except ValueError as e:
        if "more than" in str(e):
            rec.refuse(f"{what}= names more than {limit} " + ("nodes, more than dlgres checks" if key == "nodename"
                       else "files: at most 1024 per node (gres.conf(5))"))
        else:
            rec.refuse(f"{what}={rec.fields[key][:60]}: {e}; write ranges as name[0-3] or name[0,2-3]")
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
    if key == "multiplefiles":
        rec.files = [",".join(rec.files)]  # one GRES made of several device files


def _check_count(rec: GresLine) -> None:
    f = rec.fields
    if "count" in f:
        n = parse_count(f["count"])
        if n is None:
            rec.refuse(f"Count={f['count']}: not a number (N, or N with a K/M/G/T/P suffix)")
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
    if {"one_sharing", "all_sharing"} <= vals:
        rec.refuse(f"Flags={rec.fields['flags']}: one_sharing and all_sharing are not compatible; keep one")
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


def parse_line(lineno: int, raw: str, release: Release = OLDEST) -> GresLine | None:
    """One gres.conf line → a record (None for a blank or comment-only line), by the rules of ``release``."""
    body = raw.split("#", 1)[0].strip()
    if not body:
        return None
    toks = _tokens(body)
    rec = GresLine(lineno, {k: v for k, v in toks})
    first = toks[0][0]
    if first not in ("nodename", "name", "autodetect"):
        rec.refuse(f"the line starts with {toks[0][0] or body.split()[0]!r}: a gres.conf line starts with "
                   "NodeName=, Name= or AutoDetect= (slurmd cannot parse it and does not start)")
        return rec
    late = [k for k, _ in toks[1:] if k == "nodename"]
    if late:
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


MAX_NODE_LINES = 1 << 20
"""Most (node, line) pairs one file may name (65536 nodes with 16 lines each): the node names
of all NodeName= together. A bigger file is refused with :class:`TooLarge` as soon as it is
reached, instead of expanding names without bound and taking minutes to check."""


class TooLarge(ValueError):
    """The gres.conf names more (node, line) pairs than :data:`MAX_NODE_LINES`."""


def parse_gres_conf(text: str, release: Release = OLDEST) -> list[GresLine]:
    """All records of a gres.conf text, in line order, by the rules of ``release``.

    Raises:
        TooLarge: the NodeName= lists of the lines add up to more than :data:`MAX_NODE_LINES`.
    """
    out = []
    names = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        rec = parse_line(lineno, raw, release)
        if rec is not None:
            names += len(rec.nodes or ())
            if names > MAX_NODE_LINES:
                raise TooLarge(f"line {lineno}: the NodeName= lists up to here name {names} nodes in all, more "
                               f"than the {MAX_NODE_LINES} dlgres checks")
            out.append(rec)
    return out
