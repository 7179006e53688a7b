"""Parse a captured ``nvidia-smi topo -m`` matrix (the input of ``dlgres --from-topo``).

The capture is the table ``nvidia-smi topo -m`` prints: a header naming the device columns
(``GPU0 .. GPUn``, then NICs such as ``NIC0`` or ``mlx4_0``) and the trailing columns
(``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID``), one row per device, then a legend.
Real captures (see tests/fixtures/topo) are tab-separated, with empty tab fields in NIC rows and
an extra empty field before ``GPU NUMA ID``, or space-aligned (pasted from a terminal), and may
be cut off mid-table. This module reads both layouts, keeps only what gres.conf needs (each
GPU's connection to every other GPU, its CPU affinity as OS CPU ids, its NUMA node), and says
exactly which GPU rows are missing or cut. ``nvidia-smi topo -m > file`` run in a terminal keeps
the escape codes it uses to underline the header (``ESC[4m ... ESC[0m``): every ECMA-48 escape
sequence (CSI ``ESC[...``, OSC ``ESC]...``, two-byte ``ESC x``) is removed before parsing.
:func:`check_shape` refuses a node shape the capture contradicts. Cells: ``X`` self, ``NV#`` a bonded set of #
NVLinks, ``PIX``/``PXB``/``PHB``/``NODE``/``SYS`` PCIe paths (the capture's own legend).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurm_plugin.gres.topo_cpu import CpuTopology, CpuTopologyError, format_ranges, parse_ranges

_GPU_RE = re.compile(r"^GPU(\d+)$")
_NV_RE = re.compile(r"^NV(\d+)$")
_CELLS = frozenset({"X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC"})
# ECMA-48: CSI (ESC [ params intermediates final), OSC (ESC ] ... BEL or ESC \), and other ESC
# sequences (ESC, intermediates, final: ``ESC(B`` from tput sgr0, ``ESC=``).
_ESCAPE_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]")


def strip_escapes(text: str) -> str:
    """``"\\x1b[4mGPU0\\x1b[0m"`` → ``"GPU0"``: terminal escape sequences removed, text kept."""
    return _ESCAPE_RE.sub("", text)


class TopoError(ValueError):
    """The text is not an ``nvidia-smi topo -m`` matrix, or a row is malformed (line given)."""


@dataclass(frozen=True)
class GpuRow:
    """One complete GPU row of the matrix.

    Attributes:
        index: the ``N`` of ``GPUN`` (nvidia-smi's index: PCI bus order by default).
        peers: connection to each GPU column, in column order (``X``, ``NV12``, ``SYS``, ...);
            NIC columns are left out.
        cpu_affinity: OS CPU ids (hyper-thread siblings included), empty when ``N/A``.
        numa: the ``NUMA Affinity`` node, None when absent or ``N/A``.
        line: 1-based line number in the capture.
    """

    index: int
    peers: tuple[str, ...]
    cpu_affinity: tuple[int, ...]
    numa: int | None
    line: int

    def nvlinks(self) -> tuple[int, ...]:
        """gres.conf ``Links=`` values: ``-1`` self, ``#`` for ``NV#``, ``0`` otherwise."""
        out = []
        for cell in self.peers:
            m = _NV_RE.match(cell)
            out.append(-1 if cell == "X" else int(m.group(1)) if m else 0)
        return tuple(out)


@dataclass(frozen=True)
class Topology:
    """A parsed capture.

    Attributes:
        gpu_count: GPU columns in the header (the node's GPUs).
        gpus: complete GPU rows in file order.
        nics: NIC column names (``NIC0``, ``mlx4_0``, ...).
        missing: GPU indices without a complete row (capture cut off or row cut mid-line).
        notes: human-readable remarks (cut rows, missing NIC rows).
    """

    gpu_count: int
    gpus: tuple[GpuRow, ...]
    nics: tuple[str, ...]
    missing: tuple[int, ...]
    notes: tuple[str, ...]

    @property
    def partial(self) -> bool:
        """True when at least one GPU has no complete row."""
        return bool(self.missing)


def _split(line: str) -> list[str]:
    """Cells of one line: tab-separated (empty fields kept) or aligned with 2+ spaces."""
    if "\t" in line:
        return [c.strip() for c in line.rstrip("\r\n").split("\t")]
    return re.split(r"\s{2,}", line.strip())


def _is_cell(c: str) -> bool:
    return c in _CELLS or bool(_NV_RE.match(c))


def _find_header(lines: list[str]) -> int:
    """Index of the header: first cell ``GPU0`` not followed by a connection cell (rows are)."""
    for i, line in enumerate(lines):
        cells = [c for c in _split(line) if c]
        if cells and cells[0] == "GPU0" and (len(cells) == 1 or not _is_cell(cells[1])):
            return i
    raise TopoError("no 'nvidia-smi topo -m' header found (a line of columns GPU0 GPU1 ...)")


def _row(lineno: int, cells: list[str], n_dev: int, n_gpu: int, trailing: list[str]) -> GpuRow | str:
    """A complete GpuRow, or the reason the row is incomplete."""
    name, dev = cells[0], cells[1 : 1 + n_dev]
    rest = [c for c in cells[1 + n_dev :] if c]
    if len(dev) < n_dev or len(rest) < len(trailing):
        got, want = len(dev) + len(rest), n_dev + len(trailing)
        return f"line {lineno}: row {name} is cut off ({got} of {want} cells)"
    bad = [c for c in dev if not _is_cell(c)]
    if bad:
        raise TopoError(
            f"line {lineno}: row {name}: unknown connection {bad[0]!r} "
            "(expected X, NV#, PIX, PXB, PHB, NODE or SYS)"
        )
    fields = dict(zip(trailing, rest))
    aff = fields.get("CPU Affinity", "N/A")
    numa = fields.get("NUMA Affinity", "N/A")
    try:
        cpus = () if aff == "N/A" else parse_ranges(aff)
    except CpuTopologyError as e:
        raise TopoError(f"line {lineno}: row {name}: CPU Affinity: {e}") from None
    return GpuRow(
        index=int(name[3:]),
        peers=tuple(dev[:n_gpu]),
        cpu_affinity=cpus,
        numa=int(numa) if numa.isdigit() else None,
        line=lineno,
    )


def parse_topo(text: str) -> Topology:
    """Parse ``nvidia-smi topo -m`` output (tab- or space-separated; NIC and NUMA columns).

    A capture that ends early is not an error: the rows present are returned and
    :attr:`Topology.missing` lists the GPUs without a complete row. A row shorter than the
    header (cut mid-line) is treated as missing; so is a last GPU row that ends the file
    without a newline when the capture is already short of rows (it may be cut inside a
    number: ``10-19,30-39`` could have been ``10-19,30-399``).

    Raises:
        TopoError: no header, a header column named twice, an unknown connection cell, a
            malformed CPU list (or a CPU id beyond any Slurm node's), a GPU row whose name is
            not a header column or that comes twice, ``X`` off the row's own column, or an
            asymmetric matrix (GPU0→GPU1 differs from GPU1→GPU0); messages give the line number.
    """
    lines = strip_escapes(text).splitlines()
    h = _find_header(lines)
    header = [c for c in _split(lines[h]) if c]
    devices = [c for c in header if _GPU_RE.match(c) or c.startswith(("NIC", "mlx"))]
    n_dev = len(devices)
    gpus_cols = [int(c[3:]) for c in devices if _GPU_RE.match(c)]
    trailing = header[n_dev:]
    body: list[int] = []
    for i in range(h + 1, len(lines)):
        if not lines[i].strip() or lines[i].strip().startswith("Legend"):
            break
        body.append(i)
    gpu_lines = [i for i in body if _GPU_RE.match(_split(lines[i])[0])]
    # A short capture whose last line has no newline may be cut inside a value ("240-25").
    suspect = (
        len(gpu_lines) < len(gpus_cols) and bool(body) and body[-1] == len(lines) - 1
        and not strip_escapes(text).endswith("\n")
    )
    twice = sorted({c for c in devices if devices.count(c) > 1})
    if twice:
        raise TopoError(f"line {h + 1}: the header names column {twice[0]} twice")
    rows: list[GpuRow] = []
    notes: list[str] = []
    seen_names: dict[str, int] = {}
    for i in body:
        name = _split(lines[i])[0]
        if name in seen_names:
            raise TopoError(f"line {i + 1}: a second row {name!r} (the first is line {seen_names[name]})")
        seen_names[name] = i + 1
        if name not in devices:
            raise TopoError(f"line {i + 1}: row {name!r} is not a column of the header")
        if not _GPU_RE.match(name):
            continue
        got = _row(i + 1, _split(lines[i]), n_dev, len(gpus_cols), trailing)
        if isinstance(got, GpuRow) and suspect and i == body[-1]:
            got = f"line {i + 1}: row {name} ends the capture without a newline and may be cut"
        if isinstance(got, str):
            notes.append(got)
        else:
            rows.append(got)
    _check_matrix(rows, gpus_cols)
    have = {r.index for r in rows}
    missing = tuple(g for g in gpus_cols if g not in have)
    absent = [g for g in gpus_cols if f"GPU{g}" not in seen_names]
    if absent:
        notes.append(f"capture ends before the rows of GPU{absent[0]}..GPU{absent[-1]}")
    nic_absent = [d for d in devices if not _GPU_RE.match(d) and d not in seen_names]
    if nic_absent and not absent:
        notes.append(f"capture ends before the rows of {nic_absent[0]}..{nic_absent[-1]} (NICs; GPUs complete)")
    return Topology(
        gpu_count=len(gpus_cols),
        gpus=tuple(rows),
        nics=tuple(d for d in devices if not _GPU_RE.match(d)),
        missing=missing,
        notes=tuple(notes),
    )


def _check_matrix(rows: list[GpuRow], cols: list[int]) -> None:
    """Refuse GPU rows that ``nvidia-smi topo -m`` cannot print: ``X`` anywhere but on the row's
    own column, or a connection that differs from the one the other row gives (the matrix is
    symmetric: GPU0→GPU1 is GPU1→GPU0). Such a capture was edited or mangled, and its ``Links=``
    would be refused by ``dlgres --check`` (and slurmd's reading of it is undefined).

    Raises:
        TopoError: the first fault, naming both cells and their lines.
    """
    pos = {g: k for k, g in enumerate(cols)}
    for r in rows:
        xs = [cols[k] for k, c in enumerate(r.peers) if c == "X"]
        if xs != [r.index]:
            found = ", ".join(f"GPU{g}" for g in xs) or "no column"
            raise TopoError(f"line {r.line}: row GPU{r.index} has X (the GPU itself) under {found}, not only "
                            f"under GPU{r.index}: the capture was edited or mangled; take a fresh "
                            "'nvidia-smi topo -m'")
    for k, a in enumerate(rows):
        for b in rows[k + 1:]:
            ab, ba = a.peers[pos[b.index]], b.peers[pos[a.index]]
            if ab != ba:
                raise TopoError(f"line {b.line}: GPU{b.index} to GPU{a.index} is {ba} but line {a.line} gives "
                                f"GPU{a.index} to GPU{b.index} as {ab}: 'nvidia-smi topo -m' prints a symmetric "
                                "matrix, so the capture was edited or mangled; take a fresh one")


def check_shape(topo: Topology, cpu: CpuTopology) -> None:
    """Refuse a node shape that the capture's CPU and NUMA affinities contradict.

    The kernel gives a GPU the CPUs of its NUMA node, and a NUMA node holds whole cores (every
    hyper-thread of a core) inside one socket. So, on the given shape (Linux's enumeration,
    :meth:`CpuTopology.from_shape`): every CPU of a row must exist, a row must hold all threads
    of each core it touches (else the CPU count, hence the thread numbering, is wrong), and a
    row with one ``NUMA Affinity`` node must stay inside one socket.

    Raises:
        slurm_plugin.gres.topo_cpu.CpuTopologyError: the first contradiction, naming the GPU row,
            the CPUs and what the capture shows instead.
    """
    threads: dict[int, set[int]] = {}
    for os_cpu, core in cpu.cpu_to_core.items():
        threads.setdefault(core, set()).add(os_cpu)
    shape = f"{cpu.sockets}x{cpu.cores_per_socket}x{cpu.threads_per_core}"
    seen = max((c for r in topo.gpus for c in r.cpu_affinity), default=-1) + 1
    if seen > len(cpu.cpu_to_core):
        raise CpuTopologyError(
            f"the capture's CPU affinities go up to CPU {seen - 1} ({seen} CPUs at least) but a {shape} node "
            f"has {len(cpu.cpu_to_core)} CPUs: give the node's real --sockets/--cores-per-socket/--threads-per-core")
    for r in topo.gpus:
        if not r.cpu_affinity:
            continue
        aff = set(r.cpu_affinity)
        where = f"GPU{r.index} (line {r.line}): CPU Affinity {format_ranges(aff)}"
        cores = cpu.logical_cores(aff)  # raises for a CPU the shape lacks
        for core in cores:
            lost = sorted(threads[core] - aff)
            if lost:
                have = sorted(threads[core] & aff)
                raise CpuTopologyError(
                    f"{where}: on a {shape} node CPU {have[0]} and CPU {lost[0]} are threads of one core, but "
                    f"the capture gives the GPU only CPU {have[0]} (it shows at least {seen} CPUs, the shape "
                    f"{len(cpu.cpu_to_core)}): give the node's real --sockets/--cores-per-socket/--threads-per-core")
        sockets = sorted({c // cpu.cores_per_socket for c in cores})
        if r.numa is not None and len(sockets) > 1:
            raise CpuTopologyError(
                f"{where} is NUMA node {r.numa} but spans sockets {', '.join(map(str, sockets))} of a {shape} "
                "node (a NUMA node lies in one socket): give the node's real --sockets/--cores-per-socket")
