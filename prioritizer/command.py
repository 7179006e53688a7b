"""What every ``dlprio`` subcommand is made of: :class:`Command` (name, help, argument setup,
handler returning the exit status) and :class:`CliError` (a domain error shown as one line).

Exit codes: 0 success, 1 a runtime failure the command reports, 2 bad input (usage, malformed
file, unknown name); never a traceback for a domain error.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

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
