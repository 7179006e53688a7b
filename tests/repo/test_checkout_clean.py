"""Nothing the documented commands or the tests run writes into the checkout: the docs' commands
write their outputs outside it, ``.gitignore`` covers what a user's run there writes, and every
job a test submits names its ``--output`` (Slurm's default ``slurm-N.out`` lands in the
directory the test runs in; tests/conftest.py also checks the checkout after each module)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from test_docs_commands import DOCS, fenced_commands

ROOT = Path(__file__).resolve().parents[2]
OUTPUT_FLAGS = ("--plot", "--jobs-csv", "--output", "-o")


def test_documented_commands_write_outside_the_checkout() -> None:
    inside = []
    for path in DOCS:
        for line, argv in fenced_commands(path):
            for flag, value in zip(argv, argv[1:]):
                if flag in OUTPUT_FLAGS and not (value.startswith(("/", "out/")) or value == "-"):
                    inside.append(f"{path.relative_to(ROOT)}:{line}: {flag} {value}")
    assert inside == []


def test_gitignore_covers_what_runs_in_the_checkout_write() -> None:
    written = ["jct.png", "grid.png", "history.csv", "best.yaml", "slurm-42.out", "out/x.png"]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *written], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.stdout.split() == written


def _submits_without_output(path: Path) -> list[str]:
    """``client.submit(...)`` calls (any receiver named ``client`` or ``c``: a SlurmClient) with
    no ``--output`` or ``--chdir`` in the call or in the function around it."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    found = []

    def visit(node: ast.AST, around: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            around = ast.get_source_segment(source, node) or ""
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "submit"
                and ast.unparse(node.func.value).split(".")[-1] in ("client", "c")):
            text = (ast.get_source_segment(source, node) or "") + around
            if "--output" not in text and "--chdir" not in text:
                found.append(f"{path.name}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            visit(child, around)

    visit(tree, "")
    return found


def test_every_job_the_tests_submit_names_its_output() -> None:
    found = [hit for path in sorted((ROOT / "tests").rglob("*.py"))
             for hit in _submits_without_output(path)]
    assert found == []
