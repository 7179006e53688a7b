"""The exit codes of the five commands (slurm_plugin/common/exits.py, ``Exit``) and README.md's
one table of them agree both ways: every code of the enum is a row with its name, every row is
a code of the enum; no other exit-code table is in the docs; each command's ``--help`` names
the codes it gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slurm_plugin.common.exits import SHORT, CliError, Exit, epilog, signalled

ROOT = Path(__file__).resolve().parents[3]
ROW = re.compile(r"^\| (\d+) \| `([A-Z_]+)` \| (.+?) \| (.+?) \|$")


def readme_rows() -> dict[int, str]:
    """README.md's "Exit codes" table: code -> name."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = [ROW.match(line) for line in section.splitlines() if line.startswith("| ")]
    body = [m for m in rows if m is not None]
    # the header is the only "| " line of the table that is not a row
    assert len(body) == len(rows) - 1, section
    return {int(m[1]): m[2] for m in body}


def test_every_code_is_a_readme_row_and_every_row_a_code() -> None:
    rows = readme_rows()
    assert rows == {int(c): c.name for c in Exit}
    assert sorted(rows) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 130, 143]


def test_readme_table_check_fails_on_a_missing_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the check can fail: a README without the STORAGE row no longer matches the enum
    text = (ROOT / "README.md").read_text()
    cut = "\n".join(line for line in text.splitlines() if "| 7 | `STORAGE` |" not in line)
    (tmp_path / "README.md").write_text(cut)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert 7 not in readme_rows() and readme_rows() != {int(c): c.name for c in Exit}


def test_the_signal_codes_are_the_shells() -> None:
    assert (signalled(2), signalled(15)) == (Exit.SIGINT, Exit.SIGTERM) == (130, 143)


def test_docs_hold_no_other_exit_code_table() -> None:
    for doc in (ROOT / "docs").glob("*.md"):
        for line in doc.read_text().splitlines():
            assert not re.match(r"^\| *exit *(code|status)? *\|", line, re.I), (doc.name, line)


def test_cli_error_defaults_to_bad_input() -> None:
    assert CliError("x").exit_code is Exit.BAD_INPUT
    assert CliError("x", Exit.NOT_FOUND).exit_code == 5


def test_every_code_has_a_help_phrase() -> None:
    assert set(SHORT) == set(Exit)
    assert epilog([Exit.BAD_INPUT, Exit.OK, Exit.OK]) == (
        "exit codes: 0 ok, 2 bad input (all codes: README.md, Exit codes)")


@pytest.mark.parametrize(("module", "codes"), [
    ("submit.cli", "0 ok, 1 failed, 2 bad input, 3 Slurm unreachable, 4 Slurm refused, 130 SIGINT, 143 SIGTERM"),
    ("submit.queue_cli", "0 ok, 1 failed, 2 bad input, 3 Slurm unreachable, 4 Slurm refused"),
    ("slurm_plugin.gres.cli", "0 ok, 1 failed, 2 bad input, 8 no NVML"),
    ("slurm_plugin.localcluster.cli", "0 ok, 1 failed, 2 bad input, 3 Slurm unreachable, 4 Slurm refused, 5 not found"),
])
def test_help_names_the_codes_the_command_gives(module: str, codes: str) -> None:
    parser = __import__(module, fromlist=["x"])
    build = getattr(parser, "build_parser", None) or getattr(parser, "_parser")
    assert build().epilog == f"exit codes: {codes} (all codes: README.md, Exit codes)"


def test_dlprio_help_names_every_code_but_nvml() -> None:
    from prioritizer.cli import build_parser
    parser, _ = build_parser(None)
    assert parser.epilog is not None and "8 no NVML" not in parser.epilog
    assert parser.epilog.startswith("exit codes: 0 ok, 1 failed, 2 bad input, 3 Slurm unreachable")
    assert "6 held by another dlprio, 7 ledger storage failed, 130 SIGINT, 143 SIGTERM" in parser.epilog
