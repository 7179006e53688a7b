"""``dlgres``: print gres.conf lines for a GPU node, or check an existing gres.conf.

Three sources, one generator (:mod:`slurm_plugin.gres.generate`):

* ``dlgres`` — this node, from NVML (pynvml) and ``/sys`` CPU topology;
  ``--fake-nvml FILE`` answers from a recorded NVML (tests/fixtures/nvml) instead.
* ``dlgres --from-topo FILE --sockets S --cores-per-socket C [--threads-per-core T]`` — a
  captured ``nvidia-smi topo -m`` of a node with that slurm.conf shape.
* ``--shards N`` (with either source) adds ``Name=shard Count=N File=...`` after the GPU
  lines, N shards per GPU (Slurm's gres/shard, for jobs that ask a fraction of one GPU), and the
  slurm.conf hint gets ``GresTypes=gpu,shard`` and ``shard:<N x GPUs>`` in the node's ``Gres=``.
* ``dlgres --check gres.conf [--sockets S --cores-per-socket C [--threads-per-core T]]
  [--slurm-conf FILE] [--plugin-dir DIR] [--slurm-release R] [--fake-nvml FILE]`` — every
  gres.conf(5) rule of Slurm 22.05, 24.11 or 26.05 (:mod:`slurm_plugin.gres.check`), one line
  per finding, ``FILE:LINE: message``; the release is ``--slurm-release``, else read from the
  plugin directory, else the newest with a note on stderr (:mod:`slurm_plugin.gres.release`);
  ``--slurm-conf`` adds GresTypes and each node's ``Gres=``; AutoDetect's library is looked for
  in ``--plugin-dir``, else slurm.conf's PluginDir, else Debian's ``/usr/lib/x86_64-linux-gnu/slurm-wlm``;
  with ``--fake-nvml`` (or NVML on this node) ``Type=`` is checked against the GPU names.

Output is gres.conf text (comments start with ``#``) or, with ``--json``, one JSON object.
Exit codes (:class:`~slurm_plugin.common.exits.Exit`, README.md's table): 0 done; 1 ``--check``
found problems; 2 bad input (unreadable or malformed file, a capture that is cut off without
``--allow-partial``, a CPU the node shape lacks); 8 NVML unavailable (no driver or no GPU on
this machine).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

from slurm_plugin import hostlist
from slurm_plugin.gres import generate as gres
from slurm_plugin.gres import check as gres_check
from slurm_plugin.gres import release as gres_release
from slurm_plugin.gres import slurm_lines
from slurm_plugin.gres import slurmconf as gres_slurmconf
from slurm_plugin.gres import nvml
from slurm_plugin.gres import topo
from slurm_plugin.gres import topo_cpu
from slurm_plugin.common.cli import ArgumentParser, StdoutError, quiet_on_closed_stdout, visible
from slurm_plugin.common.exits import Exit, epilog
from slurm_plugin.common.readfile import UnreadableFile, read_regular
from slurm_plugin.gres.nvml_fake import FakeNvml



class InputError(Exception):
    """Bad input; the message is printed as ``dlgres: <message>``."""


def _count(limit: int) -> Callable[[str], int]:
    """argparse ``type`` of a node shape option: an integer of at most ``limit`` (the limits and
    their sources are in :mod:`slurm_plugin.gres.topo_cpu`; values below 1 are refused by
    :meth:`~slurm_plugin.gres.topo_cpu.CpuTopology.from_shape`, naming the whole shape)."""
    def parse(text: str) -> int:
        if not re.fullmatch(r"\s*[+-]?\d{1,12}\s*", text):
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}")
        value = int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"{value} is more than {limit}, the most a real node has")
        return value
    parse.__name__ = "int"
    return parse


def _shards(text: str) -> int:
    """argparse ``type`` of ``--shards``: 0..:data:`slurm_plugin.gres.generate.MAX_SHARDS_PER_GPU`."""
    if not re.fullmatch(r"\s*\d{1,12}\s*", text) or int(text) > gres.MAX_SHARDS_PER_GPU:
        raise argparse.ArgumentTypeError(f"{text!r}: shards per GPU must be a whole number in "
                                         f"0..{gres.MAX_SHARDS_PER_GPU}")
    return int(text)


_shards.__name__ = "shards"


DEFAULT_SYSFS = "/sys/devices/system/cpu"


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="dlgres", description="gres.conf lines for GPU nodes (gres.conf(5) of Slurm 22.05, 24.11, 26.05).",
                       epilog=epilog([Exit.OK, Exit.FAILED, Exit.BAD_INPUT, Exit.NO_GPU_LIBRARY]))
    src = p.add_mutually_exclusive_group()
    src.add_argument("--from-topo", metavar="FILE", help="a captured 'nvidia-smi topo -m' of the node")
    src.add_argument("--check", metavar="GRES_CONF", help="check an existing gres.conf; exit 1 on findings")
    p.add_argument("--fake-nvml", metavar="FILE", help="answer NVML calls from a recorded JSON (no GPU needed)")
    p.add_argument("--slurm-conf", metavar="FILE", help="with --check: the cluster's slurm.conf (GresTypes, node Gres=)")
    p.add_argument("--plugin-dir", metavar="DIR", help="with --check: Slurm's plugin directory (default: slurm.conf "
                                                      "PluginDir, else Debian's)")
    p.add_argument("--slurm-release", choices=gres_release.RELEASES,
                   help="with --check: whose gres.conf(5) rules (default: read from the plugin directory)")
    p.add_argument("--shards", type=_shards, default=0, metavar="N",
                   help="also write N GPU shards per GPU (Name=shard lines; default 0: none)")
    p.add_argument("--node", help="NodeName= for the lines (default: none, for a node-local gres.conf)")
    p.add_argument("--type", dest="gpu_type", help="gres Type= (default: from the GPU name; none for --from-topo)")
    p.add_argument("--sockets", type=_count(topo_cpu.MAX_SOCKETS), help="node sockets (slurm.conf Sockets=)")
    p.add_argument("--cores-per-socket", type=_count(topo_cpu.MAX_CORES_PER_SOCKET), help="slurm.conf CoresPerSocket=")
    p.add_argument("--threads-per-core", type=_count(topo_cpu.MAX_THREADS_PER_CORE), default=None,
                   help="slurm.conf ThreadsPerCore= (default 1)")
    p.add_argument("--sysfs", help=f"CPU topology root for the NVML path (default {DEFAULT_SYSFS})")
    p.add_argument("--allow-partial", action="store_true", help="print the GPUs of a cut-off capture, marked PARTIAL")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    return p


_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?")
"""One Slurm node name (slurm.conf(5) NodeName: a hostname, RFC 1123 letters, digits, ``-``,
``.``, plus ``_`` which Slurm also accepts)."""
_HOSTLIST_CHARS = re.compile(r"[A-Za-z0-9._\-\[\],]+")


def _validate(a: argparse.Namespace) -> None:
    """Every user value dlgres writes into gres.conf: ``--node`` (a hostlist expression of
    Slurm node names) and ``--type``. Raises InputError naming the flag."""
    if a.node is not None:
        ok = bool(_HOSTLIST_CHARS.fullmatch(a.node))
        if ok:
            try:
                names = hostlist.expand(a.node)
            except ValueError:
                names = []
            ok = bool(names) and all(_HOSTNAME.fullmatch(n) for n in names)
        if not ok:
            raise InputError(f"--node {a.node!r} is not a Slurm node name or hostlist (letters, digits, "
                             "'-', '.', '_', brackets like gpu[01-04]); give the NodeName from slurm.conf")
    if a.gpu_type is not None and gres.type_problem(a.gpu_type):
        raise InputError(f"--type {a.gpu_type!r} is not a gres Type: {gres.TYPE_RULE}; e.g. --type a100")


def _refuse_unused(a: argparse.Namespace) -> None:
    """An option the chosen mode would not use is refused, naming it, rather than dropped:
    ``--check`` reads a gres.conf and writes none; ``--allow-partial`` is for a capture
    (``--from-topo``), ``--sysfs`` for the NVML path; ``--threads-per-core`` completes a shape.
    Raises InputError."""
    def refuse(flags: list[str], goes: str) -> None:
        if flags:
            raise InputError(f"{', '.join(flags)} {'goes' if len(flags) == 1 else 'go'} {goes}; "
                             "leave " + ("it" if len(flags) == 1 else "them") + " out")
    if a.check:
        refuse([f for f, given in (("--shards", a.shards > 0), ("--node", a.node is not None),
                                   ("--type", a.gpu_type is not None),
                                   ("--allow-partial", a.allow_partial),
                                   ("--sysfs", a.sysfs is not None)) if given],
               "with writing gres.conf lines, not with --check")
    else:
        refuse([f for f, given in (("--slurm-conf", a.slurm_conf), ("--plugin-dir", a.plugin_dir),
                                   ("--slurm-release", a.slurm_release)) if given],
               "with --check")
        if a.from_topo and a.fake_nvml:
            raise InputError("--from-topo and --fake-nvml are two sources: give one")
        refuse(["--allow-partial"] if a.allow_partial and not a.from_topo else [],
               "with --from-topo (a cut-off capture)")
        refuse(["--sysfs"] if a.from_topo and a.sysfs is not None else [],
               "with the NVML path (the CPU topology of this node), not --from-topo")
    if a.threads_per_core is not None and a.sockets is None and a.cores_per_socket is None:
        raise InputError("--threads-per-core completes a shape: give --sockets and "
                         "--cores-per-socket with it")


def _shape(a: argparse.Namespace, required: bool) -> topo_cpu.CpuTopology | None:
    if a.sockets is None and a.cores_per_socket is None:
        if required:
            raise InputError(
                "--from-topo needs the node's shape: --sockets S --cores-per-socket C "
                "[--threads-per-core T] (as in its slurm.conf NodeName line or 'slurmd -C')"
            )
        return None
    if a.sockets is None or a.cores_per_socket is None:
        raise InputError("give both --sockets and --cores-per-socket")
    return topo_cpu.CpuTopology.from_shape(a.sockets, a.cores_per_socket, 1 if a.threads_per_core is None else a.threads_per_core)


MAX_INPUT_BYTES = slurm_lines.MAX_BYTES
"""Largest file dlgres reads (a capture, gres.conf, slurm.conf, a recorded NVML), bytes: 16 MiB
(a gres.conf or slurm.conf with what it includes). An 8-GPU ``nvidia-smi topo -m`` is about 3 KiB
and a gres.conf or slurm.conf of thousands of nodes well under 1 MiB; the bound only keeps a wrong
path from filling memory."""


def _read(path: str) -> str:
    """The text of the input file ``path``: a regular file of at most :data:`MAX_INPUT_BYTES`,
    in UTF-8, read by :func:`slurm_plugin.common.readfile.read_regular` (a FIFO, ``/dev/zero`` or a
    directory is refused at once, never read). Raises InputError: one line naming the file."""
    try:
        raw, _ = read_regular(path, MAX_INPUT_BYTES)
    except UnreadableFile as e:
        raise InputError(f"cannot read {visible(path)}: {e.reason}"
                         + (", the most dlgres reads" if e.too_big else "")) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read {visible(path)}: not UTF-8 text (byte {e.start})") from None


def _emit(a: argparse.Namespace, source: str, devices: list[gres.GpuDevice], notes: list[str],
          partial: bool, cpu: topo_cpu.CpuTopology, total: int) -> int:
    lines = gres.gres_lines(a.node, devices, check_links=not partial)
    lines += gres.shard_lines(a.node, [d.file for d in devices], a.shards)
    if a.json:
        obj: dict[str, Any] = {
            "source": source, "node": a.node, "partial": partial, "notes": notes,
            "gpus": [{"file": d.file, "type": d.type, "cores": list(d.cores),
                      "links": list(d.links) if d.links is not None else None, "bus_id": d.bus_id}
                     for d in devices],
            "shards_per_gpu": a.shards, "lines": lines,
        }
        print(json.dumps(obj, indent=1))
        return Exit.OK
    local = a.from_topo is None and a.fake_nvml is None
    host = a.node or (socket.gethostname().split(".")[0] if local else "NODE")
    print(f"# gres.conf for {host}: {len(devices)} of {total} GPU(s) from {source}; written by dlgres")
    for n in notes:
        print(f"# note: {n}")
    if partial:
        print("# PARTIAL: the capture is cut off; lines below cover only the GPUs listed, and their")
        print("# Links still count every GPU column. Do not install this file as it is.")
    for d in devices:
        if d.bus_id:
            print(f"# {d.file}: PCI {d.bus_id}")
    print("\n".join(lines))
    types = sorted({d.type for d in devices if d.type})
    gres_word = f"gpu:{types[0]}:{total}" if len(types) == 1 else f"gpu:{total}"
    if a.shards:
        gres_word += f",shard:{a.shards * len(devices)}"
        print("# slurm.conf: GresTypes=gpu,shard")
    print(f"# slurm.conf: NodeName={host} Gres={gres_word} Sockets={cpu.sockets} "
          f"CoresPerSocket={cpu.cores_per_socket} ThreadsPerCore={cpu.threads_per_core}")
    return Exit.OK


def _from_topo(a: argparse.Namespace) -> int:
    cpu = _shape(a, required=True)
    assert cpu is not None
    try:
        t = topo.parse_topo(_read(a.from_topo))
    except topo.TopoError as e:
        raise InputError(f"{visible(a.from_topo)}: {e}") from None
    if t.partial and not a.allow_partial:
        missing = ",".join(f"GPU{g}" for g in t.missing)
        raise InputError(
            f"{a.from_topo} is cut off: no complete row for {missing} ({len(t.gpus)} of {t.gpu_count} GPUs); "
            "capture the whole 'nvidia-smi topo -m' output, or pass --allow-partial for the GPUs present"
        )
    devices = gres.devices_from_topo(t, cpu, a.gpu_type)
    return _emit(a, f"'nvidia-smi topo -m' capture {a.from_topo}", devices, list(t.notes), t.partial, cpu, t.gpu_count)


def _from_nvml(a: argparse.Namespace) -> int:
    cpu = _shape(a, required=False) or topo_cpu.CpuTopology.from_sysfs(a.sysfs or DEFAULT_SYSFS)
    module = FakeNvml.from_file(a.fake_nvml) if a.fake_nvml else None
    gpus = nvml.read_gpus(module)
    if not gpus:
        raise nvml.NvmlUnavailable("NVML sees no GPU on this node")
    devices = gres.devices_from_nvml(gpus, cpu, a.gpu_type)
    src = f"recorded NVML {a.fake_nvml}" if a.fake_nvml else "NVML"
    return _emit(a, src, devices, [], False, cpu, len(devices))


DEBIAN_PLUGIN_DIR = "/usr/lib/x86_64-linux-gnu/slurm-wlm"


def _detected_names(a: argparse.Namespace) -> list[str] | None:
    """GPU names from --fake-nvml, else from this node's NVML; None when neither answers."""
    module = FakeNvml.from_file(a.fake_nvml) if a.fake_nvml else None
    try:
        return [g.name for g in nvml.read_gpus(module)] or None
    except nvml.NvmlUnavailable:
        return None


def _read_conf(path: str) -> list[slurm_lines.Line]:
    """The logical lines of the Slurm config file ``path`` and what it includes
    (:func:`slurm_plugin.gres.slurm_lines.read_file`, at most :data:`MAX_INPUT_BYTES`).
    Raises InputError: one line naming the file (and line)."""
    try:
        return slurm_lines.read_file(path, MAX_INPUT_BYTES)
    except UnreadableFile as e:
        raise InputError(f"cannot read {visible(path)}: {e.reason}"
                         + (", the most dlgres reads" if e.too_big else "")) from None
    except slurm_lines.ConfReadError as e:
        raise InputError(visible(str(e))) from None


def _check(a: argparse.Namespace) -> int:
    slurm = gres_slurmconf.parse_slurm_conf(_read_conf(a.slurm_conf), a.slurm_conf) if a.slurm_conf else None
    dirs = [a.plugin_dir] if a.plugin_dir else (slurm.plugin_dirs if slurm and slurm.plugin_dirs else None)
    if dirs is None and Path(DEBIAN_PLUGIN_DIR).is_dir():
        dirs = [DEBIAN_PLUGIN_DIR]
    text = _read_conf(a.check)
    names = _detected_names(a) if any("autodetect" in line.keys for line in text) else None
    release = gres_release.resolve(a.slurm_release, dirs)
    if release.note:
        print(f"dlgres: note: {release.note}", file=sys.stderr)
    try:
        findings = gres_check.check_gres(text, _shape(a, required=False), slurm, dirs, names, release)
    except gres_check.TooLarge as e:
        raise InputError(f"{visible(a.check)}: {e}") from None
    if a.json:
        rows = [{"file": f.path or a.check, "line": f.line, "message": f.message} for f in findings]
        print(json.dumps({"file": a.check, "release": release.name, "release_from": release.source,
                          "note": release.note, "findings": rows}, indent=1))
    else:
        for f in findings:
            print(f"{visible(f.path or a.check)}:{f.line}: {visible(f.message)}")
        if not findings:
            print(f"{visible(a.check)}: no findings")
    return Exit.FAILED if findings else Exit.OK


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    """Entry point of ``dlgres``; returns the exit code (see module docstring)."""
    try:
        a = _parser().parse_args(argv)
    except SystemExit as exc:   # --help, or a usage error already printed (one line for "")
        return exc.code if isinstance(exc.code, int) else Exit.BAD_INPUT
    try:
        _validate(a)
        _refuse_unused(a)
        if a.check:
            return _check(a)
        if a.from_topo:
            return _from_topo(a)
        return _from_nvml(a)
    except (BrokenPipeError, StdoutError):  # stdout's own failures are not input errors
        raise
    except (InputError, gres_slurmconf.SlurmConfError, topo.TopoError, topo_cpu.CpuTopologyError, ValueError, OSError) as e:
        print(f"dlgres: {visible(str(e))}", file=sys.stderr)
        return Exit.BAD_INPUT
    except nvml.NvmlUnavailable as e:
        print(f"dlgres: {e} (on a machine without GPUs use --from-topo or --fake-nvml)", file=sys.stderr)
        return Exit.NO_GPU_LIBRARY


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
