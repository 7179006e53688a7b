"""Observe: one read of Slurm per cycle, folded into the ledger and into the policy's Snapshot.

First step of the daemon cycle (STYLE.md rule 2: ``observe → decide → act``). It reads
``squeue --json`` and ``sinfo --json`` once through :class:`slurm_plugin.client.SlurmClient`,
groups heterogeneous-job components into one unit keyed by the leader's id (DESIGN.md,
"daemon"), keeps the managed units (GPU jobs in the configured partitions), and updates the
ledger: a running unit has an open run starting at Slurm's own ``start_time``; a run ends at
the job's ``end_time`` when it finished, at the daemon's own requeue time when the daemon
requeued it, else at the end ``sacct --duplicates`` reports, else at the last cycle that saw it
running (losing at most one interval; ../shared/SLURM-NOTES.md: after a requeue squeue shows
the *next* start and no end). A job that started and ended between two cycles gets the run
Slurm reports (start_time..end_time). Nothing here decides; ``prioritizer.policy.decide.decide`` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Intent, Ledger, Run
from prioritizer.daemon.rebuild import rebuild_stale_runs
from prioritizer.policy.model import JobPhase, JobView, NodeView, Snapshot
from slurm_plugin.client import SlurmClient, SlurmError
from slurm_plugin.marker import CheckpointContract, MarkerError, parse
from slurm_plugin.records import Job, Node

PENDING_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED"})
RUNNING_STATES = frozenset({"RUNNING", "CONFIGURING", "SIGNALING", "RESIZING", "SUSPENDED"})
#: Pending reasons after which Slurm would start the job as soon as GPUs are free. A pending job
#: with any other reason (held, dependency, limits, nodes down...) is ordered but never preempted
#: for: freeing GPUs would not start it (squeue(1) "JOB REASON CODES").
STARTABLE_REASONS = frozenset({"None", "", "Priority", "Resources", "BeginTime"})
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})


@dataclass(frozen=True)
class Unit:
    """One schedulable unit: a plain job, an array element, or a whole hetjob (leader id).

    ``gpus_per_node`` has one entry per node (components concatenated), aligned with
    ``nodes`` while running. ``contract`` is the checkpoint marker of the leader's comment
    (None: no marker, or a malformed one).
    """

    job_id: int
    user: str
    account: str
    partition: str
    state: str
    reason: str
    gpus_per_node: tuple[int, ...]
    nodes: tuple[str, ...]
    submit_time: float | None
    start_time: float | None
    end_time: float | None
    eligible_time: float | None
    restart_count: int
    requeue: bool
    contract: CheckpointContract | None
    priority: int

    @property
    def gpus(self) -> int:
        return sum(self.gpus_per_node)

    @property
    def phase(self) -> JobPhase | None:
        """PENDING, RUNNING, or None for any other state (completing, finished)."""
        if self.state in PENDING_STATES:
            return JobPhase.PENDING
        if self.state in RUNNING_STATES and self.start_time is not None:
            return JobPhase.RUNNING
        return None


@dataclass(frozen=True)
class Observation:
    """What one cycle saw: ``now`` (epoch s), the policy's snapshot, managed units by id,
    and the nodes Slurm reported."""

    now: float
    snapshot: Snapshot
    units: dict[int, Unit]
    nodes: tuple[Node, ...]


def units_from_jobs(jobs: Iterable[Job], cfg: DaemonConfig) -> dict[int, Unit]:
    """Group hetjob components into units and keep the managed GPU units (pure)."""
    groups: dict[int, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.unit_id, []).append(job)
    managed = set(cfg.partitions) | set(cfg.queue_partitions)
    out: dict[int, Unit] = {}
    for unit_id, parts in groups.items():
        parts.sort(key=lambda j: j.het_job_offset)
        lead = parts[0]
        if managed and not managed & set(lead.partition.split(",")):
            continue
        per_node = tuple(g for j in parts for g in [j.gpus_per_node] * max(j.node_count, 1))
        if not sum(per_node):
            continue
        try:
            contract = parse(lead.comment)
        except MarkerError:
            contract = None
        out[unit_id] = Unit(
            job_id=unit_id, user=lead.user, account=lead.account, partition=lead.partition,
            state=lead.state, reason=lead.reason, gpus_per_node=per_node,
            nodes=tuple(n for j in parts for n in j.node_list),
            submit_time=lead.submit_time, start_time=lead.start_time, end_time=lead.end_time,
            eligible_time=lead.eligible_time, restart_count=lead.restart_count,
            requeue=all(j.requeue for j in parts), contract=contract, priority=lead.priority)
    return out


def observe(client: SlurmClient, ledger: Ledger, cfg: DaemonConfig, now: float,
            log: Any = None) -> Observation:
    """Read Slurm once, update the ledger's jobs and runs, return the policy's input.

    Raises:
        SlurmUnreachable: squeue/sinfo got no answer (the ledger is left untouched).
    """
    jobs = client.jobs()
    nodes = tuple(client.nodes())
    units = units_from_jobs(jobs, cfg)
    intents = ledger.open_intents()
    with ledger.transaction():
        record_units(client, ledger, units, now)
        rebuild_stale_runs(client, ledger, units, now, log)   # lost/stale ledger: sacct
    return Observation(now, build_snapshot(ledger, units, nodes, intents, cfg, now), units, nodes)


def record_units(client: SlurmClient | None, ledger: Ledger, units: dict[int, Unit],
                 now: float) -> None:
    """Fold the units into the ledger (runs opened/closed, jobs upserted or ended).

    ``client`` is used only for ``sacct`` when a run's end is unknown (None: never).
    """
    open_runs = ledger.open_runs()
    for unit in units.values():
        ledger.upsert_job(unit.job_id, user=unit.user, account=unit.account,
                          partition=unit.partition, state=unit.state, gpus=unit.gpus,
                          submit_time=unit.submit_time, restart_count=unit.restart_count, now=now)
        run = open_runs.get(unit.job_id)
        if unit.phase is JobPhase.RUNNING and unit.start_time is not None:
            if run is not None and run.start != unit.start_time:
                _close_unknown(client, ledger, run, before=unit.start_time)
            ledger.start_run(unit.job_id, unit.start_time, unit.gpus, now)
            continue
        if run is not None:
            if unit.phase is None and unit.end_time is not None and unit.end_time <= now:
                ledger.close_run(unit.job_id, run.start, unit.end_time, "slurm")
            else:
                _close_unknown(client, ledger, run, before=now)
        if unit.phase is None:
            _record_unseen_run(ledger, unit, now)
            if unit.state != "COMPLETING":
                ledger.mark_ended(unit.job_id, unit.state, now)
    for row in ledger.jobs(active_only=True):
        if row.job_id not in units:
            run = open_runs.get(row.job_id)
            if run is not None:
                _close_unknown(client, ledger, run, before=now)
            ledger.mark_ended(row.job_id, "GONE" if row.state in PENDING_STATES | RUNNING_STATES
                              else row.state, now)


def _record_unseen_run(ledger: Ledger, unit: Unit, now: float) -> None:
    """A job that started and ended between two cycles: its run is Slurm's start..end."""
    start, end = unit.start_time, unit.end_time
    if start is None or end is None or not start < end <= now:
        return
    if all(r.start != start for r in ledger.runs(unit.job_id)):
        ledger.start_run(unit.job_id, start, unit.gpus, now)
        ledger.close_run(unit.job_id, start, end, "slurm")


def _close_unknown(client: SlurmClient | None, ledger: Ledger, run: Run, before: float) -> None:
    """Close ``run`` whose end Slurm's squeue no longer shows (see module doc)."""
    requeued = [i.requeue_at for i in ledger.intents(run.job_id)
                if i.requeue_at is not None and i.requeue_at >= run.start]
    if requeued:
        ledger.close_run(run.job_id, run.start, min(min(requeued), before), "requeue")
        return
    end = _sacct_end(client, run) if client is not None else None
    if end is not None:
        ledger.close_run(run.job_id, run.start, min(end, before), "sacct")
    else:
        ledger.close_run(run.job_id, run.start, min(run.last_seen, before), "last_seen")


def _sacct_end(client: SlurmClient, run: Run) -> float | None:
    """End of the attempt that started at ``run.start`` per ``sacct --duplicates`` (or None)."""
    try:
        records = client.accounting_runs(run.job_id)
    except SlurmError:
        return None
    for rec in records:
        t = rec.get("time") or {}
        if t.get("start") == int(run.start) and (t.get("end") or 0) >= run.start:
            return float(t["end"])
    return None


def _eligible(unit: Unit, now: float) -> float | None:
    """When a pending unit may start: None (now), its BeginTime, or never (inf) while it waits
    for something GPUs cannot give it (see :data:`STARTABLE_REASONS`)."""
    if unit.phase is not JobPhase.PENDING:
        return None
    if unit.reason not in STARTABLE_REASONS:
        return math.inf
    return unit.eligible_time if unit.eligible_time and unit.eligible_time > now else None


def build_snapshot(ledger: Ledger, units: dict[int, Unit], nodes: Iterable[Node],
                   intents: list[Intent], cfg: DaemonConfig, now: float) -> Snapshot:
    """The policy's input: usable nodes and the pending/running managed units."""
    all_runs = ledger.all_runs()
    rows = {r.job_id: r for r in ledger.jobs(active_only=True)}
    signalled = {i.job_id for i in intents if i.signal_at is not None}
    in_intent = {i.job_id for i in intents}
    node_views = tuple(NodeView(n.name, n.gpus_total, n.gpus_free) for n in nodes if n.gpus_total)
    names = {n.name for n in node_views}
    views = []
    for unit in sorted(units.values(), key=lambda u: u.job_id):
        phase = unit.phase
        row = rows.get(unit.job_id)
        if phase is None or row is None:
            continue
        runs = all_runs.get(unit.job_id, [])
        closed = [r for r in runs if r.end is not None]
        last = closed[-1] if closed else None
        open_run = next((r for r in runs if r.end is None), None)
        exempt = (unit.partition in cfg.exempt_partitions or unit.account in cfg.exempt_accounts)
        running = phase is JobPhase.RUNNING
        views.append(JobView(
            job_id=unit.job_id, phase=phase,
            gpus_per_node=unit.gpus_per_node,
            submit_time=float(unit.submit_time or now),
            attained_gpu_s=sum(r.gpu_seconds(now) for r in runs),
            attained_s=sum(r.seconds(now) for r in runs),
            service_base_gpu_s=row.service_base_gpu_s,
            queue=row.queue, queue_entry_time=row.queue_entry_time,
            run_start=open_run.start if (running and open_run) else None,
            last_run_s=last.seconds(now) if last else 0.0,
            last_run_end=last.end if last else None,
            preemptible=unit.requeue and not exempt and unit.job_id not in in_intent,
            eligible_time=_eligible(unit, now),
            nodes=(unit.nodes if running and len(unit.nodes) == len(unit.gpus_per_node)
                   and set(unit.nodes) <= names else ()),
            being_preempted=unit.job_id in signalled))
    return Snapshot(nodes=node_views, jobs=tuple(views))
