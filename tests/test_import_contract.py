"""import-linter's contracts in pyproject.toml hold, checked by running ``lint-imports`` as CI
would: ``prioritizer.policy`` imports nothing of Slurm, the daemon or the simulator;
``prioritizer.sim`` nothing of ``prioritizer.daemon``; and the layers submit > prioritizer >
slurm_plugin have no upward import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_lint_imports_contracts_kept() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 3 kept, 0 broken." in proc.stdout, proc.stdout
    for name in ("The policy is pure", "The simulator never imports the daemon", "Layers:"):
        assert name in proc.stdout, proc.stdout
