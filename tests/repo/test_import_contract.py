"""import-linter's contracts in pyproject.toml hold, checked by running ``lint-imports`` as CI
would: ``prioritizer.policy`` imports nothing of Slurm, the daemon or the simulator (the shared
wording of a bad value excepted); ``slurm_plugin.common`` nothing else of the project;
``prioritizer.sim`` nothing of ``prioritizer.daemon``; ``prioritizer.forecast`` nothing of the
daemon or Slurm's commands; the rules (``prioritizer.policy`` outside ``fast/``) and the daemon
nothing of the replay speed-ups ``prioritizer.policy.fast``; the layers submit > prioritizer >
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
    assert "Contracts: 8 kept, 0 broken." in proc.stdout, proc.stdout
    for name in ("The policy is pure", "The rules (prioritizer.policy but .fast) never import",
                 "The daemon never imports the replay speed-ups",
                 "Shared helpers (slurm_plugin.common) import nothing else",
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


def test_the_rules_contract_finds_a_rule_importing_the_speed_ups(tmp_path: Path) -> None:
    # pyproject's own contract, over a copy of the layout: a rule module (policy/rule.py)
    # that imports a module of policy/fast/ breaks it; fast/ importing the rules does not
    text = (ROOT / "pyproject.toml").read_text()
    block = text.split('name = "The rules (prioritizer.policy but .fast)', 1)[1].split("\n\n", 1)[0]
    pkg = tmp_path / "prioritizer"
    (pkg / "policy" / "fast").mkdir(parents=True)
    for init in (pkg, pkg / "policy", pkg / "policy" / "fast"):
        (init / "__init__.py").write_text("")
    (pkg / "policy" / "rule.py").write_text("X = 1\n")
    (pkg / "policy" / "fast" / "quick.py").write_text("from prioritizer.policy import rule\n")
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_packages = ["prioritizer"]\n\n'
                      '[[tool.importlinter.contracts]]\nname = "The rules (prioritizer.policy but .fast)'
                      + block + "\n")
    exe = Path(sys.executable).with_name("lint-imports")

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(exe), str(config)], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120,
                              env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    kept = run()
    assert kept.returncode == 0 and "Contracts: 1 kept, 0 broken." in kept.stdout, kept.stdout
    (pkg / "policy" / "rule.py").write_text("from prioritizer.policy.fast import quick\n")
    broken = run()
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "prioritizer.policy.rule -> prioritizer.policy.fast.quick" in broken.stdout, broken.stdout
