"""The wheel carries every package of the three roots (a non-editable install, as in
docs/admins.md, once lacked ``prioritizer.history`` and ``prioritizer.tune``)."""

from __future__ import annotations

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
