"""``dlprio explain JOBID`` and ``dlprio status``: read-only views of the ledger.

The ledger is what the daemon last saw: both views say how old it is (the daemon's last read
of Slurm) and count an open run only up to the last cycle that saw it running, never
extrapolated to now: after the daemon stops, a job that ended is not shown gaining service.
``explain`` says why a job sits where it sits: its queue, attained service
(GPU·s, summed over its runs, time suspended not counted; a suspended job is said to be),
the thresholds of its queue and the next one, the
promotion rule (Tiresias NSDI'19 section 4.2: back to queue 0 after waiting ``knob ×`` the
last run), and the reason of the last change, in the same words the daemon logged
(docs/design.md, code rule 11); then the start-time forecast the daemon's snapshot holds
(:func:`forecast_lines`). ``status`` lists the active jobs (``--all``: every job the ledger
still holds, finished ones until ``retention_days``) with fixed keys (docs/dlprio.md), plus
``last_seen`` and the refused-update backoff. While ``auto_tune`` is on, both say which
settings are in force and why (:func:`prioritizer.daemon.auto_tune.status_line`).
Both open the ledger read-only and never take the daemon's lock.
"""

from __future__ import annotations

import bisect
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from prioritizer import tables
from prioritizer.daemon import tenants_view
from prioritizer.daemon.auto_tune import in_force, status_line
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.forecast_text import detail_lines, expired
from prioritizer.daemon.ledger import PREEMPTED_OUTCOMES, JobRow, Ledger, Run
from prioritizer.daemon.observe import (HELD_STATES, PENDING_STATES, settle_s, stuck,
                                        waiting_since_requeue)
from prioritizer.daemon.suspension import SUSPENDED_STATES
from prioritizer.daemon.snapshot import (STALE_INTERVALS, SnapshotError, ahead, is_current,
                                         read_snapshot, stale_after_s)
from slurm_plugin.common.cli import visible
from slurm_plugin.common.wording import MAX_SHOWN, shown
from slurm_plugin.slurm.accounting import AccountingRecord
from slurm_plugin.slurm.records import (MAX_JOB_ID, WAITING_STATES, Job, array_task_ranges,
                                        decimal_at_most, parse_array_tasks)

STATUS_KEYS = ("job_id", "user", "state", "held", "queue", "attained_gpu_s", "preemptions",
               "promotions", "restart_count", "last_seen", "update_refusals")


class UnknownJob(LookupError):
    """The ledger has no such job."""


def seen_service(runs: list[Run]) -> tuple[float, float]:
    """(GPU·s, s) over ``runs``, an open run counted up to the last cycle that saw it; time
    suspended is not counted (:meth:`Run.seconds`)."""
    gpu_s = sum(r.gpu_seconds(r.end if r.end is not None else r.last_seen) for r in runs)
    return gpu_s, sum(r.seconds(r.end if r.end is not None else r.last_seen) for r in runs)


def freshness(ledger: Ledger, now: float, interval_s: float) -> str:
    """One line: when the daemon last read Slurm and, past :data:`STALE_INTERVALS`
    intervals, that the ledger is STALE (no daemon cycling, or Slurm away); how many pending
    jobs' values the last cycle left for later ones (``update_budget``), when any."""
    at = ledger.observed_at()
    if at is None:
        return "ledger: no cycle recorded yet (STALE: start the daemon)"
    age = max(now - at, 0.0)
    line = f"ledger as of {_ts(at)} ({age:.0f} s ago)"
    if ahead(at, now):
        line = (f"ledger as of {_ts(at)}, {at - now:.0f} s ahead of this host's clock; STALE: "
                "the clock was set back since the daemon's last cycle, or runs behind the "
                "daemon host's: states and service are as last seen, their age unknown")
    elif age > stale_after_s(interval_s):
        line += (f"; STALE: no daemon cycle for {age:.0f} s (interval {interval_s:g} s): "
                 "states and service are as last seen, not now")
    backlog = int(ledger.meta("order_backlog") or 0)
    if backlog:
        line += (f"; {backlog} pending jobs' values still to send to Slurm (update_budget "
                 "per cycle, head of the start order first)")
    return line


def held_by(row: JobRow) -> str | None:
    """What holds an active job as squeue last said (:attr:`JobRow.held`: a held state word,
    or the hold reason of a pending job, ``JobHeldAdmin``); None when nothing holds it, it
    ended, or it is not waiting (a running job under ``scontrol hold`` runs on; a ledger
    written before that rule may still name its hold)."""
    if row.ended_at is not None or row.state not in WAITING_STATES:
        return None
    return row.held or (row.state if row.state in HELD_STATES else None)  # held: None before schema 6


def status_rows(ledger: Ledger, now: float, *, active_only: bool = False) -> list[dict[str, object]]:
    """One dict per job (``active_only``: not ended) with exactly :data:`STATUS_KEYS`
    (``state``: Slurm's state word; ``held``: what holds it, :func:`held_by`, None when
    nothing; service in GPU·s up to the last cycle that saw the job, 1 decimal;
    ``last_seen`` epoch s; ``update_refusals``: consecutive refused updates, 0 when none)."""
    runs = ledger.all_runs()
    out = []
    for row in ledger.jobs(active_only=active_only):
        service, _ = seen_service(runs.get(row.job_id, []))
        out.append({"job_id": row.job_id, "user": row.user, "state": row.state,
                    "held": held_by(row), "queue": row.queue,
                    "attained_gpu_s": round(service, 1),
                    "preemptions": row.preemptions, "promotions": row.promotions,
                    "restart_count": row.restart_count, "last_seen": row.last_seen,
                    "update_refusals": row.refusals})
    return out


STATUS_HEADERS = ("JOBID", "USER", "STATE", "QUEUE", "ATTAINED(GPU·s)", "PREEMPT", "PROMOTE",
                  "RESTART", "REFUSED")
_STATUS_RIGHT = frozenset(STATUS_HEADERS) - {"USER", "STATE"}


def tenant_table(ledger: Ledger, *, styled: bool = False) -> str:
    """Per tenant as the last cycle saw it (``virtual_clusters``; "" without): GPUs
    guaranteed, used, borrowed beyond the guarantee, waiting, and the weighted fair share."""
    table = tenants_view.recorded_rows(ledger)
    if not table:
        return ""
    return tables.render(tenants_view.TENANT_HEADERS, tenants_view.tenant_cells(table),
                         frozenset(tenants_view.TENANT_HEADERS) - {"TENANT"}, styled=styled)


def status_table(rows: list[dict[str, object]], *, styled: bool = False) -> str:
    """The table of :func:`status_rows`: header + one line per job, columns
    :data:`STATUS_HEADERS` (STATE ``HELD`` for a pending job that a hold reason holds, as
    squeue's REASON ``JobHeldAdmin``, never for a running one; a held state word such as ``REQUEUE_HOLD`` as it is;
    queue spelled ``Q0``, ``Q1``... and ``-`` when not decided, service in GPU·s, as in
    dlqueue and REASON), laid out by :mod:`prioritizer.tables` (``styled``: for a terminal;
    otherwise plain, whitespace-separated, never cropped)."""
    cells = [[str(r["job_id"]), str(r["user"]),
              str(r["state"]) if r["held"] in (None, r["state"]) else "HELD",
              "-" if r["queue"] is None else f"Q{r['queue']}", str(r["attained_gpu_s"]),
              str(r["preemptions"]), str(r["promotions"]), str(r["restart_count"]),
              str(r["update_refusals"])] for r in rows]
    return tables.render(STATUS_HEADERS, cells, _STATUS_RIGHT, styled=styled)


_PLAIN = re.compile(r"[0-9]+")
_HETJOB = re.compile(r"([0-9]+)\+([0-9]+)")
_ARRAY = re.compile(r"[0-9]+_(?:[0-9]+|\[[0-9,\-:%]+\])")


def find_task_ids(text: str) -> str:
    """The line telling how to find by hand the job id of array task(s) ``text`` (``40_3``,
    ``40_[5-9]``): each element is a unit under its own job id, which squeue's ``%A`` and
    sacct's ``JobIDRaw`` give."""
    return (f"JOBID {text}: array tasks are tracked by their own job id; find it with "
            f"'squeue -h -o %A -j {text}' (or 'sacct -X -n -o JobIDRaw -j {text}'), then run "
            "'dlprio explain <that id>'")


class ArrayTask(ValueError):
    """Array task(s) given as JOBID, ``40_3`` or ``40_[5-9]`` (as dlqueue and squeue print
    them): each element is a unit under its own job id, which only Slurm knows
    (:func:`array_task_units`); ``tasks``: the elements as ranges. The message
    (:func:`find_task_ids`) says how to find that id by hand, for when Slurm does not answer."""

    def __init__(self, text: str, array_id: int, tasks: list[range]) -> None:
        super().__init__(find_task_ids(text))
        self.text, self.array_id, self.tasks = text, array_id, tasks

    @property
    def one(self) -> bool:
        """Whether it names one element (``40_3``)."""
        return sum(len(r) for r in self.tasks) == 1


def _meet(a: list[range], b: list[range]) -> bool:
    """Whether two sets of array elements share one (each range walked by the shorter)."""
    return any(any(t in long for t in short)
               for x in a for y in b
               for short, long in [(x, y) if len(x) <= len(y) else (y, x)])


def array_task_units(array_id: int, tasks: list[range], jobs: Iterable[Job],
                     records: Iterable[AccountingRecord] = ()) -> dict[int, str]:
    """The ledger units (job ids) of the elements ``tasks`` of array ``array_id``, each with
    how squeue names it (``40_3``; ``40_[5-9]`` for the pending record): the job ids of the
    elements' own squeue records and of the pending record whose task expression holds one of
    them (squeue folds the pending tasks into one record, one unit, until Slurm starts them);
    when squeue shows none of them, the job ids of their sacct records (finished tasks).
    ``{}`` when neither names one."""
    out: dict[int, str] = {}
    for job in jobs:
        if job.array_job_id != array_id:
            continue
        if job.array_task_id is not None and any(job.array_task_id in r for r in tasks):
            out[job.job_id] = f"{array_id}_{job.array_task_id}"
        elif job.array_task_id is None and job.array_task_string:
            if _meet(tasks, array_task_ranges(job.array_task_string)):
                out[job.job_id] = f"{array_id}_[{job.array_task_string}]"
    if not out:
        out = {r.job_id: f"{array_id}_{r.array_task_id}" for r in records
               if r.array_job_id == array_id and r.array_task_id is not None
               and any(r.array_task_id in t for t in tasks)}
    return out


def ledger_job_id(text: str) -> int:
    """The ledger unit of a job id as squeue/dlqueue print it: ``40`` → 40, a hetjob component
    ``40+1`` → its leader 40 (a hetjob is one unit, keyed by the leader's id).

    Raises:
        ValueError: as :func:`parse_job_id`.
    """
    return parse_job_id(text)[0]


def parse_job_id(text: str) -> tuple[int, int | None]:
    """``(ledger unit, hetjob component or None)`` of a job id as squeue/dlqueue print it:
    ``40`` → (40, None), ``40+1`` → (40, 1) (:func:`ledger_job_id`).

    Raises:
        ArrayTask: for an array task ``40_3`` (each element is a unit under its own job id,
            squeue ``%A``; :func:`array_task_units` finds it in what Slurm shows).
        ValueError: for several tasks ``40_[5-9]``, with how to find their ids
            (:func:`find_task_ids`); for anything else, the accepted forms.
    """
    text = text.strip()
    if _PLAIN.fullmatch(text) and decimal_at_most(text, MAX_JOB_ID):
        return int(text), None
    het = _HETJOB.fullmatch(text)
    if het and decimal_at_most(het.group(1), MAX_JOB_ID) and decimal_at_most(het.group(2),
                                                                             MAX_JOB_ID):
        return int(het.group(1)), int(het.group(2))
    if _ARRAY.fullmatch(text) and decimal_at_most(text.partition("_")[0], MAX_JOB_ID) and (
            len(text) <= MAX_SHOWN):   # a longer one is no id Slurm gives: echoed bounded below
        array, _, tasks = text.partition("_")
        try:
            elements = parse_array_tasks(tasks.removeprefix("[").removesuffix("]"))
        except ValueError as exc:
            raise ValueError(f"JOBID {text}: {exc}; expected array tasks as squeue prints them "
                             "(40_3, 40_[5-9], 40_[1,4-8:2])") from None
        raise ArrayTask(text, int(array), elements)
    raise ValueError(f"JOBID {shown(text)}: expected a job id as dlqueue prints it: 40, 40+1 "
                     f"(hetjob component) or 40_3 (array task), at most {MAX_JOB_ID}")


def explain(job_id: int, ledger: Ledger, cfg: DaemonConfig, now: float,
            component: int | None = None) -> str:
    """Human text on one job (see module doc); ``component``: the hetjob component asked for
    (``40+1``), which the job must have. Raises :class:`UnknownJob`."""
    row = ledger.job(job_id)
    if row is None:
        raise UnknownJob(f"job {job_id}: not in the ledger {ledger.path} (not a managed GPU job, "
                         "or the daemon has not seen it yet)")
    if component is not None and row.components is not None and component >= row.components:
        raise UnknownJob(
            f"job {job_id} has components +0..+{row.components - 1}; no +{component}"
            if row.components > 1 else
            f"job {job_id} is no heterogeneous job (it has no +N components); no +{component}: "
            f"run 'dlprio explain {job_id}'")
    runs = ledger.runs(job_id)
    service, _ = seen_service(runs)
    counted = service - row.service_base_gpu_s
    pol, _ = in_force(cfg, ledger)   # auto_tune's adopted settings, when in force
    las1d = pol.policy == "las"
    thresholds = pol.thresholds_s if las1d else pol.thresholds_gpu_s
    unit = "s of run time" if las1d else "GPU·s"
    lines = [f"job {job_id} ({row.user}, {row.partition}): {row.state}",
             freshness(ledger, now, cfg.interval_s)]
    if (tuned := status_line(cfg, ledger)) is not None:
        lines.append(tuned)
    requeued_at = ledger.requeued_for().get(job_id)
    settle = settle_s(cfg.interval_s)
    # a job array's pending record is never judged stuck (its tasks start under new job ids),
    # but like any waiter it is awaited while settle lasts
    if (requeued_at is not None and row.ended_at is None and row.state in PENDING_STATES
            and waiting_since_requeue(requeued_at, runs, row.held_seen)):
        if row.array_record:
            if now - requeued_at < settle:
                lines.append(f"victims were requeued for it at {_ts(requeued_at)}; Slurm should "
                             f"start its next task by {_ts(requeued_at + settle)} (a job "
                             "array's tasks start under job ids of their own)")
        elif stuck(requeued_at, runs, row.held_seen, now, settle):
            lines.append(f"victims were requeued for it at {_ts(requeued_at)} and it has not "
                         f"started in {settle:g} s: Slurm lacks something else for it (CPUs, "
                         "memory, the nodes it named or excluded), so it preempts no more "
                         "until it starts")
        else:
            lines.append(f"victims were requeued for it at {_ts(requeued_at)}; Slurm should "
                         f"start it by {_ts(requeued_at + settle)}, else it preempts no more "
                         "until it starts")
    if hold := held_by(row):
        lines.append(f"held by Slurm ({visible(hold)}): not ordered until someone releases it "
                     f"('scontrol release {job_id}'); its attained service is kept")
    if row.state in SUSPENDED_STATES and row.ended_at is None:
        since = next((r.suspended_at for r in runs if r.end is None and r.suspended_at), None)
        lines.append(f"suspended by Slurm ({row.state}"
                     + (f" since {_ts(since)}" if since is not None else "")
                     + "): it keeps its GPUs but does not run; the time suspended is not "
                     "counted as attained service")
    if row.queue is None:
        lines.append("queue: not decided yet")
    elif row.queue > len(thresholds):   # thresholds_gpu_s shortened since the last cycle saw it
        lines.append(f"queue: {row.queue}, decided under earlier settings with more queues "
                     f"than the {len(thresholds) + 1} now (0..{len(thresholds)}, policy "
                     f"{pol.policy}); " + ("kept as it ended" if row.ended_at is not None
                                           else "the daemon's next cycle places it again"))
    else:
        lo = thresholds[row.queue - 1] if row.queue > 0 else 0
        hi = f"{thresholds[row.queue]:g}" if row.queue < len(thresholds) else "inf"
        # an ended job keeps the queue of the last cycle that saw it running: the service it
        # attained after that cycle (or while the daemon was down) moved it no more
        last = " as last decided while it ran" if row.ended_at is not None else ""
        lines.append(f"queue: {row.queue} of 0..{len(thresholds)} (policy {pol.policy}){last}; "
                     f"queue range [{lo:g}, {hi}) {unit}")
        if row.queue_entry_time is not None:
            lines.append(f"in queue since: {_ts(row.queue_entry_time)}")
    if 0 < row.gpus < 1:
        lines.append(f"share: {row.gpus:g} of one GPU (GPU shards): its attained service counts "
                     f"{row.gpus:g} GPU·s per second; a whole-GPU job may preempt it together with "
                     "every shard job of its GPU")
    lines.append(f"attained service: {service:.0f} GPU·s over {len(runs)} run(s)"
                 + (f"; counted since last promotion: {counted:.0f}" if row.service_base_gpu_s else ""))
    level = bisect.bisect_right(thresholds, counted if not las1d else counted / max(row.gpus, 1))
    lines.append(f"thresholds: {', '.join(f'{t:g}' for t in thresholds)} {unit}"
                 f" (service alone places it in queue {level})")
    if pol.starve_knob > 0:
        lines.append(f"promotion: back to queue 0 after waiting >= {pol.starve_knob:g} x its last "
                     "run")
    when = f" at {_ts(row.reason_time)}" if row.reason_time else ""
    lines.append(f"last change{when}: {row.reason or 'none'}")
    tenant_rule = tenants_view.recorded_reason(ledger, job_id)
    if tenant_rule is not None:
        lines.append(f"tenants (last cycle): {tenant_rule}")
    lines.append(f"promotions: {row.promotions}, preemptions: {row.preemptions}, "
                 f"restarts: {row.restart_count}")
    for r in runs:
        end = _ts(r.end) if r.end is not None else f"running when last seen {_ts(r.last_seen)}"
        seen = r.end if r.end is not None else r.last_seen
        paused = r.suspended(seen)
        lines.append(f"  run {_ts(r.start)} -> {end}: {r.seconds(seen):.0f} s x {r.gpus:g} GPUs"
                     + (f" (and {paused:.0f} s suspended, not counted)" if paused >= 0.5 else ""))
    for i in ledger.intents(job_id):
        made = i.outcome is None or i.outcome in PREEMPTED_OUTCOMES
        lines.append(f"  preemption for job {i.waiter}{'' if made else ' not made'}"
                     f"{f' ({i.rule})' if i.rule else ''}: signal "
                     f"{i.signal or 'none'}, {i.outcome or 'in progress'}"
                     f"{'' if made else ' (not counted)'}")
    for i in ledger.intents_for(job_id):
        lines.append(f"  preempted job {i.job_id} for it{f' ({i.rule})' if i.rule else ''}: "
                     f"{i.outcome or 'in progress'}")
    if row.applied:
        lines.append(f"told Slurm: {row.applied}")
    if row.refusals:
        retry = f"; next try at {_ts(row.retry_at)}" if row.retry_at else ""
        lines.append(f"Slurm refused {row.refusals} update(s) in a row: {row.refused}{retry}")
    return "\n".join(lines) + "\n"


def forecast_lines(job_id: int, ledger: Ledger, snapshot_path: str, now: float,
                   interval_s: float = 30.0) -> list[str]:
    """The start-time forecast of an active job from the daemon's snapshot
    (:func:`prioritizer.daemon.forecast_text.detail_lines`; nothing for a job that ended or
    that the ledger lacks; one line when the snapshot is missing or unreadable). A snapshot
    older than :data:`STALE_INTERVALS` × ``interval_s`` (the daemon stopped) makes the
    forecast stale whatever its own age."""
    row = ledger.job(job_id)
    if row is None or row.ended_at is not None:
        return []
    try:   # read_snapshot reads a regular file only, bounded: a FIFO or device never blocks
        snap = read_snapshot(snapshot_path)
    except (SnapshotError, OSError) as exc:   # its message names the file
        return [f"forecast: none (snapshot {visible(str(exc))})"]
    if snap is None:
        return [f"forecast: none (no snapshot at {visible(snapshot_path)}: is the daemon "
                "running?)"]
    made: Mapping[str, Any] | None = snap.forecast
    if not is_current(snap.generated_at, now, stale_after_s(interval_s)):
        made = expired(made)   # the daemon stopped updating the snapshot, or the clock is off
    return detail_lines(made, job_id, now, running=row.state == "RUNNING")


def _ts(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
