"""The policy is pure (docs/design.md, code rule 4): its modules import no clock, process or database."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

FORBIDDEN = {"subprocess", "sqlite3", "time", "datetime", "os", "socket", "slurm_plugin"}
#: The one module of another package the policy may import (the wording of a bad value).
ALLOWED = {"slurm_plugin.common.wording"}
ROOT = Path(__file__).resolve().parents[3] / "prioritizer" / "policy"
#: Every module of the policy package (prioritizer/policy/, its fast/ included).
PURE = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py"))
WORDING = ROOT.parents[1] / "slurm_plugin" / "common" / "wording.py"


def imported_roots(source: str) -> set[str]:
    """Top-level package names imported anywhere in ``source``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module not in ALLOWED:
                names.add(node.module.split(".")[0])
    return names


def test_the_policy_package_has_its_modules() -> None:
    assert {"decide.py", "placement.py", "gittins.py", "config.py", "model.py",
            "preemption.py", "fast/incremental.py", "fast/quiet.py"} <= set(PURE)


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_nothing_impure(module: str) -> None:
    assert imported_roots((ROOT / module).read_text()) & FORBIDDEN == set()


def test_the_shared_wording_it_imports_is_pure_too() -> None:
    assert imported_roots(WORDING.read_text()) <= {"__future__", "difflib", "collections", "typing"}


def test_the_checker_sees_imports() -> None:
    # the helper itself must catch every import form it claims to
    src = "import time\nfrom datetime import datetime\nimport os.path\ndef f():\n import sqlite3\n"
    assert imported_roots(src) >= {"time", "datetime", "os", "sqlite3"}
