"""Rebuild a lost or stale ledger's runs from Slurm accounting.

Hook in the observe step (:func:`prioritizer.daemon.observe.observe` calls
:func:`rebuild_stale_runs` after folding squeue into the ledger). A unit is *stale* when Slurm
says it ran more times than the ledger has closed runs for it: ``restart_count`` (squeue's
``restart_cnt``, one per requeue) greater than the ledger's closed runs. That covers a lost
ledger file (the job has no earlier runs at all) and a daemon that was down while a run
started and ended. For the stale units, one ``sacct --duplicates --json -j ...`` call returns
every attempt (sacct(1) ``-D``); each *finished* attempt the ledger lacks is added as a closed
run (start, end, GPUs from the allocated ``gres/gpu``, seconds suspended from sacct's
``Suspended``, which attained service leaves out; end source ``sacct``). Job-level records
only (steps never summed) and runs keyed by Slurm's start time, so nothing is counted twice.
The attempt still running is the squeue run the observe step already opened.

GPUs where accounting does not track them (``gres/gpu`` missing from slurm.conf's
``AccountingStorageTRES``: sacct's record of a managed GPU job then names no ``gres/gpu``):
the run takes the GPUs the ledger recorded from squeue while the job was alive (its other
runs, else its row; the observe step has just written the job's current squeue count). A run
whose GPUs are known nowhere is not added (never a 0-GPU run); either case logs
``ledger_rebuild_gpus_untracked`` with the fix (:data:`slurm_plugin.slurm.accounting.GPU_TRES_FIX`).

Each (job, restart count) is asked about once (ledger meta key ``sacct_rebuild:JOBID``), so a
job sacct does not know yet costs one call, not one per cycle. Without slurmdbd nothing is
rebuilt (logged once). A Slurm error leaves the ledger as it was and tries again next cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import event
from slurm_plugin.slurm.accounting import GPU_TRES_FIX, UNFINISHED_STATES, fold_jobs
from slurm_plugin.slurm.client import AccountingDisabled, SlurmClient, SlurmError


class _Unit(Protocol):
    @property
    def job_id(self) -> int: ...

    @property
    def restart_count(self) -> int: ...

    @property
    def gpus(self) -> float: ...


@dataclass(frozen=True)
class Rebuilt:
    """What one rebuild did: ``jobs`` that got runs, ``runs`` added; of those runs,
    ``gpus_from_ledger`` took their GPUs from the ledger (sacct named none), and
    ``gpus_unknown`` runs were left out, their GPUs known nowhere."""

    jobs: int = 0
    runs: int = 0
    gpus_from_ledger: int = 0
    gpus_unknown: int = 0

    @property
    def gpus_untracked(self) -> bool:
        """sacct named no GPUs for a managed (GPU) job: accounting does not track them."""
        return bool(self.gpus_from_ledger or self.gpus_unknown)


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


def _ledger_gpus(ledger: Ledger, unit: _Unit) -> float:
    """GPUs of ``unit`` as squeue showed them: a run's the ledger recorded, else its job row's,
    else the unit's now (0: known nowhere)."""
    for run in ledger.runs(unit.job_id):
        if run.gpus > 0:
            return run.gpus
    row = ledger.job(unit.job_id)
    return row.gpus if row is not None and row.gpus > 0 else max(unit.gpus, 0)


def rebuild_stale_runs(client: SlurmClient | None, ledger: Ledger, units: Mapping[int, _Unit],
                       now: float, log: Any = None) -> Rebuilt:
    """Add the finished attempts the ledger lacks for stale units; return what was added.
    Logs ``ledger_rebuilt jobs=N runs=M source=sacct`` when N > 0 (``log``: an
    :class:`~prioritizer.daemon.log.CycleAdapter`), and ``ledger_rebuild_gpus_untracked``
    when sacct named no GPUs for them. Call inside the ledger's transaction."""
    if client is None:
        return Rebuilt()
    ids = stale_units(ledger, units)
    if not ids or ledger.meta("sacct_rebuild:disabled") == "1":
        return Rebuilt()
    try:
        records = client.accounting_jobs(ids)
    except AccountingDisabled:
        ledger.set_meta("sacct_rebuild:disabled", "1")
        if log is not None:
            event(log, "ledger_rebuild_unavailable", level=logging.WARNING,
                  why="no slurmdbd: runs missed while the daemon was away stay missed")
        return Rebuilt()
    except SlurmError as exc:
        if log is not None:
            event(log, "ledger_rebuild_failed", level=logging.WARNING, error=str(exc))
        return Rebuilt()
    wanted = set(ids)
    jobs_rebuilt = runs_added = from_ledger = unknown = 0
    for job in fold_jobs(records):
        if job.job_id not in wanted:
            continue
        known = {r.start for r in ledger.runs(job.job_id)}
        ledger_gpus = _ledger_gpus(ledger, units[job.job_id])
        added = 0
        for attempt in job.attempts:
            if (attempt.start is None or attempt.end is None
                    or attempt.state in UNFINISHED_STATES or float(attempt.start) in known):
                continue
            gpus: float = attempt.gpus
            if not attempt.gpu_tres:          # accounting does not track GPUs
                if ledger_gpus <= 0:
                    unknown += 1
                    continue
                gpus = ledger_gpus
                from_ledger += 1
            ledger.start_run(job.job_id, attempt.start, gpus, now)
            ledger.close_run(job.job_id, attempt.start, attempt.end, "sacct",
                             attempt.suspended_s)
            added += 1
        if added:
            jobs_rebuilt += 1
            runs_added += added
    for job_id in ids:
        ledger.set_meta(f"sacct_rebuild:{job_id}", str(units[job_id].restart_count))
    result = Rebuilt(jobs_rebuilt, runs_added, from_ledger, unknown)
    if log is not None and jobs_rebuilt:
        extra = {"gpus_from_ledger": from_ledger} if from_ledger else {}
        event(log, "ledger_rebuilt", jobs=jobs_rebuilt, runs=runs_added, source="sacct", **extra)
    if log is not None and result.gpus_untracked:
        event(log, "ledger_rebuild_gpus_untracked", level=logging.WARNING,
              why="sacct names no GPUs: Slurm accounting does not track gres/gpu",
              runs_gpus_from_ledger=from_ledger, runs_gpus_unknown=unknown, fix=GPU_TRES_FIX)
    return result
