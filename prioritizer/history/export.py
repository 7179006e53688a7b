"""From Slurm accounting to history rows: what ``dlprio history export`` keeps and why.

Pure (no Slurm, no clock): takes the jobs :func:`slurm_plugin.slurm.accounting.fold_jobs` built from
``sacct --duplicates --json`` and returns :class:`~prioritizer.history.trace.HistoryRow` records
plus an :class:`ExportReport` that counts every job left out, by reason (:data:`REASONS`), so
nothing is dropped silently.

Work of a job (``work_gpu_s``): GPU·seconds of its runs, minus runs lost to a requeue. A run
that ended ``REQUEUED`` keeps its progress only when the job declared the checkpoint contract
(the ``dl:v1`` marker dlsubmit writes in ``--comment``; slurmdbd keeps comments only with
``AccountingStoreFlags=job_comment``, slurm.conf(5)) or when the daemon's ledger shows that it
signalled the job for a checkpoint: then the next run resumes from its checkpoint. Without it the batch script restarts from the top (``scontrol requeue``,
sbatch(1) ``--requeue``), so that run's time was lost: the work is the later runs only.

Where the daemon ran (``--ledger``), its ledger adds per job the preemptions it made and the
seconds between each checkpoint signal and the requeue (:class:`LedgerFacts`): that time was
spent checkpointing, not progressing, so it is taken off the work of a checkpointing job
(× its GPUs).

GPUs where accounting does not track them (``gres/gpu`` missing from slurm.conf's
``AccountingStorageTRES``, :func:`slurm_plugin.slurm.accounting.tracks_gpus`): sacct then names no
``gres/gpu`` for any job, so a GPU job looks CPU-only. A job whose record names no GPUs takes
the count Slurm showed while it was known to slurmctld (``known_gpus``: squeue for jobs within
``MinJobAge``, the daemon's ledger for the jobs it observed); without one its GPUs are unknown
and it is left out as ``unknown_gpus``, never exported as CPU-only or with a guessed count.
Where the cluster's config could not be read, a job that Slurm showed with GPUs but whose
record names none tells the same.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prioritizer.history.trace import HistoryRow
from slurm_plugin.slurm.accounting import (CANCELLED_STATES, GPU_TRES_FIX, JOB_COMMENT_FIX,
                                           TIMELIMIT_STATES, AccountedJob)

#: Why a job is left out of the export (counted, reported, never silent).
REASONS = {
    "unfinished": "not finished at the end of the window (pending or running)",
    "never_ran": "ended without ever running (e.g. cancelled while pending)",
    "end_before_start": "a run ends before it starts (clock or accounting fault)",
    "no_submit": "no submit time in accounting",
    "zero_gpus": "asked for GPUs but holds none (CPU-only jobs are counted apart)",
    "cpu_only": "CPU-only job (left out of GPU replays; --include-cpu-only keeps them)",
    "zero_work": "ran for 0 seconds",
    "lost_to_requeue": ("requeued without a checkpoint (the runs' work was lost) and ended "
                        "before it ran again (e.g. cancelled while held)"),
    "unknown_gpus": "GPU count unknown: accounting does not track gres/gpu",
}
CHECKPOINT_MARKER = "dl:v1"


@dataclass(frozen=True)
class LedgerFacts:
    """What the daemon's ledger knows of one job: preemptions it made, the seconds from
    checkpoint signal to requeue summed over them, whether it checkpoints (the daemon
    signalled it: only jobs that declare the contract get the signal), and its GPUs as squeue
    showed them (0: not known)."""

    preemptions: int
    checkpoint_s: float
    checkpoints: bool = False
    gpus: int = 0


@dataclass
class ExportReport:
    """Counts of what was exported and what was left out (reason → job ids)."""

    exported: int = 0
    left_out: dict[str, list[int]] = field(default_factory=dict)
    #: accounting does not track GPUs (config, or a job Slurm showed with GPUs sacct lacks)
    gpus_untracked: bool = False
    #: exported jobs whose GPU count came from ``known_gpus`` (squeue, the ledger), not sacct
    gpus_from_slurm: list[int] = field(default_factory=list)
    #: exported jobs with a run ended ``REQUEUED`` counted as lost: no checkpoint marker in
    #: their comment and no checkpoint of the daemon's in the ledger (:func:`checkpoints`)
    requeued_lost: list[int] = field(default_factory=list)

    def leave_out(self, reason: str, job_id: int) -> None:
        self.left_out.setdefault(reason, []).append(job_id)

    @property
    def left_out_count(self) -> int:
        return sum(len(v) for v in self.left_out.values())

    def lines(self, limit: int = 5) -> list[str]:
        """One line per reason: ``left out 3 job(s): cpu_only (...): 12, 13, 14``."""
        out = []
        for reason, ids in sorted(self.left_out.items()):
            shown = ", ".join(str(i) for i in ids[:limit]) + (" ..." if len(ids) > limit else "")
            out.append(f"left out {len(ids)} job(s): {reason} ({REASONS[reason]}): {shown}")
        return out

    def requeued_line(self, comments_kept: bool | None, limit: int = 5) -> str | None:
        """Where runs before a requeue were counted as lost and accounting may not keep job
        comments (``comments_kept``: :func:`~slurm_plugin.slurm.accounting.keeps_job_comments`,
        None: unknown), one line: how many, which, and the fix; None otherwise (a cluster that
        keeps comments showed no checkpoint marker for those jobs: they did restart from the
        top)."""
        if not self.requeued_lost or comments_kept:
            return None
        ids = self.requeued_lost
        shown = ", ".join(str(i) for i in ids[:limit]) + (" ..." if len(ids) > limit else "")
        why = ("Slurm accounting keeps no job comments (no job_comment in AccountingStoreFlags)"
               if comments_kept is False else
               "Slurm's AccountingStoreFlags could not be read, so job comments may not be kept")
        return (f"{len(ids)} job(s) requeued with no checkpoint marker seen had their runs "
                f"before the requeue counted as lost ({shown}): {why}, so the dl:v1 marker of "
                f"a checkpointing job is not seen; to keep it, {JOB_COMMENT_FIX}; --ledger adds "
                "the jobs the daemon checkpointed")

    def untracked_line(self) -> str | None:
        """Where accounting does not track GPUs, one line: what that cost and the fix
        (:data:`~slurm_plugin.slurm.accounting.GPU_TRES_FIX`); None where it does."""
        if not self.gpus_untracked:
            return None
        unknown = len(self.left_out.get("unknown_gpus", ()))
        return (f"Slurm accounting does not track GPUs (no gres/gpu in AccountingStorageTRES): "
                f"{unknown} job(s) with unknown GPU counts left out, "
                f"{len(self.gpus_from_slurm)} with GPU counts from squeue or the dlprio "
                f"ledger; to count them, {GPU_TRES_FIX}")


def anonymise(name: str, salt: str = "") -> str:
    """A stable pseudonym of a user or account name: ``h-`` + 12 hex digits of
    SHA-256(salt + name). The same name gives the same pseudonym in every export with the
    same salt; without a salt, a list of guessed names can be hashed and matched."""
    if not name:
        return ""
    return "h-" + hashlib.sha256((salt + name).encode()).hexdigest()[:12]


def work_gpu_s(job: AccountedJob, facts: LedgerFacts | None = None) -> float:
    """GPU·s the job needed (see the module doc: requeued runs without a checkpoint are lost;
    with ledger ``facts``, checkpoint time is not work)."""
    checkpoints = checkpoint_resumes(job, facts)
    return kept_work([(a.state == "REQUEUED", a.gpu_s) for a in job.attempts], checkpoints,
                     facts.checkpoint_s * job.gpus if checkpoints and facts is not None else 0.0)


def kept_work(runs: Iterable[tuple[bool, float]], checkpoints: bool,
              checkpoint_gpu_s: float = 0.0) -> float:
    """GPU·s of work kept from a job's runs, each ``(requeued, gpu_s)`` in start order: a run
    ended by a requeue is lost unless the job ``checkpoints`` (its next run restarts from the
    top), and ``checkpoint_gpu_s`` (GPU·s spent between checkpoint signals and requeues) is
    not work. Never negative. The one rule for work: accounting's attempts
    (:func:`work_gpu_s`) and the daemon's ledger runs
    (:func:`prioritizer.tune.daemon_replay.ledger_rows`) both count through it."""
    total = 0.0
    for requeued, gpu_s in runs:
        if requeued and not checkpoints:
            total = 0.0      # restarts from the top: earlier runs were lost
            continue
        total += gpu_s
    return max(total - checkpoint_gpu_s, 0.0)


def checkpoint_resumes(job: AccountedJob, facts: LedgerFacts | None = None) -> bool:
    """Whether a run after a requeue resumes from a checkpoint: the job's comment holds the
    ``dl:v1`` marker, or the daemon's ledger ``facts`` show it checkpointed."""
    return CHECKPOINT_MARKER in job.comment or bool(facts and facts.checkpoints)


def ended_by(job: AccountedJob) -> str:
    """``timelimit``, ``cancelled`` or ``self`` from the final state."""
    if job.state in TIMELIMIT_STATES:
        return "timelimit"
    if job.state.split()[0] in CANCELLED_STATES:
        return "cancelled"
    return "self"


def _with_gpus(job: AccountedJob, gpus: int) -> AccountedJob:
    """``job`` whose runs held ``gpus`` GPUs (a count Slurm showed, where sacct named none)."""
    attempts = tuple(dataclasses.replace(a, gpus=gpus if a.start is not None else a.gpus)
                     for a in job.attempts)
    return dataclasses.replace(job, gpus=gpus, attempts=attempts)


def _problem(job: AccountedJob, include_cpu_only: bool, until: float | None) -> str | None:
    if not job.finished or (until is not None and job.end is not None and job.end > until):
        return "unfinished"
    if job.submit is None:
        return "no_submit"
    if any(a.start is not None and a.end is not None and a.end < a.start for a in job.attempts):
        return "end_before_start"
    if not any(a.start is not None for a in job.attempts):
        return "never_ran"
    if job.gpus == 0:
        if any(a.gpus for a in job.attempts):
            return "zero_gpus"
        return None if include_cpu_only else "cpu_only"
    if work_gpu_s(job) <= 0:
        # ran, but every run was lost to a requeue and no run came after the last one
        lost = job.attempts[-1].start is None and any(a.run_s > 0 for a in job.attempts)
        return "lost_to_requeue" if lost else "zero_work"
    return None


def history_rows(jobs: Iterable[AccountedJob], *, anonymise_names: bool = False, salt: str = "",
                 include_cpu_only: bool = False,
                 ledger: Mapping[int, LedgerFacts] | None = None,
                 gpus_tracked: bool | None = True,
                 known_gpus: Mapping[int, int] | None = None,
                 until: float | None = None,
                 ) -> tuple[list[HistoryRow], ExportReport]:
    """History rows of the finished jobs and the report of those left out.

    Args:
        jobs: folded accounting jobs (any order; rows come out in submit order, then id).
        anonymise_names: replace users and accounts by :func:`anonymise` pseudonyms.
        include_cpu_only: keep CPU-only jobs (``num_gpu`` 0, ``work_gpu_s`` = seconds run).
        ledger: the daemon's facts by job id (``--ledger``), if it ran.
        gpus_tracked: :func:`slurm_plugin.slurm.accounting.tracks_gpus` of the cluster's config
            (None: unknown).
        known_gpus: GPUs by job id as Slurm showed them outside accounting (see the module
            doc); used only for jobs whose records name no ``gres/gpu``.
        until: the window's end (epoch s): a job that ends after it was still pending or
            running then, ``unfinished`` like one that has not ended (None: no end).
    """
    known = {k: v for k, v in (known_gpus or {}).items() if v > 0}
    jobs = sorted(jobs, key=lambda j: (j.submit or 0, j.job_id))
    untracked = gpus_tracked is False or any(
        not j.gpu_tres and j.job_id in known for j in jobs)
    report = ExportReport(gpus_untracked=untracked)
    rows = []
    for job in jobs:
        unknown = untracked and not job.gpu_tres
        filled = unknown and job.job_id in known
        if filled:
            job, unknown = _with_gpus(job, known[job.job_id]), False
        # CPU-only where GPUs are tracked; unknown where they are not (never a guessed count)
        problem = (_problem(job, include_cpu_only or unknown, until)
                   or ("unknown_gpus" if unknown else None))
        if problem:
            report.leave_out(problem, job.job_id)
            continue
        if filled:
            report.gpus_from_slurm.append(job.job_id)
        gpus = job.gpus
        facts = (ledger or {}).get(job.job_id)
        work = work_gpu_s(job, facts) if gpus else job.attempts[-1].run_s
        if gpus and not checkpoint_resumes(job, facts) and any(
                a.state == "REQUEUED" for a in job.attempts):
            report.requeued_lost.append(job.job_id)
        eligible = float(job.eligible or job.submit or 0)
        end = float(job.end or 0)
        user, account = job.user, job.account
        if anonymise_names:
            user, account = anonymise(user, salt), anonymise(account, salt)
        rows.append(HistoryRow(
            job_id=str(job.job_id), user=user, account=account, partition=job.partition,
            submit_time=float(job.submit or 0), eligible_time=eligible, num_gpu=gpus,
            num_nodes=job.nodes, work_gpu_s=work, duration=work / gpus if gpus else work,
            end_time=end, jct=max(end - eligible, 0.0), state=job.state.split()[0],
            attempts=sum(1 for a in job.attempts if a.start is not None),
            ended_by=ended_by(job), preemptions=facts.preemptions if facts else 0))
    report.exported = len(rows)
    return rows, report


def count_states(rows: Iterable[HistoryRow]) -> Counter[str]:
    """How many rows ended each way (``ended_by``)."""
    return Counter(r.ended_by for r in rows)
