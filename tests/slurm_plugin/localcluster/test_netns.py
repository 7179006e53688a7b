"""slurm_plugin/localcluster/netns.py with ``ip`` replaced by a recorder: what ``up --netns`` asks of iproute2,
what it refuses, and that ``down`` deletes only the cluster's own namespaces and links (the live
run is tests/live/test_ddp_live.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from slurm_plugin.localcluster import netns
from slurm_plugin.localcluster.cluster import ClusterSpec

SPEC = ClusterSpec(name="net", nodes=2, port_base=8400, netns=True)


class FakeIp:
    """``ip`` over a fixed set of links and routes; records every other call."""

    def __init__(self, links: dict[str, str], routes: list[dict[str, str]]) -> None:
        self.links, self.routes, self.calls = links, routes, []

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        if args == ("-j", "link", "show"):
            out = json.dumps([{"ifname": n, **({"ifalias": a} if a else {})} for n, a in self.links.items()])
        elif args == ("-j", "-4", "route", "show"):
            out = json.dumps(self.routes)
        else:
            self.calls.append(" ".join(args))
            out = ""
        return subprocess.CompletedProcess(["ip", *args], 0, out, "")


@pytest.fixture
def netns_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(netns, "NETNS_DIR", tmp_path)
    return tmp_path


def test_setup_makes_the_bridge_then_a_namespace_and_veth_per_node(netns_dir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ip = FakeIp({"lo": "", "eth0": ""}, [{"dst": "default", "dev": "eth0"}, {"dst": "192.0.2.0/24", "dev": "eth0"}])
    monkeypatch.setattr(netns, "_ip", ip)
    netns.setup(SPEC)
    assert ip.calls[:4] == ["link add dl8400br type bridge", "link set dl8400br alias dlcluster:net",
                            "addr replace 10.32.208.1/24 dev dl8400br", "link set dl8400br up"]
    node2 = ip.calls[4 + 8:]
    assert node2 == [
        "netns add dlc-net-node2", "-n dlc-net-node2 link del eth0",
        "link add dl8400v2 type veth peer name eth0 netns dlc-net-node2", "link set dl8400v2 alias dlcluster:net",
        "link set dl8400v2 master dl8400br up", "-n dlc-net-node2 addr replace 10.32.208.102/24 dev eth0",
        "-n dlc-net-node2 link set eth0 up", "-n dlc-net-node2 link set lo up"]
    assert netns.exec_prefix(SPEC, "node2") == ["nsenter", f"--net={netns_dir}/dlc-net-node2", "--"]
    assert netns.exec_prefix(ClusterSpec(), "node2") == []


def test_setup_refuses_a_routed_subnet_or_a_foreign_link_and_changes_nothing(
        netns_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ip = FakeIp({"lo": ""}, [{"dst": "10.32.0.0/16", "dev": "wg0"}])
    monkeypatch.setattr(netns, "_ip", ip)
    with pytest.raises(netns.NetnsError, match=r"^--netns: the subnet 10.32.208.0/24 of --port-base 8400 is already "
                                               r"routed \(10.32.0.0/16 dev wg0\); choose another --port-base$"):
        netns.setup(SPEC)
    ip = FakeIp({"dl8400br": "dlcluster:other"}, [{"dst": "10.32.208.0/24", "dev": "dl8400br"}])
    monkeypatch.setattr(netns, "_ip", ip)
    with pytest.raises(netns.NetnsError, match=r"^--netns: link dl8400br exists and is not cluster 'net''s "
                                               r"\(alias 'dlcluster:other'\); choose another --port-base$"):
        netns.setup(SPEC)
    assert ip.calls == []


def test_teardown_deletes_only_the_clusters_namespaces_and_aliased_links(
        netns_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("dlc-net-node1", "dlc-net-node7", "dlc-net2-node1", "dlc-net-nodeX", "other"):
        (netns_dir / name).touch()
    ip = FakeIp({"lo": "", "dl8400br": "dlcluster:net", "dl8400v1": "dlcluster:net", "dl8500br": "dlcluster:net2",
                 "dl8400v9": "mine"}, [])
    monkeypatch.setattr(netns, "_ip", ip)
    removed = netns.teardown(SPEC)
    assert removed == ["dlc-net-node1", "dlc-net-node7", "dl8400br", "dl8400v1"]
    assert ip.calls == ["netns pids dlc-net-node1", "netns del dlc-net-node1", "netns pids dlc-net-node7",
                        "netns del dlc-net-node7", "link del dl8400br", "link del dl8400v1"]
