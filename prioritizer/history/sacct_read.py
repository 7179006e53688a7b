"""Reading a window of Slurm accounting whole: every attempt of each job that had one in it.

``sacct --starttime S --endtime E`` lists an attempt (one record of ``--duplicates``) only when
it was eligible, ran or ended within the window (sacct(1) ``--starttime``), so a job requeued
before ``S`` comes with its later attempts only: a later submit, a shorter JCT, fewer attempts.
Used by ``dlprio history export`` and the daemon's replays of ``sacct`` history, with
:func:`gpu_sources` (the GPUs of jobs whose accounting names none).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from slurm_plugin.slurm.accounting import AccountedJob, AccountingRecord, tracks_gpus
from slurm_plugin.slurm.client import SlurmClient, SlurmError

if TYPE_CHECKING:
    from prioritizer.history.export import LedgerFacts

#: job ids per ``sacct -j`` call of :func:`with_earlier_attempts` (argv stays short)
IDS_PER_CALL = 500


#: seconds between a requeued attempt's end and the next attempt's submit (Slurm sets both at
#: the requeue: equal on 22.05, 24.11 and 26.05; one second of slack for the clock's tick)
REQUEUE_SLACK_S = 1


def with_earlier_attempts(client: SlurmClient, records: list[AccountingRecord],
                          since_s: float) -> list[AccountingRecord]:
    """``records`` of a window (``sacct --starttime``, epoch s ``since_s``) with the attempts
    of its jobs from before the window. A requeue submits the next attempt at the moment the
    last one ends, so a job whose earliest listed attempt was submitted before the window may
    have earlier ones: those jobs are read again, ``sacct -j``
    (:meth:`SlurmClient.accounting_jobs`, :data:`IDS_PER_CALL` ids a call), and each earlier
    attempt that ended where the next one was submitted (:data:`REQUEUE_SLACK_S`), back from
    the earliest listed one, is added. The chain, not the id, decides: ``sacct -j`` also lists
    older jobs of the same id (a cluster whose ids started over). Raises as the client does."""
    earliest: dict[int, AccountingRecord] = {}
    for r in records:
        if r.submit is not None and (r.job_id not in earliest
                                     or r.submit < (earliest[r.job_id].submit or 0)):
            earliest[r.job_id] = r
    before = {job_id: r for job_id, r in earliest.items()
              if r.submit is not None and r.submit < since_s}
    if not before:
        return records
    units = sorted({r.unit_id for r in before.values()})   # a hetjob leader brings its parts
    whole: list[AccountingRecord] = []
    for i in range(0, len(units), IDS_PER_CALL):
        whole += client.accounting_jobs(units[i:i + IDS_PER_CALL])
    of_job: dict[int, list[AccountingRecord]] = {}
    for r in whole:
        of_job.setdefault(r.job_id, []).append(r)
    added: list[AccountingRecord] = []
    for job_id, first in before.items():
        submit = first.submit
        older = sorted((r for r in of_job.get(job_id, ()) if r.submit is not None
                        and submit is not None and r.submit < submit),
                       key=lambda r: r.submit or 0, reverse=True)
        for r in older:   # latest first: each must end where the one after it was submitted
            if submit is None or r.end is None or abs(r.end - submit) > REQUEUE_SLACK_S:
                break
            added.append(r)
            submit = r.submit
    return added + records


def show_config(client: SlurmClient) -> Mapping[str, str] | None:
    """``scontrol show config`` through ``client``; None when Slurm does not answer."""
    try:
        return client.show_config()
    except SlurmError:
        return None


def gpu_sources(client: SlurmClient, jobs: list[AccountedJob],
                facts: dict[int, LedgerFacts] | None,
                config: Callable[[], Mapping[str, str] | None] | None = None,
                ) -> tuple[bool | None, dict[int, int]]:
    """Whether accounting tracks GPUs (``config()``, by default :func:`show_config`; None when
    Slurm does not answer) and the GPUs Slurm showed outside accounting, by job id: squeue's
    jobs still known to slurmctld (``MinJobAge``; hetjob components summed) and the ledger's.
    Asked through ``client`` only when a job that ran names no ``gres/gpu`` in sacct (else
    ``(True, {})``, no Slurm call)."""
    if all(j.gpu_tres for j in jobs if any(a.start is not None for a in j.attempts)):
        return True, {}
    conf = show_config(client) if config is None else config()
    tracked = None if conf is None else tracks_gpus(conf)
    known: dict[int, int] = {}
    try:
        for job in client.jobs():
            known[job.unit_id] = known.get(job.unit_id, 0) + job.gpus
    except SlurmError:
        pass
    known.update({job_id: f.gpus for job_id, f in (facts or {}).items() if f.gpus > 0})
    return tracked, known
