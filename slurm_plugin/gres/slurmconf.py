"""What ``dlgres --check --slurm-conf FILE`` needs from slurm.conf (Slurm 22.05 slurm.conf(5)).

``GresTypes`` ("A comma-delimited list of generic resources to be managed"), ``PluginDir``
("a colon-separated list of directories") and, per node, ``Gres=`` in the format
``<name>[:<type>][:no_consume]:<number>[K|M|G]`` ("The final field must specify a generic
resources count"; "It is forbidden to specify both an untyped GRES and a typed GRES with the same
<name>"), and ``ClusterName``. "Each line where NodeName is "DEFAULT" will replace or add to
previous default values and will not reinitialize the default values". "A single node name can
not appear as a NodeName value in more than one line": slurm.conf(5) goes on "(duplicate node
name records will be ignored)", but src/common/read_config.c (``_push_to_hashtbls``) makes
"Duplicated NodeName %s in the config file" fatal, and slurmd -G of 22.05, 24.11 and 26.05
stops with "Duplicated NodeHostName n1 in config file" (with or without NodeHostname= on the two
lines); the check reads on with the first record. Keys are case-insensitive. Lines, comments, continuations, quotes and
``Include`` are read by :mod:`slurm_plugin.gres.slurm_lines`, as Slurm's parser reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurm_plugin import hostlist
from slurm_plugin.gres.conf import MAX_NODE_LINES, MAX_NODES, parse_count
from slurm_plugin.gres.slurm_lines import Line, Where, read_text


class SlurmConfError(ValueError):
    """A slurm.conf value this reader needs is malformed (message names the line)."""


@dataclass
class SlurmConf:
    """The GRES facts of a slurm.conf.

    Attributes:
        gres_types: GresTypes names, lower case (empty: none managed).
        plugin_dirs: PluginDir entries (empty: not set).
        node_gres: node name → {(name, type or ""): count} from its ``Gres=``.
        cloud: nodes with ``State=CLOUD`` (slurm.conf(5): powered up on demand).
        cluster_name: ``ClusterName``, lower case as Slurm stores it (None: not set).
        socket_as: ``numa_node_as_socket`` or ``l3cache_as_socket`` when ``SlurmdParameters``
            has it (a "socket" of gres.conf ``Cores`` is then a NUMA node or an L3 cache).
        findings: (where, message) of what slurmctld ignores or refuses in the file.
        path: the file's name as the user gave it (messages name it).
    """

    gres_types: set[str] = field(default_factory=set)
    plugin_dirs: list[str] = field(default_factory=list)
    node_gres: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)
    cloud: set[str] = field(default_factory=set)
    cluster_name: str | None = None
    socket_as: str | None = None
    findings: list[tuple[Where, str]] = field(default_factory=list)
    path: str = "slurm.conf"


def parse_node_gres(where: str, text: str) -> dict[tuple[str, str], int]:
    """``gpu:a100:8,mps:400`` → ``{("gpu", "a100"): 8, ("mps", ""): 400}``; ``where`` (``FILE:LINE``)
    starts the messages.

    Raises:
        SlurmConfError: an item without a numeric count, or a name given both with and without a
            type (slurm.conf(5): forbidden; slurmd stops: "Some gpu GRES in slurm.conf have a type
            while others do not").
    """
    out: dict[tuple[str, str], int] = {}
    if text.lower() in ("", "(null)"):
        return out
    for item in text.split(","):
        parts = [p for p in item.split(":") if p.lower() != "no_consume"]
        n = parse_count(parts[-1]) if len(parts) > 1 else None
        if n is None or len(parts) > 3:
            raise SlurmConfError(f"{where}: Gres={text}: item {item!r} is not "
                                 "<name>[:<type>]:<count>")
        key = (parts[0].lower(), parts[1] if len(parts) == 3 else "")
        out[key] = out.get(key, 0) + n
    for name, typ in out:
        if typ and (name, "") in out:
            raise SlurmConfError(f"{where}: Gres={text}: {name} both with a type ({name}:{typ}) and without: "
                                 f"slurm.conf(5) forbids it (slurmd stops: 'Some {name} GRES in slurm.conf have a "
                                 "type while others do not'); give every item a type")
    return out


RECORD_KEYS = frozenset({"nodename", "partitionname", "nodeset", "frontendname", "downnodes"})
"""The keys that start a record whose other keys follow on the same line (slurm.conf(5)); any
other line holds one key: src/common/parse_config.c ``s_p_parse_file`` parses one key per line
(``_parse_next_key``) and calls what is left a parse error."""


def parse_slurm_conf(text: str | list[Line], path: str = "slurm.conf") -> SlurmConf:
    """Read GresTypes, PluginDir, ClusterName, SlurmdParameters' socket choice and every node's
    Gres= from slurm.conf: its content, or its lines as
    :func:`slurm_plugin.gres.slurm_lines.read_file` gives them (with what it includes). ``path``
    names the file in messages.

    Raises:
        SlurmConfError: a line Slurm cannot parse, a malformed NodeName hostlist or Gres= value, or
            more than :data:`~slurm_plugin.gres.conf.MAX_NODES` nodes (``FILE:LINE`` given).
        ConfReadError: (text only) as :func:`slurm_plugin.gres.slurm_lines.read_bytes`.
    """
    conf = SlurmConf(path=path)
    default_gres: dict[tuple[str, str], int] = {}
    default_state = ""
    named = 0
    first_line: dict[str, Where] = {}
    for line in read_text(text, path) if isinstance(text, str) else text:
        where = line.where.at(path)
        if line.rest:
            raise SlurmConfError(f"{where}: Slurm cannot read {line.rest[:40]!r} (slurmctld and slurmd stop: "
                                 "'Parse error in file'); give each key a value")
        if len(line.pairs) > 1 and line.keys[0] not in RECORD_KEYS:
            second = line.pairs[1].key
            raise SlurmConfError(f"{where}: {second}= after {line.pairs[0].key}= on one line: Slurm reads one "
                                 "key per line outside NodeName, PartitionName, NodeSet, FrontendName and "
                                 f"DownNodes lines (slurmctld and slurmd stop: 'Parse error in file'); put "
                                 f"{second} on its own line")
        kv = {p.key.lower(): p.value for p in line.pairs}
        if "grestypes" in kv:
            conf.gres_types = {g.strip().lower() for g in kv["grestypes"].split(",") if g.strip()}
        if kv.get("clustername"):
            conf.cluster_name = kv["clustername"].lower()
        for p in kv.get("slurmdparameters", "").lower().split(","):
            if p in ("numa_node_as_socket", "l3cache_as_socket"):
                conf.socket_as = p
        if "plugindir" in kv:
            conf.plugin_dirs = [d for d in kv["plugindir"].split(":") if d]
        if "nodename" not in kv:
            continue
        gres = parse_node_gres(where, kv["gres"]) if "gres" in kv else None
        if kv["nodename"].upper() == "DEFAULT":
            default_gres = default_gres if gres is None else gres
            default_state = kv.get("state", default_state)
            continue
        try:
            names = hostlist.expand(kv["nodename"], limit=MAX_NODES)
        except ValueError as e:
            raise SlurmConfError(f"{where}: NodeName={kv['nodename'][:60]}: {e}") from None
        named += len(names)
        if named > MAX_NODE_LINES or len(conf.node_gres.keys() | names) > MAX_NODES:
            raise SlurmConfError(f"{where}: the NodeName= lines up to here name more than "
                                 f"{MAX_NODES} nodes, more than dlgres checks")
        cloud = kv.get("state", default_state).upper() == "CLOUD"
        again = [n for n in names if n in first_line]
        if again:
            conf.findings.append((line.where, f"NodeName={hostlist.collect(again)} again (first: "
                                              f"{first_line[again[0]].at(path)}): Slurm stops (slurmd: "
                                              f"'Duplicated NodeHostName {again[0]} in config file'); "
                                              "merge the two lines"))
        for n in names:
            if n in first_line:
                continue
            first_line[n] = line.where
            conf.node_gres[n] = dict(default_gres if gres is None else gres)
            if cloud:
                conf.cloud.add(n)
    return conf
