"""import-linter's contracts in pyproject.toml hold (``prioritizer.policy`` never imports
``slurm_plugin``), checked by running ``lint-imports`` as CI would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_lint_imports_contracts_kept() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "policy is pure" in proc.stdout and "KEPT" in proc.stdout
