"""``dlgres --check`` by release: the gres.conf(5) rules that differ between Slurm 22.05, 24.11
and 26.05, each worked example judged under every release, and how the release is found.
Docstrings quote the man pages of the three releases (Debian bookworm, trixie, sid)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_plugin.gres import release as gres_release
from slurm_plugin.gres.check import check_gres
from slurm_plugin.gres.cli import main
from slurm_plugin.gres.release import Release, resolve
from slurm_plugin.gres.slurmconf import parse_slurm_conf
from slurm_plugin.gres.topo_cpu import CpuTopology

SHAPE = CpuTopology.from_shape(2, 8)


def _lines(text: str, release: str, **kw) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in check_gres(text, release=Release(release, "test"), **kw)]


NVIDIA = (
    "AutoDetect=nvidia\n"
    "Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-7 Flags=explicit,nvidia_gpu_env\n"
    "Name=gpu Type=h100 File=/dev/nvidia1 Cores=8-15 Flags=explicit,nvidia_gpu_env\n"
)
"""AutoDetect nvidia: "Automatically detect NVIDIA GPUs. No library required, but doesn't detect
MIGs or NVlinks. Added in Slurm 24.11." Flags explicit is in 24.11's list, not 22.05's. slurmd -G
of 24.11 and 26.05 takes the file (``Flags=Explicit,HAS_FILE,HAS_TYPE,ENV_NVML`` on both GPUs);
22.05 logs "unknown autodetect flag 'nvidia'" and ignores explicit."""

PART_SOCKET = "Name=gpu File=/dev/nvidia0 Cores=0-3\n"
"""Cores, 24.11 and 26.05: "If this option is used, all the cores in a socket* must be specified
together." 22.05: "this option should generally be used to identify all cores on some socket"."""

ENV_UUID = "Name=gpu File=/dev/nvidia0 Flags=env_uuid\n"
"""Flags env_uuid (26.05 only): "Requires the use of AutoDetect so that UUIDs are available." """

_NO_EXPLICIT = ("Flags=explicit,nvidia_gpu_env: explicit was added in Slurm 24.11; Slurm 22.05 does not know it "
                "(slurmd ignores it)")


@pytest.mark.parametrize(("text", "release", "expected"), [
    pytest.param(NVIDIA, "22.05", [
        (1, "AutoDetect=nvidia: added in Slurm 24.11; Slurm 22.05 takes nvml, rsmi, oneapi, off: slurmd logs "
            "'unknown autodetect flag' and ignores it; give File= lines (dlgres writes them)"),
        (2, _NO_EXPLICIT),
        (3, _NO_EXPLICIT),
    ], id="nvidia-22.05"),
    pytest.param(NVIDIA, "24.11", [], id="nvidia-24.11"),
    pytest.param(NVIDIA, "26.05", [], id="nvidia-26.05"),
    pytest.param(PART_SOCKET, "22.05", [], id="part-socket-22.05"),
    pytest.param(PART_SOCKET, "24.11", [
        (1, "Cores=0-3: part of socket(s) 0 (cores 0-7): gres.conf(5) of Slurm 24.11 wants all the cores of a "
            "socket given together (slurmd 24.11 starts with it, without a message)"),
    ], id="part-socket-24.11"),
    pytest.param(PART_SOCKET, "26.05", [
        (1, "Cores=0-3: part of socket(s) 0 (cores 0-7): gres.conf(5) of Slurm 26.05 wants all the cores of a "
            "socket given together (slurmd 26.05 starts with it, without a message)"),
    ], id="part-socket-26.05"),
    pytest.param(ENV_UUID, "22.05", [
        (1, "Flags=env_uuid: env_uuid was added in Slurm 26.05; Slurm 22.05 does not know it (slurmd ignores it)"),
    ], id="env-uuid-22.05"),
    pytest.param(ENV_UUID, "24.11", [   # slurmd -G 24.11: Flags=HAS_FILE, no ENV_* flag
        (1, "Flags=env_uuid: env_uuid was added in Slurm 26.05; Slurm 24.11 does not know it (slurmd ignores it)"),
        (1, "Flags=env_uuid has no env flag: slurmd 24.11 then sets no GPU variable (CUDA_VISIBLE_DEVICES and the "
            "like) for this line; add nvidia_gpu_env (or the vendor's)"),
    ], id="env-uuid-24.11"),
    pytest.param(ENV_UUID, "26.05", [
        (1, "Flags=env_uuid without AutoDetect on this node: slurmd 26.05 has no UUID to give (it warns "
            "'Flags=env_uuid set but no GPU UUID available for device /dev/nvidia0. Falling back to numeric "
            "indices.'); set AutoDetect=nvml or nvidia, or drop the flag"),
    ], id="env-uuid-26.05"),
    pytest.param("AutoDetect=nvml\n" + ENV_UUID, "26.05", [], id="env-uuid-autodetect-26.05"),
])
def test_the_same_gres_conf_under_each_release(text: str, release: str, expected: list[tuple[int, str]]):
    assert _lines(text, release, shape=SHAPE) == expected


@pytest.mark.parametrize(("value", "since"), [("nrt", "24.11"), ("nvidia", "24.11"), ("full", "26.05")])
def test_autodetect_values_by_release(value: str, since: str):
    """AutoDetect lists: 22.05 nvml, off, rsmi (oneapi in its env-flags paragraph); 24.11 adds nrt
    and nvidia; 26.05 adds full."""
    text = f"AutoDetect={value}\nName=gpu File=/dev/nvidia0\n"
    for release in gres_release.RELEASES:
        got = _lines(text, release)
        if Release(release, "test").has(since):
            assert got == [], (release, got)
        else:
            assert [(n, m.split(";")[0]) for n, m in got] == [(1, f"AutoDetect={value}: added in Slurm {since}")]


def test_autodetect_nvidia_needs_gpu_nvidia_so(tmp_path: Path):
    """24.11's gpu_nvidia plugin is what AutoDetect=nvidia loads: a plugin directory without it
    detects nothing."""
    (tmp_path / "gres_gpu.so").touch()
    text = "AutoDetect=nvidia\nName=gpu File=/dev/nvidia0\n"
    got = _lines(text, "24.11", plugin_dirs=[str(tmp_path)])
    assert [(n, m.split(" (")[0]) for n, m in got] == [(1, "AutoDetect=nvidia: this Slurm has no gpu_nvidia.so")]
    (tmp_path / "gpu_nvidia.so").touch()
    assert _lines(text, "24.11", plugin_dirs=[str(tmp_path)]) == []


def test_env_flags_are_compared_before_autodetect():
    """"AutoDetect=nvml or AutoDetect=nvidia will set nvidia_gpu_env" (24.11), but slurmd compares
    the lines' env flags as it reads them, before AutoDetect: slurmd -G of 24.11 and 26.05 stops on
    ``AutoDetect=nvidia``, a gpu line without Flags, then one with ``Flags=nvidia_gpu_env`` or
    ``Flags=amd_gpu_env`` ("Flags (nvidia_gpu_env) does not match env flags for previous GRES of same
    node and name")."""
    for flag in ("nvidia_gpu_env", "amd_gpu_env"):
        text = f"AutoDetect=nvidia\nName=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1 Flags={flag}\n"
        for release in ("24.11", "26.05"):
            assert [(n, m.split(" for ")[0]) for n, m in _lines(text, release)] == [
                (3, f"Flags={flag}: not the same as line 2's default env flags (no Flags=)")], (flag, release)


def test_autodetect_nvidia_does_not_see_mig_devices():
    """AutoDetect nvidia "doesn't detect MIGs"; MultipleFiles is "for a card with Multi-Instance GPU"."""
    text = "AutoDetect=nvidia\nName=gpu MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21\n"
    got = _lines(text, "24.11")
    assert len(got) == 1 and got[0][0] == 2 and "does not detect MIGs" in got[0][1], got


def test_whole_sockets_follow_slurmd_parameters():
    """Cores (24.11): "*Sockets may be substituted for NUMA nodes with
    SlurmdParameters=numa_node_as_socket"; dlgres does not know those nodes, so it says nothing."""
    conf = parse_slurm_conf("GresTypes=gpu\nSlurmdParameters=config_overrides,numa_node_as_socket\n"
                            "NodeName=n01 Gres=gpu:1\n")
    assert conf.socket_as == "numa_node_as_socket"
    assert _lines(PART_SOCKET, "24.11", shape=SHAPE, slurm=conf) == []
    assert _lines(PART_SOCKET, "24.11", shape=SHAPE, slurm=parse_slurm_conf("GresTypes=gpu\nNodeName=n01 Gres=gpu:1\n"))


# --- which release ------------------------------------------------------------------------------

def test_release_from_gpu_nvidia_so_when_the_version_cannot_be_read(tmp_path: Path):
    (tmp_path / "gres_gpu.so").write_bytes(b"not an ELF file")
    assert resolve(None, [str(tmp_path)]).name == "22.05"
    (tmp_path / "gpu_nvidia.so").touch()
    got = resolve(None, [str(tmp_path)])
    assert got.name == "24.11" and got.note is not None and "gpu_nvidia.so" in got.note


def test_release_given_wins_and_nothing_found_means_newest_with_a_note(tmp_path: Path):
    assert resolve("22.05", [str(tmp_path)]) == Release("22.05", "--slurm-release")
    got = resolve(None, [str(tmp_path)])
    assert got.name == "26.05" and got.note is not None and "--slurm-release" in got.note


def test_a_version_between_releases_takes_the_older_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "gres_gpu.so").touch()
    monkeypatch.setattr(gres_release, "plugin_version", lambda path: (23, 11, 4))
    got = resolve(None, [str(tmp_path)])
    assert got.name == "22.05" and got.note is not None and "23.11" in got.note


def test_cli_judges_one_file_under_two_releases(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    conf = tmp_path / "gres.conf"
    conf.write_text(NVIDIA)
    shape = ["--sockets", "2", "--cores-per-socket", "8"]
    assert main(["--check", str(conf), "--slurm-release", "24.11", *shape, "--plugin-dir", str(tmp_path)]) == 1
    assert "no gpu_nvidia.so" in capsys.readouterr().out
    (tmp_path / "gpu_nvidia.so").touch()
    assert main(["--check", str(conf), "--slurm-release", "24.11", *shape, "--plugin-dir", str(tmp_path)]) == 0
    assert main(["--check", str(conf), "--slurm-release", "22.05", *shape, "--json"]) == 1
    out = capsys.readouterr().out
    doc = json.loads(out[out.index('{\n "file"'):])
    assert (doc["release"], doc["release_from"], len(doc["findings"])) == ("22.05", "--slurm-release", 3)


def test_cli_notes_the_guess(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    conf = tmp_path / "gres.conf"
    conf.write_text("Name=gpu File=/dev/nvidia0\n")
    assert main(["--check", str(conf), "--plugin-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().err.startswith("dlgres: note: no Slurm plugin found to tell the release")
