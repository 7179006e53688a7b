"""What ``dlgres --check --slurm-conf FILE`` needs from slurm.conf (Slurm 22.05 slurm.conf(5)).

``GresTypes`` ("A comma-delimited list of generic resources to be managed"), ``PluginDir``
("a colon-separated list of directories") and, per node, ``Gres=`` in the format
``<name>[:<type>][:no_consume]:<number>[K|M|G]`` ("The final field must specify a generic
resources count"), and ``ClusterName``. ``NodeName=DEFAULT`` lines set defaults for the node lines after them.
Keys are case-insensitive; ``#`` starts a comment; ``Include`` lines are not followed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from slurm_plugin import hostlist
from slurm_plugin.gres.conf import MAX_NODE_LINES, MAX_NODES, parse_count


_AROUND_EQUALS = re.compile(r"\s*=\s*")
"""Blanks around ``=``: Slurm's own reader (src/common/parse_config.c, its key=value pattern
allows ``[[:space:]]*`` on both sides) takes ``Key = Value`` as ``Key=Value``."""


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
    """

    gres_types: set[str] = field(default_factory=set)
    plugin_dirs: list[str] = field(default_factory=list)
    node_gres: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)
    cloud: set[str] = field(default_factory=set)
    cluster_name: str | None = None
    socket_as: str | None = None


def parse_node_gres(lineno: int, text: str) -> dict[tuple[str, str], int]:
    """``gpu:a100:8,mps:400`` → ``{("gpu", "a100"): 8, ("mps", ""): 400}``.

    Raises:
        SlurmConfError: an item without a numeric count.
    """
    out: dict[tuple[str, str], int] = {}
    if text.lower() in ("", "(null)"):
        return out
    for item in text.split(","):
        parts = [p for p in item.split(":") if p.lower() != "no_consume"]
        n = parse_count(parts[-1]) if len(parts) > 1 else None
        if n is None or len(parts) > 3:
            raise SlurmConfError(f"slurm.conf line {lineno}: Gres={text}: item {item!r} is not "
                                 "<name>[:<type>]:<count>")
        key = (parts[0].lower(), parts[1] if len(parts) == 3 else "")
        out[key] = out.get(key, 0) + n
    return out


def parse_slurm_conf(text: str) -> SlurmConf:
    """Read GresTypes, PluginDir, ClusterName, SlurmdParameters' socket choice and every node's Gres= from slurm.conf text.

    Raises:
        SlurmConfError: a malformed NodeName hostlist or Gres= value, or more than
            :data:`~slurm_plugin.gres.conf.MAX_NODES` nodes (line given).
    """
    conf = SlurmConf()
    default_gres: dict[tuple[str, str], int] = {}
    default_state = ""
    named = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        body = _AROUND_EQUALS.sub("=", raw.split("#", 1)[0].strip())
        if not body:
            continue
        kv = {}
        for tok in body.split():
            k, _, v = tok.partition("=")
            kv[k.lower()] = v
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
        gres = parse_node_gres(lineno, kv["gres"]) if "gres" in kv else None
        if kv["nodename"].upper() == "DEFAULT":
            default_gres = gres or {}
            default_state = kv.get("state", default_state)
            continue
        try:
            names = hostlist.expand(kv["nodename"], limit=MAX_NODES)
        except ValueError as e:
            raise SlurmConfError(f"slurm.conf line {lineno}: NodeName={kv['nodename'][:60]}: {e}") from None
        named += len(names)
        if named > MAX_NODE_LINES or len(conf.node_gres.keys() | names) > MAX_NODES:
            raise SlurmConfError(f"slurm.conf line {lineno}: the NodeName= lines up to here name more than "
                                 f"{MAX_NODES} nodes, more than dlgres checks")
        cloud = kv.get("state", default_state).upper() == "CLOUD"
        for n in names:
            conf.node_gres[n] = dict(default_gres if gres is None else gres)
            if cloud:
                conf.cloud.add(n)
    return conf
