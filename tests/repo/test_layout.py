"""The layout tests/README.md describes: every test file sits in a folder that mirrors the folder
of the code it checks (``tests/prioritizer/daemon/`` for ``prioritizer/daemon/``), or in
``tests/repo/`` or ``tests/live/``; ``tests/live/`` holds every test marked ``live`` and nothing
else; test file names are unique (pytest imports each file by its name alone: the folders have no
``__init__.py``, so that ``tests/prioritizer/`` never stands for the package ``prioritizer``).

A test is live when its module's ``pytestmark`` or one of its decorators names ``mark.live``."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
OWN = ("live", "repo")
"""Folders of tests/ that mirror no code folder."""
DATA = ("data", "fixtures", "golden", "__pycache__")
"""Folders of tests/ that hold inputs, not tests."""


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py")
                  if not set(p.relative_to(TESTS).parts[:-1]) & set(DATA))


def _names_live(node: ast.AST) -> bool:
    return "mark.live" in ast.unparse(node)


def _live_tests(path: Path) -> tuple[int, int]:
    """(live tests, all tests) among the module-level ``test_*`` functions of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module_live = any(isinstance(node, ast.Assign) and _names_live(node)
                      and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
                      for node in tree.body)
    tests = [node for node in tree.body
             if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
    live = [t for t in tests if module_live or any(_names_live(d) for d in t.decorator_list)]
    return len(live), len(tests)


def test_every_test_file_is_in_a_folder_of_the_layout() -> None:
    outside = []
    for path in _test_files():
        folder = path.parent.relative_to(TESTS)
        if folder == Path("."):
            outside.append(f"{path.name}: directly in tests/")
        elif folder.parts[0] not in OWN and not (REPO / folder).is_dir():
            outside.append(f"{path.relative_to(TESTS)}: no folder {folder}/ in the repository")
        elif folder.parts[0] in OWN and len(folder.parts) > 1:
            outside.append(f"{path.relative_to(TESTS)}: tests/{folder.parts[0]}/ has no subfolders")
    assert outside == []


def test_test_file_names_are_unique() -> None:
    names = Counter(path.name for path in _test_files())
    assert [name for name, n in names.items() if n > 1] == []


def test_live_tests_are_the_files_of_tests_live() -> None:
    misplaced = []
    for path in _test_files():
        live, tests = _live_tests(path)
        in_live = path.parent == TESTS / "live"
        if in_live and live < tests:
            misplaced.append(f"{path.relative_to(TESTS)}: {tests - live} of {tests} tests not live")
        if not in_live and live:
            misplaced.append(f"{path.relative_to(TESTS)}: {live} live tests outside tests/live/")
    assert misplaced == []


def test_the_live_check_sees_both_forms_of_the_mark(tmp_path: Path) -> None:
    marked = tmp_path / "test_marked.py"
    marked.write_text("import pytest\npytestmark = [pytest.mark.live, pytest.mark.releases]\n"
                      "def test_a(): pass\ndef test_b(): pass\ndef helper(): pass\n")
    mixed = tmp_path / "test_mixed.py"
    mixed.write_text("import pytest\n@pytest.mark.releases\n@pytest.mark.live\ndef test_a(): pass\n"
                     "@pytest.mark.parametrize('x', [1])\ndef test_b(x): pass\n")
    assert (_live_tests(marked), _live_tests(mixed)) == ((2, 2), (1, 2))
