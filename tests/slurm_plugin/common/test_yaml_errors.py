"""Every YAML file dlprio reads reports a syntax error as one line ``FILE:LINE:COL: YAML syntax
error: <problem>`` (slurm_plugin.common.yamlfile), exit 2. Expected texts are PyYAML's problem for the
input, at the position written out by hand (line 2, column 4: the second ``:`` of ``b: c: d``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main
from slurm_plugin.common.yamlfile import YamlFileError, read_yaml

TRACE = str(Path(__file__).resolve().parents[3] / "data" / "traces" / "tiresias" / "60_job.csv")
CONF = str(Path(__file__).resolve().parents[3] / "conf" / "dlprio.yaml")
BAD = "policy: {}\nb: c: d\n"
PROBLEM = "2:5: YAML syntax error: mapping values are not allowed here"


@pytest.mark.parametrize("argv, prefix", [
    (["simulate", "--trace", TRACE, "--config", "{f}"], ""),
    (["history", "check", "--trace", TRACE, "--config", "{f}"], ""),
    (["tune", "--trace", TRACE, "--config", "{f}", "--grid", "queues=2"], ""),
    (["tune", "--trace", TRACE, "--grid", "{f}"], ""),
    (["status", "--config", "{f}"], "config: "),
    (["once", "--dry-run", "--config", CONF, "--log-config", "{f}"], "config: log-config: "),
], ids=["simulate", "history-check", "tune-config", "tune-grid", "daemon-config", "log-config"])
def test_yaml_syntax_error_is_one_line_with_file_line_col(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          argv: list[str], prefix: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(BAD)
    rc = main([a.replace("{f}", str(f)) for a in argv])
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    assert err == f"dlprio: {prefix}{f}:{PROBLEM}\n"


@pytest.mark.parametrize("text", ["interval_s: 1%s\n", "policy: {thresholds_gpu_s: [-1%s]}\n"])
def test_integer_past_pythons_digit_limit_names_the_file(tmp_path: Path, capsys, text: str) -> None:
    """Python converts no integer of more than 4300 digits (ValueError): one line naming the
    file (was Python's advice to call sys.set_int_max_str_digits, without the file)."""
    f = tmp_path / "cfg.yaml"
    f.write_text(text % ("0" * 4400))
    assert main(["status", "--config", str(f)]) == 2
    assert capsys.readouterr().err == (f"dlprio: config: {f}: a number of more than 4,300 "
                                       "digits, more than this reader converts\n")


_BOMB = "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}" if i else "1"] * 10) + "]\n"
                for i in range(6))


@pytest.mark.parametrize("text", [
    _BOMB + "policy: {thresholds_gpu_s: *a5}\n",    # 10^6 numbers through aliases
    "interval_s: &a [*a]\n",                        # an alias inside its own anchor
    "policy: &p {thresholds_gpu_s: [1, {x: *p}]}\n",
], ids=["bomb", "cycle", "indirect-cycle"])
def test_alias_bomb_or_cycle_in_a_dlprio_file_is_refused(tmp_path: Path, capsys, text: str) -> None:
    """dlprio's files are counted like dlsubmit's specs (slurm_plugin.common.yamlfile.expanded_size):
    a bomb was walked element by element (20 s CPU for 10^7), a cycle reached the checks."""
    f = tmp_path / "cfg.yaml"
    f.write_text(text)
    assert main(["status", "--config", str(f)]) == 2
    assert capsys.readouterr().err == (
        f"dlprio: config: {f}: the document expands to more than 100,000 nodes through anchors "
        "and aliases (&name / *name); write it out or use fewer aliases\n")


def test_unclosed_flow_sequence_points_at_the_end(tmp_path: Path) -> None:
    f = tmp_path / "cfg.yaml"
    f.write_text("policy: [1\n")
    with pytest.raises(YamlFileError) as err:
        read_yaml(f)
    assert str(err.value) == (f"{f}:2:1: YAML syntax error: while parsing a flow sequence "
                              "expected ',' or ']', but got '<stream end>'")


def test_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(YamlFileError) as err:
        read_yaml(tmp_path / "none.yaml")
    assert str(err.value) == f"{tmp_path / 'none.yaml'}: cannot read (No such file or directory)"


def test_yaml_1_2_floats_are_numbers(tmp_path) -> None:
    """PyYAML (YAML 1.1) read 1e3 / 1.0e3 / 1e-9 as strings; the shared reader follows YAML
    1.2's float rule, so `thresholds_gpu_s: [1e3]` is a number, quoted "1e3" stays a string."""
    from prioritizer.policy.config import PolicyConfig
    from slurm_plugin.common.yamlfile import read_yaml

    path = tmp_path / "dlprio.yaml"
    path.write_text('policy:\n  thresholds_gpu_s: [1e3, 1.0e4]\n'
                    'x: [1e-9, -2E+2, 3, "1e3", 1e]\n')
    data = read_yaml(path)
    assert data["x"] == [1e-9, -200.0, 3, "1e3", "1e"]
    assert type(data["x"][2]) is int
    assert PolicyConfig.from_mapping(data["policy"]).thresholds_gpu_s[:2] == (1000.0, 10000.0)


def test_a_large_file_without_aliases_is_not_called_an_alias_bomb(tmp_path: Path, capsys) -> None:
    """120,000 list items written out: too large, but no alias multiplied anything, so the
    message says so (it named anchors and aliases)."""
    f = tmp_path / "cfg.yaml"
    f.write_text("policy:\n  thresholds_gpu_s:\n" + "    - 1\n" * 120_000)   # 960,000 bytes
    assert main(["status", "--config", str(f)]) == 2
    assert capsys.readouterr().err == (
        f"dlprio: config: {f}: the document has more than 100,000 nodes (keys, values and list "
        "items); split it into smaller files\n")


def test_a_document_of_many_nodes_is_refused_before_the_rest_is_parsed(tmp_path: Path,
                                                                     capsys) -> None:
    """The count stops the reader at node 100,001: the syntax error further on (the last
    ``]``) is never reached. Composed whole, a file of small items costs about 25 µs and 800
    bytes a node (a 1 MiB list of 500,000 items: 14 s and 400 MiB)."""
    f = tmp_path / "cfg.yaml"
    f.write_text("partitions: [" + "1," * 150_000 + "]]\n")   # 300 KB
    assert main(["status", "--config", str(f)]) == 2
    assert capsys.readouterr().err == (
        f"dlprio: config: {f}: the document has more than 100,000 nodes (keys, values and list "
        "items); split it into smaller files\n")
    f.write_text("partitions: [" + "1," * 90_000 + "]]\n")   # under the count: the error
    assert main(["status", "--config", str(f)]) == 2
    assert "YAML syntax error" in capsys.readouterr().err


def test_a_dlprio_file_past_1_mib_is_refused_unread(tmp_path: Path, capsys) -> None:
    """A daemon config, grid or log config is a few KiB: one past 1 MiB is refused before any
    of it is parsed (PyYAML's scanner takes about 0.6 s a MiB of one long value)."""
    f = tmp_path / "cfg.yaml"
    with open(f, "wb") as out:
        out.truncate(1024 * 1024 + 1)   # sparse: no disk
    assert main(["status", "--config", str(f)]) == 2
    assert capsys.readouterr().err == (f"dlprio: config: {f}: larger than 1048576 bytes (1 MiB), "
                                       "the most dlprio reads\n")
