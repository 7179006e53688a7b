"""The console scripts (slurm_plugin/common/entry.py): a Ctrl-C while a command's module loads,
or one its ``main`` lets through, ends it with one line and exit 130, never a traceback."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_plugin.common import entry
from slurm_plugin.common.exits import Exit

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("slow_to_load", "lets_it_through", "ends_fine"):
        sys.modules.pop(name, None)


def test_an_interrupt_while_the_command_loads_is_one_line_and_130(
        modules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (modules / "slow_to_load.py").write_text("raise KeyboardInterrupt\ndef main():\n    return 0\n")
    assert entry.run("dlsubmit", "slow_to_load:main") == 130 == Exit.SIGINT
    assert capsys.readouterr() == ("", "dlsubmit: interrupted\n")


def test_an_interrupt_the_command_lets_through_is_one_line_and_130(
        modules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (modules / "lets_it_through.py").write_text("def main():\n    raise KeyboardInterrupt\n")
    assert entry.run("dlcluster", "lets_it_through:main") == 130
    assert capsys.readouterr() == ("", "dlcluster: interrupted\n")


def test_the_command_s_own_exit_code_is_returned(modules: Path) -> None:
    (modules / "ends_fine.py").write_text("def main():\n    return 4\n")
    assert entry.run("dlqueue", "ends_fine:main") == 4


def test_every_console_script_goes_through_entry_to_its_command() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {name: f"slurm_plugin.common.entry:{name}"
                       for name in ("dlcluster", "dlsubmit", "dlgres", "dlprio", "dlqueue")}
    targets = {"dlsubmit": "submit.cli:main", "dlqueue": "submit.queue_cli:main",
               "dlprio": "prioritizer.cli:entry", "dlgres": "slurm_plugin.gres.cli:main",
               "dlcluster": "slurm_plugin.localcluster.cli:main"}
    for name, target in targets.items():
        called: list[tuple[str, str]] = []
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(entry, "run", lambda program, t: called.append((program, t)) or 0)
            getattr(entry, name)()
        assert called == [(name, target)]
        module, _, attribute = target.partition(":")
        assert callable(getattr(__import__(module, fromlist=[attribute]), attribute))


def test_an_error_raised_while_an_interrupt_was_handled_is_the_interrupt(
        modules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse's ``finally`` can fail in turn when the interrupt lands inside it: still one
    line and 130. An error of its own still raises."""
    (modules / "lets_it_through.py").write_text(
        "def main():\n    try:\n        raise KeyboardInterrupt\n    finally:\n"
        "        raise AttributeError('usage')\n")
    assert entry.run("dlsubmit", "lets_it_through:main") == 130
    assert capsys.readouterr() == ("", "dlsubmit: interrupted\n")
    (modules / "ends_fine.py").write_text("def main():\n    raise ValueError('a bug')\n")
    with pytest.raises(ValueError, match="a bug"):
        entry.run("dlsubmit", "ends_fine:main")
