"""dlcluster's configuration rendering and option checks (pure)."""

from __future__ import annotations

import re

import pytest

from slurm_plugin.cluster import ClusterSpec, SpecError, render_gres_conf, render_slurm_conf


def conf_map(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and not line.startswith(("NodeName=", "PartitionName=")):
            k, _, v = line.partition("=")
            out[k] = v
    return out


def test_default_cluster_settings_the_issue_requires() -> None:
    spec = ClusterSpec()
    text = render_slurm_conf(spec, "host")
    conf = conf_map(text)
    assert spec.slurm_conf.as_posix() == "/etc/slurm/slurm.conf"
    assert conf["PriorityType"] == "priority/multifactor"
    assert conf["PreemptType"] == "preempt/none"
    assert conf["AuthInfo"] == "cred_expire=10"
    assert conf["JobSubmitPlugins"] == "lua"
    assert conf["SlurmctldParameters"] == "preempt_send_user_signal"
    assert conf["SlurmdParameters"] == "config_overrides"
    nodes = [line for line in text.splitlines() if line.startswith("NodeName=")]
    assert [n.split()[0] for n in nodes] == ["NodeName=node1", "NodeName=node2", "NodeName=node3", "NodeName=node4"]
    assert all("Sockets=2 CoresPerSocket=8" in n and "RealMemory=64000" in n and "Gres=gpu:a100:8" in n
               for n in nodes)
    assert "PartitionName=gpu Nodes=ALL Default=YES" in text
    # distinct ports for slurmctld and every slurmd
    ports = [int(m) for m in re.findall(r"Port=(\d+)", text)]
    assert len(set(ports)) == len(ports) == 5


def test_gres_conf_one_line_per_gpu_with_cores_and_links() -> None:
    spec = ClusterSpec(nodes=2, gpus_per_node=4)
    lines = [x for x in render_gres_conf(spec).splitlines() if x.startswith("NodeName=")]
    assert len(lines) == 4
    assert lines[0] == (
        "NodeName=node[1-2] Name=gpu Type=a100 File=/var/lib/dlcluster/dlcluster/dev/nvidia0 "
        "Cores=0-7 Links=-1,4,1,1"
    )
    assert lines[3].endswith("File=/var/lib/dlcluster/dlcluster/dev/nvidia3 Cores=8-15 Links=1,1,4,-1")


def test_named_cluster_gets_its_own_paths_and_ports() -> None:
    spec = ClusterSpec(name="dev1", port_base=8000, with_dbd=True)
    assert spec.slurm_conf.as_posix() == "/etc/slurm-dev1/slurm.conf"
    assert spec.state_dir.as_posix() == "/var/lib/dlcluster/dev1"
    assert spec.ports == [8000, 8101, 8102, 8103, 8104, 8002]


@pytest.mark.parametrize(
    "kwargs,option",
    [({"nodes": 0}, "--nodes"), ({"nodes": 65}, "--nodes"), ({"gpus_per_node": 0}, "--gpus-per-node"),
     ({"gpus_per_node": 3}, "--gpus-per-node"), ({"gpu_type": "a 100"}, "--gpu-type"),
     ({"name": "Bad/Name"}, "--name"), ({"name": "dev\n"}, "--name"),   # $ matched before a final newline
     ({"cred_expire_s": 0}, "--cred-expire"), ({"port_base": 80}, "--port-base")],
)
def test_bad_options_name_the_option(kwargs: dict, option: str) -> None:
    with pytest.raises(SpecError, match=re.escape(option)):
        ClusterSpec(**kwargs).validate()
