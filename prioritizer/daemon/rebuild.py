"""Rebuild a lost or stale ledger's runs from Slurm accounting.

Hook in the observe step (:func:`prioritizer.daemon.observe.observe` calls
:func:`rebuild_stale_runs` after folding squeue into the ledger). A unit is *stale* when Slurm
says it ran more times than the ledger has closed runs for it: ``restart_count`` (squeue's
``restart_cnt``, one per requeue) greater than the ledger's closed runs. That covers a lost
ledger file (the job has no earlier runs at all) and a daemon that was down while a run
started and ended. For the stale units, one ``sacct --duplicates --json -j ...`` call returns
every attempt (sacct(1) ``-D``); each *finished* attempt the ledger lacks is added as a closed
run (start, end, GPUs from the allocated ``gres/gpu``; end source ``sacct``). Job-level records
only (steps never summed) and runs keyed by Slurm's start time, so nothing is counted twice.
The attempt still running is the squeue run the observe step already opened.

Each (job, restart count) is asked about once (ledger meta key ``sacct_rebuild:JOBID``), so a
job sacct does not know yet costs one call, not one per cycle. Without slurmdbd nothing is
rebuilt (logged once). A Slurm error leaves the ledger as it was and tries again next cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import event
from slurm_plugin.accounting import UNFINISHED_STATES, fold_jobs
from slurm_plugin.client import AccountingDisabled, SlurmClient, SlurmError


class _Unit(Protocol):
    @property
    def job_id(self) -> int: ...

    @property
    def restart_count(self) -> int: ...


def stale_units(ledger: Ledger, units: Mapping[int, _Unit]) -> list[int]:
    """Ids of units whose ledger has fewer closed runs than Slurm's restart count, not yet
    asked about at this restart count."""
    runs = ledger.all_runs()
    out = []
    for unit in units.values():
        if unit.restart_count <= 0:
            continue
        closed = sum(1 for r in runs.get(unit.job_id, ()) if r.end is not None)
        if closed >= unit.restart_count:
            continue
        if ledger.meta(f"sacct_rebuild:{unit.job_id}") == str(unit.restart_count):
            continue
        out.append(unit.job_id)
    return sorted(out)


def rebuild_stale_runs(client: SlurmClient | None, ledger: Ledger, units: Mapping[int, _Unit],
                       now: float, log: Any = None) -> int:
    """Add the finished attempts the ledger lacks for stale units; return how many jobs got
    runs. Logs ``ledger_rebuilt jobs=N runs=M source=sacct`` when N > 0 (``log``: an
    :class:`~prioritizer.daemon.log.CycleAdapter`). Call inside the ledger's transaction."""
    if client is None:
        return 0
    ids = stale_units(ledger, units)
    if not ids or ledger.meta("sacct_rebuild:disabled") == "1":
        return 0
    try:
        records = client.accounting_jobs(ids)
    except AccountingDisabled:
        ledger.set_meta("sacct_rebuild:disabled", "1")
        if log is not None:
            event(log, "ledger_rebuild_unavailable", level=logging.WARNING,
                  why="no slurmdbd: runs missed while the daemon was away stay missed")
        return 0
    except SlurmError as exc:
        if log is not None:
            event(log, "ledger_rebuild_failed", level=logging.WARNING, error=str(exc))
        return 0
    wanted = set(ids)
    jobs_rebuilt = runs_added = 0
    for job in fold_jobs(records):
        if job.job_id not in wanted:
            continue
        known = {r.start for r in ledger.runs(job.job_id)}
        added = 0
        for attempt in job.attempts:
            if (attempt.start is None or attempt.end is None
                    or attempt.state in UNFINISHED_STATES or float(attempt.start) in known):
                continue
            ledger.start_run(job.job_id, attempt.start, attempt.gpus, now)
            ledger.close_run(job.job_id, attempt.start, attempt.end, "sacct")
            added += 1
        if added:
            jobs_rebuilt += 1
            runs_added += added
    for job_id in ids:
        ledger.set_meta(f"sacct_rebuild:{job_id}", str(units[job_id].restart_count))
    if jobs_rebuilt and log is not None:
        event(log, "ledger_rebuilt", jobs=jobs_rebuilt, runs=runs_added, source="sacct")
    return jobs_rebuilt
