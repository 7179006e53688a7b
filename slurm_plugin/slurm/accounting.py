"""Typed records of Slurm accounting, parsed from ``sacct --duplicates --json`` (slurmdbd).

Pure parsing and folding (no commands run here; :meth:`slurm_plugin.slurm.client.SlurmClient.accounting`
runs ``sacct``). Each declared release's record is one msgspec Struct: :class:`SacctJob38`
(22.05, openapi/dbv0.0.38; ``tests/data/sample-sacct*.json``) and :class:`SacctJob42`
(24.11–26.05, data_parser/v0.0.42; ``tests/data/capture-*-sacct-v0.0.42.json``), both read into
:class:`AccountingRecord` by one function:

* With ``--duplicates`` sacct prints one record per *attempt*: a requeued job has a record in
  state ``REQUEUED`` for each earlier run and one for its last run (sacct(1), ``-D``). The
  record of a later attempt carries the requeue time as ``time.submission``; the job's own
  submit time is the first attempt's.
* Job-level records only: steps (``steps[]``) are never summed, so a step's time is never
  counted twice beside its job's.
* GPUs: the allocated TRES ``gres/gpu`` (``tres.allocated``), the requested count
  (``tres.requested``) where the attempt never ran (no start, nothing allocated); typed GPU
  entries (``gres/gpu:a100``) are summed only where no plain ``gres/gpu`` is written.
  slurmdbd records a GRES only when ``AccountingStorageTRES`` lists it (slurm.conf(5),
  https://slurm.schedmd.com/tres.html), in ``tres.requested`` as in ``tres.allocated``, and the
  sacct record keeps no other count of a job's GPUs (no ``tres_per_node`` as squeue's). So a
  record without any ``gres/gpu`` entry (``gpu_tres`` False) is a CPU-only job where GPUs are
  tracked, and a job whose GPUs are *unknown* where they are not (:func:`tracks_gpus`,
  :data:`GPU_TRES_FIX`).
* State: ``state.current``, the word sacct prints (v0.0.42's list by
  :func:`slurm_plugin.slurm.shapes.state_word`).
* Hetjob components are separate records with ``het.job_id`` = the leader's id and
  ``het.job_offset``; :func:`fold_jobs` folds them into one job (leader id, GPUs summed over
  components, the k-th records of every component forming attempt k).

Times are epoch seconds (``None`` where Slurm has none: 0, ``null`` or ``NO_VAL``),
``time.limit`` minutes in the JSON and seconds here. ``time.suspended`` (sacct(1)
``Suspended``: "the amount of time a job or job step was suspended") is seconds; the seconds an
attempt *ran* leave it out, as Slurm's own ``Elapsed`` does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import msgspec

from slurm_plugin.slurm.records import ACTIVE_STATES, ShapeError
from slurm_plugin.slurm.shapes import NoVal, Release, decode, epoch, number, state_word

#: Final states that mean "stopped from outside, so its run time is a lower bound".
TIMELIMIT_STATES = frozenset({"TIMEOUT", "DEADLINE"})
CANCELLED_STATES = frozenset({"CANCELLED"})
#: States of an attempt that has not finished yet: a job's active states, less ``REQUEUED``,
#: which sacct gives the attempt that a requeue ended.
UNFINISHED_STATES = ACTIVE_STATES - {"REQUEUED"}


@dataclass(frozen=True)
class AccountingRecord:
    """One record of ``sacct --duplicates --json``: one attempt of one job (hetjob component).

    Attributes:
        job_id: the record's job id (a hetjob component has its own id).
        het_job_id: the hetjob leader's id, ``None`` for a plain job; ``het_offset`` its index.
        array_job_id, array_task_id: the array's id and element index, ``None`` outside arrays.
        name, user, account, partition, comment: as slurmdbd stores them.
        state: ``state.current`` (COMPLETED, FAILED, TIMEOUT, CANCELLED, REQUEUED, RUNNING, ...).
        submit, eligible, start, end: epoch seconds, ``None`` where unset (never started: start).
        time_limit_s: the time limit in seconds, ``None`` when unlimited or unknown.
        gpus: allocated GPUs (requested GPUs when the attempt never ran).
        nodes: allocated nodes (requested when it never ran).
        ran: whether the attempt started (has a start time and an allocation).
        gpu_tres: whether the TRES list read names ``gres/gpu`` (False: no GPUs, or an
            accounting that does not track them, :func:`tracks_gpus`).
        suspended_s: seconds the attempt spent suspended (``time.suspended``).
    """

    job_id: int
    het_job_id: int | None
    het_offset: int
    array_job_id: int | None
    array_task_id: int | None
    name: str
    user: str
    account: str
    partition: str
    comment: str
    state: str
    submit: int | None
    eligible: int | None
    start: int | None
    end: int | None
    time_limit_s: int | None
    gpus: int
    nodes: int
    ran: bool
    gpu_tres: bool = True
    suspended_s: int = 0

    @property
    def unit_id(self) -> int:
        """The id of the schedulable job: the hetjob leader's id, else the record's own."""
        return self.het_job_id or self.job_id

    @property
    def run_s(self) -> float:
        """Seconds this attempt ran, time suspended not counted (0 when it never started or
        has no end yet)."""
        if self.start is None or self.end is None:
            return 0.0
        return float(max(self.end - self.start - self.suspended_s, 0))


@dataclass(frozen=True)
class Attempt:
    """One run of a job (hetjob components merged): epoch s, GPUs, and how it ended;
    ``gpu_tres``: some component's TRES names ``gres/gpu`` (see :class:`AccountingRecord`);
    ``suspended_s``: seconds it spent suspended (the most of its components)."""

    start: int | None
    end: int | None
    gpus: int
    nodes: int
    state: str
    gpu_tres: bool = True
    suspended_s: int = 0

    @property
    def run_s(self) -> float:
        """Seconds run, time suspended not counted (0 when it never started or has no end)."""
        if self.start is None or self.end is None:
            return 0.0
        return float(max(self.end - self.start - self.suspended_s, 0))

    @property
    def gpu_s(self) -> float:
        """GPU·seconds this run held."""
        return self.run_s * self.gpus


@dataclass(frozen=True)
class AccountedJob:
    """One job from accounting, every attempt in start order (a hetjob is one job).

    ``gpus``/``nodes`` are the last attempt's (the requested ones if it never ran);
    ``submit``/``eligible`` the first attempt's; ``state`` the last attempt's.
    """

    job_id: int
    name: str
    user: str
    account: str
    partition: str
    comment: str
    submit: int | None
    eligible: int | None
    time_limit_s: int | None
    gpus: int
    nodes: int
    state: str
    attempts: tuple[Attempt, ...]
    array_job_id: int | None = None
    array_task_id: int | None = None

    @property
    def end(self) -> int | None:
        """The last attempt's end (epoch s), ``None`` while unfinished."""
        return self.attempts[-1].end if self.attempts else None

    @property
    def finished(self) -> bool:
        """True when the last attempt has ended (no longer pending or running) and the job
        runs no more: a last attempt ``REQUEUED`` is a job whose next, pending attempt
        accounting has not recorded yet (slurmdbd writes it a moment after the requeue)."""
        return (self.state not in UNFINISHED_STATES and self.state != "REQUEUED"
                and self.end is not None)

    @property
    def gpu_tres(self) -> bool:
        """True when some attempt's TRES names ``gres/gpu`` (False: CPU-only, or GPUs not
        tracked by accounting)."""
        return any(a.gpu_tres for a in self.attempts)

    @property
    def attained_gpu_s(self) -> float:
        """GPU·seconds run over every attempt, time suspended not counted (the daemon's
        attained service, 2D)."""
        return sum(a.gpu_s for a in self.attempts)

    @property
    def ran_s(self) -> float:
        """Seconds run over every attempt, time suspended not counted."""
        return sum(a.run_s for a in self.attempts)


class Tres(msgspec.Struct, frozen=True):
    """One TRES of a sacct record (``tres.allocated``/``tres.requested``): ``type`` (``cpu``,
    ``node``, ``gres``, ...), ``name`` (``gpu``, ``gpu:a100`` for a typed GPU; ``null`` on
    22.05 and ``""`` later for an untyped TRES), ``count`` (``null`` on 22.05 and negative
    later where the TRES has no count, e.g. ``energy``)."""

    type: str
    name: str | None
    count: int | None


class _Allocation(msgspec.Struct, frozen=True):
    allocated: list[Tres] = []
    requested: list[Tres] = []


class _Comment38(msgspec.Struct, frozen=True):
    job: str | None = None


class _State38(msgspec.Struct, frozen=True):
    current: str


class _Time38(msgspec.Struct, frozen=True):
    submission: int | None = None
    eligible: int | None = None
    start: int | None = None
    end: int | None = None
    limit: int | None = None
    suspended: int | None = None


class _Het38(msgspec.Struct, frozen=True):
    job_id: int = 0
    job_offset: int | None = None


class _Array38(msgspec.Struct, frozen=True):
    job_id: int = 0
    task_id: int | None = None


class SacctJob38(msgspec.Struct, frozen=True):
    """One element of ``jobs`` in ``sacct --json`` on 22.05 (openapi/dbv0.0.38,
    ``src/plugins/openapi/dbv0.0.38/jobs.c``), the fields read here. That release writes every
    field (``null`` where unset); the defaults let a record be made from a few fields
    (:func:`record_from_json`). Times: epoch s; ``time.limit``: minutes (``null`` = none)."""

    job_id: int
    state: _State38
    name: str | None = ""
    user: str | None = ""
    account: str | None = ""
    partition: str | None = ""
    comment: _Comment38 = _Comment38()
    time: _Time38 = _Time38()
    tres: _Allocation = _Allocation()
    het: _Het38 = _Het38()
    array: _Array38 = _Array38()
    allocation_nodes: int | None = None


class _Comment42(msgspec.Struct, frozen=True):
    administrator: str
    job: str
    system: str


class _State42(msgspec.Struct, frozen=True):
    current: list[str]
    reason: str


class _Time42(msgspec.Struct, frozen=True):
    submission: int
    eligible: int
    start: int
    end: int
    limit: NoVal
    suspended: int


class _Het42(msgspec.Struct, frozen=True):
    job_id: int
    job_offset: NoVal


class _Array42(msgspec.Struct, frozen=True):
    job_id: int
    task_id: NoVal


class SacctJob42(msgspec.Struct, frozen=True):
    """One element of ``jobs`` in ``sacct --json=v0.0.42`` (24.11–26.05;
    ``src/plugins/data_parser/v0.0.42/parsers.c``, ``JOB``), the fields read here, every one
    required. Unlike squeue's record, the times stay plain integers (``time.start`` of an
    attempt that never ran is ``NO_VAL``, 4294967294, on 26.05); ``time.limit``,
    ``het.job_offset`` and ``array.task_id`` are :class:`NoVal`; ``state.current`` is a list
    (``["PENDING", "REQUEUED"]`` for a requeued attempt, sacct's ``REQUEUED``). ``user`` is
    ``null`` when neither slurmdbd nor sacct's host can name the job's uid (a deleted user:
    ``DUMP_FUNC(JOB_USER)`` falls back to ``uid_to_string_or_null``; sacct's text shows the
    uid); it reads as no user."""

    job_id: int
    state: _State42
    name: str
    user: str | None
    account: str
    partition: str
    comment: _Comment42
    time: _Time42
    tres: _Allocation
    het: _Het42
    array: _Array42
    allocation_nodes: int


class _Sacct38(msgspec.Struct):
    jobs: list[SacctJob38]


class _Sacct42(msgspec.Struct):
    jobs: list[SacctJob42]


_SACCT: dict[str, type[_Sacct38 | _Sacct42]] = {"v0.0.38": _Sacct38, "v0.0.42": _Sacct42}


#: What turns GPU accounting on (slurm.conf(5) ``AccountingStorageTRES``), one line.
GPU_TRES_FIX = ("add gres/gpu to AccountingStorageTRES in slurm.conf "
                "(AccountingStorageTRES=gres/gpu) and restart slurmctld; only jobs that start "
                "after that are counted")


def tracks_gpus(config: Mapping[str, str]) -> bool | None:
    """Whether slurmdbd records jobs' GPUs, from ``scontrol show config``'s
    ``AccountingStorageTRES`` (``cpu,mem,energy,node,billing,...,gres/gpu``): True when it lists
    ``gres/gpu`` (or a typed ``gres/gpu:TYPE``, whose jobs alone are then counted), False when
    it does not, None when the key is missing (an unknown answer)."""
    raw = config.get("AccountingStorageTRES")
    if raw is None:
        return None
    names = [t.strip().lower() for t in raw.split(",")]
    return any(t == "gres/gpu" or t.startswith("gres/gpu:") for t in names)


def keeps_job_comments(config: Mapping[str, str]) -> bool | None:
    """Whether slurmdbd stores each job's ``--comment``, from ``scontrol show config``'s
    ``AccountingStoreFlags`` (``job_comment,job_env``, or ``(null)`` when none is set;
    slurm.conf(5)): True when it lists ``job_comment``, False when it does not, None when the
    key is missing (an unknown answer)."""
    raw = config.get("AccountingStoreFlags")
    if raw is None:
        return None
    return "job_comment" in (t.strip().lower() for t in raw.split(","))


#: How to make accounting keep job comments, for the export's line about requeued runs
JOB_COMMENT_FIX = ("add job_comment to AccountingStoreFlags in slurm.conf "
                   "(AccountingStoreFlags=job_comment) and restart slurmctld; only jobs that "
                   "end after that keep their comment")


def _tres_count(entries: list[Tres], kind: str, name: str | None) -> int | None:
    """Count of one TRES (``type``/``name``) in a sacct TRES list; ``None`` if absent.

    Typed GPUs may appear as ``gres/gpu:a100`` beside the plain ``gres/gpu`` total; the plain
    entry wins, else the typed ones are summed. An untyped TRES (``node``) is matched by
    ``name=None`` whether it is written ``null`` or ``""``."""
    plain, typed = None, 0
    found_typed = False
    for e in entries:
        if e.type != kind:
            continue
        count = max(e.count or 0, 0)
        if (e.name or None) == name:
            plain = (plain or 0) + count
        elif name and e.name and e.name.startswith(name + ":"):
            typed += count
            found_typed = True
    if plain is not None:
        return plain
    return typed if found_typed else None


def record_from_json(fields: dict[str, object]) -> AccountingRecord:
    """An :class:`AccountingRecord` from a 22.05 sacct job record given as a dict, the fields
    left out taking :class:`SacctJob38`'s defaults. Raises :class:`ShapeError` (a ValueError)
    naming the field of another shape (a record without ``job_id``)."""
    try:
        return _record(msgspec.convert(fields, SacctJob38))
    except msgspec.ValidationError as exc:
        raise ShapeError(f"sacct --json: {exc}") from None


def records_from_json(data: bytes | str, release: Release) -> list[AccountingRecord]:
    """Every record of one ``sacct --duplicates <release.json_flag>`` answer, in sacct's order.
    Raises :class:`ShapeError` for an answer of another parser, a field of another shape
    (msgspec's path, ``$.jobs[0].state.current``) or a job state not known."""
    return [_record(j) for j in decode(data, release, "sacct", _SACCT[release.parser]).jobs]


def _record(j: SacctJob38 | SacctJob42) -> AccountingRecord:
    """The :class:`AccountingRecord` of one declared sacct record (see the module doc)."""
    state = state_word(j.state.current, f"sacct --json: job {j.job_id}")
    t = j.time
    start = epoch(t.start)
    alloc, req = j.tres.allocated, j.tres.requested
    ran = start is not None and bool(alloc)
    used = alloc if ran else req
    listed = _tres_count(used, "gres", "gpu")
    gpus = listed or 0
    nodes = _tres_count(used, "node", None) or (number(j.allocation_nodes) if ran else None) or 1
    limit = number(t.limit)
    array_id = j.array.job_id
    return AccountingRecord(
        job_id=j.job_id, het_job_id=j.het.job_id or None,
        het_offset=number(j.het.job_offset) or 0, array_job_id=array_id or None,
        array_task_id=number(j.array.task_id) if array_id else None,
        name=j.name or "", user=j.user or "", account=j.account or "",
        partition=j.partition or "", comment=j.comment.job or "", state=state,
        submit=epoch(t.submission), eligible=epoch(t.eligible), start=start,
        end=epoch(t.end) if start is not None or state not in UNFINISHED_STATES else None,
        time_limit_s=limit * 60 if limit else None, gpus=gpus, nodes=nodes, ran=ran,
        gpu_tres=listed is not None, suspended_s=number(t.suspended) or 0)


def _attempt_key(r: AccountingRecord) -> tuple[int, int, int]:
    big = 2**62
    return (r.submit or 0, r.start or big, r.end or big)


def fold_jobs(records: Iterable[AccountingRecord]) -> list[AccountedJob]:
    """Group attempts into jobs and hetjob components into their leader.

    Attempt k of a hetjob is made of the k-th record (in submit/start order) of each
    component: start = the earliest start, end = the latest end, GPUs and nodes summed, state
    the leader's. Jobs are returned in order of their first submit time, then id.
    """
    units: dict[int, dict[int, list[AccountingRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        units[r.unit_id][r.job_id].append(r)
    jobs = []
    for unit_id, comps in units.items():
        ordered = {cid: sorted(rs, key=_attempt_key) for cid, rs in comps.items()}
        leader_id = unit_id if unit_id in ordered else min(ordered)
        leader = ordered[leader_id]
        attempts = []
        for k, lead in enumerate(leader):
            parts = [rs[k] for rs in ordered.values() if k < len(rs)]
            starts = [p.start for p in parts if p.start is not None]
            ends = [p.end for p in parts if p.end is not None]
            attempts.append(Attempt(
                start=min(starts) if starts else None,
                end=max(ends) if ends and len(ends) == len(parts) else None,
                gpus=sum(p.gpus for p in parts),
                nodes=sum(p.nodes for p in parts),
                state=lead.state, gpu_tres=any(p.gpu_tres for p in parts),
                suspended_s=max(p.suspended_s for p in parts)))
        first, last = leader[0], leader[-1]
        jobs.append(AccountedJob(
            job_id=unit_id, name=first.name, user=first.user, account=first.account,
            partition=last.partition, comment=first.comment, submit=first.submit,
            eligible=first.eligible or first.submit, time_limit_s=last.time_limit_s,
            gpus=attempts[-1].gpus, nodes=attempts[-1].nodes, state=last.state,
            attempts=tuple(attempts), array_job_id=first.array_job_id,
            array_task_id=first.array_task_id))
    jobs.sort(key=lambda j: (j.submit or 0, j.job_id))
    return jobs
