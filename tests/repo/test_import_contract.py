"""import-linter's contracts in pyproject.toml hold, checked by running ``lint-imports`` as CI
would: ``prioritizer.policy`` imports nothing of Slurm, the daemon or the simulator (the shared
wording of a bad value excepted); ``slurm_plugin.common`` nothing else of the project;
``prioritizer.sim`` nothing of ``prioritizer.daemon``; ``prioritizer.forecast`` nothing of the
daemon or Slurm's commands; the layers submit > prioritizer >
slurm_plugin have no upward import; and no package's modules import each other round."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_lint_imports_contracts_kept() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 6 kept, 0 broken." in proc.stdout, proc.stdout
    for name in ("The policy is pure", "Shared helpers (slurm_plugin.common) import nothing else",
                 "The simulator never imports the daemon", "The forecast is the policy and the",
                 "Layers:", "No circles:"):
        assert name in proc.stdout, proc.stdout


def test_the_no_circles_contract_finds_a_circle(tmp_path: Path) -> None:
    # the contract type can fail: two modules of a package that import each other round
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_packages = ["pkg"]\n\n'
                      '[[tool.importlinter.contracts]]\nname = "No circles"\n'
                      'type = "acyclic_siblings"\nancestors = ["pkg"]\n')
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe), str(config)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "No circles BROKEN" in proc.stdout and "Contracts: 0 kept, 1 broken." in proc.stdout
