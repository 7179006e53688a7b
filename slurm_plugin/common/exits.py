"""The exit codes of all five commands (dlprio, dlsubmit, dlqueue, dlgres, dlcluster), one
meaning each, and :class:`CliError`, the one error a command turns into a one-line message and
its code. README.md's "Exit codes" table lists the same codes (tests/slurm_plugin/common/test_exit_codes.py checks
both ways).

Shell conventions kept: 0 success, 1 a failure the command itself reports, 2 a usage error
(argparse's own code), 128 + N the signal N that ended the command. Codes 3-8 tell apart what a
script or a systemd unit reacts to differently: Slurm not answering (retry later), Slurm
refusing (fix the request or the permissions), a name that does not exist, a holder elsewhere
(do not restart), a disk that failed (restart once it is mended), no GPU library.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class Exit(IntEnum):
    """A command's exit status (README.md's table has the code, the name and the meaning)."""

    OK = 0
    """success"""
    FAILED = 1
    """the command ran and reports a failure (gres.conf findings, a build or a write that failed, a cluster not up)"""
    BAD_INPUT = 2
    """bad usage, option, file, spec or config; one line per problem naming it; nothing done"""
    SLURM_UNREACHABLE = 3
    """Slurm could not be asked (slurmctld or slurmdbd not answering, a command missing or timing out)"""
    SLURM_REFUSED = 4
    """Slurm answered with an error (a job refused, every priority update refused, accounting disabled)"""
    NOT_FOUND = 5
    """what was named does not exist (a job the ledger does not know, no ledger yet, no such local cluster)"""
    HELD = 6
    """another dlprio holds the ledger lock or the cluster lease, or the daemon lost the lease"""
    STORAGE = 7
    """the ledger's storage failed (disk full, read-only file system)"""
    NO_GPU_LIBRARY = 8
    """NVML is not available (no NVIDIA driver or no GPU on this machine)"""
    SIGINT = 130
    """interrupted by SIGINT (Ctrl-C): 128 + 2"""
    SIGTERM = 143
    """stopped by SIGTERM: 128 + 15"""


SHORT = {
    Exit.OK: "ok", Exit.FAILED: "failed", Exit.BAD_INPUT: "bad input",
    Exit.SLURM_UNREACHABLE: "Slurm unreachable", Exit.SLURM_REFUSED: "Slurm refused",
    Exit.NOT_FOUND: "not found", Exit.HELD: "held by another dlprio",
    Exit.STORAGE: "ledger storage failed", Exit.NO_GPU_LIBRARY: "no NVML",
    Exit.SIGINT: "SIGINT", Exit.SIGTERM: "SIGTERM",
}
"""A few words per code, for ``--help`` (:func:`epilog`)."""


def epilog(codes: Iterable[Exit]) -> str:
    """The ``--help`` epilog of a command that exits with ``codes``, e.g. ``exit codes: 0 ok,
    2 bad input (all codes: README.md, Exit codes)``."""
    listed = ", ".join(f"{int(c)} {SHORT[c]}" for c in sorted(set(codes)))
    return f"exit codes: {listed} (all codes: README.md, Exit codes)"


def signalled(signum: int) -> int:
    """The shell's exit status of a command ended by signal ``signum``: 128 + ``signum``
    (:attr:`Exit.SIGINT` for 2, :attr:`Exit.SIGTERM` for 15)."""
    return 128 + signum


class CliError(Exception):
    """A domain error shown as one line ``PROG: <message>`` (one line per problem when the
    message has several) and ending the command with ``exit_code``."""

    def __init__(self, message: str, exit_code: Exit = Exit.BAD_INPUT) -> None:
        super().__init__(message)
        self.exit_code = exit_code
