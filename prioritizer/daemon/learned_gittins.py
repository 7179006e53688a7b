"""``gittins_samples: history``: the daemon's Gittins distribution learned from the cluster's
own finished jobs, refreshed every ``gittins_refresh_s`` seconds.

Samples are the attained service (GPU·s over every run) of jobs that have *ended*: first the
ledger's ended jobs (closed runs only), and when those are fewer than ``gittins_min_samples``,
Slurm accounting's finished GPU jobs of the last 30 days (``sacct --duplicates``, every attempt).
Jobs still pending or running never enter (their service is not final). Below the minimum the
packaged distribution (``prioritizer.policy.durations``) is kept and a log line says so.
Hooked in :class:`prioritizer.daemon.loop.Daemon` (its ``cycle`` calls :meth:`HistoryDistribution.current`).
"""

from __future__ import annotations

import logging
from typing import Any

from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import event
from prioritizer.policy.durations import load_distribution
from prioritizer.policy.gittins import GittinsDistribution
from slurm_plugin.slurm.accounting import fold_jobs
from slurm_plugin.slurm.client import SlurmClient, SlurmError

SACCT_WINDOW = "now-30days"


def ledger_samples(ledger: Ledger) -> list[float]:
    """GPU·s of every ended job in the ledger (closed runs only), > 0 only."""
    runs = ledger.all_runs()
    out = []
    for job in ledger.jobs():
        if job.ended_at is None:
            continue
        service = sum(r.gpu_seconds(r.end) for r in runs.get(job.job_id, ()) if r.end is not None)
        if service > 0:
            out.append(service)
    return out


def sacct_samples(client: SlurmClient) -> list[float]:
    """GPU·s of the finished GPU jobs in accounting over :data:`SACCT_WINDOW`."""
    jobs = fold_jobs(client.accounting(SACCT_WINDOW))
    return [j.attained_gpu_s for j in jobs if j.finished and j.gpus > 0 and j.attained_gpu_s > 0]


class HistoryDistribution:
    """The learned distribution, recomputed at most every ``refresh_s`` seconds."""

    def __init__(self, min_samples: int, refresh_s: float) -> None:
        self.min_samples, self.refresh_s = min_samples, refresh_s
        self.distribution: GittinsDistribution = load_distribution()
        self.learned_at: float | None = None
        #: whether :attr:`distribution` is this cluster's (else the packaged one)
        self.learned = False

    def current(self, client: SlurmClient | None, ledger: Ledger, now: float,
                log: Any = None) -> GittinsDistribution:
        """The distribution to decide with at ``now`` (refreshed when due; see module doc)."""
        if self.learned_at is not None and now - self.learned_at < self.refresh_s:
            return self.distribution
        self.learned_at = now
        samples, source = ledger_samples(ledger), "ledger"
        if len(samples) < self.min_samples and client is not None:
            try:
                samples, source = sacct_samples(client), "sacct"
            except SlurmError as exc:
                if log is not None:
                    event(log, "gittins_sacct_failed", level=logging.WARNING, error=str(exc))
        self.learned = len(samples) >= self.min_samples
        if not self.learned:
            self.distribution = load_distribution()
            if log is not None:
                event(log, "gittins_packaged", samples=len(samples), min=self.min_samples,
                      why="too few finished jobs; using yarn-gput1000.csv")
        else:
            self.distribution = GittinsDistribution(samples)
            if log is not None:
                event(log, "gittins_learned", samples=len(samples), source=source)
        return self.distribution
