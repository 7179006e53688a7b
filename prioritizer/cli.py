"""The ``dlprio`` command: one registry of subcommands (STYLE.md rule 12).

Each subcommand lives in its own module that exposes ``COMMAND`` (a :class:`Command`);
registering one is a single line in :data:`COMMAND_MODULES`. Modules are imported only when
their command runs or when help is built. Exit codes: 0 success, 1 a runtime failure the
command reports, 2 bad input (usage, malformed file, unknown name); never a traceback for a
domain error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from typing import Callable

from slurm_plugin.cli_util import quiet_on_closed_stdout

#: Modules with a ``COMMAND``; one line per subcommand.
COMMAND_MODULES: tuple[str, ...] = (
    "prioritizer.sim_cli",
    "prioritizer.daemon_cmd_run",
    "prioritizer.daemon_cmd_once",
    "prioritizer.daemon_cmd_explain",
    "prioritizer.daemon_cmd_status",
)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A domain error shown as one line ``dlprio: <message>`` with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Command:
    """A subcommand: ``configure`` adds its arguments, ``run`` returns the exit code."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The top-level parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="dlprio", description="Tiresias-style priorities for Slurm GPU jobs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands: dict[str, Command] = {}
    for module in COMMAND_MODULES:
        command: Command = importlib.import_module(module).COMMAND
        commands[command.name] = command
        command.configure(sub.add_parser(command.name, help=command.help,
                                         description=command.help))
    return parser, commands


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    """Entry point of ``dlprio``; returns the exit code (see module doc)."""
    parser, commands = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return commands[args.command].run(args)
    except CliError as exc:
        print(f"dlprio: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("dlprio: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
