"""Check an existing gres.conf for the mistakes real sites make (``dlgres --check``).

Rules from gres.conf(5) of Slurm 22.05: ``Links`` is one integer per GPU of the node with
``-1`` for the GPU itself, and a line with ``Links`` names a single ``File``; ``Cores`` are
logical core indices below sockets × cores per socket; a device ``File`` belongs to one line
per node; ``CPUs=`` is not documented any more: sites that copied ``nvidia-smi topo -m``'s
"CPU Affinity" into it give OS CPU ids with hyper-thread siblings (``0-15,32-47``), where
``Cores=`` wants logical cores (``0-15``). A real example: the DGX A100 file
of NVIDIA/deepops issue 1102 has ``Links=0,0,-1,,0,0,0,0,0`` on line 3.
GPUs of a node are numbered in the order their lines appear (the usual bus-id order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurm_plugin.topo_cpu import CpuTopology, CpuTopologyError, format_ranges, parse_ranges

KNOWN_KEYS = {
    "autodetect", "count", "cores", "cpus", "file", "flags", "links", "multiplefiles",
    "name", "nodename", "type",
}
_BRACKET_RE = re.compile(r"^(.*)\[([0-9,\-]+)\](.*)$")


@dataclass(frozen=True)
class Finding:
    """One problem: 1-based ``line`` and a message that names the field and the fix."""

    line: int
    message: str


@dataclass(frozen=True)
class _Slot:
    """One GPU device of a node: the line it comes from and that line's Links (if valid)."""

    line: int
    links: tuple[int, ...] | None
    entries: int | None = None


def expand_brackets(text: str) -> list[str]:
    """``/dev/nvidia[0,2-3]`` → ``['/dev/nvidia0', '/dev/nvidia2', '/dev/nvidia3']``;
    ``tux[0-1]`` likewise; text without brackets → ``[text]``.

    Raises:
        CpuTopologyError: a malformed range inside the brackets.
    """
    m = _BRACKET_RE.match(text)
    if not m:
        return [text]
    return [f"{m.group(1)}{i}{m.group(3)}" for i in parse_ranges(m.group(2))]


def _fields(raw: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for tok in raw.split():
        key, _, val = tok.partition("=")
        out[key.lower()] = val
    return out


def _parse_links(line: int, text: str) -> tuple[tuple[int, ...] | None, list[Finding]]:
    items = text.split(",")
    bad = [
        f"entry {k + 1} is empty" if not v.strip() else f"entry {k + 1} {v!r} is not an integer >= -1"
        for k, v in enumerate(items)
        if not re.fullmatch(r"-1|\d+", v.strip())
    ]
    if bad:
        msg = f"Links={text}: {'; '.join(bad)} (one integer per GPU, -1 for itself)"
        return None, [Finding(line, msg)]
    return tuple(int(v) for v in items), []


def _node_findings(slots: list[_Slot]) -> list[Finding]:
    """Length, self entry and symmetry of the Links rows of one node (GPU i = i-th device)."""
    out = []
    n = len(slots)
    for i, s in enumerate(slots):
        if s.entries is not None and s.entries != n:
            out.append(Finding(s.line, f"Links has {s.entries} entries but the node has {n} GPUs: "
                                       "give one entry per GPU"))
        if s.links is None:
            continue
        where = [k for k, v in enumerate(s.links) if v == -1]
        if where != [i]:
            found = ", ".join(str(k + 1) for k in where) or "none"
            out.append(Finding(s.line, f"Links self entry: this is GPU {i} of the node, so entry {i + 1} "
                                       f"(only) must be -1; -1 found at entries: {found}"))
    for i, a in enumerate(slots):
        for j in range(i + 1, n):
            b = slots[j]
            if a.links and b.links and len(a.links) == len(b.links) == n and a.links[j] != b.links[i]:
                out.append(Finding(b.line, f"Links to GPU {i} is {b.links[i]} but line {a.line} "
                                           f"gives {a.links[j]} the other way"))
    return out


def _check_cores(line: int, key: str, text: str, shape: CpuTopology | None) -> list[Finding]:
    try:
        ids = parse_ranges(text)
    except CpuTopologyError as e:
        return [Finding(line, f"{key}={text}: {e}")]
    over = format_ranges(i for i in ids if shape is not None and i >= shape.cores)
    if key == "CPUs":
        msg = "CPUs= is not in gres.conf(5) of Slurm 22.05: use Cores= with logical core indices"
        if shape is not None:
            try:
                msg += f" (on this node shape: Cores={format_ranges(shape.logical_cores(ids))})"
            except CpuTopologyError as e:
                msg += f" ({e})"
        if over:
            msg += f"; {over} are not cores: OS ids of hyper-thread siblings"
        return [Finding(line, msg)]
    if over:
        assert shape is not None
        return [Finding(line, f"Cores={text}: {over} beyond the node's {shape.cores} cores "
                              f"(0-{shape.cores - 1}); Cores= takes logical core indices, not OS CPU ids")]
    return []


def _line_findings(lineno: int, f: dict[str, str], devs: list[str], shape: CpuTopology | None,
                   ) -> tuple[tuple[int, ...] | None, list[Finding]]:
    """Checks of one GPU line on its own; returns its parsed Links (None if absent or bad)."""
    out: list[Finding] = []
    links = None
    if "links" in f:
        if len(devs) > 1:
            out.append(Finding(lineno, f"Links= with {len(devs)} files: a line with Links must name a single File"))
        links, bad = _parse_links(lineno, f["links"])
        out += bad
    for key, name in (("cores", "Cores"), ("cpus", "CPUs")):
        if key in f:
            out += _check_cores(lineno, name, f[key], shape)
    return links, out


def check_gres(text: str, shape: CpuTopology | None = None) -> list[Finding]:
    """All findings for a gres.conf text, sorted by line (one per problem and line).

    Args:
        text: the file's content.
        shape: the node's CPU shape (``CpuTopology.from_shape``) to check ``Cores`` ranges and
            convert ``CPUs=``; None skips those checks.
    """
    findings: list[Finding] = []
    nodes: dict[str, list[_Slot]] = {}
    line_files: dict[int, tuple[str, ...]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        body = raw.split("#", 1)[0].strip()
        if not body:
            continue
        f = _fields(body)
        unknown = [k for k in f if k not in KNOWN_KEYS]
        if unknown:
            findings.append(Finding(lineno, f"unknown key {unknown[0]!r} (gres.conf(5) keys: "
                                            f"{', '.join(sorted(KNOWN_KEYS))})"))
        if f.get("name", "").lower() != "gpu":
            continue
        try:
            hosts = expand_brackets(f.get("nodename", ""))
            devs = expand_brackets(f["file"]) if "file" in f else []
        except CpuTopologyError as e:
            findings.append(Finding(lineno, f"bad [range]: {e}"))
            continue
        links, bad = _line_findings(lineno, f, devs, shape)
        findings += bad
        single = len(devs) == 1 and "links" in f
        slot = _Slot(lineno, links if single else None, len(f["links"].split(",")) if single else None)
        dups: dict[int, list[str]] = {}
        for host in hosts:
            slots = nodes.setdefault(host, [])
            for dev in devs:
                prev = [s.line for s in slots if dev in line_files.get(s.line, ())]
                if prev:
                    dups.setdefault(prev[0], []).append(dev)
                else:
                    slots.append(slot)
        for prev_line, dup in dups.items():
            findings.append(Finding(lineno, f"File={', '.join(dict.fromkeys(dup))} already given on line "
                                            f"{prev_line} for the same node(s): each device belongs to one line"))
        line_files[lineno] = tuple(devs)
    for slots in nodes.values():
        findings += _node_findings(slots)
    unique = {(x.line, x.message): x for x in findings}
    return sorted(unique.values(), key=lambda x: x.line)
