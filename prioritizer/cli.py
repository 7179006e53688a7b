"""The ``dlprio`` command: one registry of subcommands (docs/design.md, code rule 12).

:data:`COMMANDS` lists where the :class:`~prioritizer.command.Command` objects of the daemon
(``prioritizer.daemon.cli``) and the simulator (``prioritizer.sim.cli``) live; registering one
is a single line. A subcommand named on the command line loads only its own module (a
``dlprio simulate`` sweep does not pay for importing the daemon). Exit codes:
:class:`~slurm_plugin.common.exits.Exit` (README.md's table); never a traceback for a domain error.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from prioritizer.command import CliError, Command, Exit, clean_message
from slurm_plugin.common.exits import epilog
from slurm_plugin.common.cli import ArgumentParser, quiet_on_closed_stdout

#: Every subcommand, in the order ``dlprio --help`` lists them: (name, module, attribute
#: of its Command object in that module).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("simulate", "prioritizer.sim.cli", "COMMAND"),
    ("run", "prioritizer.daemon.cli", "RUN"),
    ("once", "prioritizer.daemon.cli", "ONCE"),
    ("explain", "prioritizer.daemon.cli", "EXPLAIN"),
    ("status", "prioritizer.daemon.cli", "STATUS"),
    ("history", "prioritizer.history.cli", "COMMAND"),
    ("tune", "prioritizer.tune.cli", "COMMAND"),
    ("compile", "prioritizer.compile_cli", "COMMAND"),
)

#: The subcommands that replay traces: they import the compiled policy when a current
#: build exists (:func:`prioritizer.compiled.activate`, before their modules load); the
#: daemon's never do.
REPLAY_COMMANDS = frozenset({"simulate", "tune", "history"})


def load_command(module: str, attribute: str) -> Command:
    """The Command object ``attribute`` of ``module`` (imports the module)."""
    return getattr(importlib.import_module(module), attribute)


def build_parser(only: str | None = None) -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The top-level parser with every registered subcommand, or with just ``only`` when
    that names one (the same parse of that subcommand's arguments, fewer imports)."""
    parser = ArgumentParser(
        prog="dlprio", description="Tiresias-style priorities for Slurm GPU jobs.",
        epilog=epilog(c for c in Exit if c is not Exit.NO_GPU_LIBRARY))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands: dict[str, Command] = {}
    named = any(name == only for name, _, _ in COMMANDS)
    for name, module, attribute in COMMANDS:
        if named and name != only:
            continue
        command = load_command(module, attribute)
        commands[command.name] = command
        command.configure(sub.add_parser(command.name, help=command.help,
                                         description=command.help))
    return parser, commands


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    """Entry point of ``dlprio``; returns the exit code (see module doc)."""
    words = sys.argv[1:] if argv is None else argv
    try:
        parser, commands = build_parser(words[0] if words else None)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:   # --help, or a usage error argparse already printed
            return exc.code if isinstance(exc.code, int) else Exit.BAD_INPUT
        # an option's type= raises CliError for a bad value (prioritizer.numbers)
        return commands[args.command].run(args)
    except CliError as exc:
        return _report(exc, words)
    except KeyboardInterrupt:
        print("dlprio: interrupted", file=sys.stderr)
        return Exit.SIGINT


def entry() -> int:
    """The ``dlprio`` program (console script and ``python -m prioritizer.cli``): for a
    replay command, first the compiled policy (:func:`prioritizer.compiled.activate`), then
    :func:`main`. In-process calls of :func:`main` (tests, other tools) keep the policy
    modules they imported."""
    words = sys.argv[1:]
    if words and words[0] in REPLAY_COMMANDS:
        from prioritizer.compiled import activate
        try:
            activate(words=words)
        except CliError as exc:
            return _report(exc, words)
    return main()


def _report(exc: CliError, words: list[str]) -> int:
    """Print a CliError as ``dlprio: ...`` lines (one per config problem); its exit code."""
    for line in clean_message(str(exc), words).splitlines():
        print(f"dlprio: {line}", file=sys.stderr)
    return exc.exit_code


if __name__ == "__main__":
    sys.exit(entry())
