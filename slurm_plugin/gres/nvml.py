"""Read this node's GPUs from NVML (pynvml) for ``dlgres``: the facts gres.conf needs.

For each GPU: its name (→ gres ``Type``), PCI bus id (Slurm numbers GPUs by sorted bus id,
gres.conf(5) ``Links``), the minor number of its ``/dev/nvidiaN`` (not necessarily the index),
its CPU affinity as OS CPU ids (``nvmlDeviceGetCpuAffinity`` bit mask) and its NVLinks: links
to a peer GPU's bus id, and links to NVSwitches (HGX/DGX A100 and H100: every GPU reaches
every other through the switches; ``nvidia-smi topo -m`` then shows ``NV12``/``NV18``).

The NVML module is an argument: real ``pynvml`` by default, or
:class:`slurm_plugin.gres.nvml_fake.FakeNvml`. No GPU exists on the project's build and CI
machines, so this path is tested only against that recorded fake, built from the real
``nvidia-smi topo -m`` captures from public issues (tests/fixtures/nvml); it has not
been run against a real driver here.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any


class NvmlUnavailable(RuntimeError):
    """NVML could not be loaded or initialised (no driver, no GPU, pynvml missing)."""


@dataclass(frozen=True)
class NvmlGpu:
    """One GPU as NVML reports it.

    Attributes:
        index: NVML's index (PCI bus order unless the driver was told otherwise).
        name: marketing name, e.g. ``NVIDIA H100 80GB HBM3``.
        bus_id: PCI bus id, upper case, e.g. ``00000000:1B:00.0``.
        minor: N of ``/dev/nvidiaN``.
        cpu_affinity: OS CPU ids near the GPU, hyper-thread siblings included.
        peer_links: peer bus id → number of NVLinks straight to that GPU.
        switch_links: NVLinks to NVSwitches.
    """

    index: int
    name: str
    bus_id: str
    minor: int
    cpu_affinity: tuple[int, ...]
    peer_links: dict[str, int] = field(default_factory=dict)
    switch_links: int = 0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def load_pynvml() -> ModuleType:
    """Import the real ``pynvml`` module (from NVIDIA's ``nvidia-ml-py``; a warning the
    deprecated ``pynvml`` wrapper package would print, if a site has it, is silenced).

    Raises:
        NvmlUnavailable: nvidia-ml-py is not installed.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module("pynvml")
    except ImportError as e:  # pragma: no cover - pynvml is a declared dependency
        raise NvmlUnavailable(f"pynvml (package nvidia-ml-py) is not installed: {e}") from None


def _links(nvml: Any, handle: Any) -> list[tuple[str, int | None]]:
    """(remote bus id, remote device type or None when NVML cannot tell) per active NVLink."""
    out: list[tuple[str, int | None]] = []
    for link in range(int(nvml.NVML_NVLINK_MAX_LINKS)):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link) != nvml.NVML_FEATURE_ENABLED:
                continue
            remote = _text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId).upper()
        except nvml.NVMLError:
            continue  # link index not present on this GPU (NOT_SUPPORTED / INVALID_ARGUMENT)
        try:
            kind: int | None = int(nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link))
        except (nvml.NVMLError, AttributeError):
            kind = None  # older driver: classify by bus id below
        out.append((remote, kind))
    return out


def _classify(raw: list[tuple[str, int | None]], gpu_buses: set[str], nvml: Any) -> tuple[dict[str, int], int]:
    """Split links into peer-GPU links and NVSwitch links (IBM NPU links count as neither)."""
    peers: dict[str, int] = {}
    switch = 0
    for remote, kind in raw:
        if kind == nvml.NVML_NVLINK_DEVICE_TYPE_GPU or (kind is None and remote in gpu_buses):
            peers[remote] = peers.get(remote, 0) + 1
        elif kind == nvml.NVML_NVLINK_DEVICE_TYPE_SWITCH or kind is None:
            switch += 1
    return peers, switch


AFFINITY_CPUS = 1 << 16
"""OS CPUs whose affinity bits are asked for, 64 to a word (``nvmlDeviceGetCpuAffinity``'s
``cpuSetSize`` of 1,024 words): above any kernel's ``NR_CPUS`` (at most 8,192), so no CPU near a
GPU is ever cut off, whatever shape the caller believes the node has; a CPU the node's shape
lacks is then refused by :meth:`~slurm_plugin.gres.topo_cpu.CpuTopology.logical_cores`."""


def read_gpus(nvml: Any | None = None, cpu_count: int = AFFINITY_CPUS) -> list[NvmlGpu]:
    """All GPUs of this node, in NVML index order.

    Args:
        nvml: a pynvml-compatible module or object; None loads the real pynvml.
        cpu_count: OS CPUs to ask affinity for (rounded up to 64-bit words).
    Raises:
        NvmlUnavailable: NVML failed to initialise (message from NVML, e.g. "NVML Shared
            Library Not Found" or "Driver Not Loaded").
    """
    nvml = nvml if nvml is not None else load_pynvml()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        raise NvmlUnavailable(f"NVML: {e}") from None
    try:
        words = (cpu_count + 63) // 64
        seen = []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            mask = [int(w) for w in nvml.nvmlDeviceGetCpuAffinity(h, words)]
            cpus = tuple(64 * w + b for w, bits in enumerate(mask) for b in range(64) if bits >> b & 1)
            bus = _text(nvml.nvmlDeviceGetPciInfo(h).busId).upper()
            name = _text(nvml.nvmlDeviceGetName(h))
            seen.append((i, name, bus, int(nvml.nvmlDeviceGetMinorNumber(h)), cpus, _links(nvml, h)))
        buses = {s[2] for s in seen}
        out = []
        for i, name, bus, minor, cpus, raw in seen:
            peers, switch = _classify(raw, buses, nvml)
            out.append(NvmlGpu(i, name, bus, minor, cpus, peers, switch))
        return out
    finally:
        nvml.nvmlShutdown()


def link_matrix(gpus: list[NvmlGpu]) -> list[list[int]]:
    """gres.conf ``Links`` rows for ``gpus`` in the given order: ``-1`` on the diagonal.

    Links between two GPUs = NVLinks straight between them + ``min`` of their NVSwitch link
    counts when both reach NVSwitches (all-to-all fabric; matches ``nvidia-smi topo -m``'s
    ``NV12`` on DGX A100 and ``NV18`` on HGX H100).
    """
    rows = []
    for a in gpus:
        row = []
        for b in gpus:
            if a is b:
                row.append(-1)
            else:
                row.append(a.peer_links.get(b.bus_id, 0) + min(a.switch_links, b.switch_links))
        rows.append(row)
    return rows
