"""``dlgres --check`` against what ``slurmd -G`` of Debian's Slurm does with the same gres.conf:
22.05.8 (bookworm), 24.11.5 (trixie) and 26.05.5 (sid), each run with a minimal slurm.conf
(``AuthType=auth/none``, node ``n1``, ``Gres=gpu:2`` unless a test says otherwise) and
``File=`` paths made with ``mknod`` (char 195 N). Each docstring quotes what slurmd printed;
the expected findings follow from it. docs/admins.md has the table of all rules tried."""

from __future__ import annotations

from pathlib import Path

from slurm_plugin.gres.check import check_gres
from slurm_plugin.gres.release import Release


def _lines(text: str, release: str, **kw) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in check_gres(text, release=Release(release, "test"), **kw)]


def test_autodetect_plugin_missing_names_the_release_build(tmp_path: Path):
    """Debian's 24.11 and 26.05 have no gpu_nvml.so (slurmd -G, AutoDetect=nvml: "We were configured
    with nvml functionality, but that lib wasn't found on the system" on 24.11, "... we weren't able
    to find that lib when Slurm was configured" on 26.05), and Debian's 24.11 has no gpu_oneapi.so
    ("Configured with oneAPI, but oneAPI isn't enabled during the build"); Debian's 26.05 has it."""
    (tmp_path / "gres_gpu.so").touch()
    for value, so, release in (("nvml", "gpu_nvml.so", "24.11"), ("nvml", "gpu_nvml.so", "26.05"),
                               ("oneapi", "gpu_oneapi.so", "24.11")):
        got = _lines(f"AutoDetect={value}\nName=gpu File=/dev/nvidia0\n", release, plugin_dirs=[str(tmp_path)])
        assert got == [(1, f"AutoDetect={value}: this Slurm has no {so} (in {tmp_path}; Debian's {release} is built "
                           "without it): slurmd logs that the library was not found and detects nothing; give File= "
                           "lines (dlgres writes them)")], (value, release)
    got = _lines("AutoDetect=oneapi\nName=gpu File=/dev/nvidia0\n", "26.05", plugin_dirs=[str(tmp_path)])
    assert [m.split("; ")[1].split(")")[0] for _, m in got] == ["Debian's 26.05 has it: is this the plugin directory?"]
