"""``prioritizer.cli``'s registry: each entry names the Command its module defines, and a
subcommand named on the command line gets the same parser as in the full ``dlprio`` one."""

from __future__ import annotations

from prioritizer.cli import COMMANDS, build_parser, load_command


def test_registry_names_match_their_commands() -> None:
    for name, module, attribute in COMMANDS:
        assert load_command(module, attribute).name == name


def test_one_subcommand_parser_parses_as_the_full_one() -> None:
    argv = ["simulate", "--trace", "t.csv", "--nodes", "2", "--policy", "las", "--json"]
    full, full_commands = build_parser()
    alone, alone_commands = build_parser("simulate")
    assert sorted(full_commands) == sorted(name for name, _, _ in COMMANDS)
    assert list(alone_commands) == ["simulate"]
    assert vars(alone.parse_args(argv)) == vars(full.parse_args(argv))
