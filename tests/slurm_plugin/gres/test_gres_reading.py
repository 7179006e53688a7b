"""``dlgres --check`` reads gres.conf and slurm.conf as Slurm's one config parser reads them
(src/common/parse_config.c: ``_get_next_line``, ``_parse_include_directive``, the key=value
pattern; gres.conf's keys and counts from src/common/gres.c; slurm.conf's node records from
slurm.conf(5)). Expected values are worked out by hand from those sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_plugin.gres.check import check_gres
from slurm_plugin.gres.release import Release


def _messages(text: str, **kw) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in check_gres(text, **kw)]


def test_autodetect_nvml_without_its_library_on_debian_22_05(tmp_path: Path):
    """Debian's 22.05 packages carry no gpu_nvml.so: the message says so, not "every build has it"."""
    got = _messages("AutoDetect=nvml\nName=gpu File=/dev/nvidia0\n", plugin_dirs=[str(tmp_path)],
                    release=Release("22.05", "test"))
    assert got == [(1, f"AutoDetect=nvml: this Slurm has no gpu_nvml.so (in {tmp_path}; Debian's 22.05 is built "
                       "without it): slurmd logs that the library was not found and detects nothing; give File= "
                       "lines (dlgres writes them)")]
