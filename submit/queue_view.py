"""The pure core of ``dlqueue``: Slurm jobs + the daemon's public snapshot → rows → a rich table.

Place in the pipeline (docs/design.md, code rule 13, "snapshot → pure table builder → thin live
shell"): :mod:`submit.queue_cli`
reads the jobs with one squeue call through :meth:`slurm_plugin.slurm.client.SlurmClient.jobs` and the daemon's world-readable snapshot through
:func:`prioritizer.daemon.snapshot.read_snapshot` (never the private ledger), then calls
:func:`build_rows`, :func:`render_text` (or :func:`build_queue_table` for ``--watch``),
:func:`changes` and :func:`json_rows` here.
Nothing in this module runs a command, reads a file or a clock: ``now`` is an argument.

Sources: squeue(1) (columns, state abbreviations, JOBID forms ``LEADER+OFFSET`` and
``ARRAY_TASK``); Slurm's scheduling order "preemptor, reservation, partition PriorityTier,
priority, submit time, job id" (docs/design.md, "Changing state"); the
requeue delay: ``scontrol
requeue`` sets BeginTime = now + ``cred_expire`` + 1 s and resets ``submit_time`` to the requeue
time (slurm.conf(5) ``AuthInfo``; seen on 22.05: reason ``BeginTime``, ``restart_cnt`` 1,
``eligible_time`` = the begin time).

User-controlled text (names, users, reasons, ids) is shown literally and whole: every cell is a
:class:`rich.text.Text` (never markup), control and invisible formatting characters are written
as visible escapes by :func:`visible` (a newline becomes the two characters ``\\n``, so a row
stays one line), and plain output is rendered at the table's natural width (never cropped,
never wrapped). Only ``--watch``, whose screen must fit the terminal, lays the table out to
its width (``fit=True``, :mod:`submit.queue_fit`): NAME and REASON wrap inside their column (at
spaces where possible, long words folded, no character lost but the space at a break), every
other column stays whole, and the least needed columns are left out (the screen names them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prioritizer.daemon import forecast_text
from prioritizer.daemon.snapshot import PublicJob, PublicSnapshot, PublicTenant
from prioritizer.tables import natural_width, plain_text, render_table, rich_table, visible
from slurm_plugin import marker
from slurm_plugin.slurm.records import HOLDING_STATES, WAITING_STATES, Job
from submit import queue_fit

if TYPE_CHECKING:  # rich's table loads only for --watch (build_queue_table): dlqueue start-up
    from rich.table import Table
    from rich.text import Text


# squeue(1) "JOB STATE CODES": compact form → the job_state word of squeue --json.
STATE_CODES = {
    "BF": "BOOT_FAIL", "CA": "CANCELLED", "CD": "COMPLETED", "CF": "CONFIGURING",
    "CG": "COMPLETING", "DL": "DEADLINE", "F": "FAILED", "NF": "NODE_FAIL", "OOM": "OUT_OF_MEMORY",
    "PD": "PENDING", "PR": "PREEMPTED", "R": "RUNNING", "RD": "RESV_DEL_HOLD",
    "RF": "REQUEUE_FED", "RH": "REQUEUE_HOLD", "RQ": "REQUEUED", "RS": "RESIZING",
    "RV": "REVOKED", "SI": "SIGNALING", "SE": "SPECIAL_EXIT", "SO": "STAGE_OUT",
    "ST": "STOPPED", "S": "SUSPENDED", "TO": "TIMEOUT",
}
JSON_KEYS = ("job_id", "display_id", "user", "name", "state", "queue", "attained_gpu_s", "gpus", "nodes",
             "wait_s", "preemptions", "reason", "shards", "job_class", "forecast")
_DIGITS = re.compile(r"\d+")
_STATE_STYLE = {"RUNNING": "green", "PENDING": "yellow", "COMPLETING": "cyan"}


@dataclass(frozen=True)
class QueueRow:
    """One line of the queue, raw values (text is NOT escaped here; :func:`visible` does that).

    Attributes:
        job_id: Slurm's job id (a hetjob component's own id).
        display_id: the id as squeue writes it: ``12``, ``12+1`` (hetjob), ``30_4`` (array
            element), ``30_[5-9]`` (an array's pending elements).
        user, name, state: as Slurm reports them.
        queue: the daemon's queue level (0 = highest), ``None`` without the snapshot or when
            the daemon does not manage the job.
        attained_gpu_s: attained service in GPU·s from the snapshot, ``None`` likewise.
        gpus: total GPUs of the job; nodes: nodes allocated (started) or requested (pending).
        node_names: hostlist expression of allocated nodes, "" while pending.
        wait_s: seconds, see :func:`wait_seconds`.
        preemptions: the daemon's preemption count, or Slurm's ``restart_cnt`` without a
            snapshot; ``None`` for a job the snapshot does not hold (one that ended: Slurm's
            count would mix every requeue into the daemon's preemptions; shown ``-``).
        reason: see :func:`reason_text`.
        shards: GPU shards per node of a shard job (a share of one GPU, shown ``shard:K`` under
            GPUS), 0 otherwise.
        job_class: ``production`` or ``opportunistic`` (the checkpoint marker's class; an
            opportunistic job's REASON starts with ``opportunistic;``).
        start: the START cell (:func:`prioritizer.daemon.forecast_text.start_cell`).
        forecast: the ``--json`` forecast (:func:`prioritizer.daemon.forecast_text.json_field`).
    """

    job_id: int
    display_id: str
    user: str
    name: str
    state: str
    queue: int | None
    attained_gpu_s: float | None
    gpus: int
    nodes: int
    node_names: str
    wait_s: int
    preemptions: int | None
    reason: str
    shards: int = 0
    job_class: str = "production"
    start: str = ""
    forecast: dict[str, object] | None = None


def _job_class(comment: str) -> str:
    try:
        contract = marker.parse(comment)
    except marker.MarkerError:
        return "production"
    return contract.job_class if contract is not None else "production"


def parse_states(spec: str) -> frozenset[str] | None:
    """``-t`` value → job_state words; ``None`` means every state (``all``).

    Accepts a comma-separated list of squeue(1) codes or words in any case (``pd,R,completed``).
    Raises ValueError naming the unknown entry and the valid codes.
    """
    out: set[str] = set()
    words = set(STATE_CODES.values())
    for raw in spec.split(","):
        item = raw.strip().upper()
        if item == "ALL":
            return None
        if item in STATE_CODES:
            out.add(STATE_CODES[item])
        elif item in words:
            out.add(item)
        else:
            from slurm_plugin.common.wording import shown   # the error path only
            raise ValueError(f"unknown job state {shown(raw.strip())}; use codes such as "
                             f"{', '.join(sorted(STATE_CODES))} or 'all' (squeue(1))")
    if not out:
        raise ValueError("empty state list; e.g. -t PD,R")
    return frozenset(out)


def format_duration(seconds: float) -> str:
    """squeue's TIME format: ``M:SS``, ``H:MM:SS``, ``D-HH:MM:SS`` (negative values count as 0)."""
    s = max(int(seconds), 0)
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    if d:
        return f"{d}-{h:02d}:{m:02d}:{sec:02d}"
    if h:
        return f"{h}:{m:02d}:{sec:02d}"
    return f"{m}:{sec:02d}"


def wait_seconds(job: Job, now: int) -> int:
    """Seconds the job has waited for its current (or next) run.

    Pending: ``now - submit_time`` (Slurm resets ``submit_time`` on requeue, so for a requeued
    job this is the wait since its requeue). Started: ``start_time - submit_time``, the wait
    before the current run. Finished: the same with ``end_time`` when it never started.
    Never negative; 0 when Slurm gave no submit time.
    """
    if job.submit_time is None:
        return 0
    if job.state in WAITING_STATES:
        return max(now - job.submit_time, 0)
    began = job.start_time or job.end_time or job.submit_time
    return max(began - job.submit_time, 0)


def reason_text(job: Job, pub: PublicJob | None, now: int) -> str:
    """The REASON cell: Slurm's reason for pending jobs, then the daemon's, joined by ``; ``.

    A pending job with reason ``BeginTime`` and ``restart_count > 0`` is in Slurm's requeue
    delay (BeginTime = requeue + cred_expire + 1 s), shown as ``requeue delay (starts in ~Ns)``
    with N = ``eligible_time - now`` (0 once due), not as stuck. A first-run ``BeginTime``
    (``--begin``) shows ``BeginTime (eligible in H:MM:SS)``. Running jobs show only the
    daemon's reason (Slurm says ``None``).
    """
    parts: list[str] = []
    if job.state in WAITING_STATES:
        due = job.eligible_time or job.start_time
        left = max((due or now) - now, 0)
        if job.reason == "BeginTime" and job.restart_count > 0:
            parts.append(f"requeue delay (starts in ~{left}s)")
        elif job.reason == "BeginTime":
            parts.append(f"BeginTime (eligible in {format_duration(left)})")
        elif job.reason and job.reason != "None":
            parts.append(job.reason)
    elif job.reason and job.reason != "None":
        parts.append(job.reason)
    if pub is not None and pub.reason:
        parts.append(pub.reason)
    return "; ".join(parts)


def _display_id(job: Job) -> str:
    if job.het_job_id:
        return f"{job.het_job_id}+{job.het_job_offset}"
    if job.array_job_id and job.array_task_id is not None:
        return f"{job.array_job_id}_{job.array_task_id}"
    if job.array_job_id and job.array_task_string:  # pending elements, as squeue writes them
        return f"{job.array_job_id}_[{job.array_task_string}]"
    return str(job.job_id)


def _public(job: Job, by_id: dict[int, PublicJob]) -> PublicJob | None:
    return by_id.get(job.job_id) or by_id.get(job.unit_id)


def _unit_key(job: Job, pub: PublicJob | None, top_priority: int) -> tuple[int, ...]:
    """Sort key of a schedulable unit (group, then the order inside the group)."""
    submit = job.submit_time or 0
    if job.state in HOLDING_STATES:
        return (0, 0, job.start_time or 0, 0, submit, job.unit_id)
    if job.state in WAITING_STATES:
        if pub is not None and pub.rank is not None:
            return (1, 0, pub.rank, 0, submit, job.unit_id)
        return (1, 1, 0, -top_priority, submit, job.unit_id)
    return (2, 0, job.end_time or 0, 0, submit, job.unit_id)


def build_rows(jobs: Iterable[Job], snapshot: PublicSnapshot | None, now: int) -> list[QueueRow]:
    """Rows in the order the scheduler will start them.

    Order: started jobs (by start time), then waiting jobs by the daemon's ``rank`` where the
    snapshot has one, then the remaining waiting jobs by Slurm priority (descending), submit
    time, id (Slurm's own order), then finished jobs by end time. The components of a hetjob
    stay together, in offset order, keyed by their leader (highest priority of the unit).

    Args:
        jobs: Slurm's jobs (already filtered).
        snapshot: the daemon's public snapshot, or ``None`` when there is none.
        now: the current time, epoch s.
    """
    jobs = list(jobs)
    by_id = snapshot.by_id() if snapshot is not None else {}
    units = [j.unit_id for j in jobs]   # a property: read once per job (10,000 rows)
    top: dict[int, int] = {}
    leader: dict[int, Job] = {}
    for j, unit in zip(jobs, units):
        p = top.get(unit)
        if p is None or j.priority > p:
            top[unit] = j.priority
        lead = leader.get(unit)
        if lead is None or j.het_job_offset < lead.het_job_offset:
            leader[unit] = j
    pubs = [_public(j, by_id) for j in jobs] if by_id else [None] * len(jobs)
    unit_keys = {unit: _unit_key(lead, _public(lead, by_id) if by_id else None, top[unit])
                 for unit, lead in leader.items()}
    order = sorted(range(len(jobs)), key=lambda i: (*unit_keys[units[i]], jobs[i].het_job_offset,
                                                     jobs[i].job_id))
    rows = []
    made = snapshot.forecast if snapshot is not None else None
    for i in order:
        j, pub = jobs[i], pubs[i]
        start, field = "", None
        if made is not None:
            start = forecast_text.start_cell(made, j.unit_id, now, j.state in WAITING_STATES)
            field = forecast_text.json_field(made, j.unit_id, now)
        rows.append(QueueRow(
            job_id=j.job_id, display_id=_display_id(j), user=j.user, name=j.name,
            state=j.state, queue=pub.queue if pub else None,
            attained_gpu_s=pub.attained_gpu_s if pub else None, gpus=j.gpus,
            nodes=len(j.node_list) or j.node_count, node_names=j.nodes,
            wait_s=wait_seconds(j, now),
            preemptions=(pub.preemptions if pub else
                         None if snapshot is not None else j.restart_count),
            reason=reason_text(j, pub, now), shards=j.shards_per_node,
            job_class=_job_class(j.comment), start=start, forecast=field))
    return rows


def change_key(row: QueueRow) -> tuple[object, ...]:
    """What ``--watch`` into a file or pipe reports a change of: everything but the clocks
    (WAIT, ATTAINED, and the numbers inside REASON such as a countdown or "behind N jobs"),
    which move every refresh without anything happening."""
    return (row.user, row.name, row.state, row.queue, row.gpus, row.node_names,
            row.preemptions, _DIGITS.sub("#", row.reason))


def changes(before: dict[str, tuple[object, ...]] | None, rows: Sequence[QueueRow], *,
            show_service: bool, show_start: bool = False
            ) -> tuple[dict[str, tuple[object, ...]], str]:
    """One ``--watch`` refresh for a file or pipe: (the new state, the text to print).

    The first refresh (``before`` None) prints the whole table; later ones only the rows that
    are new or changed (see :func:`change_key`) as a table with its header, then one
    ``gone: ID, ID`` line for rows that left; "" when nothing changed.
    """
    now = {r.display_id: change_key(r) for r in rows}
    if before is None:
        return now, render_text(rows, show_service=show_service, show_start=show_start)
    moved = [r for r in rows if before.get(r.display_id) != now[r.display_id]]
    gone = [k for k in before if k not in now]
    text = render_text(moved, show_service=show_service, show_start=show_start) if moved else ""
    if gone:
        text += "gone: " + ", ".join(visible(k) for k in gone) + "\n"
    return now, text


def json_rows(rows: Sequence[QueueRow]) -> list[dict[str, object]]:
    """Rows as dicts with exactly :data:`JSON_KEYS` (raw text, seconds, GPU·s; ``display_id``
    the id as squeue writes it and ``-j`` takes it, a pending array's whole task expression;
    ``nodes`` is a count; ``queue``/``attained_gpu_s`` are ``None`` without the daemon; ``forecast`` is
    :func:`prioritizer.daemon.forecast_text.json_field`, ``None`` without a fresh one)."""
    out = []
    for r in rows:
        raw = vars(r)   # flat dataclass of plain values: no deep copy needed (asdict is slow)
        out.append({k: raw[k] for k in JSON_KEYS})
    return out


def queue_name(queue: int | None) -> str:
    """The one spelling of a dlprio queue in every view: ``Q0`` (highest), ``Q1``...; "" for none."""
    return "" if queue is None else f"Q{queue}"


def service_text(gpu_s: float | None) -> str:
    """Attained service as every view prints it: whole GPU·s ("" for none)."""
    return "" if gpu_s is None else f"{gpu_s:.0f}"


#: The attained-service column, unit in the header (the same unit as REASON and dlprio status).
ATTAINED_HEAD = "ATTAINED(GPU·s)"
_RIGHT = {ATTAINED_HEAD, "GPUS", "WAIT", "START", "PREEMPTS"}


def headers(show_service: bool, show_start: bool = False) -> list[str]:
    """Column headers; QUEUE and ATTAINED(GPU·s) only with a daemon snapshot, START only
    with a forecast in it."""
    heads = ["JOBID", "USER", "NAME", "STATE"]
    if show_service:
        heads += ["QUEUE", ATTAINED_HEAD]
    heads += ["GPUS", "NODES", "WAIT"]
    if show_start:
        heads.append("START")
    return heads + ["PREEMPTS", "REASON"]


#: The most characters of a pending array's task expression the JOBID cell shows: squeue's own
#: default (squeue(1) SLURM_BITSTR_LEN, 64 bytes, the end cut to "..."); dlqueue reads the
#: whole expression, so ``-j 30_98`` and ``--json`` see every task.
ARRAY_TASKS_SHOWN = 64


def shown_id(display_id: str) -> str:
    """The JOBID cell: ``display_id`` with a pending array's task expression longer than
    :data:`ARRAY_TASKS_SHOWN` cut as squeue cuts it (``30_[0,2,4,...]``)."""
    head, sep, tasks = display_id.partition("_[")
    if not sep or len(tasks) - 1 <= ARRAY_TASKS_SHOWN:
        return display_id
    return f"{head}_[{tasks[:ARRAY_TASKS_SHOWN - 3]}...]"


def cell_texts(row: QueueRow, show_service: bool, show_start: bool = False) -> list[str]:
    """The cells of one row as shown (user text through :func:`visible`)."""
    cells = [visible(shown_id(row.display_id)), visible(row.user), visible(row.name),
             visible(row.state)]
    if show_service:
        cells += [queue_name(row.queue), service_text(row.attained_gpu_s)]
    gpus = f"shard:{row.shards}" if row.shards and not row.gpus else str(row.gpus)
    reason = f"{row.job_class}; {row.reason}" if row.job_class != "production" else row.reason
    cells += [gpus, visible(row.node_names) or str(row.nodes), format_duration(row.wait_s)]
    if show_start:
        cells.append(row.start)
    return cells + ["-" if row.preemptions is None else str(row.preemptions), visible(reason)]


def _cells(row: QueueRow, show_service: bool, show_start: bool = False) -> list[Text]:
    from rich.text import Text

    texts = cell_texts(row, show_service, show_start)
    state_at = 3
    return [Text(t, style=_STATE_STYLE.get(row.state, "") if i == state_at else "")
            for i, t in enumerate(texts)]


def render_text(rows: Sequence[QueueRow], *, show_service: bool = True,
                show_start: bool = False) -> str:
    """The table as plain text (what ``dlqueue`` prints): :func:`prioritizer.tables.plain_text`,
    the layout of :func:`build_queue_table` printed by :func:`render_table` (a test compares
    them), fast enough for 10,000 rows."""
    return plain_text(headers(show_service, show_start),
                      (cell_texts(r, show_service, show_start) for r in rows), _RIGHT)


def build_queue_table(rows: Sequence[QueueRow], width: int, *, show_service: bool = True,
                      fit: bool = False, show_start: bool = False) -> Table:
    """The queue as a borderless squeue-like table.

    Args:
        rows: from :func:`build_rows`.
        width: the console width (cells) it will be printed at.
        show_service: include QUEUE and ATTAINED(GPU·s) columns (only with a snapshot).
        show_start: include the START column (only with a forecast in the snapshot).
        fit: for ``--watch``: when the natural width exceeds ``width``, the columns of
            :func:`watch_layout` (:func:`submit.queue_fit.fit`): NAME and REASON wrap inside
            their column, every other column stays whole, the least needed are left out.
            Without ``fit`` nothing ever wraps, crops or is left out: print with
            :func:`render_table`, which widens the console.
    Returns:
        A :class:`rich.table.Table`; every cell is a :class:`Text` passed through
        :func:`visible`, so no user string is read as markup.
    """
    heads = headers(show_service, show_start)
    cells = [_cells(r, show_service, show_start) for r in rows]
    if not fit:
        return rich_table(heads, cells, _RIGHT)
    layout = watch_layout(rows, width, show_service=show_service, show_start=show_start)
    keep = [i for i, h in enumerate(heads) if h in layout.shown]
    return rich_table(layout.shown, ([row[i] for i in keep] for row in cells), _RIGHT,
                      layout.widths, layout.widths)


def watch_layout(rows: Sequence[QueueRow], width: int, *, show_service: bool = True,
                 show_start: bool = False) -> queue_fit.Fit:
    """The ``--watch`` screen's columns for ``rows`` at ``width`` cells
    (:func:`submit.queue_fit.fit` of the cells as shown)."""
    return queue_fit.fit(headers(show_service, show_start),
                         [cell_texts(r, show_service, show_start) for r in rows], width)


TENANT_HEADERS = ("TENANT", "GUARANTEED", "USED", "BORROWED", "WAITING", "FAIR_SHARE")


def render_tenants(tenants: Sequence[PublicTenant]) -> str:
    """The daemon's per-tenant GPUs (``virtual_clusters``) as plain text: guaranteed, used,
    borrowed beyond the guarantee, waiting, and the weighted fair share."""
    from prioritizer import tables
    cells = [[visible(t.name), str(t.guaranteed), str(t.used), str(t.borrowed), str(t.waiting),
              f"{t.fair_share:.3f}"] for t in tenants]
    return tables.render(TENANT_HEADERS, cells, frozenset(TENANT_HEADERS) - {"TENANT"})
