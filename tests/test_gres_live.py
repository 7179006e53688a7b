"""The live cluster's gres.conf (written by dlcluster through slurm_plugin.gres) passes
``dlgres --check`` for the node shape slurmd reports, and slurmd took every GPU line."""

from __future__ import annotations

import pytest
from live_helpers import slurm_conf

from slurm_plugin.client import SlurmClient
from slurm_plugin import hostlist
from slurm_plugin.gres_check import check_gres
from slurm_plugin.topo_cpu import CpuTopology

pytestmark = pytest.mark.live


def test_live_gres_conf_is_clean_and_accepted_by_slurmd():
    text = slurm_conf().with_name("gres.conf").read_text()
    nodes = SlurmClient(timeout_s=20).nodes()
    assert nodes
    shape = {(n.sockets, n.cores_per_socket) for n in nodes}
    assert len(shape) == 1, f"mixed node shapes {shape}"
    sockets, cps = shape.pop()
    assert check_gres(text, CpuTopology.from_shape(sockets, cps)) == []
    gpu_lines = [ln for ln in text.splitlines() if ln.startswith("NodeName=") and "Name=gpu" in ln]
    per_node: dict[str, int] = {}
    for ln in gpu_lines:
        for host in hostlist.expand(ln.split()[0].split("=", 1)[1]):
            per_node[host] = per_node.get(host, 0) + 1
    for n in nodes:
        assert n.usable, f"{n.name} is {n.state} {n.state_flags}"
        assert n.gpus_total == per_node[n.name]
        assert f"Type={n.gpu_type}" in gpu_lines[0]
