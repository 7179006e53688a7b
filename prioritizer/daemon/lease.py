"""One acting daemon per *cluster*: a lease that slurmctld arbitrates.

The ledger lock (:mod:`prioritizer.daemon.lock`) stops two daemons on one ledger file; two
daemons with different ledgers, or on two hosts, would still both act on the same jobs. The
cluster lease is a held batch job named ``lease_name`` (default ``dlprio-lease``): never
started, using no resource, visible to every host that talks to the same slurmctld. Slurm
gives job ids in one sequence, so the arbiter is slurmctld itself: **the active lease job with
the lowest id holds the lease**. Its ``--comment`` carries the holder and a heartbeat::

    dlprio-lease;holder=HOST:PID;ledger=HOST:SHA1(ledger path)[:12];heartbeat=EPOCH

* acquire (``run``/``once`` start): a lease job whose heartbeat is older than the TTL is
  cancelled (its holder is gone); so is one written for *this* ledger on this host, since we
  hold the ledger's ``flock`` and its writer is therefore dead (a restart after SIGKILL takes
  over at once). A fresh lease job of another daemon refuses the start (:class:`LeaseHeld`,
  exit 6 (Exit.HELD) naming the holder). Otherwise submit ours, read again, and keep it only if it has
  the lowest id (two daemons starting together: the later one cancels its own and refuses).
* fencing (every cycle, on the squeue read the cycle makes anyway): ours must still be the
  lowest active lease job, else :class:`LeaseLost` ends the daemon before it acts; the
  heartbeat is renewed every third of the TTL (one ``scontrol update``).
* release (clean stop): ``scancel`` ours.
* another ``lease_name``: a lease job of a daemon under another name (its comment has the
  fields above) is no lease of ours; acquire logs ``other_lease`` (WARNING) for each, since two
  daemons order the same jobs unless their ``partitions`` are apart.

A daemon that lost its lease can act at most once more, in a cycle whose read preceded the
takeover; the TTL (default 3 intervals + the Slurm call timeout) keeps a live holder renewing
well before anyone may take over.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prioritizer.daemon.log import CycleAdapter, event
from slurm_plugin.slurm.client import JobUnknown, SlurmClient, SlurmRefused
from slurm_plugin.slurm.records import Job

SCRIPT = "#!/bin/sh\n# dlprio cluster lease: held, never runs (docs/dlprio.md)\nexit 0\n"


class LeaseHeld(RuntimeError):
    """Another daemon holds the cluster lease (the message names it and its heartbeat)."""


class LeaseLost(RuntimeError):
    """Our lease job is gone or no longer the lowest: another daemon took over."""


@dataclass(frozen=True)
class LeaseInfo:
    """What a lease job's comment says (``holder``, ``ledger`` ids, ``heartbeat`` epoch s)."""

    job_id: int
    holder: str
    ledger: str
    heartbeat: float

    @classmethod
    def parse(cls, job: Job) -> LeaseInfo:
        fields = dict(p.split("=", 1) for p in job.comment.split(";") if "=" in p)
        try:
            beat = float(fields.get("heartbeat", "0"))
        except ValueError:
            beat = 0.0
        return cls(job.job_id, fields.get("holder", "?"), fields.get("ledger", ""), beat)


def ledger_id(ledger_path: str) -> str:
    """``HOST:hash`` of the ledger's real path: the same ledger on the same host."""
    real = os.path.realpath(ledger_path)
    return f"{socket.gethostname()}:{hashlib.sha1(real.encode()).hexdigest()[:12]}"


class ClusterLease:
    """The lease of one daemon (see module doc). ``ttl_s``: seconds without a heartbeat
    after which another daemon may take the lease over."""

    def __init__(self, client: SlurmClient, name: str, ttl_s: float, ledger_path: str,
                 log: CycleAdapter, clock: Callable[[], float] = time.time) -> None:
        self.client, self.name, self.ttl_s, self.log, self.clock = client, name, ttl_s, log, clock
        self.holder = f"{socket.gethostname()}:{os.getpid()}"
        self.ledger = ledger_id(ledger_path)
        self.job_id: int | None = None
        self.renewed = 0.0

    def comment(self, now: float) -> str:
        return f"{self.name};holder={self.holder};ledger={self.ledger};heartbeat={now:.0f}"

    def others(self, jobs: Iterable[Job]) -> list[Job]:
        """The active lease jobs of dlprio daemons under another ``lease_name`` (their comment
        has a lease's fields), lowest id first."""
        return sorted((j for j in jobs if j.name != self.name and j.is_active
                       and all(f";{k}=" in j.comment for k in ("holder", "ledger", "heartbeat"))),
                      key=lambda j: j.job_id)

    def active(self, jobs: Iterable[Job]) -> list[Job]:
        """The active lease jobs, lowest id first."""
        return sorted((j for j in jobs if j.name == self.name and j.is_active),
                      key=lambda j: j.job_id)

    def acquire(self) -> None:
        """Take the lease or raise :class:`LeaseHeld`. Raises SlurmError when Slurm fails."""
        now = self.clock()
        for job in self.active(self.client.jobs()):
            info = LeaseInfo.parse(job)
            age = now - info.heartbeat
            if info.ledger == self.ledger or age > self.ttl_s:
                self._cancel(job.job_id)
                event(self.log, "lease_taken_over", job.job_id, logging.WARNING,
                      holder=info.holder, heartbeat_age_s=round(age, 1),
                      why="same ledger" if info.ledger == self.ledger else "stale")
                continue
            raise self._held(info, now)
        self.job_id = self.client.submit(SCRIPT, [
            f"--job-name={self.name}", "--hold", "--output=/dev/null", "--ntasks=1",
            f"--comment={self.comment(now)}"])
        self.renewed = now
        seen = self.client.jobs()
        holders = self.active(seen)
        if not holders or holders[0].job_id != self.job_id:
            mine, self.job_id = self.job_id, None
            self._cancel(mine)
            if holders:
                raise self._held(LeaseInfo.parse(holders[0]), now)
            raise LeaseHeld(f"cluster lease {self.name}: our lease job {mine} vanished; retry")
        event(self.log, "lease_acquired", self.job_id, name=self.name, ttl_s=self.ttl_s)
        for job in self.others(seen):
            info = LeaseInfo.parse(job)
            event(self.log, "other_lease", job.job_id, logging.WARNING, name=job.name,
                  holder=info.holder, heartbeat_age_s=round(now - info.heartbeat, 1),
                  fix="two daemons on one cluster order the same jobs unless their "
                      "partitions are apart: give them one lease_name, or disjoint partitions")

    def check(self, jobs: Iterable[Job], now: float) -> None:
        """Fencing, before the cycle acts: raise :class:`LeaseLost` unless ours is the lowest
        active lease job in ``jobs`` (this cycle's squeue read); renew the heartbeat."""
        holders = self.active(jobs)
        if self.job_id is None or not holders or holders[0].job_id != self.job_id:
            other = LeaseInfo.parse(holders[0]) if holders else None
            raise LeaseLost(f"cluster lease {self.name}: lease job {self.job_id} lost"
                            + (f" to {other.holder} (job {other.job_id})" if other else "")
                            + "; stopping without acting")
        if now - self.renewed >= self.ttl_s / 3:
            self.client.update([self.job_id], "Comment", self.comment(now))
            self.renewed = now

    def release(self) -> None:
        """Cancel our lease job (clean stop); never raises."""
        if self.job_id is not None:
            try:
                self._cancel(self.job_id)
                event(self.log, "lease_released", self.job_id)
            except Exception:   # noqa: BLE001 - Slurm away at stop: the TTL frees the lease
                pass
            self.job_id = None

    def _cancel(self, job_id: int) -> None:
        try:
            self.client.cancel([job_id])
        except (JobUnknown, SlurmRefused):
            pass

    def _held(self, info: LeaseInfo, now: float) -> LeaseHeld:
        return LeaseHeld(
            f"cluster lease {self.name}: held by {info.holder} (lease job {info.job_id}, "
            f"heartbeat {now - info.heartbeat:.0f} s ago; taken over after {self.ttl_s:.0f} s "
            "without one); only one dlprio may act on a cluster")
