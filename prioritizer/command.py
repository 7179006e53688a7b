"""What every ``dlprio`` subcommand is made of: :class:`Command` (name, help, argument setup,
handler returning the exit status); :class:`CliError` (a domain error shown as one line) is
the one of every command.

Exit codes: :class:`~slurm_plugin.common.exits.Exit` (README.md's table); never a traceback for
a domain error.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

from slurm_plugin.common.cli import visible
from slurm_plugin.common.exits import CliError, Exit

__all__ = ["CliError", "Command", "Exit", "clean_message"]


def clean_message(message: str, words: list[str]) -> str:
    """A CliError message safe to print: each command-line word (or ``--opt=`` value) that
    holds control characters is replaced by :func:`~slurm_plugin.common.cli.visible` of it
    wherever the message quotes it, then any control character left (one in a derived path)
    is escaped too; the message's own line breaks (one line per config problem) are kept."""
    parts = set(words) | {w.partition("=")[2] for w in words if w.startswith("--")}
    for word in sorted((w for w in parts if w and not w.isprintable()), key=len, reverse=True):
        message = message.replace(word, visible(word))
    return "".join(c if c.isprintable() or c == "\n" else visible(c) for c in message)


@dataclass(frozen=True)
class Command:
    """A subcommand: ``configure`` adds its arguments, ``run`` returns the exit code."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
