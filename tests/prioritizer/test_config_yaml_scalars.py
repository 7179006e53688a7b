"""A name in dlprio.yaml that YAML 1.1 does not read as text:
``lease_name: no`` is the boolean false to PyYAML, ``lease_name: 123`` a number, an empty value
null. Every text key, every item of a name list and every key taking one of a few names says
what YAML made of the value and how to quote it, one line each, exit 2. Expected texts are
written out here from that rule."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.daemon import config as daemon_config
from prioritizer.daemon.config import DaemonConfig
from prioritizer.policy.validation import ConfigError

#: every DaemonConfig key whose value is one string
TEXT_KEYS = ("ledger_path", "snapshot_path", "metrics_addr", "gittins_samples", "lease_name")
#: every DaemonConfig key whose value is a list of names
NAME_LISTS = ("partitions", "queue_partitions", "exempt_partitions", "exempt_accounts")


def _errors(tmp_path: Path, text: str) -> list[str]:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        daemon_config.load(f)
    return [line.removeprefix(f"{f}: ") for line in str(err.value).splitlines()]


def test_the_key_lists_here_are_every_text_key_of_the_daemon_config() -> None:
    """A text key added later is in these tests too (its declared base type is str)."""
    hints = typing.get_type_hints(DaemonConfig, include_extras=True)

    def base(tp: typing.Any) -> typing.Any:
        return base(typing.get_args(tp)[0]) if typing.get_origin(tp) is typing.Annotated else tp

    fields = [f.name for f in dataclasses.fields(DaemonConfig)]
    assert [n for n in fields if base(hints[n]) is str] == list(TEXT_KEYS)
    assert [n for n in fields if typing.get_origin(base(hints[n])) is tuple] == list(NAME_LISTS)


@pytest.mark.parametrize("key", TEXT_KEYS)
@pytest.mark.parametrize("written, reading, example, got", [
    ("no", "the boolean false", "no", "False"), ("off", "the boolean false", "no", "False"),
    ("FALSE", "the boolean false", "no", "False"), ("yes", "the boolean true", "yes", "True"),
    ("On", "the boolean true", "yes", "True"), ("true", "the boolean true", "yes", "True"),
    ("123", "a number", "123", "123"), ("0x1f", "a number", "31", "31"),
    ("1_000", "a number", "1000", "1000"), ("1.5", "a number", "1.5", "1.5"),
    ("-7", "a number", "-7", "-7")])
def test_a_text_key_yaml_read_as_a_boolean_or_number_says_to_quote_it(
        tmp_path: Path, key: str, written: str, reading: str, example: str, got: str) -> None:
    assert _errors(tmp_path, f"{key}: {written}\n") == [
        f'{key}: expected a string, but YAML read the value as {reading}; quote it as written, '
        f'e.g. {key}: "{example}" (got {got})']


@pytest.mark.parametrize("key", TEXT_KEYS)
@pytest.mark.parametrize("written", ["", "~", "null", "Null"])
def test_a_text_key_left_empty_says_to_write_it_or_leave_it_out(tmp_path: Path, key: str,
                                                                 written: str) -> None:
    assert _errors(tmp_path, f"{key}: {written}\n") == [
        f"{key}: expected a string, but YAML read the value as null (an empty value, ~ or null); "
        "write the text in quotes, or leave the key out for its default (got None)"]


@pytest.mark.parametrize("key", NAME_LISTS)
def test_a_name_list_item_yaml_read_as_a_boolean_or_number_says_to_quote_it(
        tmp_path: Path, key: str) -> None:
    assert _errors(tmp_path, f"{key}: [gpu, no, 7, 'ok', on]\n") == [
        f'{key}[1]: expected a string, but YAML read the value as the boolean false; quote it as '
        f'written, e.g. {key}: ["no"] (got False)',
        f'{key}[2]: expected a string, but YAML read the value as a number; quote it as written, '
        f'e.g. {key}: ["7"] (got 7)',
        f'{key}[4]: expected a string, but YAML read the value as the boolean true; quote it as '
        f'written, e.g. {key}: ["yes"] (got True)']


def test_quoted_the_same_words_are_names(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text('lease_name: "no"\nmetrics_addr: "127.0.0.1"\nexempt_accounts: ["7", "off"]\n')
    cfg = daemon_config.load(f)
    assert (cfg.lease_name, cfg.exempt_accounts) == ("no", ("7", "off"))


@pytest.mark.parametrize("text, line", [
    ("mode: off\n", "mode: must be 'priority' or 'partition' (got False, YAML's reading of an "
     "unquoted no/off/false)"),
    ("log_format: yes\n", "log_format: must be 'text' or 'json' (got True, YAML's reading of an "
     "unquoted yes/on/true)"),
    ("priority_field: 1\n", "priority_field: must be 'site_factor' or 'priority' (got 1, a number "
     "to YAML)"),
    ("policy:\n  policy: no\n", "policy.policy: must be 'tiresias-las', 'tiresias-gittins', "
     "'las', 'fifo', 'fifo-fit' or 'srtf' (got False, YAML's reading of an unquoted no/off/false)"),
    ("mode:\n", "mode: must be 'priority' or 'partition' (got None, YAML's reading of an empty "
     "value, ~ or null)")])
def test_a_key_of_a_few_names_says_what_yaml_read(tmp_path: Path, text: str, line: str) -> None:
    assert _errors(tmp_path, text) == [line]


def test_a_number_past_what_python_writes_is_still_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        DaemonConfig(lease_name=10**5000)   # type: ignore[arg-type]
    assert str(err.value) == (
        'lease_name: expected a string, but YAML read the value as a number; quote it as '
        'written, e.g. lease_name: "123" (got a whole number of over 4,000 digits)')


def test_dlprio_status_stops_at_lease_name_no(tmp_path: Path, capsys) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(f"ledger_path: {tmp_path / 'l.sqlite'}\nlease_name: no\n")
    assert main(["status", "--config", str(f)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f'dlprio: config: {f}: lease_name: expected a string, but YAML read '
                              'the value as the boolean false; quote it as written, e.g. '
                              'lease_name: "no" (got False)\n')
    assert not (tmp_path / "l.sqlite").exists()
