"""scripts/venv.sh, the virtualenv step of scripts/setup.sh: the venv is made with Debian's
/usr/bin/python3, and one whose interpreter other users cannot run (e.g. pyenv's under /root,
mode 700) is made again, with a line saying why. Runs the shell functions alone (no pip)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from submit_helpers import REPO

SYSTEM_PYTHON = os.path.realpath("/usr/bin/python3")


def sh(script: str, cwd: Path) -> str:
    proc = subprocess.run(["bash", "-c", f". {REPO / 'scripts' / 'venv.sh'}; {script}"], cwd=cwd,
                          capture_output=True, text=True, check=True)
    return proc.stdout


def fake_venv(tmp_path: Path, interpreter: str) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(interpreter)
    return venv


def private_interpreter(tmp_path: Path) -> Path:
    """An interpreter in a directory only its owner may enter, as pyenv's under /root."""
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    exe = home / "bin" / "python3"
    exe.write_bytes(Path(SYSTEM_PYTHON).read_bytes())
    exe.chmod(0o755)
    home.chmod(0o700)
    return exe


def test_a_venv_on_a_root_only_interpreter_is_named_with_the_directory_that_blocks(
        tmp_path: Path) -> None:
    exe = private_interpreter(tmp_path)
    venv = fake_venv(tmp_path, str(exe))
    assert sh(f"venv_problem {venv}", tmp_path) == (
        f"its interpreter {exe} is not executable by other users: {tmp_path / 'home'} (mode 700)\n")
    assert sh(f"venv_problem {fake_venv(tmp_path / 'ok', '/usr/bin/python3')}", tmp_path) == ""
    gone = fake_venv(tmp_path / "gone", str(tmp_path / "nowhere" / "python3"))
    assert sh(f"venv_problem {gone}", tmp_path) == (
        f"its interpreter {tmp_path / 'nowhere' / 'python3'} is not executable by other users: "
        f"{tmp_path / 'nowhere' / 'python3'} (missing)\n")


def test_ensure_venv_makes_it_again_with_the_system_interpreter(tmp_path: Path) -> None:
    exe = private_interpreter(tmp_path)
    venv = fake_venv(tmp_path, str(exe))
    out = sh(f"ensure_venv setup.sh {venv} --without-pip", tmp_path)
    assert out == (f"setup.sh: {venv}: its interpreter {exe} is not executable by other users: "
                   f"{tmp_path / 'home'} (mode 700); making it again with /usr/bin/python3\n")
    assert os.path.realpath(venv / "bin" / "python") == SYSTEM_PYTHON
    # a usable venv is left alone, silently
    (venv / "keep").write_text("")
    assert sh(f"ensure_venv setup.sh {venv} --without-pip", tmp_path) == ""
    assert (venv / "keep").exists()


def test_ensure_venv_ignores_the_python3_first_on_path(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "python3").write_text("#!/bin/sh\necho wrong python >&2; exit 9\n")
    (shim / "python3").chmod(0o755)
    sh(f"PATH={shim}:$PATH ensure_venv setup.sh {tmp_path / 'v'} --without-pip", tmp_path)
    assert os.path.realpath(tmp_path / "v" / "bin" / "python") == SYSTEM_PYTHON


def test_setup_sh_makes_the_venv_through_ensure_venv() -> None:
    lines = (REPO / "scripts" / "setup.sh").read_text().splitlines()
    assert ". scripts/venv.sh" in lines and "ensure_venv setup.sh .venv" in lines
    assert not [line for line in lines if "python3 -m venv" in line]


def test_setup_sh_accepts_each_debian_release_the_cluster_supports() -> None:
    """setup.sh's platform check names the same Debian releases, with the same Slurm, as
    dlcluster's (rootfs.HOST_RELEASES): Debian 13 is not turned away before `dlcluster up`."""
    import re

    from slurm_plugin.localcluster import rootfs
    text = (REPO / "scripts" / "setup.sh").read_text()
    accepted = dict(re.findall(r"^\s*debian/(\d+)\) host_slurm=([\d.]+) ;;$", text, re.M))
    assert accepted == rootfs.HOST_RELEASES
