"""The daemon's ledger read for ``dlprio history export|check --ledger``: facts per job and a cycle time.

Opened read-only (:class:`prioritizer.daemon.ledger.Ledger`, whose open checks every cell it
reads: :mod:`prioritizer.daemon.ledger_values`); a missing file, a non-ledger or a damaged cell
is one :class:`CliError` line naming ``--ledger`` (and for a cell its table, row and column),
exit 2.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sqlite3
import time
from collections.abc import Iterator

from prioritizer.command import CliError
from prioritizer.daemon.ledger import JobRow, Ledger, LedgerDamaged, NotALedger
from prioritizer.history.export import LedgerFacts
from slurm_plugin.common.cli import visible


def ledger_facts(path: str) -> dict[int, LedgerFacts]:
    """Per job: preemptions the daemon made and signal→requeue seconds (read-only open).

    Raises:
        CliError: the file is missing, not a ledger or damaged (exit 2).
    """
    with _open_ledger(path) as ledger:
        return {row.job_id: job_facts(ledger, row) for row in ledger.jobs()}


def job_facts(ledger: Ledger, row: JobRow) -> LedgerFacts:
    """What ``ledger`` knows of the job of ``row``: the preemptions the daemon made, the
    seconds from each checkpoint signal to its requeue (summed), whether the daemon signalled
    it to checkpoint, and its GPUs as squeue showed them (0: a shard job's share)."""
    intents = ledger.intents(row.job_id)
    spans = [i.requeue_at - i.signal_at for i in intents
             if i.signal_at is not None and i.requeue_at is not None]
    return LedgerFacts(row.preemptions, sum(max(s, 0.0) for s in spans),
                       any(i.signal for i in intents),
                       row.gpus if isinstance(row.gpus, int) else 0)


def cycle_time(path: str) -> float | None:
    """One of the daemon's cycle times (epoch s) from its ledger (read-only): when it created
    its first preemption intent (a cycle's moment), else its last observation; None if the
    ledger has neither.

    Raises:
        CliError: the file is missing, not a ledger or damaged (exit 2).
    """
    with _open_ledger(path) as ledger:
        created = [i.created for row in ledger.jobs() for i in ledger.intents(row.job_id)]
        if created:
            return min(created)
        return ledger.observed_at()


#: The fix of a ``--ledger`` file that is not the daemon's ledger.
FIX = "give the daemon's ledger file (ledger_path in its dlprio.yaml)"


def adopted_note(config_path: str, ledger_path: str) -> str | None:
    """A note when the daemon's ``auto_tune`` adopted settings other than the ``policy:``
    section of ``config_path`` (the config that ran, read as the daemon reads it; None when it
    does not load, or nothing was adopted): what was adopted, when, and the keys that differ,
    so the admin can replay them. The replay itself keeps the file's section: a history window
    runs under whatever was in force at each moment, the file's before the switch.

    Raises:
        CliError: the ledger is missing, not a ledger or damaged (exit 2).
    """
    from prioritizer.config_file import load
    from prioritizer.daemon.auto_tune import in_force
    from prioritizer.policy.validation import ConfigError
    try:
        cfg = load(config_path)
    except (ConfigError, OSError):   # the replay's checks read the policy section alone
        return None
    with _open_ledger(ledger_path) as ledger:
        policy, record = in_force(cfg, ledger)
    if record is None:
        return None
    own, adopted = dataclasses.asdict(cfg.policy), dataclasses.asdict(policy)
    keys = ", ".join(f"{k}: {_yaml(v)}" for k, v in adopted.items() if own[k] != v)
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(record["at"])))
    return (f"the daemon's auto_tune adopted {record['label']} at {when}; this replay uses "
            f"the policy section of {visible(config_path)} as written (in force before that "
            f"switch); to replay the adopted settings, set {keys} in a copy of it")


def _yaml(value: object) -> str:
    """A policy value as YAML reads it back: whole numbers without ``.0``, lists in brackets."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return json.dumps(value)


@contextlib.contextmanager
def _open_ledger(path: str) -> Iterator[Ledger]:
    """The ledger opened read-only; a missing file, a directory, a non-ledger or a damaged
    ledger is CliError ``--ledger PATH: <reason>; <fix>`` (exit 2, one line; the fix never
    touches the file given)."""
    shown_path = visible(path)
    if os.path.isdir(path):
        raise CliError(f"--ledger {shown_path}: is a directory; {FIX}")
    if not os.path.exists(path):
        raise CliError(f"--ledger {shown_path}: no such file; {FIX}")
    try:
        with Ledger(path, readonly=True) as ledger:
            yield ledger
    except NotALedger as exc:
        raise CliError(f"--ledger {shown_path}: not a dlprio ledger ({visible(exc.what)}); "
                       f"{FIX}") from None
    except LedgerDamaged as exc:
        raise CliError(f"--ledger {shown_path}: the ledger is damaged ({visible(str(exc.why))}); "
                       f"{FIX}, a sound copy of it (from a backup), or leave out --ledger") from None
    except (OSError, sqlite3.Error) as exc:
        reason = str(exc).removeprefix(f"{path}: ").removeprefix(f"{path}:")
        raise CliError(f"--ledger {shown_path}: {visible(reason)}") from None

