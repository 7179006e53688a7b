"""Every YAML file dlprio reads reports a syntax error as one line ``FILE:LINE:COL: YAML syntax
error: <problem>`` (prioritizer.yamlfile), exit 2. Expected texts are PyYAML's problem for the
input, at the position written out by hand (line 2, column 4: the second ``:`` of ``b: c: d``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.yamlfile import YamlFileError, read_yaml

TRACE = str(Path(__file__).resolve().parents[1] / "data" / "traces" / "tiresias" / "60_job.csv")
CONF = str(Path(__file__).resolve().parents[1] / "conf" / "dlprio.yaml")
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
