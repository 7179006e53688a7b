"""Typed records of Slurm accounting, parsed from ``sacct --duplicates --json`` (slurmdbd).

Pure parsing and folding (no commands run here; :meth:`slurm_plugin.client.SlurmClient.accounting`
runs ``sacct``). Field names follow Slurm 22.05's sacct JSON (data_parser v0.0.38; recorded in
``tests/data/sample-sacct*.json`` on a ``dlcluster --with-dbd``):

* With ``--duplicates`` sacct prints one record per *attempt*: a requeued job has a record in
  state ``REQUEUED`` for each earlier run and one for its last run (sacct(1), ``-D``). The
  record of a later attempt carries the requeue time as ``time.submission``; the job's own
  submit time is the first attempt's.
* Job-level records only: steps (``steps[]``) are never summed, so a step's time is never
  counted twice beside its job's.
* GPUs: the allocated TRES ``gres/gpu`` (``tres.allocated``), the requested count
  (``tres.requested``) where the attempt never ran (no start, nothing allocated).
* Hetjob components are separate records with ``het.job_id`` = the leader's id and
  ``het.job_offset``; :func:`fold_jobs` folds them into one job (leader id, GPUs summed over
  components, the k-th records of every component forming attempt k).

Times are epoch seconds (``None`` where Slurm has none), ``time.limit`` minutes in the JSON and
seconds here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

#: Final states that mean "stopped from outside, so its run time is a lower bound".
TIMELIMIT_STATES = frozenset({"TIMEOUT", "DEADLINE"})
CANCELLED_STATES = frozenset({"CANCELLED"})
#: States of an attempt that has not finished yet.
UNFINISHED_STATES = frozenset({"PENDING", "RUNNING", "REQUEUE_HOLD", "SUSPENDED", "CONFIGURING",
                               "COMPLETING", "RESIZING", "SIGNALING", "STAGE_OUT"})


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

    @property
    def unit_id(self) -> int:
        """The id of the schedulable job: the hetjob leader's id, else the record's own."""
        return self.het_job_id or self.job_id

    @property
    def run_s(self) -> float:
        """Seconds this attempt ran (0 when it never started or has no end yet)."""
        if self.start is None or self.end is None:
            return 0.0
        return float(max(self.end - self.start, 0))


@dataclass(frozen=True)
class Attempt:
    """One run of a job (hetjob components merged): epoch s, GPUs, and how it ended."""

    start: int | None
    end: int | None
    gpus: int
    nodes: int
    state: str

    @property
    def run_s(self) -> float:
        """Seconds run (0 when it never started or has no end)."""
        if self.start is None or self.end is None:
            return 0.0
        return float(max(self.end - self.start, 0))

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
        """True when the last attempt has ended (no longer pending or running)."""
        return self.state not in UNFINISHED_STATES and self.end is not None

    @property
    def attained_gpu_s(self) -> float:
        """GPU·seconds held over every attempt (the daemon's attained service, 2D)."""
        return sum(a.gpu_s for a in self.attempts)

    @property
    def ran_s(self) -> float:
        """Seconds run over every attempt."""
        return sum(a.run_s for a in self.attempts)


def _int(v: object) -> int | None:
    """An int from Slurm's JSON, ``None`` for null/absent/negative."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return int(v) if v >= 0 else None


def _epoch(v: object) -> int | None:
    value = _int(v)
    return value if value else None


def _tres_count(entries: object, kind: str, name: str | None) -> int | None:
    """Count of one TRES (``type``/``name``) in a sacct TRES list; ``None`` if absent.

    Typed GPUs may appear as ``gres/gpu:a100`` beside the plain ``gres/gpu`` total; the plain
    entry wins, else the typed ones are summed."""
    if not isinstance(entries, list):
        return None
    plain, typed = None, 0
    found_typed = False
    for e in entries:
        if not isinstance(e, dict) or e.get("type") != kind:
            continue
        count = _int(e.get("count")) or 0
        ename = e.get("name")
        if ename == name:
            plain = (plain or 0) + count
        elif name and isinstance(ename, str) and ename.startswith(name + ":"):
            typed += count
            found_typed = True
    if plain is not None:
        return plain
    return typed if found_typed else None


def record_from_json(j: dict) -> AccountingRecord:
    """Build an :class:`AccountingRecord` from one element of sacct's ``jobs`` list.

    Raises:
        ValueError: the element is not a mapping or has no integer ``job_id``.
    """
    if not isinstance(j, dict) or _int(j.get("job_id")) is None:
        raise ValueError(f"sacct record without a job_id: {str(j)[:80]!r}")
    t = j.get("time") if isinstance(j.get("time"), dict) else {}
    tres = j.get("tres") if isinstance(j.get("tres"), dict) else {}
    het = j.get("het") if isinstance(j.get("het"), dict) else {}
    array = j.get("array") if isinstance(j.get("array"), dict) else {}
    state = j.get("state")
    state_text = str(state.get("current") if isinstance(state, dict) else state or "")
    comment = j.get("comment")
    comment_text = str((comment.get("job") if isinstance(comment, dict) else comment) or "")
    start = _epoch(t.get("start"))
    alloc_gpus = _tres_count(tres.get("allocated"), "gres", "gpu")
    alloc_nodes = _tres_count(tres.get("allocated"), "node", None)
    ran = start is not None and bool(tres.get("allocated"))
    if ran:
        gpus = alloc_gpus or 0
        nodes = alloc_nodes or _int(j.get("allocation_nodes")) or 1
    else:
        gpus = _tres_count(tres.get("requested"), "gres", "gpu") or 0
        nodes = _tres_count(tres.get("requested"), "node", None) or 1
    limit = _int(t.get("limit"))
    het_id = _int(het.get("job_id"))
    array_id = _int(array.get("job_id"))
    return AccountingRecord(
        job_id=int(j["job_id"]),
        het_job_id=het_id or None,
        het_offset=_int(het.get("job_offset")) or 0,
        array_job_id=array_id or None,
        array_task_id=_int(array.get("task_id")) if array_id else None,
        name=str(j.get("name") or ""),
        user=str(j.get("user") or ""),
        account=str(j.get("account") or ""),
        partition=str(j.get("partition") or ""),
        comment=comment_text,
        state=state_text,
        submit=_epoch(t.get("submission")),
        eligible=_epoch(t.get("eligible")),
        start=start,
        end=_epoch(t.get("end")) if start is not None or state_text not in UNFINISHED_STATES
        else None,
        time_limit_s=limit * 60 if limit else None,
        gpus=gpus,
        nodes=nodes,
        ran=ran,
    )


def records_from_json(data: dict) -> list[AccountingRecord]:
    """Every record of one ``sacct --json`` document (its ``jobs`` list), in sacct's order."""
    return [record_from_json(j) for j in (data.get("jobs") or [])]


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
                state=lead.state))
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
