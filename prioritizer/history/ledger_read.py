"""The daemon's ledger read for ``dlprio history export|check --ledger``: facts per job and a cycle time.

Opened read-only (:class:`prioritizer.daemon.ledger.Ledger`); a missing file, a non-ledger or a
damaged cell is one :class:`CliError` line naming ``--ledger``, the row and the column (exit 2).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

from prioritizer.command import CliError
from prioritizer.daemon.ledger import Ledger
from prioritizer.history.export import LedgerFacts
from slurm_plugin.common.cli import visible


def ledger_facts(path: str) -> dict[int, LedgerFacts]:
    """Per job: preemptions the daemon made and signal→requeue seconds (read-only open).

    Raises:
        CliError: the file is missing or not a ledger (exit 2).
    """
    with _open_ledger(path) as ledger:
        out = {}
        for row in ledger.jobs():
            where = f"jobs row job_id={row.job_id!r}"
            _ledger_value(path, where, "preemptions", row.preemptions, integer=True)
            intents = ledger.intents(row.job_id)
            for i in intents:
                for column in ("signal_at", "requeue_at"):
                    _ledger_value(path, f"intents row id={i.id!r}", column, getattr(i, column),
                                  optional=True)
            spans = [i.requeue_at - i.signal_at for i in intents
                     if i.signal_at is not None and i.requeue_at is not None]
            out[row.job_id] = LedgerFacts(row.preemptions, sum(max(s, 0.0) for s in spans),
                                          any(i.signal for i in intents),
                                          row.gpus if isinstance(row.gpus, int) else 0)
        return out


def cycle_time(path: str) -> float | None:
    """One of the daemon's cycle times (epoch s) from its ledger (read-only): when it created
    its first preemption intent (a cycle's moment), else its last observation; None if the
    ledger has neither.

    Raises:
        CliError: the file is missing or not a ledger (exit 2).
    """
    with _open_ledger(path) as ledger:
        created = [_ledger_value(path, f"intents row id={i.id!r}", "created", i.created)
                   for row in ledger.jobs() for i in ledger.intents(row.job_id)]
        if created:
            return min(created)
        raw = ledger.meta("observed_at")
        return _ledger_value(path, "meta", "observed_at", _as_number(raw) if raw else None,
                             optional=True)


@contextlib.contextmanager
def _open_ledger(path: str) -> Iterator[Ledger]:
    """The ledger opened read-only; a missing file, a directory or a non-ledger is CliError
    ``--ledger PATH: <reason>`` (exit 2, one line)."""
    shown_path = visible(path)
    if os.path.isdir(path):
        raise CliError(f"--ledger {shown_path}: is a directory; give the daemon's ledger file")
    if not os.path.exists(path):
        raise CliError(f"--ledger {shown_path}: no such file")
    try:
        with Ledger(path, readonly=True) as ledger:
            yield ledger
    except (OSError, sqlite3.Error) as exc:
        reason = str(exc).removeprefix(f"{path}: ").removeprefix(f"{path}:")
        raise CliError(f"--ledger {shown_path}: {visible(reason)}") from None


def _as_number(raw: object) -> object:
    """A meta value (stored as text) as a float when it reads as one, else as it is."""
    try:
        return float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return raw


def _ledger_value(path: str, where: str, column: str, value: object, *, integer: bool = False,
                  optional: bool = False) -> Any:
    """``value`` of a ledger cell when it is a finite number >= 0 (a whole one with
    ``integer``; None with ``optional``). Raises CliError naming the ledger, row and column."""
    if value is None and optional:
        return None
    kinds = (int,) if integer else (int, float)
    if (isinstance(value, bool) or not isinstance(value, kinds)
            or not math.isfinite(value) or value < 0):
        rule = "a whole number >= 0" if integer else "a finite number >= 0 (epoch s)"
        raise CliError(f"--ledger {visible(path)}: {where}: {column} = {visible(repr(value))} is "
                       f"not {rule}; the ledger is damaged (restore it, or export without "
                       "--ledger)")
    return value
