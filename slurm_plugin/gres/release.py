"""Which Slurm release's gres.conf(5) ``dlgres --check`` applies, and the rules that differ by release.

dlgres knows the gres.conf(5) of the three releases the product supports: 22.05 (Debian
bookworm), 24.11 (trixie) and 26.05 (sid). What differs between their man pages and touches a
check (:mod:`slurm_plugin.gres.conf`, :mod:`slurm_plugin.gres.check`):

* AutoDetect: 22.05 takes nvml, rsmi, oneapi, off (its list omits oneapi, but its env-flags
  paragraph names ``AutoDetect=oneapi``, and slurmd 22.05 accepts it); 24.11 adds ``nrt``
  (``gpu_nrt.so``) and ``nvidia`` (``gpu_nvidia.so``, "No library required, but doesn't detect
  MIGs or NVlinks", sets ``nvidia_gpu_env`` as nvml does); 26.05 adds ``full`` (tries every
  mechanism in turn). slurmd logs "unknown autodetect flag" for a value its release lacks and
  ignores it.
* Flags: 24.11 adds ``explicit``; 26.05 adds ``env_uuid`` ("Requires the use of AutoDetect").
  An unknown flag is ignored. How slurmd reads Flags= over the lines of a node and name differs
  (slurmd -G of each): 22.05 compares and passes on env flags; 24.11 whole Flags= values, so a
  value without env flags leaves the line without any; 26.05 keeps the default env flags for such
  a value and compares and passes on whole values that have env flags
  (:data:`WHOLE_FLAGS_SINCE`, :data:`DEFAULT_ENV_KEPT_SINCE`).
* Cores: from 24.11 "all the cores in a socket must be specified together" (22.05 only advises
  it), sockets meaning NUMA nodes or L3 caches with ``SlurmdParameters=numa_node_as_socket`` or
  ``l3cache_as_socket``; slurmd -G of 24.11 and 26.05 takes part of a socket without a message.

Count, Type, File, MultipleFiles, Links, the mps/shard rules and ``CPUs=`` (in none of the three)
read the same in all three.

The release is found in this order (:func:`resolve`): ``--slurm-release``; else the plugin
directory (``--plugin-dir``, else slurm.conf's PluginDir, else Debian's): the
``plugin_version`` symbol every Slurm plugin exports and slurmd compares with its own version
when it loads the plugin (``SLURM_VERSION_NUM(major, minor, micro)``, read from the ELF
dynamic symbols of ``gres_gpu.so`` or ``gpu_generic.so``); else, when neither can be read,
whether ``gpu_nvidia.so`` is there (it depends on no library, so every 24.11 or later build has
it: present means 24.11, absent 22.05); else the newest rules, with a note. A version between
two known releases gets the rules of the older one (23.11 → 22.05), with a note.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from slurm_plugin.common.readfile import UnreadableFile, read_regular

RELEASES = ("22.05", "24.11", "26.05")
"""The releases whose gres.conf(5) dlgres knows, oldest first."""

AUTODETECT_SINCE = {"nvml": "22.05", "rsmi": "22.05", "oneapi": "22.05", "off": "22.05",
                    "nrt": "24.11", "nvidia": "24.11", "full": "26.05"}
ENV_FLAGS = frozenset({"nvidia_gpu_env", "amd_gpu_env", "intel_gpu_env", "opencl_env", "no_gpu_env"})
FLAG_SINCE = {**{f: "22.05" for f in ENV_FLAGS}, "countonly": "22.05", "one_sharing": "22.05",
              "all_sharing": "22.05", "explicit": "24.11", "env_uuid": "26.05"}
WHOLE_SOCKET_CORES_SINCE = "24.11"
SHOWS_FLAGS_SINCE = "24.11"
"""slurmd -G prints each GRES's flags from 24.11 on (``Flags=HAS_FILE,ENV_NVML,...``); 22.05's
prints none, so what 22.05 makes of a Flags= value that starts it is not seen."""
WHOLE_FLAGS_SINCE = "24.11"
"""From 24.11 slurmd compares and passes on whole Flags= values between the lines of a node and
name, not env flags alone (:func:`slurm_plugin.gres.check._flags_rule`)."""
DEFAULT_ENV_KEPT_SINCE = "26.05"
"""From 26.05 a Flags= value without env flags keeps the default env flags (24.11: none)."""
FILELESS_GPU_WARNING_SINCE = "24.11"
"""Every release drops a ``Name=gpu`` line without ``File`` (AutoDetect off) from the GRES it
reports: slurmd -G of 22.05 lists none (its libslurmfull holds "Removing file-less GPU %s:%s from
final GRES list", a debug line), 24.11 and 26.05 warn "Ignoring file-less GPU gpu:(null) from final
GRES list"."""
DEBIAN_GPU_PLUGINS = {"22.05": frozenset(), "24.11": frozenset({"gpu_nvidia.so", "gpu_nrt.so"}),
                      "26.05": frozenset({"gpu_nvidia.so", "gpu_nrt.so", "gpu_oneapi.so"})}
"""The AutoDetect plugins in Debian's build of each release (bookworm 22.05.8, trixie 24.11.5,
sid 26.05.5): none has ``gpu_nvml.so`` or ``gpu_rsmi.so``, and only 26.05 has ``gpu_oneapi.so``
(slurmd -G of 22.05 and 24.11 with AutoDetect=oneapi: "Configured with oneAPI, but oneAPI isn't
enabled during the build")."""

PLUGIN_FILES = ("gres_gpu.so", "gpu_generic.so")
"""Plugins read for ``plugin_version``: both are in every Slurm build with GPU support."""
MAX_PLUGIN_BYTES = 64 * 1024 * 1024
"""Largest plugin file read for its version (gres_gpu.so is about 100 KiB)."""


@dataclass(frozen=True)
class Release:
    """The rules one ``--check`` applies.

    Attributes:
        name: one of :data:`RELEASES`.
        source: how it was found, for the output (``plugin_version 24.11.5 of DIR/gres_gpu.so``).
        note: what the user should know about the choice (a guess, an unknown version), or None.
    """

    name: str
    source: str
    note: str | None = None

    def has(self, since: str) -> bool:
        """Whether a rule added in release ``since`` holds here."""
        return RELEASES.index(self.name) >= RELEASES.index(since)

    @property
    def autodetect(self) -> list[str]:
        return [v for v, since in AUTODETECT_SINCE.items() if self.has(since)]

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(f for f, since in FLAG_SINCE.items() if self.has(since))


def plugin_version(path: Path) -> tuple[int, int, int] | None:
    """(major, minor, micro) from the ``plugin_version`` symbol of a 64-bit little-endian ELF
    plugin; None when the file cannot be read or is not such a plugin."""
    try:
        data, _ = read_regular(path, MAX_PLUGIN_BYTES)
        if data[:6] != b"\x7fELF\x02\x01":
            return None
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        secs = [struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize) for i in range(shnum)]
        for _, kind, _, _, off, size, link, _ in secs:
            if kind != 11:   # SHT_DYNSYM
                continue
            names = secs[link][4]
            for k in range(off, off + size, 24):
                st_name, _, _, shndx, value = struct.unpack_from("<IBBHQ", data, k)
                end = data.index(b"\0", names + st_name)
                if data[names + st_name:end] == b"plugin_version" and 0 < shndx < shnum:
                    sec = secs[shndx]
                    v, = struct.unpack_from("<I", data, sec[4] + value - sec[3])
                    return v >> 16, (v >> 8) & 0xFF, v & 0xFF
    except (UnreadableFile, struct.error, ValueError, IndexError):
        return None
    return None


def _known(major: int, minor: int, source: str) -> Release:
    found = f"{major:02d}.{minor:02d}"
    older = [r for r in RELEASES if tuple(map(int, r.split("."))) <= (major, minor)]
    name = older[-1] if older else RELEASES[0]
    if name == found:
        return Release(name, source)
    return Release(name, source, f"Slurm {found} is not one dlgres knows ({', '.join(RELEASES)}): "
                                 f"checking with the rules of {name}")


def from_plugin_dirs(dirs: list[str]) -> Release | None:
    """The release of the first directory that holds a Slurm GPU plugin; None when none does."""
    for d in dirs:
        for name in PLUGIN_FILES:
            p = Path(d) / name
            v = plugin_version(p) if p.is_file() else None
            if v is not None:
                return _known(v[0], v[1], f"plugin_version {v[0]:02d}.{v[1]:02d}.{v[2]} of {p}")
        if any((Path(d) / name).is_file() for name in PLUGIN_FILES):
            nvidia = (Path(d) / "gpu_nvidia.so").is_file()
            return Release("24.11" if nvidia else "22.05", f"gpu_nvidia.so {'in' if nvidia else 'not in'} {d}",
                           "the plugins' version could not be read: "
                           + ("24.11 or later" if nvidia else "older than 24.11") + " judged by gpu_nvidia.so")
    return None


def resolve(given: str | None, dirs: list[str] | None) -> Release:
    """The release to check with: ``given`` (one of :data:`RELEASES`), else the plugin
    directories ``dirs``, else the newest rules with a note (see the module docstring)."""
    if given is not None:
        if given not in RELEASES:
            raise ValueError(f"--slurm-release {given!r}: dlgres knows {', '.join(RELEASES)}")
        return Release(given, "--slurm-release")
    found = from_plugin_dirs(dirs) if dirs else None
    if found is not None:
        return found
    newest = RELEASES[-1]
    return Release(newest, "default", f"no Slurm plugin found to tell the release: checking with the rules of "
                                      f"{newest}; give --slurm-release or --plugin-dir")
