"""Observe: one read of Slurm per cycle, folded into the ledger and into the policy's Snapshot.

First step of the daemon cycle (docs/design.md, code rule 2: ``observe → decide → act``). It reads jobs with one formatted
squeue call and nodes with one formatted sinfo call through :class:`slurm_plugin.slurm.client.SlurmClient`,
groups heterogeneous-job components into one unit keyed by the leader's id (docs/design.md,
"Ledger and daemon"), keeps the managed units (GPU jobs in the configured partitions), and updates the
ledger: a running unit has an open run starting at Slurm's own ``start_time``; a run ends at
the job's ``end_time`` when it finished, at the daemon's own requeue time when the daemon
requeued it, else at the end ``sacct --duplicates`` reports, else at the last cycle that saw it
running (losing at most one interval; seen on 22.05: after a requeue squeue shows the *next*
start and no end). A job that started and ended between two cycles gets the run
Slurm reports (start_time..end_time). A run's time suspended (SUSPENDED or STOPPED: the run
stays open, the job keeps its GPUs) is kept from Slurm's time used and is no attained
service (:mod:`prioritizer.daemon.suspension`). Nothing here decides;
``prioritizer.policy.decide.decide`` does.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Intent, Ledger, Run
from prioritizer.daemon import sharing
from prioritizer.daemon.rebuild import rebuild_stale_runs
from prioritizer.daemon.suspension import SUSPENDED_STATES, suspension
from prioritizer.policy.model import JobPhase, JobView, NodeView, Snapshot
from prioritizer.policy.sharing import Share
from prioritizer.policy.tenants import account_key
from slurm_plugin.slurm.client import SlurmClient, SlurmError
from slurm_plugin.marker import CheckpointContract, MarkerError, parse
from slurm_plugin.slurm.records import WAITING_STATES, Job, Node, array_task_count

#: The states of a unit the daemon orders and of a unit whose run it counts: SUSPENDED and
#: STOPPED jobs keep their allocation, so their run stays open, its time suspended not
#: counted (prioritizer/daemon/suspension.py; slurm_plugin.slurm.records has every state word).
PENDING_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED"})
RUNNING_STATES = frozenset({"RUNNING", "CONFIGURING", "SIGNALING", "RESIZING", "SUSPENDED",
                            "STOPPED"})
#: Waiting states of a unit held for a person (REQUEUE_HOLD after ``scontrol requeuehold``,
#: RESV_DEL_HOLD when its reservation was deleted, SPECIAL_EXIT after a special exit code;
#: squeue(1) "JOB STATE CODES"): not ordered (an update of its priority would release a
#: hold) and not ended either; the ledger keeps it active with its runs, so retention never
#: prunes the attained service it resumes with once released.
HELD_STATES = WAITING_STATES - PENDING_STATES
#: States of a unit that has not ended: one that leaves squeue unseen in a final state is GONE.
_UNFINISHED = PENDING_STATES | RUNNING_STATES | HELD_STATES
#: Pending reasons after which Slurm would start the job as soon as GPUs are free. A pending job
#: with any other reason (held, dependency, limits, nodes down...) is ordered but never preempted
#: for: freeing GPUs would not start it (squeue(1) "JOB REASON CODES").
STARTABLE_REASONS = frozenset({"None", "", "Priority", "Resources", "BeginTime"})
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
#: States of a running unit that a checkpoint signal cannot reach: ``scancel --signal`` of a
#: suspended job answers "Job is in transitional state, retrying" until it is resumed (24.11
#: and 26.05), so such a unit is no victim.
NO_SIGNAL_STATES = SUSPENDED_STATES
#: Seconds after a preemption made for a waiter (victims requeued) within which Slurm starts
#: the waiter if GPUs were all it lacked (the victims' epilogs, then the main or backfill
#: scheduler; at least 4 daemon intervals). A waiter still pending after it lacks what the
#: policy cannot see (CPUs, memory, the nodes it named or excluded, features): it is preempted
#: for no more until it starts. One that a cycle saw held since the requeue is not judged so:
#: the hold kept it from starting, and once released it waits as a fresh waiter. Nor is a job
#: array's pending record: the tasks Slurm starts for it take new job ids
#: (:attr:`Unit.array_record`).
SETTLE_S = 120.0


@dataclass(frozen=True)
class Unit:
    """One schedulable unit: a plain job, an array element, or a whole hetjob (leader id).

    ``gpus_per_node`` has one entry per node of the components that ask for GPUs
    (components concatenated; GPU-less components add none), aligned with ``nodes`` while
    running. ``requeue``: every component may be requeued and is a batch job (``scontrol
    requeue`` restarts neither a ``--no-requeue`` job nor a ``salloc``/``srun`` allocation). ``contract`` is the checkpoint marker of the leader's comment
    (None: no marker, or a malformed one). A shard job (``--gres=shard:K``, no whole GPU) is a
    unit of one GPU per node for placement, ``shards`` K per node, and ``share`` its fraction
    of one GPU once the nodes' shards per GPU are known (prioritizer/daemon/sharing.py).
    ``components``: the hetjob's components (GPU-less ones included), 1 for any other unit.
    ``tasks``: the pending elements of an array's meta record (squeue folds them into one
    record, ``30_[5-9%2]``: 5, each asking ``gpus_per_node``), 1 for any other unit.
    ``array_tasks``: the task expression of the pending record of a job array's tasks, as
    squeue gives it (``2-10%2``; "" for any other unit); such a record (:attr:`array_record`)
    never shows a start: Slurm starts each task but the last under a new job id.
    ``element``: for the array task that carries the array's own job id (the last one Slurm
    starts keeps it), ``ARRAYID_TASKID``, the only name of it alone: the array's id names
    every task of the array in ``scontrol update``, ``scontrol requeue`` and ``scancel``
    (scontrol(1), scancel(1)); "" for any other unit.
    ``time_used_s``: the leader's seconds run in its current (or last) run, time suspended
    not counted (squeue's ``TimeUsed``; None: Slurm gives none).
    ``partitions``: every partition its components name (a pending one's list split), the
    leader's first: where it may run (``policy.pools``).
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
    shards: int = 0
    share: float = 0.0
    components: int = 1
    tasks: int = 1
    array_tasks: str = ""
    time_used_s: float | None = None
    partitions: tuple[str, ...] = ()
    element: str = ""

    @property
    def array_record(self) -> bool:
        """Whether it is the pending record of a job array's tasks."""
        return bool(self.array_tasks)

    @property
    def update_target(self) -> int | str:
        """What Slurm's commands name for it (``scontrol update jobid=``, ``scontrol
        requeue``, ``scancel --signal``): its job id; for an array's pending record, its
        pending tasks (``40_[5-9]``, the throttle left out); for the task that carries the
        array's id, :attr:`element` (``40_9``). The array's id alone names every task, and
        once one has ended Slurm answers "Job has already finished" (exit 1) though it
        updates the others."""
        if self.element:
            return self.element
        if not self.array_tasks:
            return self.job_id
        return f"{self.job_id}_[{self.array_tasks.partition('%')[0]}]"

    @property
    def gpus(self) -> float:
        """GPUs its attained service counts per second: the share of one GPU of a shard unit
        (prioritizer/daemon/sharing.py), else its GPUs."""
        return self.share if self.share else sum(self.gpus_per_node)

    @property
    def held(self) -> bool:
        """Held in the queue: a waiting unit (:data:`~slurm_plugin.slurm.records.WAITING_STATES`)
        with a hold reason, or a pending one of Slurm priority 0 (scontrol(1) ``hold`` "sets
        its priority to 0") whose reason is none of :data:`STARTABLE_REASONS`: squeue's reason
        is then the hold's description where Slurm gives one, "job requeued in held state"
        after ``scontrol requeuehold`` on 24.11 and 26.05. Slurm refuses priority updates of
        held jobs. A running unit is never held: ``scontrol hold`` of a running job leaves it
        running with priority 0 and reason JobHeldAdmin/JobHeldUser (26.05), a hold that only
        keeps it from starting again if it is requeued."""
        if self.state not in WAITING_STATES:
            return False
        return self.reason in HELD_REASONS or (
            self.state in PENDING_STATES and self.priority == 0
            and self.reason not in STARTABLE_REASONS)

    @property
    def hold(self) -> str | None:
        """What holds it as squeue says, recorded in the ledger for ``dlprio explain``: its
        held state word (:data:`HELD_STATES`), else the reason of a :attr:`held` unit
        (``JobHeldAdmin``, ``job requeued in held state``); None when nothing holds it."""
        if self.state in HELD_STATES:
            return self.state
        return self.reason if self.held else None

    @functools.cached_property
    def phase(self) -> JobPhase | None:
        """PENDING, RUNNING, or None for any other state (completing, finished); computed once
        per unit (a cycle asks about 9 times per unit)."""
        if self.state in PENDING_STATES:
            return JobPhase.PENDING
        if self.state in RUNNING_STATES and self.start_time is not None:
            return JobPhase.RUNNING
        return None


@dataclass(frozen=True)
class Observation:
    """What one cycle saw: ``now`` (epoch s), the policy's snapshot, managed units by id,
    and the nodes Slurm reported; ``lease_jobs``: the jobs named ``cfg.lease_name`` (the
    cluster lease's fencing reads them, :mod:`prioritizer.daemon.lease`); ``shares``: the
    shard and opportunistic units (:mod:`prioritizer.daemon.sharing`); ``preempting``: the
    jobs of an open preemption intent (being checkpointed and requeued); ``awaiting``: the
    pending waiters GPUs are being freed for (:func:`awaiting_waiters`)."""

    now: float
    snapshot: Snapshot
    units: dict[int, Unit]
    nodes: tuple[Node, ...]
    lease_jobs: tuple[Job, ...] = ()
    shares: Mapping[int, Share] = field(default_factory=dict)
    preempting: frozenset[int] = frozenset()
    awaiting: frozenset[int] = frozenset()


#: ``units_from_jobs``' memory between two cycles: unit id → (its Job records, the result:
#: the Unit or None when not managed). Jobs are frozen; the client reuses the Job of a record
#: that did not change, so an unchanged unit is found by identity.
UnitCache = dict[int, tuple[tuple[Job, ...], "Unit | None"]]


def units_from_jobs(jobs: Iterable[Job], cfg: DaemonConfig,
                    cache: UnitCache | None = None) -> dict[int, Unit]:
    """Group hetjob components into units and keep the managed GPU units (pure, but for
    ``cache``: pass the same dict every cycle, with the same ``cfg``, to reuse the units whose
    Job records are the very same objects as last time; it then holds this call's units)."""
    groups: dict[int, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.unit_id, []).append(job)
    managed = set(cfg.partitions) | set(cfg.queue_partitions)
    out: dict[int, Unit] = {}
    before = dict(cache) if cache is not None else {}
    if cache is not None:
        cache.clear()
    for unit_id, parts in groups.items():
        if len(parts) > 1:
            parts.sort(key=lambda j: j.het_job_offset)
        key = tuple(parts)
        seen = before.get(unit_id)
        if seen is not None and len(seen[0]) == len(key) and all(
                a is b for a, b in zip(seen[0], key)):
            if cache is not None:
                cache[unit_id] = seen
            if seen[1] is not None:
                out[unit_id] = seen[1]
            continue
        unit = _unit(unit_id, parts, managed)
        if cache is not None:
            cache[unit_id] = (key, unit)
        if unit is not None:
            out[unit_id] = unit
    return out


def _unit(unit_id: int, parts: list[Job], managed: set[str]) -> Unit | None:
    """The Unit of one group of components (leader first), None when not a managed GPU unit."""
    lead = parts[0]
    if managed and not managed & set(lead.partition.split(",")):
        return None
    per_node, nodes = _gpu_nodes(parts)
    shards = lead.shards_per_node if len(parts) == 1 and not sum(per_node) else 0
    if shards:
        per_node = (1,) * max(lead.node_count, 1)
        nodes = lead.node_list if len(lead.node_list) == len(per_node) else ()
    if not sum(per_node):
        return None
    contract = _contract(lead.comment)
    return Unit(
        job_id=unit_id, user=lead.user, account=lead.account, partition=lead.partition,
        state=lead.state, reason=lead.reason, gpus_per_node=per_node,
        nodes=nodes,
        submit_time=lead.submit_time, start_time=lead.start_time, end_time=lead.end_time,
        eligible_time=lead.eligible_time, restart_count=lead.restart_count,
        requeue=all(j.requeue and j.batch for j in parts), contract=contract,
        priority=lead.priority, shards=shards, components=len(parts),
        tasks=array_task_count(lead.array_task_string) if lead.array_task_string else 1,
        array_tasks=lead.array_task_string, time_used_s=lead.time_used_s,
        partitions=tuple(dict.fromkeys(p for j in parts for p in j.partition.split(",") if p)),
        element=f"{unit_id}_{lead.array_task_id}" if lead.array_task_id is not None
        and lead.array_job_id == unit_id and not lead.array_task_string else "")


@functools.lru_cache(maxsize=4096)
def _contract(comment: str) -> CheckpointContract | None:
    """The checkpoint marker of a comment (None: none or malformed); most jobs of a site share
    a few comments, so the parse is cached (10,000 jobs a cycle)."""
    try:
        return parse(comment)
    except MarkerError:
        return None


def _gpu_nodes(parts: list[Job]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """GPUs per node and, once running, the node names, of the components that ask for GPUs.

    A component without GPUs (a hetjob's parameter server, PAI's ``ps`` role) needs no GPU
    node: it adds no entry, so the policy never looks for (or frees) a GPU node for it.
    ``nodes`` is empty when any GPU component's node list does not match its node count.
    """
    per_node: list[int] = []
    nodes: list[str] = []
    aligned = True
    for j in parts:
        if not j.gpus_per_node:
            continue
        count = max(j.node_count, 1)
        per_node.extend([j.gpus_per_node] * count)
        aligned = aligned and len(j.node_list) == count
        nodes.extend(j.node_list)
    return tuple(per_node), tuple(nodes) if aligned else ()


def observe(client: SlurmClient, ledger: Ledger, cfg: DaemonConfig, now: float,
            log: Any = None, cache: UnitCache | None = None) -> Observation:
    """Read Slurm once, update the ledger's jobs and runs, return the policy's input.
    ``cache``: the daemon's :data:`UnitCache` (see :func:`units_from_jobs`).

    Raises:
        SlurmUnreachable: squeue/sinfo got no answer (the ledger is left untouched).
        SlurmShapeUnknown: Slurm answered in a shape the client does not parse (another
            release, a field with an unexpected value): the ledger is left untouched, so no
            job is closed because a field failed to parse (docs/dlprio.md "Slurm versions").
    """
    jobs = client.jobs()
    nodes = tuple(client.nodes())
    tiers = partition_tiers(client.show_partitions())
    units = units_from_jobs(jobs, cfg, cache)
    units = sharing.with_shares(units, nodes)
    detail = client.jobs(detail=True) if sharing.needs_detail(units) else ()
    intents = ledger.open_intents()
    with ledger.transaction():
        record_units(client, ledger, units, now)
        rebuild_stale_runs(client, ledger, units, now, log)   # lost/stale ledger: sacct
        ledger.note_observed(now)
    lease = tuple(j for j in jobs if cfg.lease_name and j.name == cfg.lease_name)
    requeued = ledger.requeued_for()   # once per cycle: the snapshot and the waiters share it
    return Observation(now, build_snapshot(ledger, units, nodes, intents, cfg, now, tiers=tiers,
                                           requeued_for=requeued),
                       units, nodes, lease, sharing.shares(units, detail),
                       frozenset(i.job_id for i in intents),
                       awaiting_waiters(ledger, units, intents, now, settle_s(cfg.interval_s),
                                        requeued))


def awaiting_waiters(ledger: Ledger, units: Mapping[int, Unit], intents: Iterable[Intent],
                     now: float, settle: float,
                     requeued_for: Mapping[int, float]) -> frozenset[int]:
    """The pending waiters GPUs are being freed for: the waiter of an open preemption intent,
    and one whose victims were requeued less than ``settle`` seconds ago (:func:`settle_s`)
    that has not started since. ``requeued_for``: the cycle's
    :meth:`~prioritizer.daemon.ledger.Ledger.requeued_for`. With virtual clusters they come
    first in the order (``policy.tenant_decide.waiters_first``)."""
    def pending(w: int) -> bool:
        return w in units and units[w].phase is JobPhase.PENDING

    out = {i.waiter for i in intents if i.waiter is not None and pending(i.waiter)}
    for w, at in requeued_for.items():   # a few jobs: those whose victims were requeued lately
        if now - at < settle and pending(w):
            row = ledger.job(w)
            if waiting_since_requeue(at, ledger.runs(w), row.held_seen if row else None):
                out.add(w)
    return frozenset(out)


def partition_tiers(partitions: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
    """``{partition: PriorityTier}`` from ``scontrol show partition`` (missing/odd: 0)."""
    out: dict[str, int] = {}
    for name, fields in partitions.items():
        raw = fields.get("PriorityTier", "0")
        out[name] = int(raw) if raw.isdigit() else 0
    return out


def unit_tier(unit: Unit, tiers: Mapping[str, int]) -> int:
    """The tier Slurm schedules the unit in: the highest of its partitions (a pending job may
    list several, ``gpu,low``)."""
    return max((tiers.get(p, 0) for p in unit.partition.split(",")), default=0)


def record_units(client: SlurmClient | None, ledger: Ledger, units: dict[int, Unit],
                 now: float) -> None:
    """Fold the units into the ledger (runs opened/closed, jobs upserted or ended).

    ``client`` is used only for ``sacct`` when a run's end is unknown (None: never). Call it
    inside one :meth:`Ledger.transaction`. Cost at 10,000 jobs: one read of the
    active rows and open runs, one ``IN`` read of the finished units' rows, then bulk writes
    (``executemany``) of what changed; an unchanged active job costs no statement of its own
    (its ``last_seen`` moves with :meth:`Ledger.touch_active`), a finished job already recorded
    costs nothing.
    """
    open_runs = ledger.open_runs()
    active = {r.job_id: r for r in ledger.jobs(active_only=True)}
    finished = [u.job_id for u in units.values() if u.phase is None and u.job_id not in active]
    rows = {**ledger.jobs_by_id(finished), **active}
    upserts: list[tuple] = []
    starts: list[tuple[int, float, float, float]] = []
    suspended: list[tuple[int, float, float, float | None, float]] = []
    for unit in units.values():
        row = rows.get(unit.job_id)
        seen = (unit.user, unit.account, unit.partition, unit.state, unit.gpus,
                unit.submit_time, unit.restart_count, unit.components, unit.hold,
                int(unit.array_record))
        known = row is not None and seen == (row.user, row.account, row.partition, row.state,
                                             row.gpus, row.submit_time, row.restart_count,
                                             row.components, row.held, row.array_record)
        run = open_runs.get(unit.job_id)
        if (unit.phase is None and known and row is not None and run is None
                and (row.ended_at is None) == (unit.state in HELD_STATES)):
            continue                      # finished (or held) and already recorded as such
        if not (known and row is not None and row.ended_at is None):
            upserts.append((unit.job_id, *seen, now))
        was = row.state if row is not None else ""
        if unit.phase is JobPhase.RUNNING and unit.start_time is not None:
            if run is not None and run.start != unit.start_time:
                _close_unknown(client, ledger, run, before=unit.start_time, was=was)
                run = None
            this = run or Run(unit.job_id, unit.start_time, None, unit.gpus, now, None)
            held = suspension(this, unit.state, was, unit.time_used_s, now)
            if held != (this.suspended_s, this.suspended_at, this.stopped_s):
                suspended.append((unit.job_id, unit.start_time, *held))
            starts.append((unit.job_id, unit.start_time, unit.gpus, now))
            continue
        if unit.phase is None:            # finished or completing: its writes stay in order
            ledger.upsert_jobs(upserts)
            upserts.clear()
        if run is not None:
            # Slurm's end and time used are this run's only while squeue shows this run: a
            # job requeued (by the daemon or anyone) and cancelled between two cycles ended
            # pending, its run at the requeue
            this_run = unit.start_time == run.start and (
                row is None or unit.restart_count == row.restart_count)
            if (unit.phase is None and this_run and unit.end_time is not None
                    and unit.end_time <= now):
                # a final state: the seconds suspended in all, none still counting
                ledger.close_run(unit.job_id, run.start, unit.end_time, "slurm", suspension(
                    run, unit.state, was, unit.time_used_s, unit.end_time)[0])
            else:
                _close_unknown(client, ledger, run, before=now, was=was)
        if unit.phase is None:
            _record_unseen_run(ledger, unit, now)
            if unit.state != "COMPLETING" and unit.state not in HELD_STATES:
                ledger.mark_ended(unit.job_id, unit.state, now)
    ledger.upsert_jobs(upserts)
    ledger.start_runs(starts)
    ledger.set_suspended(suspended)
    for job_id, row in active.items():
        if job_id not in units:
            run = open_runs.get(job_id)
            if run is not None:
                _close_unknown(client, ledger, run, before=now, was=row.state)
            ledger.mark_ended(job_id, "GONE" if row.state in _UNFINISHED else row.state, now)
    ledger.touch_active(now)


def _record_unseen_run(ledger: Ledger, unit: Unit, now: float) -> None:
    """A job that started and ended between two cycles: its run is Slurm's start..end, less
    the time Slurm says it was suspended."""
    start, end = unit.start_time, unit.end_time
    if start is None or end is None or not start < end <= now:
        return
    if all(r.start != start for r in ledger.runs(unit.job_id)):
        ledger.start_run(unit.job_id, start, unit.gpus, now)
        fresh = Run(unit.job_id, start, None, unit.gpus, now, None)
        ledger.close_run(unit.job_id, start, end, "slurm",
                         suspension(fresh, unit.state, "", unit.time_used_s, end)[0])


def _close_unknown(client: SlurmClient | None, ledger: Ledger, run: Run, before: float,
                   was: str = "") -> None:
    """Close ``run`` whose end Slurm's squeue no longer shows (see module doc); ``was``: the
    job's state the ledger recorded at the previous cycle."""
    requeued = [i.requeue_at for i in ledger.intents(run.job_id)
                if i.requeue_at is not None and i.requeue_at >= run.start]
    if requeued:
        ledger.close_run(run.job_id, run.start, min(min(requeued), before), "requeue")
        return
    found = _sacct_end(client, run) if client is not None else None
    if found is not None:
        end, suspended_s = found
        # sacct counts the time SUSPENDED; the time STOPPED is the daemon's own count, a stop
        # still going at the last sighting included
        stopped = run.stopped_s
        if was == "STOPPED" and run.suspended_at is not None:
            stopped += max(run.last_seen - run.suspended_at, 0.0)
        ledger.close_run(run.job_id, run.start, min(end, before), "sacct", suspended_s + stopped)
    else:
        ledger.close_run(run.job_id, run.start, min(run.last_seen, before), "last_seen")


def _sacct_end(client: SlurmClient, run: Run) -> tuple[float, float] | None:
    """End (epoch s) and seconds suspended (sacct's ``Suspended``) of the attempt that
    started at ``run.start`` per ``sacct --duplicates`` (or None)."""
    try:
        records = client.accounting_runs(run.job_id)
    except SlurmError:
        return None
    for rec in records:
        if rec.start == int(run.start) and rec.end is not None and rec.end >= run.start:
            return float(rec.end), float(rec.suspended_s)
    return None


def _eligible(unit: Unit, now: float, is_stuck: bool = False) -> float | None:
    """When a pending unit may start: None (now), its BeginTime, or never (inf) while it waits
    for something GPUs cannot give it (see :data:`STARTABLE_REASONS`), is held, or is
    ``is_stuck`` (:func:`stuck`)."""
    if unit.phase is not JobPhase.PENDING:
        return None
    if unit.reason not in STARTABLE_REASONS or unit.held or is_stuck:
        return math.inf
    return unit.eligible_time if unit.eligible_time and unit.eligible_time > now else None


def settle_s(interval_s: float) -> float:
    """Seconds a waiter is given to start after its victims were requeued: :data:`SETTLE_S`,
    at least 4 daemon intervals of ``interval_s`` seconds."""
    return max(SETTLE_S, 4 * interval_s)


def waiting_since_requeue(requeued_at: float | None, runs: Iterable[Run],
                          held_seen: float | None) -> bool:
    """Victims were requeued for the waiter at ``requeued_at`` (epoch s) and it has not started
    since: no run of ``runs`` began in that second or after it (Slurm gives a start in whole
    seconds, and may start the waiter within the second its victims were requeued in), and no
    cycle saw it held since (``held_seen``, the last one that did: a hold, by Slurm or a
    person, kept it from starting; once released it waits as a fresh waiter)."""
    return (requeued_at is not None and all(r.start < math.floor(requeued_at) for r in runs)
            and (held_seen is None or held_seen < requeued_at))


def stuck(requeued_at: float | None, runs: Iterable[Run], held_seen: float | None, now: float,
          settle: float) -> bool:
    """A waiter that victims were requeued for at ``requeued_at`` and that has neither started
    nor been seen held since (:func:`waiting_since_requeue`), ``settle`` seconds
    (:func:`settle_s`) on: it lacks what the policy cannot see."""
    return (requeued_at is not None and now - requeued_at >= settle
            and waiting_since_requeue(requeued_at, runs, held_seen))


def build_snapshot(ledger: Ledger, units: dict[int, Unit], nodes: Iterable[Node],
                   intents: list[Intent], cfg: DaemonConfig, now: float, *,
                   tiers: Mapping[str, int] | None = None,
                   requeued_for: Mapping[int, float] | None = None) -> Snapshot:
    """The policy's input: usable nodes and the pending/running managed units.
    ``tiers``: partition PriorityTier (:func:`partition_tiers`; None: all 0).
    ``requeued_for``: the cycle's :meth:`~prioritizer.daemon.ledger.Ledger.requeued_for`
    (None: read here).

    A unit whose GPUs are about to be freed is given as RUNNING and ``releasing``
    (:class:`prioritizer.policy.model.JobView`): its preemption is in flight (an open
    intent: written, signalled, in grace, requeue being sent), Slurm shows it COMPLETING
    (ending by itself, or requeued and not pending yet), or its checkpoint signal was refused
    because it was already completing while squeue still showed it running. The policy
    counts those GPUs as coming free for the waiters and picks no victim they cover."""
    tiers = tiers or {}
    all_runs = ledger.active_runs()
    rows = {r.job_id: r for r in ledger.jobs(active_only=True)}
    refused = ledger.refused_victims()
    ending = ledger.completing_victims()
    in_intent = {i.job_id for i in intents}
    if requeued_for is None:
        requeued_for = ledger.requeued_for()
    settle = settle_s(cfg.interval_s)
    nodes = list(nodes)
    unusable = {n.name for n in nodes if not n.usable}   # draining: its jobs are let finish
    node_views = tuple(NodeView(n.name, n.gpus_total, n.gpus_free, n.partitions)
                       for n in nodes if n.gpus_total)
    names = {n.name for n in node_views}
    views = []
    exempt_parts = set(cfg.exempt_partitions)
    exempt_accounts = {account_key(a) for a in cfg.exempt_accounts}
    tier_of: dict[str, int] = {}   # per partition string: most jobs share a few
    no_runs: list[Run] = []
    for job_id in sorted(units):
        unit = units[job_id]
        phase = unit.phase
        completing = phase is None and unit.state == "COMPLETING"
        if completing:
            phase = JobPhase.RUNNING   # still holds its GPUs, frees them without a victim
        row = rows.get(job_id)
        if phase is None or row is None:
            continue
        runs = all_runs.get(job_id, no_runs)
        if runs:
            closed = [r for r in runs if r.end is not None]
            last = closed[-1] if closed else None
            open_run = next((r for r in runs if r.end is None), None)
            attained_gpu_s = sum(r.gpu_seconds(now) for r in runs)
            attained_s = sum(r.seconds(now) for r in runs)
        else:   # most pending jobs never ran: nothing to sum
            last = open_run = None
            attained_gpu_s = attained_s = 0.0
        exempt = unit.partition in exempt_parts or account_key(unit.account) in exempt_accounts
        running = phase is JobPhase.RUNNING
        tier = tier_of.get(unit.partition)
        if tier is None:
            tier = tier_of[unit.partition] = unit_tier(unit, tiers)
        views.append(JobView(
            job_id=job_id, phase=phase,
            gpus_per_node=unit.gpus_per_node,
            submit_time=float(unit.submit_time or now),
            attained_gpu_s=attained_gpu_s,
            attained_s=attained_s,
            service_base_gpu_s=row.service_base_gpu_s,
            queue=row.queue, queue_entry_time=row.queue_entry_time,
            run_start=open_run.start if (running and open_run) else None,
            last_run_s=last.seconds(now) if last else 0.0,
            last_run_end=last.end if last else None,
            preemptible=(unit.requeue and not exempt and job_id not in in_intent
                         and refused.get(job_id, -1) < unit.restart_count
                         and unit.state not in NO_SIGNAL_STATES
                         and unusable.isdisjoint(unit.nodes)),
            # a job array's record: its tasks start under new ids, never on the record
            eligible_time=_eligible(unit, now, not unit.array_record and stuck(
                requeued_for.get(job_id), runs, row.held_seen, now, settle)),
            nodes=(unit.nodes if running and len(unit.nodes) == len(unit.gpus_per_node)
                   and set(unit.nodes) <= names else ()),
            releasing=(completing or job_id in in_intent
                       or ending.get(job_id) == unit.restart_count), tier=tier,
            first_start=min(r.start for r in runs) if runs else None,
            partitions=unit.partitions))
    return Snapshot(nodes=node_views, jobs=tuple(views))
