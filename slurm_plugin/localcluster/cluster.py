"""The local cluster's shape and configuration files (pure: no processes, no files written).

``dlcluster`` runs a real Slurm 22.05 on one machine: one slurmctld and N ``slurmd -N nodeI``
(Debian's slurmd is built with ``--enable-multiple-slurmd``), each node with fake GPU character
devices (docs/design.md, "The local cluster"). This module turns a
:class:`ClusterSpec` into slurm.conf, gres.conf and slurmdbd.conf text;
:mod:`slurm_plugin.localcluster.provision` writes them and starts the daemons.

Several clusters can run side by side (one per developer or test run): each has a name, its
own config directory, state directory and ports. The default cluster (name ``dlcluster``)
writes to ``/etc/slurm`` so that plain ``sbatch``/``squeue`` need no ``SLURM_CONF``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from slurm_plugin import hostlist
from slurm_plugin.gres import generate as gres
from slurm_plugin.localcluster import rootfs

DEFAULT_NAME = "dlcluster"
NAME_RE = re.compile(r"[a-z][a-z0-9]{0,15}\Z")


class SpecError(ValueError):
    """A cluster option is out of range; the message names the option and the fix."""


@dataclass(frozen=True)
class ClusterSpec:
    """A local cluster.

    Attributes:
        name: cluster name (lowercase letters/digits, ≤ 16): Slurm's ClusterName.
        nodes: number of nodes ``node1..nodeN`` (1..64).
        gpus_per_node: fake GPUs per node (1..64, even so they split over 2 sockets).
        gpu_type: GRES type (``a100``); "" for untyped GPUs.
        shards_per_gpu: GPU shards per GPU (Slurm's gres/shard; 0 = none): every GPU also
            serves that many shards, one GPU serving either shard jobs or one whole-GPU job.
        sockets, cores_per_socket: advertised node shape (config_overrides; default 2 × 8).
        real_memory_mib: advertised RealMemory in MiB (default 64000).
        cred_expire_s: ``AuthInfo=cred_expire`` seconds: a requeued job waits this + 1 s before
            it may start again (Slurm's default 120; 10 here for tests).
        port_base: SlurmctldPort; node ``i`` listens on ``port_base + 100 + i``;
            slurmdbd on ``port_base + 2``.
        with_dbd: also run MariaDB + slurmdbd (sacct, QOS, fairshare).
        slurm: the Slurm release (``22.05``, ``24.11``, ``26.05``: :data:`rootfs.RELEASE_SUITES`).
        host_slurm: the release the host's Debian ships (``""``: none); another ``slurm`` runs
            from a root filesystem (:mod:`slurm_plugin.localcluster.rootfs`).
        netns: each slurmd in its own network namespace with its own address on a bridge
            (:attr:`subnet`, :mod:`slurm_plugin.localcluster.netns`); otherwise every node listens on 127.0.0.1.
    """

    name: str = DEFAULT_NAME
    nodes: int = 4
    gpus_per_node: int = 8
    gpu_type: str = "a100"
    shards_per_gpu: int = 0
    sockets: int = 2
    cores_per_socket: int = 8
    real_memory_mib: int = 64000
    cred_expire_s: int = 10
    port_base: int = 6817
    with_dbd: bool = False
    slurm: str = "22.05"
    host_slurm: str = "22.05"
    netns: bool = False

    def validate(self) -> None:
        """Raise :class:`SpecError` naming the first bad option."""
        if not NAME_RE.match(self.name):
            raise SpecError(f"--name {self.name!r}: use 1-16 lowercase letters/digits, starting with a letter")
        if not 1 <= self.nodes <= 64:
            raise SpecError(f"--nodes {self.nodes}: must be between 1 and 64")
        if not 1 <= self.gpus_per_node <= 64:
            raise SpecError(f"--gpus-per-node {self.gpus_per_node}: must be between 1 and 64")
        if self.gpus_per_node % self.sockets:
            raise SpecError(
                f"--gpus-per-node {self.gpus_per_node}: must be a multiple of the {self.sockets} sockets"
            )
        if self.gpu_type and not re.match(r"^[A-Za-z0-9_.-]{1,32}$", self.gpu_type):
            raise SpecError(f"--gpu-type {self.gpu_type!r}: use letters, digits, '_', '.', '-'")
        if not 0 <= self.shards_per_gpu <= 64:
            raise SpecError(f"--shards {self.shards_per_gpu}: must be 0..64 shards per GPU (0: none)")
        if not 1 <= self.cred_expire_s <= 3600:
            raise SpecError(f"--cred-expire {self.cred_expire_s}: must be 1..3600 seconds")
        if not 1024 <= self.port_base <= 65535 - 200:
            raise SpecError(f"--port-base {self.port_base}: must be 1024..65335")
        if self.slurm not in rootfs.RELEASE_SUITES:
            raise SpecError(f"--slurm {self.slurm!r}: use one of {', '.join(rootfs.RELEASE_SUITES)}")
        if self.netns and self.rootfs_dir is not None:
            raise SpecError(f"--netns runs on the host's own Slurm {self.host_slurm} only; "
                            f"drop --netns or --slurm {self.slurm}")

    # ------------------------------------------------------------ the release
    @property
    def rootfs_dir(self) -> Path | None:
        """The root filesystem the cluster runs from, ``None`` for the host's own Slurm."""
        return None if self.slurm == self.host_slurm else rootfs.rootfs_dir(self.slurm)

    @property
    def bin_dir(self) -> Path | None:
        """Wrappers of the release's commands (``dlcluster env`` puts them on PATH), ``None``
        for the host's own Slurm."""
        return self.state_dir / "bin" if self.rootfs_dir else None

    @property
    def release(self) -> tuple[int, int]:
        """``slurm`` as ``(major, minor)``: ``"24.11"`` → ``(24, 11)``."""
        major, minor = self.slurm.split(".")
        return int(major), int(minor)

    # ------------------------------------------------------------ derived paths
    @property
    def conf_dir(self) -> Path:
        """``/etc/slurm`` for the default cluster, ``/etc/slurm-NAME`` otherwise."""
        return Path("/etc/slurm") if self.name == DEFAULT_NAME else Path(f"/etc/slurm-{self.name}")

    @property
    def state_dir(self) -> Path:
        """State, spool, logs, PID files and fake devices: ``/var/lib/dlcluster/NAME``."""
        return Path("/var/lib/dlcluster") / self.name

    @property
    def slurm_conf(self) -> Path:
        return self.conf_dir / "slurm.conf"

    @property
    def node_names(self) -> list[str]:
        return [f"node{i}" for i in range(1, self.nodes + 1)]

    def node_port(self, i: int) -> int:
        """slurmd port of node ``i`` (1-based)."""
        return self.port_base + 100 + i

    @property
    def dbd_port(self) -> int:
        return self.port_base + 2

    @property
    def ports(self) -> list[int]:
        """Every TCP port the cluster listens on."""
        ports = [self.port_base] + [self.node_port(i) for i in range(1, self.nodes + 1)]
        return ports + ([self.dbd_port] if self.with_dbd else [])

    # ------------------------------------------------------------ network namespaces
    @property
    def subnet(self) -> ipaddress.IPv4Network:
        """The cluster's private /24 under ``--netns``: ``10.H.L.0/24`` with ``port_base = 256 H + L``
        (8400 → ``10.32.208.0/24``), so clusters with distinct port bases never share one."""
        return ipaddress.IPv4Network((10 << 24 | self.port_base << 8, 24))

    @property
    def host_addr(self) -> str:
        """Where the nodes reach slurmctld: the bridge's address (``.1``) under ``--netns``, else 127.0.0.1."""
        return str(self.subnet.network_address + 1) if self.netns else "127.0.0.1"

    def node_addr(self, i: int) -> str:
        """``NodeAddr`` of node ``i`` (1-based): ``.100+i`` of :attr:`subnet` under ``--netns``
        (like its port, ``port_base + 100 + i``), else 127.0.0.1."""
        return str(self.subnet.network_address + 100 + i) if self.netns else "127.0.0.1"

    def netns_name(self, node: str) -> str:
        """The network namespace of ``node`` (``ip netns``): ``dlc-NAME-NODE``."""
        return f"dlc-{self.name}-{node}"

    @property
    def bridge(self) -> str:
        """The bridge on the host side: ``dlPORTbr`` (a link name holds at most 15 bytes, a
        cluster name up to 16, so links are named by the cluster's unique port base and carry
        the cluster name in their alias, :attr:`link_alias`)."""
        return f"dl{self.port_base}br"

    def veth(self, i: int) -> str:
        """Host-side end of node ``i``'s veth pair (the other end is ``eth0`` in its namespace)."""
        return f"dl{self.port_base}v{i}"

    @property
    def link_alias(self) -> str:
        """The alias (``ip link ... alias``) of every link ``up --netns`` makes: ``down`` deletes
        links by it, so only this cluster's."""
        return f"dlcluster:{self.name}"

    @property
    def dev_dir(self) -> Path:
        return self.state_dir / "dev"

    @property
    def gpu_devices(self) -> list[str]:
        return [str(self.dev_dir / f"nvidia{i}") for i in range(self.gpus_per_node)]


def recorded_shape(slurm_conf: str) -> dict[str, Any]:
    """The :class:`ClusterSpec` fields that the text of a slurm.conf written by
    :func:`render_slurm_conf` records (only those it names): ``slurm``, ``nodes``,
    ``gpus_per_node``, ``gpu_type``, ``shards_per_gpu``, ``with_dbd``, ``cred_expire_s``,
    ``port_base``, ``netns``."""
    lines = slurm_conf.splitlines()
    nodes = [ln for ln in lines if ln.startswith("NodeName=")]
    out: dict[str, Any] = {"with_dbd": "accounting_storage/slurmdbd" in slurm_conf}
    if nodes:
        out["nodes"] = len(nodes)
        gres = re.search(r"\bGres=gpu:(?:([^:\s]+):)?(\d+)\b", nodes[0])
        if gres:
            out["gpu_type"], out["gpus_per_node"] = gres.group(1) or "", int(gres.group(2))
            shards = re.search(r"\bGres=\S*\bshard:(\d+)\b", nodes[0])
            out["shards_per_gpu"] = int(shards.group(1)) // out["gpus_per_node"] if shards else 0
    cred = re.search(r"^AuthInfo=.*\bcred_expire=(\d+)", slurm_conf, re.M)
    if cred:
        out["cred_expire_s"] = int(cred.group(1))
    port = re.search(r"^SlurmctldPort=(\d+)$", slurm_conf, re.M)
    if port:
        out["port_base"] = int(port.group(1))
    out["netns"] = re.search(r"^# dlcluster: netns=\S+$", slurm_conf, re.M) is not None
    release = re.search(r"^# dlcluster: slurm=(\S+)$", slurm_conf, re.M)
    if release and release.group(1) in rootfs.RELEASE_SUITES:
        out["slurm"] = release.group(1)
    return out


def recorded(spec: ClusterSpec, slurm_conf: str) -> ClusterSpec:
    """``spec`` with the shape its cluster's slurm.conf text records (:func:`recorded_shape`):
    ``down``, ``status``, ``env`` and ``ctl`` act on the cluster as it was brought up."""
    return replace(spec, **recorded_shape(slurm_conf))


def render_slurm_conf(spec: ClusterSpec, host: str) -> str:
    """slurm.conf text for ``spec`` (slurm.conf(5) of 22.05); ``host`` is this machine's hostname."""
    sd = spec.state_dir
    gres_node = f"gpu:{spec.gpu_type}:{spec.gpus_per_node}" if spec.gpu_type else f"gpu:{spec.gpus_per_node}"
    if spec.shards_per_gpu:
        gres_node += f",shard:{spec.shards_per_gpu * spec.gpus_per_node}"
    if spec.with_dbd:
        acct = (
            "AccountingStorageType=accounting_storage/slurmdbd\n"
            "AccountingStorageHost=localhost\n"
            f"AccountingStoragePort={spec.dbd_port}\n"
            + ("AccountingStorageTRES=gres/gpu,gres/shard\n" if spec.shards_per_gpu
               else "AccountingStorageTRES=gres/gpu\n") +
            "JobAcctGatherType=jobacct_gather/linux\n"
            "# Age and fairshare factors need slurmdbd\n"
            "PriorityWeightAge=1000\n"
            "PriorityWeightFairshare=1000\n"
        )
    else:
        # jobacct_gather/none is gone after 22.05 (no plugin: the default does nothing)
        acct = (
            "# no slurmdbd: no sacct, no QOS; AccountingStorageTRES=gres/gpu would be fatal\n"
            "AccountingStorageType=accounting_storage/none\n"
            "JobCompType=jobcomp/filetxt\n"
            f"JobCompLoc={sd}/log/jobcomp.txt\n"
            + ("JobAcctGatherType=jobacct_gather/none\n" if spec.release <= (22, 5) else "")
        )
    cores = spec.sockets * spec.cores_per_socket
    def_mem = spec.real_memory_mib // cores
    lines = [
        f"# Written by `dlcluster up` for cluster {spec.name!r}; regenerated on every up.",
        f"# dlcluster: slurm={spec.slurm}",
        *([f"# dlcluster: netns={spec.subnet}"] if spec.netns else []),
        f"ClusterName={spec.name}",
        f"SlurmctldHost={host}({spec.host_addr})",
        f"SlurmctldPort={spec.port_base}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "# A requeued job waits cred_expire + 1 s (BeginTime) before it may start again.",
        f"AuthInfo=cred_expire={spec.cred_expire_s}",
        f"StateSaveLocation={sd}/state",
        f"SlurmdSpoolDir={sd}/spool/%n",
        f"SlurmctldPidFile={sd}/run/slurmctld.pid",
        f"SlurmdPidFile={sd}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={sd}/log/slurmctld.log",
        f"SlurmdLogFile={sd}/log/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "MailProg=/bin/true",
        "MpiDefault=none",
        "# no cgroups in containers: track processes by /proc, bind nothing",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        f"DefMemPerCPU={def_mem}",
        "GresTypes=gpu,shard" if spec.shards_per_gpu else "GresTypes=gpu",
        "SchedulerType=sched/backfill",
        "# hetjobs start only through backfill: keep its interval short",
        "SchedulerParameters=bf_interval=5",
        "# Tiresias order reaches Slurm as each job's SiteFactor (dlprio mode `priority`)",
        "PriorityType=priority/multifactor",
        "PriorityWeightPartition=1000",
        "PriorityWeightJobSize=100",
        "# preemption is dlprio's act (signal, grace, requeue), never Slurm's own",
        "PreemptType=preempt/none",
        "PreemptMode=OFF",
        "SlurmctldParameters=preempt_send_user_signal",
        "JobRequeue=1",
        "JobSubmitPlugins=lua",
        acct.rstrip("\n"),
        "ReturnToService=2",
        "# advertise the node shape below whatever this machine has",
        "SlurmdParameters=config_overrides",
        "MinJobAge=300",
        "# room for a large site's queue (Slurm's default is 10,000; benchmarks hold 10,000 pending)",
        "MaxJobCount=25000",
        "KillWait=5",
        "InactiveLimit=0",
        "SlurmdTimeout=60",
    ]
    if spec.rootfs_dir:
        lines += ["# the release's plugins: the same path for the commands on the host and for the",
                  "# daemons in the root filesystem (slurm_plugin/localcluster/rootfs.py)",
                  f"PluginDir={rootfs.plugin_dir(spec.rootfs_dir)}"]
    for i, node in enumerate(spec.node_names, start=1):
        lines.append(
            f"NodeName={node} NodeHostname={host} NodeAddr={spec.node_addr(i)} Port={spec.node_port(i)} "
            f"Sockets={spec.sockets} CoresPerSocket={spec.cores_per_socket} ThreadsPerCore=1 "
            f"RealMemory={spec.real_memory_mib} Gres={gres_node} State=UNKNOWN"
        )
    lines.append("PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def render_gres_conf(spec: ClusterSpec) -> str:
    """gres.conf text: one line per fake GPU with ``Cores=`` and ``Links=`` (via :mod:`gres`)."""
    lines = gres.fake_gres_lines(
        hostlist.collect(spec.node_names),
        spec.gpu_devices,
        spec.gpu_type or None,
        spec.sockets,
        spec.cores_per_socket,
    )
    lines += gres.shard_lines(hostlist.collect(spec.node_names), spec.gpu_devices, spec.shards_per_gpu)
    return "# Written by `dlcluster up`: fake GPUs (character devices, major 195)\n" + "\n".join(lines) + "\n"


def render_cgroup_conf(spec: ClusterSpec) -> str | None:
    """cgroup.conf text, or ``None`` where none is needed: from 23.02 on, slurmd reads
    cgroup.conf whatever the plugins and fails without cgroups, unless ``CgroupPlugin=disabled``
    (cgroup.conf(5) of 24.11); 22.05 reads it only for the cgroup plugins."""
    if spec.release <= (22, 5):
        return None
    return ("# Written by `dlcluster up`: no cgroups here (proctrack/linuxproc, task/none)\n"
            "CgroupPlugin=disabled\n")


def render_slurmdbd_conf(spec: ClusterSpec) -> str:
    """slurmdbd.conf text (slurmdbd reads it beside $SLURM_CONF; must be mode 0600)."""
    sd = spec.state_dir
    return "\n".join([
        "DbdHost=localhost",
        f"DbdPort={spec.dbd_port}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        "StorageType=accounting_storage/mysql",
        "StorageHost=localhost",
        "StorageUser=slurm",
        "StoragePass=slurmpw",
        f"StorageLoc=slurm_acct_db_{spec.name}",
        f"PidFile={sd}/run/slurmdbd.pid",
        f"LogFile={sd}/log/slurmdbd.log",
        "DebugLevel=info",
    ]) + "\n"
