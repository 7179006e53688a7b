"""Every ``dlprio simulate`` and ``dlsubmit ... --dry-run`` command that README.md and docs/*.md
show in a fenced block runs as written from the repository root of a plain clone.

The commands are read from the files at collection time (continuation lines joined, ``#``
comments dropped; usage synopses with ``[...]`` are not commands). Each runs with the installed
entry point, in a temporary directory whose entries link to the checkout's top level, so that
relative paths resolve exactly as from the repository root while outputs (``--plot jct.png``)
land outside the checkout. Commands on a whole trace (Philly, ITP) take minutes each and are
marked ``slow``: ``./test.sh`` and CI run them; ``-m "not slow"`` leaves them out of a quick pass.
A command on a trace the reader makes first (``dlprio history export`` writes ``history.csv``,
docs/history.md) is not collected: tests/live/test_history_live.py runs that walk-through.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*```")


def fenced_commands(path: Path) -> list[tuple[int, list[str]]]:
    """(line, argv) of each dlprio simulate / dlsubmit --dry-run command in the file's fenced
    blocks (those of shell or no language; a ```python or ```yaml block holds no command); the
    line is where the command starts (1-based)."""
    found: list[tuple[int, list[str]]] = []
    inside, shell, pending, start = False, True, "", 0
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            inside, pending = not inside, ""
            shell = line.strip().removeprefix("```") in ("", "bash", "sh", "shell", "console")
            continue
        if not inside or not shell:
            continue
        if not pending:
            start = no
        pending += line.strip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        argv, pending = shlex.split(pending, comments=True), ""
        if any(a.startswith("[") or "|" in a for a in argv):
            continue  # a usage synopsis, not a command
        if argv[:2] == ["dlprio", "simulate"] or (argv[:1] == ["dlsubmit"] and "--dry-run" in argv):
            found.append((start, argv))
    return found


def _cases() -> list:
    cases = []
    for path in DOCS:
        for line, argv in fenced_commands(path):
            trace = argv[argv.index("--trace") + 1] if "--trace" in argv else ""
            if trace and not (ROOT / trace).is_file():
                continue  # the reader's own file (``history.csv`` of docs/history.md)
            slow = trace != "" and not trace.startswith("data/traces/tiresias/")
            cases.append(pytest.param(argv, id=f"{path.relative_to(ROOT)}:{line}",
                                      marks=[pytest.mark.slow] if slow else []))
    return cases


CASES = _cases()


def test_the_readme_shows_both_kinds() -> None:
    readme = [argv[0] for _, argv in fenced_commands(ROOT / "README.md")]
    assert readme.count("dlprio") >= 3 and readme.count("dlsubmit") >= 3


@pytest.mark.parametrize("argv", CASES)
def test_command_runs_as_written(argv: list[str], tmp_path: Path) -> None:
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "out"):
            (tmp_path / entry.name).symlink_to(entry)
    proc = subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    if argv[0] == "dlsubmit":
        assert proc.stdout.startswith("#!/bin/bash\n#SBATCH ")
        return
    policies = argv[argv.index("--compare") + 1].split(",") if "--compare" in argv else None
    baseline = argv[argv.index("--baseline") + 1] if "--baseline" in argv else "fifo-fit"
    if policies and len(policies) > 1 and baseline not in policies:
        policies.append(baseline)   # replayed too, for the per-window comparison
    if "--json" in argv:
        rows = json.loads(proc.stdout)
        assert [r["policy"] for r in rows] == policies
    elif policies:
        firsts = [ln.split()[0] for ln in proc.stdout.splitlines() if ln.strip()]
        assert all(p in firsts for p in policies), proc.stdout
    if "--plot" in argv:
        png = tmp_path / argv[argv.index("--plot") + 1]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
