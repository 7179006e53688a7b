"""A recorded fake of the pynvml calls ``dlgres`` makes, for machines without a GPU: a test
stand-in for a GPU's NVML, never a source of gres.conf for a real node.

It answers ``nvmlInit``, ``nvmlDeviceGetCount``, ``nvmlDeviceGetHandleByIndex``,
``nvmlDeviceGetName``, ``nvmlDeviceGetPciInfo(...).busId``, ``nvmlDeviceGetMinorNumber``,
``nvmlDeviceGetCpuAffinity`` (64-bit words, as pynvml returns them),
``nvmlDeviceGetNvLinkState`` / ``...RemotePciInfo`` / ``...RemoteDeviceType`` from a JSON
record (tests/fixtures/nvml/*.json: built from the real ``nvidia-smi topo -m`` captures from public
issues; each file says what was taken from the capture and what was filled in).
Links beyond a device's recorded ones raise ``NVMLError`` like NVML's ``NOT_SUPPORTED``.
``dlgres --fake-nvml FILE`` uses it so the NVML path can be shown without hardware.

Record format::

    {"devices": [{"name": str, "bus_id": str, "minor": int, "cpu_affinity": "0-55,112-167",
                  "nvlinks": [["switch"|"gpu", remote_bus_id], ...]}, ...]}

A record file is read as a regular file of bounded size and every field of every device is
checked when it is loaded (:func:`check_record`: required keys, types, ranges such as
``0 <= minor <= 253``), so a bad record is one line naming the file, the device and the field,
never a traceback or a ``/dev/nvidia-1``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_plugin.common.cli import visible
from slurm_plugin.common.readfile import UnreadableFile, read_regular
from slurm_plugin.gres.topo_cpu import CpuTopologyError, parse_ranges


MAX_RECORD_BYTES = 1024 * 1024
"""Largest record file read, bytes (1 MiB; the 8-GPU records here are about 4 KiB)."""
MAX_DEVICES = 1024
"""Most devices in a record: gres.conf(5), File: "Count is limited in size (currently 1024)
for each node"."""
MAX_MINOR = 253
"""Highest GPU minor number: the NVIDIA driver's character devices (major 195) give minor 255
to ``/dev/nvidiactl`` and 254 to ``/dev/nvidia-modeset``; GPUs are ``/dev/nvidia0`` up."""
MAX_NAME = 95
"""Longest GPU name: NVML's ``NVML_DEVICE_NAME_V2_BUFFER_SIZE`` is 96 bytes with the NUL."""
_BUS_ID_RE = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
"""A PCI bus id as NVML prints it: domain (8 hex digits, 4 in older drivers), bus, device,
function (``00000000:1B:00.0``)."""
_KEYS = {"name", "bus_id", "minor", "cpu_affinity", "nvlinks"}


def check_record(record: dict[str, Any], where: str) -> None:
    """Check every device of a record (``where`` names the file in messages).

    Each device is a mapping with ``name`` (a non-empty string of printable characters, at most
    :data:`MAX_NAME`), ``bus_id`` (a PCI bus id, unique in the record), ``minor`` (an integer
    0 .. :data:`MAX_MINOR`, unique), ``cpu_affinity`` (a CPU list such as ``"0-55,112-167"``,
    ids below :data:`slurm_plugin.gres.topo_cpu.MAX_CPUS`) and optional ``nvlinks`` (at most
    :attr:`FakeNvml.NVML_NVLINK_MAX_LINKS` pairs ``["gpu"|"switch", bus_id]``); no other key.

    Raises:
        ValueError: ``<where>: device <i>: <field>: <what is wrong>``, the first fault.
    """
    devices = record["devices"]
    if len(devices) > MAX_DEVICES:
        raise ValueError(f"{where}: {len(devices)} devices: at most {MAX_DEVICES} per node (gres.conf(5))")
    buses: dict[str, int] = {}
    minors: dict[int, int] = {}
    for i, dev in enumerate(devices):
        def bad(fld: str, why: str, i: int = i) -> ValueError:
            return ValueError(f"{where}: device {i}: {fld}: {why}")
        if not isinstance(dev, dict):
            raise ValueError(f"{where}: device {i}: not a JSON object with name, bus_id, minor, cpu_affinity")
        for key in ("name", "bus_id", "minor", "cpu_affinity"):
            if key not in dev:
                raise bad(key, "missing (each device needs name, bus_id, minor and cpu_affinity)")
        unknown = sorted(str(k) for k in dev if k not in _KEYS)
        if unknown:
            raise bad(visible(unknown[0]), f"unknown key (a device has {', '.join(sorted(_KEYS))})")
        name = dev["name"]
        if not isinstance(name, str) or not name.strip() or not name.isprintable() or len(name) > MAX_NAME:
            raise bad("name", f"{visible(json.dumps(name))[:60]} is not a GPU name (a non-empty string of "
                              f"printable characters, at most {MAX_NAME})")
        bus = _bus_id(dev["bus_id"], lambda why: bad("bus_id", why))
        if bus in buses:
            raise bad("bus_id", f"{bus} is also device {buses[bus]}'s: each GPU has its own")
        buses[bus] = i
        minor = dev["minor"]
        if type(minor) is not int or not 0 <= minor <= MAX_MINOR:
            raise bad("minor", f"{visible(json.dumps(minor))[:60]} is not a minor number (an integer 0 to "
                               f"{MAX_MINOR}: /dev/nvidia<minor>)")
        if minor in minors:
            raise bad("minor", f"{minor} is also device {minors[minor]}'s: each GPU has its own /dev/nvidia{minor}")
        minors[minor] = i
        aff = dev["cpu_affinity"]
        if not isinstance(aff, str):
            raise bad("cpu_affinity", f"{visible(json.dumps(aff))[:60]} is not a CPU list string such as \"0-55,112-167\"")
        try:
            parse_ranges(aff)
        except CpuTopologyError as exc:
            raise bad("cpu_affinity", str(exc)) from None
        links = dev.get("nvlinks", [])
        if not isinstance(links, list) or len(links) > FakeNvml.NVML_NVLINK_MAX_LINKS:
            raise bad("nvlinks", f"a list of at most {FakeNvml.NVML_NVLINK_MAX_LINKS} links (NVML_NVLINK_MAX_LINKS)")
        for k, link in enumerate(links):
            if (not isinstance(link, list) or len(link) != 2 or link[0] not in FakeNvml._TYPES):
                raise bad(f"nvlinks[{k}]", 'not ["gpu"|"switch", remote_bus_id]')
            _bus_id(link[1], lambda why: bad(f"nvlinks[{k}]", why))


def _bus_id(value: Any, bad: Callable[[str], ValueError]) -> str:
    """``value`` as an upper-case PCI bus id; raises ``bad(why)`` when it is not one."""
    if not isinstance(value, str) or not _BUS_ID_RE.fullmatch(value):
        raise bad(f"{visible(json.dumps(value))[:60]} is not a PCI bus id such as \"00000000:1B:00.0\"")
    return value.upper()


class FakeNvmlError(Exception):
    """Stands in for ``pynvml.NVMLError``; ``value`` is the NVML return code."""

    def __init__(self, value: int, text: str) -> None:
        super().__init__(text)
        self.value = value


@dataclass(frozen=True)
class _Pci:
    busId: bytes  # noqa: N815 - pynvml's field name


class FakeNvml:
    """pynvml-compatible object answering from a record (see module docstring)."""

    NVMLError = FakeNvmlError
    NVML_NVLINK_MAX_LINKS = 18
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
    _NOT_SUPPORTED = 3
    _TYPES = {"gpu": 0, "switch": 2}

    def __init__(self, record: dict[str, Any]) -> None:
        self.devices: list[dict[str, Any]] = list(record["devices"])
        self.initialised = False
        self.shutdowns = 0

    @classmethod
    def from_file(cls, path: str | Path) -> FakeNvml:
        """Load a record file (``{"devices": [...]}``, see tests/fixtures/nvml/): a regular file
        of at most :data:`MAX_RECORD_BYTES` (:func:`slurm_plugin.common.readfile.read_regular`: a FIFO,
        ``/dev/zero`` or a directory is refused, never read), each device checked by
        :func:`check_record`.

        Raises:
            ValueError: the file cannot be read, is not a regular file or too large, not UTF-8,
                not JSON, not a mapping with a ``devices`` list, or a device is malformed; the
                message starts with the path, e.g. ``/etc/passwd: not a recorded NVML JSON file
                (Expecting value at line 1 column 1)``.
        """
        where = visible(str(path))
        try:
            raw, _ = read_regular(path, MAX_RECORD_BYTES)
        except UnreadableFile as exc:
            raise ValueError(f"cannot read {where}: {exc.reason}"
                             + (", the most dlgres reads" if exc.too_big else "")) from None
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"{where}: not a recorded NVML JSON file (not UTF-8: byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not a recorded NVML JSON file ({exc.msg} at line {exc.lineno} "
                             f"column {exc.colno})") from None
        except RecursionError:
            raise ValueError(f"{where}: not a recorded NVML JSON file (nested too deeply)") from None
        if not isinstance(record, dict) or not isinstance(record.get("devices"), list):
            raise ValueError(f'{where}: not a recorded NVML JSON file (expected {{"devices": [...]}})')
        check_record(record, where)
        return cls(record)

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self.initialised = True

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> dict[str, Any]:  # noqa: N802
        return self.devices[i]

    def nvmlDeviceGetName(self, h: dict[str, Any]) -> str:  # noqa: N802
        return str(h["name"])

    def nvmlDeviceGetPciInfo(self, h: dict[str, Any]) -> _Pci:  # noqa: N802
        return _Pci(str(h["bus_id"]).encode())

    def nvmlDeviceGetMinorNumber(self, h: dict[str, Any]) -> int:  # noqa: N802
        return int(h["minor"])

    def nvmlDeviceGetCpuAffinity(self, h: dict[str, Any], words: int) -> list[int]:  # noqa: N802
        mask = [0] * words
        for cpu in parse_ranges(h["cpu_affinity"]):
            if cpu < 64 * words:
                mask[cpu // 64] |= 1 << (cpu % 64)
        return mask

    def _link(self, h: dict[str, Any], link: int) -> list[str]:
        links = h.get("nvlinks", [])
        if link >= len(links):
            raise FakeNvmlError(self._NOT_SUPPORTED, "Not Supported")
        return list(links[link])

    def nvmlDeviceGetNvLinkState(self, h: dict[str, Any], link: int) -> int:  # noqa: N802
        self._link(h, link)
        return self.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: dict[str, Any], link: int) -> _Pci:  # noqa: N802
        return _Pci(self._link(h, link)[1].encode())

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: dict[str, Any], link: int) -> int:  # noqa: N802
        return self._TYPES[self._link(h, link)[0]]
