"""Network namespaces of a ``dlcluster up --netns`` cluster (iproute2: ``ip netns``, veth, bridge).

Each node's slurmd runs in its own network namespace ``dlc-NAME-nodeI`` whose ``eth0`` (one end
of a veth pair) has the node's own address in the cluster's private /24
(:attr:`ClusterSpec.subnet`, ``10.H.L.0/24`` from the port base); the other end hangs on the
bridge ``dlPORTbr`` on the host side, which holds ``.1``, the address slurmctld is reached at.
So ``NodeAddr`` differs per node, and a rank on node2 reaches ``MASTER_ADDR`` on node1 through
the bridge, as across a real network::

    host: slurmctld, sbatch ...   dlPORTbr 10.H.L.1/24
                                   |-- dlPORTv1 == eth0 10.H.L.101  (netns dlc-NAME-node1: slurmd node1)
                                   |-- dlPORTv2 == eth0 10.H.L.102  (netns dlc-NAME-node2: slurmd node2)

Nothing else is addressed: no route, no NAT, no forwarding; the namespaces reach only each other
and the host's bridge address. Every link made here carries the alias ``dlcluster:NAME``
(:attr:`ClusterSpec.link_alias`; a link name holds 15 bytes, too few for a cluster name), and
:func:`teardown` deletes only links with that alias and namespaces named ``dlc-NAME-nodeI``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import subprocess
from pathlib import Path

from slurm_plugin.localcluster.cluster import ClusterSpec

NETNS_DIR = Path("/run/netns")


class NetnsError(RuntimeError):
    """An ``ip`` command failed, or a name or the subnet is taken by something else; the
    message says which and how to fix it."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {(proc.stderr or proc.stdout).strip()}")
    return proc


def _links() -> dict[str, str]:
    """``{link name: alias}`` of every link of the host's namespace (alias ``""`` when none)."""
    return {link["ifname"]: link.get("ifalias", "") for link in json.loads(_ip("-j", "link", "show").stdout)}


def namespaces(spec: ClusterSpec) -> list[str]:
    """The network namespaces of ``spec``'s cluster that exist now (any node count)."""
    pattern = re.compile(rf"dlc-{re.escape(spec.name)}-node\d+\Z")
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir() if pattern.match(p.name))
    except OSError:
        return []


def subnet_conflicts(spec: ClusterSpec) -> list[str]:
    """Routes of the host that overlap ``spec.subnet`` on any link but the cluster's bridge
    (``ip -j route``): ``["10.32.208.0/24 dev eth0"]``; ``[]`` when the subnet is free."""
    out = []
    for route in json.loads(_ip("-j", "-4", "route", "show").stdout):
        dst = route.get("dst", "")
        if dst in ("", "default") or route.get("dev") == spec.bridge:
            continue
        try:
            net = ipaddress.IPv4Network(dst, strict=False)
        except ValueError:
            continue
        if net.overlaps(spec.subnet):
            out.append(f"{dst} dev {route.get('dev', '?')}")
    return out


def setup(spec: ClusterSpec) -> None:
    """Make the bridge, one namespace and veth pair per node, and their addresses (idempotent:
    what is there with this cluster's alias is kept). Namespaces and links of this cluster for
    nodes it no longer has are removed. Raises :class:`NetnsError` when the subnet is routed
    elsewhere or a link name is taken by a link that is not this cluster's."""
    conflicts = subnet_conflicts(spec)
    if conflicts:
        raise NetnsError(f"--netns: the subnet {spec.subnet} of --port-base {spec.port_base} is already routed "
                         f"({'; '.join(conflicts)}); choose another --port-base")
    links = _links()
    wanted = {spec.bridge, *(spec.veth(i) for i in range(1, spec.nodes + 1))}
    for name in sorted(wanted):
        if name in links and links[name] != spec.link_alias:
            raise NetnsError(f"--netns: link {name} exists and is not cluster {spec.name!r}'s "
                             f"(alias {links[name]!r}); choose another --port-base")
    nodes = set(spec.node_names)
    for ns in namespaces(spec):
        if ns.rsplit("-", 1)[1] not in nodes:
            _delete_namespace(ns)
    for name, alias in links.items():
        if alias == spec.link_alias and name not in wanted:
            _ip("link", "del", name, check=False)
    if spec.bridge not in links:
        _ip("link", "add", spec.bridge, "type", "bridge")
        _ip("link", "set", spec.bridge, "alias", spec.link_alias)
    _ip("addr", "replace", f"{spec.host_addr}/{spec.subnet.prefixlen}", "dev", spec.bridge)
    _ip("link", "set", spec.bridge, "up")
    for i, node in enumerate(spec.node_names, start=1):
        ns, veth = spec.netns_name(node), spec.veth(i)
        if not (NETNS_DIR / ns).exists():
            _ip("netns", "add", ns)
        if veth not in links:
            _ip("-n", ns, "link", "del", "eth0", check=False)   # a peer left without its host end
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "alias", spec.link_alias)
        _ip("link", "set", veth, "master", spec.bridge, "up")
        _ip("-n", ns, "addr", "replace", f"{spec.node_addr(i)}/{spec.subnet.prefixlen}", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")


def exec_prefix(spec: ClusterSpec, node: str) -> list[str]:
    """The argv prefix that runs a command in ``node``'s namespace (``[]`` without ``--netns``):
    nsenter(1) joins the network namespace alone; ``ip netns exec`` would also mount a new /sys,
    without /sys/fs/cgroup, where slurmd's cgroup plugin fails to start."""
    return ["nsenter", f"--net={NETNS_DIR / spec.netns_name(node)}", "--"] if spec.netns else []


def _delete_namespace(ns: str) -> None:
    """Kill what still runs in namespace ``ns`` (the cluster's jobs: every process there was
    started by one of its slurmd's) and delete it."""
    for pid in _ip("netns", "pids", ns, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _ip("netns", "del", ns, check=False)


def teardown(spec: ClusterSpec) -> list[str]:
    """Delete the cluster's namespaces (killing what still runs in them) and every link whose
    alias is the cluster's; returns their names (``[]``: there were none)."""
    removed = namespaces(spec)
    for ns in removed:
        _delete_namespace(ns)
    for name, alias in _links().items():
        if alias == spec.link_alias:
            _ip("link", "del", name, check=False)
            removed.append(name)
    return removed
