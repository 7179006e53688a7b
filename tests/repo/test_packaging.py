"""The wheel carries every package of the three roots (a non-editable install, as in
docs/admins.md, once lacked ``prioritizer.history`` and ``prioritizer.tune``) and the packaged
config, conf/dlprio.yaml (setup.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from setuptools import find_packages

REPO = Path(__file__).resolve().parents[2]


def test_every_package_directory_is_packaged() -> None:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set(find_packages(str(REPO), **cfg["packages"]["find"]))
    on_disk = {".".join(p.parent.relative_to(REPO).parts)
               for root in ("prioritizer", "slurm_plugin", "submit")
               for p in (REPO / root).rglob("__init__.py")}
    assert "prioritizer.history" in on_disk and "prioritizer.tune" in on_disk
    assert found == on_disk


def test_the_wheel_carries_the_packaged_config(tmp_path: Path) -> None:
    """A plain ``pip install`` (docs/admins.md step 1) reads conf/dlprio.yaml without
    /etc/dlprio/dlprio.yaml: the wheel holds the repository's copy, byte for byte, and
    ``PACKAGED_PATH`` of the installed package names it."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("conf", "prioritizer", "slurm_plugin", "submit"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    # the wheel's build_py step (what ``pip wheel`` runs, without fetching a build backend:
    # the test runs offline)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(site)],
                   cwd=src, check=True, capture_output=True, timeout=300)
    packaged = site / "prioritizer" / "conf" / "dlprio.yaml"
    assert packaged.read_bytes() == (REPO / "conf" / "dlprio.yaml").read_bytes()
    proc = subprocess.run([sys.executable, "-c", "from prioritizer import config_file as c; print(c.PACKAGED_PATH)"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)},
                          capture_output=True, text=True, check=True, timeout=60)
    assert proc.stdout.strip() == str(site / "prioritizer" / "conf" / "dlprio.yaml")
