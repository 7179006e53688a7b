"""gres.conf lines for GPUs (Slurm gres.conf(5)): one line per GPU with ``Cores=`` and ``Links=``.

The one generator of gres.conf text in tiresias-slurm. Its inputs come from NVML
(:mod:`slurm_plugin.gres.nvml`), from a ``nvidia-smi topo -m`` capture (:mod:`slurm_plugin.gres.topo`)
or, for ``dlcluster``'s fake GPUs, from a node shape (:func:`fake_gres_lines`); all three end in
:func:`gres_lines`, so what live slurmd accepts for the fake cluster is what ``dlgres`` prints
for a real node. Rules (gres.conf(5), Slurm 22.05): GPUs are numbered by sorted PCI bus id, and
``Links`` lists, in that numbering, the connections to each GPU with ``-1`` for the GPU itself;
a line with ``Links`` holds a single ``File``; ``Cores`` are logical core indices (socket 0's
cores first), not OS CPU ids (:mod:`slurm_plugin.gres.topo_cpu`); the minor number in
``/dev/nvidiaN`` need not equal the GPU's number.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from slurm_plugin.common.cli import visible
from slurm_plugin.names import SLURM_NAME_RE
from slurm_plugin.gres.nvml import NvmlGpu, link_matrix
from slurm_plugin.gres.topo import Topology, check_shape
from slurm_plugin.gres.topo_cpu import CpuTopology, format_ranges

_BRANDS = {"nvidia", "geforce", "tesla", "quadro"}

TYPE_RULE = "letters, digits, '_', '.' and '-' (not first), as dlsubmit requests it"


def type_problem(name: str) -> str | None:
    """Why ``name`` cannot be a gres Type (:data:`slurm_plugin.names.SLURM_NAME_RE`, the rule
    dlsubmit requests a GRES type by), or None when it can."""
    return None if SLURM_NAME_RE.match(name) else f"not a gres Type: {TYPE_RULE}"


@dataclass(frozen=True)
class GpuDevice:
    """One GPU line of gres.conf.

    Attributes:
        file: device path, e.g. ``/dev/nvidia3``.
        type: gres Type (``a100``) or None for an untyped GPU.
        cores: logical core indices near the GPU (empty: no ``Cores=``).
        links: connections to every GPU of the node in device-number order, ``-1`` for
            itself (None: no ``Links=``).
        bus_id: PCI bus id when known (shown in ``--json`` and comments only).
    """

    file: str
    type: str | None
    cores: tuple[int, ...]
    links: tuple[int, ...] | None
    bus_id: str | None = None


def gpu_type(name: str) -> str:
    """Short gres Type from an NVML name: ``NVIDIA A100-SXM4-40GB`` → ``a100``,
    ``NVIDIA H100 80GB HBM3`` → ``h100``, ``NVIDIA GeForce RTX 4090`` → ``rtx4090``.

    Brand words are dropped; the words up to and including the first one with a digit are
    joined, cut at the first ``-``. Falls back to the lower-cased name without spaces.
    """
    words = [w for w in name.lower().split() if w not in _BRANDS]
    out = ""
    for w in words:
        out += w.split("-")[0]
        if re.search(r"\d", w):
            return out
    return re.sub(r"\s+", "", name.lower()) or "gpu"


def gres_lines(node_names: str | None, devices: Sequence[GpuDevice], check_links: bool = True) -> list[str]:
    """gres.conf lines, one per device, in the given order (which must be bus-id order).

    Returns lines such as ``NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-63
    Links=-1,12``; ``NodeName=`` is left out when ``node_names`` is None. ``check_links=False``
    skips the Links checks, for the GPUs of a cut-off capture (output marked PARTIAL).

    Raises:
        ValueError: a ``Links`` row whose length differs from the number of devices, or
            whose ``-1`` is not at the device's own position, or a repeated ``File``.
    """
    files = [d.file for d in devices]
    dup = sorted({f for f in files if files.count(f) > 1})
    if dup:
        raise ValueError(f"File {dup[0]} appears more than once")
    lines = []
    for i, d in enumerate(devices):
        parts = [f"NodeName={node_names}"] if node_names else []
        parts.append("Name=gpu")
        if d.type:
            parts.append(f"Type={d.type}")
        parts.append(f"File={d.file}")
        if d.cores:
            parts.append(f"Cores={format_ranges(d.cores)}")
        if d.links is not None:
            if check_links and len(d.links) != len(devices):
                raise ValueError(f"{d.file}: Links has {len(d.links)} entries for {len(devices)} GPUs")
            if check_links and [k for k, v in enumerate(d.links) if v == -1] != [i]:
                raise ValueError(f"{d.file}: Links must hold -1 exactly at its own position {i}")
            parts.append("Links=" + ",".join(str(v) for v in d.links))
        lines.append(" ".join(parts))
    return lines


def devices_from_nvml(gpus: Sequence[NvmlGpu], cpu: CpuTopology, type_override: str | None = None) -> list[GpuDevice]:
    """NVML facts → devices in PCI bus-id order with ``File=/dev/nvidia<minor>``.

    Without ``type_override`` each Type is :func:`gpu_type` of the GPU's name, and must pass
    the same rule as ``--type`` (:func:`type_problem`).

    Raises:
        slurm_plugin.gres.topo_cpu.CpuTopologyError: an affinity CPU the node does not have.
        ValueError: a Type derived from a GPU name that is not a gres Type (the GPU, its
            name and the fix, ``--type``, are named).
    """
    ordered = sorted(gpus, key=lambda g: g.bus_id)
    if not type_override:
        for g in ordered:
            problem = type_problem(gpu_type(g.name))
            if problem:
                raise ValueError(f"GPU {g.index} ({g.bus_id}): its name {visible(g.name)!r} gives Type "
                                 f"{visible(gpu_type(g.name))!r}, {problem}; give the Type with --type, "
                                 "e.g. --type a100")
    links = link_matrix(list(ordered))
    return [
        GpuDevice(
            file=f"/dev/nvidia{g.minor}",
            type=type_override or gpu_type(g.name),
            cores=cpu.logical_cores(g.cpu_affinity),
            links=tuple(row),
            bus_id=g.bus_id,
        )
        for g, row in zip(ordered, links)
    ]


def devices_from_topo(topo: Topology, cpu: CpuTopology, type_name: str | None) -> list[GpuDevice]:
    """Complete rows of a ``nvidia-smi topo -m`` capture → devices (index = minor assumed).

    The capture has no minor numbers: ``File=/dev/nvidia<index>`` assumes they match
    nvidia-smi's index (check ``nvidia-smi -q | grep Minor`` on the node). ``Links`` has
    one entry per GPU column, also for GPUs whose row is missing from a partial capture.

    Raises:
        slurm_plugin.gres.topo_cpu.CpuTopologyError: an affinity CPU the node does not have, or a
            shape the capture contradicts (:func:`slurm_plugin.gres.topo.check_shape`).
    """
    check_shape(topo, cpu)
    return [
        GpuDevice(
            file=f"/dev/nvidia{r.index}",
            type=type_name,
            cores=cpu.logical_cores(r.cpu_affinity),
            links=r.nvlinks(),
        )
        for r in topo.gpus
    ]


def fake_gres_lines(
    node_names: str,
    device_paths: Sequence[str],
    gpu_type: str | None,
    sockets: int,
    cores_per_socket: int,
) -> list[str]:
    """gres.conf lines for a node shape with ``len(device_paths)`` GPUs spread evenly over sockets.

    Used by ``dlcluster`` for its fake GPUs. GPU ``i`` sits on socket ``i // (n / sockets)``;
    its ``Cores=`` are that socket's logical core indices; ``Links=`` gives ``-1`` for itself,
    4 (NVLink-like) to GPUs on the same socket and 1 (PCIe/SMP) across sockets.

    Args:
        node_names: a Slurm hostlist such as ``node[1-4]``.
        device_paths: character-device paths, one per GPU, in index order.
        gpu_type: GRES type (``a100``) or None for untyped GPUs.
        sockets, cores_per_socket: the node's shape.
    Raises:
        ValueError: no GPUs, or GPUs not divisible over the sockets.
    """
    n = len(device_paths)
    if n == 0 or sockets < 1 or n % sockets:
        raise ValueError(f"{n} GPUs cannot be spread evenly over {sockets} sockets")
    per_socket = n // sockets
    devices = []
    for i, path in enumerate(device_paths):
        sock = i // per_socket
        cores = tuple(range(sock * cores_per_socket, (sock + 1) * cores_per_socket))
        links = tuple(-1 if j == i else (4 if j // per_socket == sock else 1) for j in range(n))
        devices.append(GpuDevice(file=path, type=gpu_type, cores=cores, links=links))
    return gres_lines(node_names, devices)


MAX_SHARDS_PER_GPU = 1024
"""Most shards dlgres and dlcluster give one GPU (a GRES count per device is bounded by Slurm
only by its 64-bit counter; 1024 is far beyond any useful share of one GPU)."""


def shard_lines(node_names: str | None, files: Sequence[str], per_gpu: int) -> list[str]:
    """``Name=shard Count=N File=F`` lines, one per GPU device file, to write after that node's
    GPU lines (gres.conf(5); Slurm's gres/shard: a shard line with ``File=`` must name a device
    of one of the node's ``Name=gpu`` lines, or slurmd does not start: "failed to merge SHARED
    and SHARING configuration"). Every GPU gets the same ``per_gpu`` shards, so a fraction of
    one GPU is the same count of shards on every GPU (slurm_plugin/shard.py). ``per_gpu`` 0:
    no lines. Raises ValueError for a count outside 0..:data:`MAX_SHARDS_PER_GPU`."""
    if not 0 <= per_gpu <= MAX_SHARDS_PER_GPU:
        raise ValueError(f"shards per GPU {per_gpu}: must be 0..{MAX_SHARDS_PER_GPU}")
    head = f"NodeName={node_names} " if node_names else ""
    return [f"{head}Name=shard Count={per_gpu} File={f}" for f in files] if per_gpu else []
