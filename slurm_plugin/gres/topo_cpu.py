"""A node's CPU topology: OS CPU ids → Slurm's logical core indices for gres.conf ``Cores=``.

``dlgres`` turns a GPU's CPU affinity (OS CPU ids, as NVML and ``nvidia-smi topo -m`` report
them, hyper-thread siblings included: ``0-55,112-167``) into the *logical core indices* that
gres.conf(5) wants in ``Cores=``: "Core 0 will be the first core on the first socket, while
core 1 will be the second core on the first socket" (gres.conf(5), Slurm 22.05, ``Cores``;
the same numbering as ``lstopo -l``'s ``Core L#``). A core counts once however many of its
threads appear. The topology comes from ``/sys/devices/system/cpu/cpuN/topology``
(:meth:`CpuTopology.from_sysfs`, root injectable for tests) or, for a capture taken on another
machine, from the node's shape with Linux's usual enumeration (:meth:`CpuTopology.from_shape`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from slurm_plugin.common.readfile import UnreadableFile, read_regular

_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")


class CpuTopologyError(ValueError):
    """A CPU list or topology source is malformed or does not fit the node."""


MAX_CPUS = 65533
"""Most CPUs a node may have, hence the bound of every CPU or core id dlgres reads (``0`` to
``MAX_CPUS - 1``): Slurm keeps a node's CPU, socket, core and thread counts in 16 bits (slurm.h
``node_info_t``: ``uint16_t cpus, sockets, cores, threads``), ``0xfffe`` and ``0xffff`` being
``NO_VAL16`` and ``INFINITE16``. A list is checked against it before anything is expanded, so
``0-99999999999`` is refused at once instead of filling memory."""
MAX_SOCKETS = 64
"""Most ``--sockets``: the largest single-system-image x86 servers have 32 sockets (HPE
Superdome Flex); twice that leaves room."""
MAX_CORES_PER_SOCKET = 1024
"""Most ``--cores-per-socket``: today's largest CPUs have 192 (AMD EPYC 9965) and 288 (Intel
Xeon 6 6900E) cores per socket."""
MAX_THREADS_PER_CORE = 8
"""Most ``--threads-per-core``: IBM POWER's SMT8 is the most threads per core any CPU has."""


def parse_ranges(text: str, limit: int = MAX_CPUS, what: str = "CPU") -> tuple[int, ...]:
    """``"0-3,8,10-11"`` → ``(0, 1, 2, 3, 8, 10, 11)`` (sorted, unique).

    Every id must be below ``limit`` (default :data:`MAX_CPUS`; ``what`` names the ids in the
    message). Items are checked and merged as ranges before any is expanded, so the work and
    the result are bounded by ``limit`` however long or wide the text is.

    Raises:
        CpuTopologyError: an empty item, a non-number, a descending range (``5-3``), or an id
            at or above ``limit``.
    """
    spans: list[tuple[int, int]] = []
    for item in text.strip().split(","):
        m = _RANGE_RE.match(item.strip())
        if not m:
            raise CpuTopologyError(f"bad range item {_short(item)!r} in {_short(text)!r}: expected N or N-M")
        if len(m.group(1)) > 12 or len(m.group(2) or "") > 12:   # int() of a huge string is slow
            raise CpuTopologyError(f"{what} {_short(item.strip())} in {_short(text)!r} is above {limit - 1}, "
                                   f"the highest {what} id of a Slurm node ({_LIMIT_WHY})")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise CpuTopologyError(f"descending range {_short(item)!r} in {_short(text)!r}")
        if hi >= limit:
            raise CpuTopologyError(f"{what} {hi} in {_short(text)!r} is above {limit - 1}, the highest "
                                   f"{what} id of a Slurm node ({_LIMIT_WHY})")
        spans.append((lo, hi))
    out: list[int] = []
    top = -1
    for lo, hi in sorted(spans):
        if hi > top:
            out.extend(range(max(lo, top + 1), hi + 1))
            top = hi
    return tuple(out)


_LIMIT_WHY = "Slurm counts a node's CPUs in 16 bits"


def _short(text: str, width: int = 40) -> str:
    """``text`` cut to ``width`` characters with ``...``, for a message quoting a long list."""
    return text if len(text) <= width else text[:width] + "..."


def _read_id(path: Path) -> int:
    """The number in a sysfs topology file (read as a regular file of at most 4 KiB, as sysfs
    files are: :func:`slurm_plugin.common.readfile.read_regular`)."""
    try:
        raw, _ = read_regular(path, 4096)
        text = raw.decode("ascii").strip()
        if not text.isdigit() or len(text) > 12:
            raise ValueError
        return int(text)
    except UnreadableFile as e:
        raise CpuTopologyError(f"cannot read {path}: {e.reason}") from None
    except ValueError:   # UnicodeDecodeError too
        raise CpuTopologyError(f"{path}: not a CPU topology id (a number)") from None


def shape_problem(sockets: int, cores_per_socket: int, threads_per_core: int) -> str | None:
    """Why a node shape of at least 1 each is beyond any real node (a limit above is exceeded),
    naming the option and the limit; None when it is within them."""
    for value, option, limit in ((sockets, "--sockets", MAX_SOCKETS),
                                 (cores_per_socket, "--cores-per-socket", MAX_CORES_PER_SOCKET),
                                 (threads_per_core, "--threads-per-core", MAX_THREADS_PER_CORE)):
        if value > limit:
            return f"{option} {value} is more than {limit}, the most a real node has"
    total = sockets * cores_per_socket * threads_per_core
    if total > MAX_CPUS:
        return f"{total} CPUs, more than {MAX_CPUS}, the most a Slurm node has ({_LIMIT_WHY})"
    return None


def format_ranges(values: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 8]`` → ``"0-3,8"`` (sorted, unique; ``""`` for no values)."""
    vals = sorted(set(values))
    parts: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        parts.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass(frozen=True)
class CpuTopology:
    """Where each OS CPU sits.

    Attributes:
        cpu_to_core: OS CPU id → logical core index (0 .. cores-1), socket-major as in
            gres.conf(5): all cores of the first socket, then the next socket's.
        sockets, cores_per_socket, threads_per_core: the node's shape (as in slurm.conf).
    """

    cpu_to_core: Mapping[int, int]
    sockets: int
    cores_per_socket: int
    threads_per_core: int

    @property
    def cores(self) -> int:
        """Number of cores on the node (sockets × cores per socket)."""
        return self.sockets * self.cores_per_socket

    @classmethod
    def from_shape(cls, sockets: int, cores_per_socket: int, threads_per_core: int = 1) -> CpuTopology:
        """The usual Linux enumeration (Intel and AMD servers alike).

        OS CPUs ``0 .. S·C-1`` are the first thread of every core, socket after socket; the
        next ``S·C`` ids are their second threads in the same order, and so on. E.g. 2 sockets
        × 56 cores × 2 threads: CPU 0-55 and 112-167 are socket 0 (as ``nvidia-smi topo -m``
        prints for an HGX H100), CPU 56-111 and 168-223 socket 1.

        Raises:
            CpuTopologyError: a shape value below 1, or beyond a real node's
                (:func:`shape_problem`).
        """
        if min(sockets, cores_per_socket, threads_per_core) < 1:
            raise CpuTopologyError(
                f"node shape {sockets}x{cores_per_socket}x{threads_per_core}: "
                "sockets, cores per socket and threads per core must be >= 1"
            )
        problem = shape_problem(sockets, cores_per_socket, threads_per_core)
        if problem:
            raise CpuTopologyError(f"node shape {sockets}x{cores_per_socket}x{threads_per_core}: {problem}")
        per_thread = sockets * cores_per_socket
        mapping = {t * per_thread + c: c for t in range(threads_per_core) for c in range(per_thread)}
        return cls(mapping, sockets, cores_per_socket, threads_per_core)

    @classmethod
    def from_sysfs(cls, root: str | Path = "/sys/devices/system/cpu") -> CpuTopology:
        """Read ``cpuN/topology/{physical_package_id,core_id}`` under ``root``.

        Sockets are numbered by sorted package id and cores inside a socket by sorted
        ``core_id`` (hwloc's logical order); offline CPUs (no topology dir) are skipped.

        Raises:
            CpuTopologyError: no CPU topology under ``root``, a topology file that is not a
                small regular file holding a number, or sockets of unequal size.
        """
        base = Path(root)
        where: dict[int, tuple[int, int]] = {}
        for d in base.glob("cpu[0-9]*"):
            topo = d / "topology"
            if not d.name[3:].isdigit() or not (topo / "core_id").is_file():
                continue
            cpu = int(d.name[3:]) if len(d.name) < 10 else MAX_CPUS
            if cpu >= MAX_CPUS:
                raise CpuTopologyError(f"{d}: CPU {d.name[3:]} is above {MAX_CPUS - 1}, the highest CPU id of a "
                                       f"Slurm node ({_LIMIT_WHY})")
            where[cpu] = (_read_id(topo / "physical_package_id"), _read_id(topo / "core_id"))
        if not where:
            raise CpuTopologyError(f"no CPU topology found under {base}")
        return cls.from_placement(where)

    @classmethod
    def from_placement(cls, where: Mapping[int, tuple[int, int]]) -> CpuTopology:
        """Build from OS CPU id → (package id, core id) as the kernel reports them.

        Raises:
            CpuTopologyError: sockets with different core counts, or cores with different
                thread counts (Slurm's node shape cannot describe those).
        """
        pkgs = sorted({p for p, _ in where.values()})
        per_pkg = {p: sorted({c for q, c in where.values() if q == p}) for p in pkgs}
        sizes = {len(v) for v in per_pkg.values()}
        if len(sizes) != 1:
            raise CpuTopologyError(f"sockets have different core counts: {sorted(sizes)}")
        cps = sizes.pop()
        index = {(p, c): si * cps + ci for si, p in enumerate(pkgs) for ci, c in enumerate(per_pkg[p])}
        mapping = {cpu: index[pc] for cpu, pc in where.items()}
        threads = {sum(1 for v in mapping.values() if v == core) for core in set(mapping.values())}
        if len(threads) != 1:
            raise CpuTopologyError(f"cores have different thread counts: {sorted(threads)}")
        return cls(mapping, len(pkgs), cps, threads.pop())

    def logical_cores(self, os_cpus: Iterable[int]) -> tuple[int, ...]:
        """OS CPU ids → sorted unique logical core indices (hyper-thread siblings collapse).

        Raises:
            CpuTopologyError: a CPU id this node does not have, naming the node's shape.
        """
        cores: set[int] = set()
        for cpu in os_cpus:
            if cpu not in self.cpu_to_core:
                raise CpuTopologyError(
                    f"CPU {cpu} does not exist on a node of {self.sockets} socket(s) x "
                    f"{self.cores_per_socket} cores x {self.threads_per_core} thread(s) "
                    f"(OS CPUs 0-{len(self.cpu_to_core) - 1}); give the node's real shape with "
                    "--sockets S --cores-per-socket C --threads-per-core T (slurm.conf or 'slurmd -C')"
                )
            cores.add(self.cpu_to_core[cpu])
        return tuple(sorted(cores))
