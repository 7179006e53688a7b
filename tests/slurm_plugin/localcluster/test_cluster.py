"""dlcluster's configuration rendering and option checks (pure)."""

from __future__ import annotations

import re

import pytest

from slurm_plugin.localcluster.cluster import (ClusterSpec, SpecError, recorded, recorded_shape, render_cgroup_conf,
                                  render_gres_conf, render_slurm_conf)


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
     ({"cred_expire_s": 0}, "--cred-expire"), ({"port_base": 80}, "--port-base"),
     ({"slurm": "23.02"}, "--slurm '23.02': use one of 22.05, 24.11, 26.05"),
     ({"slurm": "24.11.5"}, "--slurm")],
)
def test_bad_options_name_the_option(kwargs: dict, option: str) -> None:
    with pytest.raises(SpecError, match=re.escape(option)):
        ClusterSpec(**kwargs).validate()


def test_host_release_runs_from_the_host_without_plugin_dir() -> None:
    spec = ClusterSpec(slurm="22.05", host_slurm="22.05")
    assert spec.rootfs_dir is None and spec.bin_dir is None and spec.release == (22, 5)
    text = render_slurm_conf(spec, "host")
    conf = conf_map(text)
    assert "PluginDir" not in conf
    assert conf["JobAcctGatherType"] == "jobacct_gather/none"
    assert text.splitlines()[1] == "# dlcluster: slurm=22.05"
    with_dbd = conf_map(render_slurm_conf(ClusterSpec(with_dbd=True), "host"))
    assert with_dbd["JobAcctGatherType"] == "jobacct_gather/linux"


def test_another_release_names_plugin_dir_under_its_root_filesystem() -> None:
    spec = ClusterSpec(name="s24", port_base=7000, slurm="24.11", host_slurm="22.05")
    assert spec.rootfs_dir.as_posix() == "/var/cache/dlcluster/rootfs/trixie"
    assert spec.bin_dir.as_posix() == "/var/lib/dlcluster/s24/bin"
    assert spec.release == (24, 11)
    text = render_slurm_conf(spec, "host")
    conf = conf_map(text)
    assert conf["PluginDir"] == "/var/cache/dlcluster/rootfs/trixie/usr/lib/x86_64-linux-gnu/slurm-wlm"
    assert "jobacct_gather/none" not in text and "JobAcctGatherType" not in conf
    sid = conf_map(render_slurm_conf(ClusterSpec(slurm="26.05", host_slurm="22.05"), "host"))
    assert sid["PluginDir"] == "/var/cache/dlcluster/rootfs/sid/usr/lib/x86_64-linux-gnu/slurm-wlm"
    # on Debian 13 24.11 is the host's own: no root filesystem, no PluginDir
    host24 = ClusterSpec(slurm="24.11", host_slurm="24.11")
    assert host24.rootfs_dir is None
    assert "PluginDir" not in conf_map(render_slurm_conf(host24, "host"))


def test_cgroup_conf_disables_cgroups_from_24_11() -> None:
    assert render_cgroup_conf(ClusterSpec(slurm="22.05")) is None
    for release in ("24.11", "26.05"):
        text = render_cgroup_conf(ClusterSpec(slurm=release, host_slurm="22.05"))
        assert text is not None and conf_map(text) == {"CgroupPlugin": "disabled"}
    assert conf_map(render_cgroup_conf(ClusterSpec(slurm="24.11", host_slurm="24.11")) or "") == {
        "CgroupPlugin": "disabled"}


@pytest.mark.parametrize("spec", [
    ClusterSpec(),
    ClusterSpec(name="s24", nodes=2, gpus_per_node=4, gpu_type="h100", cred_expire_s=30, port_base=7200,
                with_dbd=True, slurm="24.11", shards_per_gpu=4),
    ClusterSpec(name="s26", nodes=64, gpus_per_node=2, gpu_type="", cred_expire_s=3600, port_base=1024,
                slurm="26.05"),
    ClusterSpec(name="x", nodes=1, gpus_per_node=64, gpu_type="100", port_base=65335, slurm="22.05",
                host_slurm="24.11"),
    ClusterSpec(name="net", nodes=3, port_base=8400, netns=True),
], ids=["default", "24.11-dbd", "26.05-untyped", "22.05-numeric-type", "netns"])
def test_recorded_reads_back_every_field_slurm_conf_records(spec: ClusterSpec) -> None:
    text = render_slurm_conf(spec, "host")
    assert set(recorded_shape(text)) == {"slurm", "nodes", "gpus_per_node", "gpu_type", "with_dbd",
                                         "cred_expire_s", "port_base", "shards_per_gpu", "netns"}
    # a spec of the same name with the defaults (what down/status/env start from) becomes spec
    assert recorded(ClusterSpec(name=spec.name, host_slurm=spec.host_slurm), text) == spec


def test_recorded_shape_of_a_slurm_conf_before_releases_were_recorded() -> None:
    text = render_slurm_conf(ClusterSpec(nodes=2), "host").replace("# dlcluster: slurm=22.05\n", "")
    assert recorded_shape(text) == {"nodes": 2, "gpus_per_node": 8, "gpu_type": "a100", "with_dbd": False,
                                    "cred_expire_s": 10, "port_base": 6817, "shards_per_gpu": 0,
                                    "netns": False}
    assert recorded_shape(text.replace("NodeName=", "#NodeName=") + "# dlcluster: slurm=23.02\n") == {
        "with_dbd": False, "cred_expire_s": 10, "port_base": 6817, "netns": False}


def test_shards_configure_gres_types_node_gres_accounting_and_a_shard_line_per_gpu() -> None:
    spec = ClusterSpec(name="sh", nodes=2, gpus_per_node=2, shards_per_gpu=4, port_base=8600, with_dbd=True)
    conf = render_slurm_conf(spec, "host")
    assert "GresTypes=gpu,shard\n" in conf and "AccountingStorageTRES=gres/gpu,gres/shard\n" in conf
    assert conf.count(" Gres=gpu:a100:2,shard:8 ") == 2          # 2 GPUs x 4 shards per node
    dev = spec.dev_dir
    assert render_gres_conf(spec).splitlines()[-2:] == [
        f"NodeName=node[1-2] Name=shard Count=4 File={dev}/nvidia0",
        f"NodeName=node[1-2] Name=shard Count=4 File={dev}/nvidia1"]
    assert recorded_shape(conf)["shards_per_gpu"] == 4
    plain = render_slurm_conf(ClusterSpec(), "host")
    assert "GresTypes=gpu\n" in plain and "shard" not in plain and "shard" not in render_gres_conf(ClusterSpec())


def test_shards_out_of_range_are_named() -> None:
    with pytest.raises(SpecError, match=r"^--shards 65: must be 0..64 shards per GPU \(0: none\)$"):
        ClusterSpec(shards_per_gpu=65).validate()


def test_netns_gives_every_node_its_own_address_in_the_port_bases_subnet() -> None:
    # 8400 = 32 * 256 + 208: the subnet 10.32.208.0/24; the bridge .1, node i .100+i
    spec = ClusterSpec(name="net", nodes=3, port_base=8400, netns=True)
    assert str(spec.subnet) == "10.32.208.0/24"
    text = render_slurm_conf(spec, "host")
    assert conf_map(text)["SlurmctldHost"] == "host(10.32.208.1)"
    assert "# dlcluster: netns=10.32.208.0/24" in text.splitlines()
    nodes = [dict(kv.split("=", 1) for kv in line.split()) for line in text.splitlines() if line.startswith("NodeName=")]
    assert [(n["NodeName"], n["NodeAddr"], n["Port"]) for n in nodes] == [
        ("node1", "10.32.208.101", "8501"), ("node2", "10.32.208.102", "8502"), ("node3", "10.32.208.103", "8503")]
    assert [spec.netns_name(n) for n in spec.node_names] == ["dlc-net-node1", "dlc-net-node2", "dlc-net-node3"]
    assert (spec.bridge, spec.veth(3), spec.link_alias) == ("dl8400br", "dl8400v3", "dlcluster:net")
    # the highest port base and node: 65335 = 255 * 256 + 55, 64 nodes; link names within 15 bytes
    top = ClusterSpec(name="abcdefghijklmnop", nodes=64, port_base=65335, netns=True)
    assert (str(top.subnet), top.node_addr(64)) == ("10.255.55.0/24", "10.255.55.164")
    assert max(len(top.bridge), len(top.veth(64))) <= 15
    # without --netns every node stays on loopback
    plain = render_slurm_conf(ClusterSpec(nodes=2), "host")
    assert conf_map(plain)["SlurmctldHost"] == "host(127.0.0.1)"
    assert plain.count("NodeAddr=127.0.0.1 ") == 2 and "netns" not in plain


def test_netns_with_another_release_is_refused_in_one_line() -> None:
    with pytest.raises(SpecError, match=r"^--netns runs on the host's own Slurm 22.05 only; drop --netns or --slurm 24.11$"):
        ClusterSpec(name="s24", port_base=7400, slurm="24.11", host_slurm="22.05", netns=True).validate()
