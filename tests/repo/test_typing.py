"""mypy finds no error in the packages (settings: pyproject.toml, ``[tool.mypy]``), and none
under ``--strict`` in the pure policy (``prioritizer/policy/``, which ``dlprio compile`` builds
with mypyc) nor in the shared helpers it and every command import (``slurm_plugin/common/``).
./test.sh runs these with the rest of the suite. The output is shown on failure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=540)


def test_packages_type_check() -> None:
    done = _mypy()
    assert done.returncode == 0, done.stdout + done.stderr


def test_policy_type_checks_strict() -> None:
    done = _mypy("--strict", "-p", "prioritizer.policy")
    assert done.returncode == 0, done.stdout + done.stderr


def test_shared_helpers_type_check_strict() -> None:
    done = _mypy("--strict", "-p", "slurm_plugin.common")
    assert done.returncode == 0, done.stdout + done.stderr
