"""A recorded fake of the pynvml calls ``dlgres`` makes, for machines without a GPU.

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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_plugin.topo_cpu import parse_ranges


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
        """Load a record file (``{"devices": [...]}``, see tests/fixtures/nvml/).

        Raises:
            OSError: the file cannot be read (its message names the file).
            ValueError: not UTF-8, not JSON, or not a mapping with a ``devices`` list; the
                message starts with the path, e.g. ``/etc/passwd: not a recorded NVML JSON
                file (Expecting value at line 1 column 1)``.
        """
        try:
            record = json.loads(Path(path).read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not a recorded NVML JSON file (not UTF-8: byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a recorded NVML JSON file ({exc.msg} at line {exc.lineno} "
                             f"column {exc.colno})") from None
        if not isinstance(record, dict) or not isinstance(record.get("devices"), list):
            raise ValueError(f'{path}: not a recorded NVML JSON file (expected {{"devices": [...]}})')
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
