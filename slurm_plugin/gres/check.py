"""Check an existing gres.conf against every gres.conf(5) rule of Slurm 22.05, 24.11 or 26.05 (``dlgres --check``).

Rules a line breaks on its own are read in :mod:`slurm_plugin.gres.conf`; this module adds the
rules across lines and nodes, and, given slurm.conf (:mod:`slurm_plugin.gres.slurmconf`), the
rules between the two files. What slurmd does with each fault was tried with ``slurmd -G`` of
Debian's 22.05, 24.11 and 26.05 (see docs/admins.md): on all three, duplicate records without
File or Type (lines with a Type add up: two ``Name=nic Type=x Count=1`` lines are nic:x:2), File
on some records of a name but not others, a device file on two gpu or nic lines, Count that differs
from the number of files, File with MultipleFiles, conflicting node-local AutoDetect, Flags that
differ between records of a node and name, and fewer mps or shard than slurm.conf's ``Gres=``
are fatal; AutoDetect=nvml without ``gpu_nvml.so`` (Debian's build) is ignored with a log line;
a Name missing from GresTypes drops the record; a gpu line without File (AutoDetect off) is
dropped; more GRES than the node's ``Gres=`` says are ignored, fewer gpu make the node INVALID
(seen live). ``Links``: one integer per GPU, ``-1`` for the GPU itself, a single File per line
(slurmd ignores, with a log line, Links it cannot read: :func:`_links_validate`; it takes the
others as written, without a message);
``Cores``: logical core indices below sockets × cores per socket; ``CPUs=`` is in none of the
three gres.conf(5) (sites that copied ``nvidia-smi topo -m``'s
"CPU Affinity" into it give OS ids with hyper-thread siblings). GPUs of a node are numbered in
the order their lines appear (the usual bus-id order). A line slurmd cannot use is reported
once and takes no part in the checks across lines, so one bad line does not cascade. The rules
that differ by release (AutoDetect and Flags values, whole sockets in ``Cores``) and how the
release is found are in :mod:`slurm_plugin.gres.release`; the default is 22.05. GPU shard rules
(gres/shard) are in :mod:`slurm_plugin.gres.shard_check`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from slurm_plugin import hostlist
from slurm_plugin.gres import shard_check as gres_shard_check
from slurm_plugin.gres.conf import (DEFAULT_ENV, ENV_FLAGS, MAX_FILES_PER_NODE, MAX_NODE_LINES, OLDEST, SHARED,
                                    GresLine, TooLarge, parse_gres_conf)
from slurm_plugin.gres.release import (DEBIAN_GPU_PLUGINS, DEFAULT_ENV_KEPT_SINCE, FILELESS_GPU_WARNING_SINCE,
                                        WHOLE_FLAGS_SINCE, WHOLE_SOCKET_CORES_SINCE, Release)
from slurm_plugin.gres.slurm_lines import Line, Where
from slurm_plugin.gres.slurmconf import SlurmConf
from slurm_plugin.gres.topo_cpu import CpuTopology, CpuTopologyError, format_ranges, parse_ranges

AUTODETECT_PLUGIN = {"nvml": "gpu_nvml.so", "rsmi": "gpu_rsmi.so", "oneapi": "gpu_oneapi.so",
                     "nvidia": "gpu_nvidia.so", "nrt": "gpu_nrt.so"}


@dataclass(frozen=True)
class Finding:
    """One problem: 1-based ``line`` of ``path`` (None: the gres.conf checked; else a file it
    includes, or slurm.conf) and a message that names the field and the fix."""

    line: int
    message: str
    path: str | None = None


_Found = tuple[Where, str]


@dataclass(frozen=True)
class _Slot:
    """One GPU device of a node: the line it comes from and that line's Links (if valid)."""

    line: Where
    links: tuple[int, ...] | None
    entries: int | None = None


GRES_MAX_LINK = 1023
"""Largest ``Links=`` entry slurmd takes (gres.c ``gres_links_validate``; 1024 is refused)."""
_STRTOL = re.compile(r"[ \t\n\v\f\r]*[+-]?\d+")
_TAKEN = "slurmd takes it without a message"


def _links_validate(text: str) -> str | None:
    """What ``gres_links_validate`` (gres.c) of 22.05, 24.11 and 26.05 logs for ``text``, None when it
    takes it: empty entries are skipped (``strtok``), each other one is read by ``strtol`` whole, from
    -2 to :data:`GRES_MAX_LINK`, and exactly one is -1. slurmd then logs "gres.conf: Ignoring invalid
    Links=... for Name=gpu" and goes on without the line's Links (slurmd -G of all three)."""
    self_at = False
    for tok in (t for t in text.split(",") if t):
        if not _STRTOL.fullmatch(tok) or not -2 <= int(tok) <= GRES_MAX_LINK:
            return f"Failed to parse token '{tok}' in links string '{text}'"
        if int(tok) == -1:
            if self_at:
                return f"links string '{text}' has more than one -1"
            self_at = True
    return None if self_at else f"-1 wasn't found in links string '{text}'"


def _parse_links(line: Where, text: str) -> tuple[tuple[int, ...] | None, list[_Found], bool]:
    """The line's Links, its findings, and whether slurmd ignores the Links (:func:`_links_validate`)."""
    items = text.split(",")
    said = _links_validate(text)
    if said is not None:
        return None, [(line, f"Links={text}: slurmd ignores these Links ('gres_links_validate: {said}', then "
                             f"'gres.conf: Ignoring invalid Links={text} for Name=gpu'); give one integer per GPU, "
                             "-1 for itself")], True
    bad = [   # what slurmd takes: empty entries, -2
        f"entry {k + 1} is empty" if not v.strip() else f"entry {k + 1} {v!r} is not an integer >= -1"
        for k, v in enumerate(items)
        if not v.strip() or int(v) < -1
    ]
    if bad:
        msg = f"Links={text}: {'; '.join(bad)} (one integer per GPU, -1 for itself; {_TAKEN})"
        return None, [(line, msg)], False
    return tuple(int(v) for v in items), [], False


def _node_findings(slots: list[_Slot]) -> list[_Found]:
    """Length, self entry and symmetry of the Links rows of one node (GPU i = i-th device)."""
    out: list[_Found] = []
    n = len(slots)
    for i, s in enumerate(slots):
        if s.entries is not None and s.entries != n:
            out.append((s.line, f"Links has {s.entries} entries but the node has {n} GPUs: "
                                       f"give one entry per GPU ({_TAKEN})"))
        if s.links is None:
            continue
        where = [k for k, v in enumerate(s.links) if v == -1]
        if where != [i]:
            found = ", ".join(str(k + 1) for k in where) or "none"
            out.append((s.line, f"Links self entry: this is GPU {i} of the node, so entry {i + 1} "
                                       f"(only) must be -1; -1 found at entries: {found} ({_TAKEN})"))
    for i, a in enumerate(slots):
        for j in range(i + 1, n):
            b = slots[j]
            if a.links and b.links and len(a.links) == len(b.links) == n and a.links[j] != b.links[i]:
                out.append((b.line, f"Links to GPU {i} is {b.links[i]} but {a.line} "
                                           f"gives {a.links[j]} the other way ({_TAKEN})"))
    return out


def _check_cores(line: Where, key: str, text: str, shape: CpuTopology | None, release: str,
                 whole: bool) -> list[_Found]:
    """``whole``: the release's gres.conf(5) requires whole sockets in Cores."""
    try:
        ids = parse_ranges(text, what="core" if key == "Cores" else "CPU")
    except CpuTopologyError as e:
        return [(line, f"{key}={text}: {e}")]
    over = format_ranges(i for i in ids if shape is not None and i >= shape.cores)
    if key == "CPUs":
        msg = f"CPUs= is not in gres.conf(5) of Slurm {release}: use Cores= with logical core indices"
        if shape is not None:
            try:
                msg += f" (on this node shape: Cores={format_ranges(shape.logical_cores(ids))})"
            except CpuTopologyError as e:
                msg += f" ({e})"
        if over:
            msg += f"; {over} are not cores: OS ids of hyper-thread siblings"
        return [(line, msg)]
    if over:
        assert shape is not None
        return [(line, f"Cores={text}: {over} beyond the node's {shape.cores} cores "
                              f"(0-{shape.cores - 1}); Cores= takes logical core indices, not OS CPU ids")]
    if whole and shape is not None and key == "Cores":
        per, given = shape.cores_per_socket, set(ids)
        part = sorted(s for s in {i // per for i in ids} if not set(range(s * per, (s + 1) * per)) <= given)
    else:
        part = []
    if part:
        full = ",".join(f"{s * per}-{(s + 1) * per - 1}" for s in part)
        return [(line, f"Cores={text}: part of socket(s) {','.join(map(str, part))} (cores {full}): "
                              f"gres.conf(5) of Slurm {release} wants all the cores of a socket given together "
                              f"(slurmd {release} starts with it, without a message)")]
    return []


def _line_findings(lineno: Where, f: dict[str, str], devs: list[str], shape: CpuTopology | None,
                   release: str, whole: bool) -> tuple[tuple[int, ...] | None, list[_Found], bool]:
    """Checks of one GPU line on its own; returns its parsed Links (None if absent or bad), its
    findings, and whether slurmd ignores its Links."""
    out: list[_Found] = []
    links, ignored = None, False
    if "links" in f:
        links, bad, ignored = _parse_links(lineno, f["links"])
        if len(devs) > 1 and not ignored:
            out.append((lineno, f"Links= with {len(devs)} files: a line with Links must name a single File "
                                f"({_TAKEN})"))
        out += bad
    for key, name in (("cores", "Cores"), ("cpus", "CPUs")):
        if key in f:
            out += _check_cores(lineno, name, f[key], shape, release, whole)
    return links, out, ignored


class _Report:
    """Findings keyed by (line, message); ``{nodes}`` in a message collects the node names."""

    def __init__(self) -> None:
        self.plain: dict[tuple[Where, str], None] = {}
        self.nodes: dict[tuple[Where, str], list[str]] = {}

    def add(self, line: Where, message: str, node: str | None = None) -> None:
        if node is None or "{nodes}" not in message:
            self.plain[(line, message)] = None
        else:
            self.nodes.setdefault((line, message), []).append(node)

    def findings(self) -> list[Finding]:
        out = list(self.plain)
        for (line, msg), names in self.nodes.items():
            label = hostlist.collect(sorted(set(names))) if any(names) else "this node"
            out.append((line, msg.replace("{nodes}", label)))
        return [Finding(w.line, msg, w.path) for w, msg in sorted(out, key=lambda f: f[0])]


def _universe(recs: list[GresLine], slurm: SlurmConf | None, rep: _Report) -> list[str]:
    """The nodes to check: slurm.conf's, else those the lines name, else "" (the reading node)."""
    named = sorted({n for r in recs if r.nodes for n in r.nodes})
    if slurm is None:
        return named or [""]
    for r in recs:
        stray = [n for n in r.nodes or () if n not in slurm.node_gres]
        if stray:
            rep.add(r.where, f"NodeName: {hostlist.collect(stray)} not in slurm.conf: the line applies to "
                            "no node (a typo?)")
    return sorted(slurm.node_gres) or named or [""]


def _autodetect(recs: list[GresLine], nodes: list[str], plugin_dirs: list[str] | None, rep: _Report,
                cloud_nodes: set[str], release: Release) -> dict[str, str]:
    """Effective AutoDetect per node ("off" when unset); reports conflicts, missing plugins and
    AutoDetect on cloud nodes."""
    glob = "off"
    local: dict[str, tuple[str, Where]] = {}
    for r in recs:
        val = r.fields.get("autodetect", "").lower()
        if not val or val not in release.autodetect:
            continue
        if plugin_dirs is not None and val in AUTODETECT_PLUGIN:
            so = AUTODETECT_PLUGIN[val]
            if not any((Path(d) / so).is_file() for d in plugin_dirs):
                why = (f"Debian's {release.name} has it: is this the plugin directory?"
                       if so in DEBIAN_GPU_PLUGINS[release.name] else f"Debian's {release.name} is built without it")
                val = "off"  # what slurmd then does
                rep.add(r.where, f"AutoDetect={r.fields['autodetect']}: this Slurm has no {so} (in "
                                 f"{':'.join(plugin_dirs)}; {why}): slurmd logs that the library was not found and "
                                "detects nothing; give File= lines (dlgres writes them)")
        cloud = sorted(set(r.nodes if r.nodes is not None else cloud_nodes) & cloud_nodes)
        if val != "off" and cloud:
            rep.add(r.where, f"AutoDetect={val} on cloud node(s) {hostlist.collect(cloud)}: AutoDetect cannot be "
                            "used with cloud nodes; give File= lines for them")
        if r.nodes is None:
            glob = val
            continue
        for n in r.nodes:
            if n in local and local[n][0] != val:
                rep.add(r.where, f"AutoDetect={val} for {{nodes}} but {local[n][1]} set {local[n][0]}: "
                                "node-local AutoDetect values must all be the same (slurmd does not start)", n)
            else:
                local.setdefault(n, (val, r.where))
    return {n: local[n][0] if n in local else glob for n in nodes}


def _node_rules(node: str, lines: list[GresLine], auto: str, detected: list[str] | None, rep: _Report,
                release: Release, told: set[Where]) -> None:
    """Rules across the GRES lines of one node (``lines``: in file order, usable only); ``told``: lines
    already reported for lacking a File that other lines of their GRES give."""
    by_name: dict[str, list[GresLine]] = {}
    for r in lines:
        by_name.setdefault(r.name, []).append(r)
    for name, group in by_name.items():
        _typed_with_untyped(name, group, rep, node)
        first: Where | None = None   # the first line of the group without File and Type
        dup = auto == "off" and sum(r.files is None and not r.type for r in group) > 1   # slurmd stops first
        shard_file = any(r.name == "shard" and r.files is not None for r in lines)   # shard_check tells
        for r in group:
            if r.files is None and not r.type and auto == "off":   # typed ones add up (module docstring)
                if first is not None:
                    rep.add(r.where, f"{name}: a second line without File for {{nodes}} (first: {first}): slurmd "
                                    f"stops on duplicate records ('gres.conf duplicate records for {name}')", node)
                first = first or r.where
            if name == "gpu" and r.files is None and auto == "off" and not (dup or shard_file or r.where in told):
                rep.add(r.where, _fileless(r, release))
            if "multiplefiles" in r.fields and auto == "nvidia":
                rep.add(r.where, f"MultipleFiles= (a MIG device) with AutoDetect=nvidia on {{nodes}}: it does not "
                                "detect MIGs (gres.conf(5)); use AutoDetect=nvml, or off with File= lines", node)
            if "env_uuid" in r.flags and auto == "off":
                rep.add(r.where, f"Flags=env_uuid without AutoDetect on {{nodes}}: slurmd {release.name} has no UUID "
                                f"to give (it warns 'Flags=env_uuid set but no GPU UUID available for device "
                                f"{r.fields.get('file', '...')}. Falling back to numeric indices.'); set "
                                "AutoDetect=nvml or nvidia, or drop the flag", node)
            if auto in ("nvml", "nvidia") and detected is not None and r.type:
                want = r.type.lower()
                if not any(want in d.lower().replace(" ", "_") for d in detected):
                    rep.add(r.where, f"Type={r.type} is not part of any GPU name NVML reports "
                                    f"({', '.join(sorted(set(detected)))}): with AutoDetect the Type must match or "
                                    "be a substring of it, spaces as '_'")
        _env_rule(name, group, rep, node, release)
    total = sum(len(r.files) for r in lines if r.files is not None)
    if total > MAX_FILES_PER_NODE:
        rep.add(lines[-1].where, f"{{nodes}}: {total} device files: gres.conf(5) says at most {MAX_FILES_PER_NODE} "
                                 "per node ('Count is limited in size (currently 1024) for each node'); slurmd starts "
                                 "with them, without a message", node)


def _dropped(typ: str, release: Release) -> str:
    """How slurmd drops a GPU without File, AutoDetect off
    (:data:`~slurm_plugin.gres.release.FILELESS_GPU_WARNING_SINCE`)."""
    said = (f"'Ignoring file-less GPU gpu:{typ or '(null)'} from final GRES list'"
            if release.has(FILELESS_GPU_WARNING_SINCE) else "without a message")
    return f"slurmd {release.name} drops a GPU without a device file ({said})"


def _fileless(r: GresLine, release: Release) -> str:
    return (f"{'Type=' + r.type if r.type else 'Name=gpu'} without File=: {_dropped(r.type, release)}, so the node "
            "registers fewer GPUs than its slurm.conf Gres= and slurmctld sets it INVALID; name the /dev/nvidiaN "
            "files")


def _typed_with_untyped(name: str, group: list[GresLine], rep: _Report, node: str) -> None:
    """gres.c ``_foreach_gres_conf``: the lines of one node and name all give ``Type=`` or none
    do; reported on the later of the first typed and the first untyped line."""
    typed = next((r for r in group if r.type), None)
    untyped = next((r for r in group if not r.type), None)
    if typed is None or untyped is None:
        return
    later = max(typed, untyped, key=lambda r: r.where)
    rep.add(later.where, f"{name}: {typed.where} gives Type= and {untyped.where} does not, for {{nodes}}: slurmd "
                         f"stops ('gres.conf for {name}, some records have \"Type=\" specification while others do "
                         f"not'); give every {name} line a Type, or none", node)


def _file_on_all_nodes(lines: list[GresLine], auto: dict[str, str], rep: _Report) -> set[Where]:
    """gres.conf(5), File: "If you specify the File parameter for a resource on some node, the
    option must be specified on all nodes" (lines of one node and across nodes). Returns the lines
    reported."""
    told: set[Where] = set()
    by_name: dict[str, list[GresLine]] = {}
    for r in lines:
        by_name.setdefault(r.name, []).append(r)
    for name, group in by_name.items():
        with_file = [r for r in group if r.files is not None]
        if not with_file:
            continue
        for r in group:
            hosts = r.nodes if r.nodes is not None else list(auto)
            if r.files is None and any(auto.get(h, "off") == "off" for h in hosts):
                rep.add(r.where, f"{name}: {with_file[0].where} gives File= but this line does not: File "
                                "must be on every line and node of a GRES or on none (slurmd stops when one "
                                "node's lines mix them)")
                told.add(r.where)
    return told


def _sharing_rules(lines: list[GresLine], rep: _Report) -> None:
    """gres.conf(5), Flags one_sharing/all_sharing: "To be used on a shared gres"; "If a gres has
    this flag configured it is global, so all other nodes with that gres will have this flag
    implied. This flag is not combatible with all_sharing for a specific gres." A line of that
    GRES without the flag takes it silently: reported with the line it comes from."""
    first: dict[str, tuple[str, Where]] = {}
    for r in lines:
        for flag in sorted(r.flags & {"one_sharing", "all_sharing"}):
            if r.name not in SHARED:
                rep.add(r.where, f"Flags={flag} on {r.name}: it is for a shared GRES (mps, shard) only")
            elif r.name in first and first[r.name][0] != flag:
                rep.add(r.where, f"Flags={flag} on {r.name} but {first[r.name][1]} sets {first[r.name][0]}: "
                                "the flag is global for a GRES, and the two are not compatible")
            else:
                first.setdefault(r.name, (flag, r.where))
    for r in lines:
        if r.name in first and not r.flags & {"one_sharing", "all_sharing"}:
            flag, origin = first[r.name]
            rep.add(r.where, _inherited(flag, origin, f"{flag} is global: every {r.name} line of every node takes it"))


def _inherited(flags: str, origin: Where, rule: str, source: str = "gres.conf(5)") -> str:
    return f"Flags: inherits {flags} from {origin} ({source}: {rule}): write Flags={flags} on this line"


def _env_rule(name: str, group: list[GresLine], rep: _Report, node: str, release: Release) -> None:
    """Env flags: a line without any inherits the line above (same node and name), reported with the
    line they were written on; all must agree. slurmd compares them as it reads gres.conf, before
    AutoDetect: a gpu line without Flags= has the four default env flags there, whatever AutoDetect
    says (slurmd -G of 22.05 with AutoDetect=nvml, 24.11 and 26.05 with AutoDetect=nvidia, a line
    without Flags then one with ``Flags=nvidia_gpu_env``: "does not match env flags for previous
    GRES of same node and name"). From 24.11 slurmd reads whole Flags= values: :func:`_flags_rule`."""
    if release.has(WHOLE_FLAGS_SINCE):
        _flags_rule(name, group, rep, node, release)
        return
    first: tuple[frozenset[str], Where] | None = None
    prev: tuple[frozenset[str], Where] | None = None   # env flags of the line above and where written
    for r in group:
        own = frozenset(r.flags & ENV_FLAGS)
        if own:
            prev = (own, r.where)
        elif prev is not None:
            rep.add(r.where, _inherited(",".join(sorted(prev[0])), prev[1],
                                       f"env flags carry to the next {name} line of the same node that sets "
                                       "none, on {nodes}"), node)
        env = prev[0] if prev else DEFAULT_ENV
        if first is None:
            first = (env, r.where)
        elif env != first[0]:
            rep.add(r.where, f"Flags: env flags {','.join(sorted(env))} differ from {first[1]}'s "
                            f"{','.join(sorted(first[0]))} for {name} on {{nodes}}: they must be the same for "
                            "every line of a node and name (slurmd does not start)", node)


@dataclass(frozen=True)
class _Prev:
    """What the next line of a node and name is compared with and takes: ``flags``, set by the
    line at ``where``; ``written``: its Flags= value, None when these are the default env flags."""

    flags: frozenset[str]
    where: Where
    written: str | None


def _flags_rule(name: str, group: list[GresLine], rep: _Report, node: str, release: Release) -> None:
    """How slurmd 24.11 and 26.05 read Flags= over the lines of one node and name, as slurmd -G of
    each shows (``Flags=Explicit,HAS_FILE,ENV_NVML`` and the like):

    * 24.11: a line's Flags= is its whole flag set, env flags or not (``Flags=explicit`` or
      ``Flags=CountOnly`` on a gpu line: no ``ENV_*`` flag, so slurmd sets no GPU variable for
      it); a line without Flags= takes the whole set of the line above; a Flags= set that differs
      from the line above stops slurmd.
    * 26.05: a Flags= without env flags keeps the default env flags and is not compared; one with
      env flags is compared, whole, with the line above and passed on, whole, to lines without
      Flags=; after a line without env flags the line above counts as the default env flags.

    ``all_sharing`` is no flag of its own (slurmd -G shows none), so it counts as no flag here; the
    sharing flags' own rules are :func:`_sharing_rules`.
    """
    rel = release.name
    whole = not release.has(DEFAULT_ENV_KEPT_SINCE)    # 24.11
    default = DEFAULT_ENV if name == "gpu" else frozenset()
    prev: _Prev | None = None
    for r in group:
        written = r.fields.get("flags")
        flags = frozenset(r.flags - {"all_sharing"})
        env = flags & ENV_FLAGS
        if written is not None and (whole or env):
            if prev is not None and prev.flags and flags != prev.flags:
                was = f"Flags={prev.written}" if prev.written is not None else "default env flags (no Flags=)"
                rep.add(r.where, f"Flags={written}: not the same as {prev.where}'s {was} for {name} on {{nodes}}: "
                                f"slurmd {rel} stops ('Flags ({written}) does not match env flags for previous GRES "
                                f"of same node and name'); write the same Flags= on every {name} line of a node",
                        node)
            if name == "gpu" and not env:
                rep.add(r.where, f"Flags={written} has no env flag: slurmd {rel} then sets no GPU variable "
                                 "(CUDA_VISIBLE_DEVICES and the like) for this line; add nvidia_gpu_env (or the "
                                 "vendor's)")
            prev = _Prev(flags, r.where, written)
        elif written is not None:    # 26.05, no env flag: the default env flags
            if name == "gpu" and prev is not None and prev.written is not None and prev.flags & ENV_FLAGS != default:
                rep.add(r.where, f"Flags={written} has no env flag: slurmd {rel} gives this line the default env "
                                 f"flags ({','.join(sorted(default))}), not {prev.where}'s "
                                 f"{','.join(sorted(prev.flags & ENV_FLAGS))}; write "
                                 f"Flags={','.join(sorted(flags | (prev.flags & ENV_FLAGS)))}", node)
            if default:
                prev = _Prev(default, r.where, None)
        elif prev is not None and prev.flags:
            taken = prev.flags - {"one_sharing"}    # one_sharing: _sharing_rules
            if prev.written is not None and taken:
                what = "a line's Flags=" if whole else "the Flags= of a line with env flags"
                rep.add(r.where, _inherited(",".join(sorted(taken)), prev.where,
                                            f"it carries {what} to the next {name} line of the same node that has "
                                            "none, on {nodes}", f"slurmd {rel}"), node)
        elif default:
            prev = _Prev(default, r.where, None)


def _slurm_rules(node: str, lines: list[GresLine], slurm: SlurmConf, rep: _Report, skip: set[str], auto: str,
                 release: Release) -> None:
    """The node's gres.conf counts against its slurm.conf Gres= (per name and type); names in
    ``skip`` have a line slurmd cannot use on this node, so their count is unknown. Fewer mps or
    shard than Gres= stop slurmd (slurmd -G of 22.05, 24.11 and 26.05: "_build_shared_list:
    multiple configurations with and without "File"", or "bad configuration, multiple
    configurations without "File"" when the lines give no File). A gpu of Gres=
    that no line of a node with lines here gives has no File, so slurmd drops it (AutoDetect off;
    slurmd -G of 22.05, 24.11 and 26.05 with ``Gres=gpu:a:2`` and ``Name=gpu File=...`` lines: the
    lines are "more configured than expected", and no GPU is listed)."""
    conf = slurm.node_gres.get(node, {})
    got: dict[tuple[str, str], tuple[int, Where]] = {}
    for r in lines:
        if r.name in skip:
            continue
        untyped_only = (r.name, "") in conf and not any(n == r.name and t for n, t in conf)
        if untyped_only and r.type:  # slurmd -G: "has N more configured than expected", Type dropped
            rep.add(r.where, f"Type={r.type} but slurm.conf Gres= of {{nodes}} has no type ({r.name}:"
                            f"{conf[(r.name, '')]}): slurmd warns and drops the type; write Gres={r.name}:"
                            f"{r.type}:N there", node)
        key = (r.name, "" if untyped_only else r.type)  # Gres=gpu:4 counts typed lines together
        c, first = got.get(key, (0, r.where))
        got[key] = (c + r.count, first)
    for (name, typ), (count, line) in got.items():
        label = f"{name}:{typ}" if typ else name
        typed = {t for (n, t) in conf if n == name}
        want = conf.get((name, typ))
        if want is None and typ and typed and "" not in typed:
            rep.add(line, f"{label}: slurm.conf Gres= of {{nodes}} has no type {typ} "
                          f"({', '.join(sorted(t for t in typed if t))}): slurmd ignores these GRES", node)
        elif want is None and not typed:
            rep.add(line, f"{label}: slurm.conf gives {{nodes}} no Gres={name}:...: add it to the node line", node)
        elif want is None and not typ:
            rep.add(line, f"{name}: lines without Type, but slurm.conf Gres= of {{nodes}} gives only types "
                          f"({', '.join(sorted(typed))}): slurmd ignores them ('A line in gres.conf for GRES {name} "
                          f"has {count} more configured than expected in slurm.conf'); give them Type=", node)
        elif want is not None and count > want:
            rep.add(line, f"{label}: {count} here but slurm.conf Gres= of {{nodes}} says {want}: slurmd ignores "
                          "the extra ones", node)
        elif want is not None and count < want and name in SHARED:   # slurmd adds a line for the rest
            with_file = any(r.files is not None for r in lines if r.name == name)
            said = ("multiple configurations with and without \"File\"" if with_file else
                    "bad configuration, multiple configurations without \"File\"")
            rep.add(line, f"{label}: {count} here but slurm.conf Gres= of {{nodes}} says {want}: slurmd stops "
                          f"('_build_shared_list: {said}'); give {want} here", node)
        elif want is not None and count < want:
            rep.add(line, f"{label}: {count} here but slurm.conf Gres= of {{nodes}} says {want}: slurmctld sets "
                          f"the node INVALID ('gres/{name} count reported lower than configured')", node)
    if not lines or auto != "off" or "gpu" in skip:
        return
    for (name, typ), want in conf.items():
        if name == "gpu" and want and (name, typ) not in got:
            label = f"gpu:{typ}" if typ else "gpu"
            rep.add(lines[0].where, f"{label}: slurm.conf Gres= of {{nodes}} gives {want} but no line here does: "
                                    f"{_dropped(typ, release)}, so slurmctld sets the node INVALID; give "
                                    f"{label} its File= lines", node)


def _links_rules(lines: list[GresLine], shape: CpuTopology | None, rep: _Report,
                 release: str, whole: bool) -> dict[str, list[_Slot]]:
    """Line-local Links/Cores checks of gpu lines; returns the device slots per node."""
    nodes: dict[str, list[_Slot]] = {}
    owners: dict[str, dict[str, Where]] = {}   # node -> device file -> the line that gives it
    for r in lines:
        devs = r.files or []
        links, bad, ignored = _line_findings(r.where, r.fields, devs, shape, release, whole)
        for f in bad:
            rep.add(*f)
        single = len(devs) == 1 and "links" in r.fields and not ignored
        slot = _Slot(r.where, links if single else None, len(r.fields["links"].split(",")) if single else None)
        dups: dict[Where, list[str]] = {}
        for host in r.nodes if r.nodes is not None else [""]:
            slots = nodes.setdefault(host, [])
            owner = owners.setdefault(host, {})
            for dev in devs:
                if dev in owner:
                    dups.setdefault(owner[dev], []).append(dev)
                else:
                    owner[dev] = r.where
                    slots.append(slot)
        for prev_line, dup in dups.items():
            rep.add(r.where, _duplicate("gpu", dup, prev_line, r.where))
    return nodes


DUPLICATE_FILE_STOPS = ("gpu", "nic")
"""GRES whose plugin stops slurmd on a device file given twice for a node (slurmd -G of 22.05, 24.11
and 26.05: "nic duplicate device file name (/dev/x)", "Gres NIC plugin failed to load
configuration"). mps and shard drop the later line's share of that device with a log line; other
names (no plugin) take both lines (22.05 without a message, 24.11 and 26.05 log "fpga duplicate
device file name"); one device on lines of two names (a nic and a gpu line) is taken by both."""


def _duplicate(name: str, dup: list[str], prev_line: Where, where: Where) -> str:
    files = ", ".join(dict.fromkeys(dup))
    same = prev_line == where
    if name in SHARED:
        given = f"given twice on this {name} line" if same else \
            f"already given on {prev_line} for {name} on the same node(s)"
        return (f"File={files} {given}: slurmd drops this line's "
                f"{name} on {dup[0]} ('Discarding gres/'shared' configuration (File={dup[0]}) without matching "
                f"gres/'sharing' record') and starts with fewer {name}; each device belongs to one {name} line")
    given = "given twice on this line" if same else f"already given on {prev_line} for the same node(s)"
    return (f"File={files} {given}: slurmd stops ('{name} duplicate device "
            f"file name ({dup[0]})', then 'Gres {name.upper()} plugin failed to load configuration'); each device "
            "belongs to one line")


def _duplicate_files(lines: list[GresLine], rep: _Report) -> None:
    """A device file on two lines of a node and a name other than gpu (:func:`_links_rules` has gpu's):
    :data:`DUPLICATE_FILE_STOPS` and :data:`~slurm_plugin.gres.conf.SHARED`."""
    owners: dict[tuple[str, str], dict[str, Where]] = {}   # (node, name) -> device file -> its first line
    for r in lines:
        if r.files is None or r.name == "gpu" or r.name not in (*DUPLICATE_FILE_STOPS, *SHARED):
            continue
        dups: dict[Where, list[str]] = {}
        for host in r.nodes if r.nodes is not None else [""]:
            owner = owners.setdefault((host, r.name), {})
            for dev in r.files:
                if dev in owner:
                    dups.setdefault(owner[dev], []).append(dev)
                else:
                    owner[dev] = r.where
        for prev_line, dup in dups.items():
            rep.add(r.where, _duplicate(r.name, dup, prev_line, r.where))


def check_gres(text: str | list[Line], shape: CpuTopology | None = None, slurm: SlurmConf | None = None,
               plugin_dirs: list[str] | None = None, detected: list[str] | None = None,
               release: Release = OLDEST) -> list[Finding]:
    """All findings for a gres.conf, in reading order (one per problem and line), then those of
    slurm.conf (:attr:`SlurmConf.findings <slurm_plugin.gres.slurmconf.SlurmConf>`).

    Raises:
        TooLarge: more (node, line) pairs than :data:`MAX_NODE_LINES`
            (:data:`slurm_plugin.gres.conf.MAX_NODE_LINES`).
        ConfReadError: (text only) as :func:`slurm_plugin.gres.slurm_lines.read_bytes`.

    Args:
        text: the file's content, or its lines as :func:`slurm_plugin.gres.slurm_lines.read_file`
            gives them (with what it includes).
        shape: the node's CPU shape (``CpuTopology.from_shape``) to check ``Cores`` ranges and
            convert ``CPUs=``; None skips those checks.
        slurm: the cluster's slurm.conf facts (GresTypes, node Gres=); None skips those rules.
        plugin_dirs: Slurm's plugin directories, to check that AutoDetect's library exists;
            None skips that rule.
        detected: GPU names NVML reports on the node (``NVIDIA A100-SXM4-40GB``), to check
            ``Type=`` under AutoDetect=nvml or nvidia; None skips that rule.
        release: whose gres.conf(5) to apply (:func:`slurm_plugin.gres.release.resolve`).
    """
    rep = _Report()
    recs = parse_gres_conf(text, release)
    for r in recs:
        for msg in r.faults:
            rep.add(r.where, msg)
    good = [r for r in recs if r.usable]
    if slurm is not None:
        for r in good:
            if r.name and r.name not in slurm.gres_types:
                rep.add(r.where, f"Name={r.fields['name']} is not in slurm.conf GresTypes "
                                f"({','.join(sorted(slurm.gres_types)) or 'empty'}): slurmd ignores the line")
        good = [r for r in good if not r.name or r.name in slurm.gres_types]
    nodes = _universe(good, slurm, rep)
    auto = _autodetect(good, nodes, plugin_dirs, rep, slurm.cloud if slurm else set(), release)
    _sharing_rules(good, rep)
    gres_lines = [r for r in good if not r.is_autodetect_only]
    broken = [r for r in recs if not r.usable]
    pairs = sum(len(nodes) if r.nodes is None else len(r.nodes) for r in recs)
    if pairs > MAX_NODE_LINES:
        raise TooLarge(f"{len(recs)} lines over {len(nodes)} nodes make {pairs} (node, line) pairs, more than "
                       f"the {MAX_NODE_LINES} dlgres checks")
    files = sum((len(nodes) if r.nodes is None else len(r.nodes)) * len(r.files or ()) for r in recs)
    if files > MAX_NODE_LINES:
        raise TooLarge(f"{len(recs)} lines over {len(nodes)} nodes name {files} (node, device file) pairs, more than "
                       f"the {MAX_NODE_LINES} dlgres checks")
    per_node: dict[str, list[GresLine]] = {}
    for r in gres_lines:
        for n in nodes if r.nodes is None else dict.fromkeys(r.nodes):
            per_node.setdefault(n, []).append(r)
    broken_names: dict[str, set[str]] = {}
    for r in broken:
        for n in nodes if r.nodes is None else r.nodes:
            broken_names.setdefault(n, set()).add(r.fields.get("name", "").lower())
    told = _file_on_all_nodes(gres_lines, auto, rep)
    for node in nodes:
        skip = broken_names.get(node, set())
        mine = per_node.get(node, [])
        if mine:
            _node_rules(node, mine, auto[node], detected, rep, release, told)
            gres_shard_check.node_rules(node, mine, auto[node], rep)
        if slurm is not None:
            _slurm_rules(node, mine, slurm, rep, skip, auto[node], release)
    _duplicate_files(gres_lines, rep)
    gpu = [r for r in gres_lines if r.name == "gpu"]
    whole = release.has(WHOLE_SOCKET_CORES_SINCE) and not (slurm and slurm.socket_as)
    slots = _links_rules(gpu, shape, rep, release.name, whole)
    bad_gpu = [r for r in broken if r.fields.get("name", "").lower() in ("gpu", "")]
    tainted = {n for r in bad_gpu for n in (r.nodes or slots)}  # numbering unknown after a bad line
    for host, node_slots in slots.items():
        if (host not in tainted and auto.get(host, auto.get("", "off")) == "off"
                and len(node_slots) <= MAX_FILES_PER_NODE):   # more is reported by _node_rules
            for f in _node_findings(node_slots):
                rep.add(*f)
    ours = slurm.findings if slurm is not None else []
    return rep.findings() + [Finding(w.line, msg, w.path or (slurm.path if slurm else None)) for w, msg in ours]
