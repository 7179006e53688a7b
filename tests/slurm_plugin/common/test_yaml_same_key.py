"""Two keys of one mapping that a reader takes as one: ``1:`` and
``"1":`` are the same parameter to ``dlprio tune``'s grid reader (it takes every key as text),
and PyYAML itself merges ``1:`` with ``true:`` or ``1.0:`` (equal in Python), keeping the last
value without a word. Each pair is refused naming both keys, what YAML read each as, and both
lines; exit 2. Expected texts are written out here from that rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.daemon import config as daemon_config
from prioritizer.policy.validation import ConfigError
from slurm_plugin.common.yamlfile import load

TRACE = str(Path(__file__).resolve().parents[3] / "data" / "traces" / "tiresias" / "60_job.csv")


@pytest.mark.parametrize("text, line", [
    ('1: [2]\n"1": [3]\n', "2: keys 1 (a number) and '1' (text) are one key in the same mapping "
     "(lines 1 and 2)"),
    ('"1": [2]\n\n1: [3]\n', "3: keys '1' (text) and 1 (a number) are one key in the same mapping "
     "(lines 1 and 3)"),
    ('1.5: [2]\n"1.5": [3]\n', "2: keys 1.5 (a number) and '1.5' (text) are one key in the same "
     "mapping (lines 1 and 2)"),
    ('true: [2]\n"True": [3]\n', "2: keys true (a boolean) and 'True' (text) are one key in the "
     "same mapping (lines 1 and 2)"),
    ('~: [2]\n"None": [3]\n', "2: keys null and 'None' (text) are one key in the same mapping "
     "(lines 1 and 2)"),
    ("1: [2]\ntrue: [3]\n", "2: keys 1 (a number) and true (a boolean) are one key in the same "
     "mapping (lines 1 and 2)"),
    ("2: [2]\n2.0: [3]\n", "2: keys 2 (a number) and 2.0 (a number) are one key in the same "
     "mapping (lines 1 and 2)"),
    # the hex and the decimal spelling of one number: one key, as before
    ("16: [2]\n0x10: [3]\n", "2: key '16' appears twice in the same mapping (lines 1 and 2)")])
def test_tune_grid_keys_of_one_text_are_refused_naming_both(tmp_path: Path, capsys, text: str,
                                                            line: str) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text(text)
    rc = main(["tune", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8", "--grid", str(grid)])
    assert (rc, *capsys.readouterr()) == (2, "", f"dlprio: {grid}:{line}; keep one\n")


def test_every_such_pair_is_one_line_in_file_order(tmp_path: Path, capsys) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text('knob: [4]\n1: [2]\nqueues: [2]\n"1": [3]\nknob: [8]\n')
    rc = main(["tune", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8", "--grid", str(grid)])
    assert (rc, *capsys.readouterr()) == (2, "", (
        f"dlprio: {grid}:4: keys 1 (a number) and '1' (text) are one key in the same mapping "
        "(lines 2 and 4); keep one\n"
        f"dlprio: {grid}:5: key 'knob' appears twice in the same mapping (lines 1 and 5); "
        "keep one\n"))


def test_the_daemon_config_reader_refuses_them_too(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text('policy:\n  1: 2\n  "1": 3\n')
    with pytest.raises(ConfigError) as err:
        daemon_config.load(f)
    assert str(err.value) == (f"{f}:3: keys 1 (a number) and '1' (text) are one key in the same "
                              "mapping (lines 2 and 3); keep one")


@pytest.mark.parametrize("text", ['a: 1\n"b": 2\n', "1: a\n2: b\n", '"1": a\n"01": b\n',
                                  "x: {1: a}\ny: {'1': b}\n"])
def test_keys_of_different_text_or_in_different_mappings_are_kept(text: str) -> None:
    assert len(load(text)) == 2
