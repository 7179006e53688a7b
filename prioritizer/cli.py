"""The ``dlprio`` command: one registry of subcommands (docs/design.md, code rule 12).

:data:`COMMANDS` lists the :class:`~prioritizer.command.Command` objects of the daemon
(``prioritizer.daemon.cli``) and the simulator (``prioritizer.sim.cli``); registering one is a
single line. Exit codes: 0 success, 1 a runtime failure the command reports, 2 bad input (usage,
malformed file, unknown name); never a traceback for a domain error.
"""

from __future__ import annotations

import argparse
import sys

from prioritizer.command import EXIT_USAGE, CliError, Command
from prioritizer.daemon.cli import EXPLAIN, ONCE, RUN, STATUS
from prioritizer.history.cli import COMMAND as HISTORY
from prioritizer.tune.cli import COMMAND as TUNE
from prioritizer.sim.cli import COMMAND as SIMULATE
from slurm_plugin.cli_util import ArgumentParser, quiet_on_closed_stdout

#: Every subcommand, in the order ``dlprio --help`` lists them.
COMMANDS: tuple[Command, ...] = (SIMULATE, RUN, ONCE, EXPLAIN, STATUS, HISTORY, TUNE)


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The top-level parser with every registered subcommand."""
    parser = ArgumentParser(
        prog="dlprio", description="Tiresias-style priorities for Slurm GPU jobs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands: dict[str, Command] = {}
    for command in COMMANDS:
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
        for line in str(exc).splitlines():   # a config error has one line per problem
            print(f"dlprio: {line}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("dlprio: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
