"""Which Slurm releases tiresias-slurm reads, and how each one is read.

Pure (no commands run here). The product reads Slurm three ways:

* **Formatted reads** of jobs and nodes (squeue(1) / sinfo(1) ``--Format``,
  :data:`slurm_plugin.slurm.records.SQUEUE_FIELDS` and :data:`~slurm_plugin.slurm.records.SINFO_FIELDS`).
  Their field names and texts are the same on 22.05, 24.11 and 26.05 (checked live on each by
  ``tests/live/test_client_live.py``), apart from TRES texts (``gres:gpu:2`` on 22.05,
  ``gres/gpu:2`` later), which :func:`slurm_plugin.slurm.records.gpus_in_tres` reads both ways.
* **JSON** of jobs in detail (``squeue --json``, :func:`jobs_from_json`, for the GPU indices)
  and of accounting (``sacct --json``, :mod:`slurm_plugin.slurm.accounting`). Its shape is the data
  parser's: 22.05 prints ``openapi/v0.0.38`` (plain numbers, ``null`` for unset ones, a state
  as one word); from 23.02 on the commands take a data parser version (``--json=v0.0.42``),
  which prints numbers as :class:`NoVal` objects and a state as a list of its base state and
  flags. Each declared parser is one set of msgspec Structs (here for squeue, in
  :mod:`slurm_plugin.slurm.accounting` for sacct); a release is read with the one it can be pinned
  to, and the answer's ``meta`` must name that parser (:func:`check_meta`).
* **Text** of ``scontrol show`` (``--oneliner`` key=value pairs, the same on every release).

:data:`RELEASES` lists what is read. SchedMD's data parser lifetimes (rest_clients page):
v0.0.38 22.05–23.11, v0.0.40 23.11–25.05, v0.0.41 24.05–25.11, v0.0.42 24.11–26.05, v0.0.43
25.05–, v0.0.44 25.11–, v0.0.45 26.05–. So v0.0.42 serves 24.11, 25.05, 25.11 and 26.05;
23.02, 23.11 and 24.05 cannot be pinned to a declared parser and are refused with one line
naming the release, before anything is read. A field that silently parsed as 0 or "" would
make a running job look ended: every read is strict and raises
:class:`slurm_plugin.slurm.records.ShapeError` (the client's ``SlurmShapeUnknown``) on any other shape.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from slurm_plugin import hostlist
from slurm_plugin.shard import shard_gpus, shards_in_gres
from slurm_plugin.slurm.records import ACTIVE_STATES, KNOWN_STATES, Job, ShapeError, gpu_counts, gpu_indices


@dataclass(frozen=True)
class Release:
    """How one Slurm release is read.

    Attributes:
        version: ``(major, minor)``, e.g. ``(24, 11)``.
        parser: the data parser its JSON is read with (``v0.0.38``, ``v0.0.42``).
        json_flag: the JSON option of its commands: ``--json`` (22.05 prints v0.0.38 and takes
            no version) or ``--json=v0.0.42`` (pinned).
        verified: how it was checked: ``live`` (a live cluster of the release runs the live
            tests) or ``schema`` (read through a pinned parser that a live release shares).
    """

    version: tuple[int, int]
    parser: str
    json_flag: str
    verified: str

    @property
    def name(self) -> str:
        """``24.11``."""
        return f"{self.version[0]}.{self.version[1]:02d}"


RELEASES: dict[tuple[int, int], Release] = {
    (22, 5): Release((22, 5), "v0.0.38", "--json", "live"),
    (24, 11): Release((24, 11), "v0.0.42", "--json=v0.0.42", "live"),
    (25, 5): Release((25, 5), "v0.0.42", "--json=v0.0.42", "schema"),
    (25, 11): Release((25, 11), "v0.0.42", "--json=v0.0.42", "schema"),
    (26, 5): Release((26, 5), "v0.0.42", "--json=v0.0.42", "live"),
}
#: Releases between the declared ones that no declared parser serves, with the reason.
REFUSED: dict[tuple[int, int], str] = {
    (23, 2): "its JSON is data parser v0.0.39 only",
    (23, 11): "its JSON is data parser v0.0.39/v0.0.40, neither declared here",
    (24, 5): "its JSON is data parser v0.0.40/v0.0.41, neither declared here",
}

_VERSION_RE = re.compile(r"^slurm(?:-wlm)?\s+(\d+)\.(\d+)\.(\d+)", re.IGNORECASE)


def parse_version(text: str, argv: Sequence[str] = ("squeue", "--version")) -> tuple[int, int, int]:
    """``slurm 22.05.8`` / ``slurm-wlm 24.11.5`` → ``(24, 11, 5)``; raises :class:`ShapeError`."""
    m = _VERSION_RE.match(text.strip())
    if not m:
        raise ShapeError(f"{' '.join(argv)}: cannot read a Slurm version from {text.strip()[:60]!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def release(version: tuple[int, int, int]) -> Release:
    """The :class:`Release` of ``version``; raises :class:`ShapeError` (one line naming the
    release, why, and what is read) for any release not in :data:`RELEASES`."""
    found = RELEASES.get(version[:2])
    if found is None:
        why = REFUSED.get(version[:2], "its output shapes are not declared here")
        known = ", ".join(r.name for r in RELEASES.values())
        raise ShapeError(f"Slurm {version[0]}.{version[1]:02d}.{version[2]} is not a release this "
                         f"version of tiresias-slurm reads ({why}; reads: {known}); nothing was changed")
    return found



# ---------------------------------------------------------------- what every JSON answer has
class NoVal(msgspec.Struct, frozen=True):
    """A number of data parser v0.0.40 on (``{"set": true, "infinite": false, "number": 5}``;
    ``src/plugins/data_parser/v0.0.42/parsers.c`` ``UINT32_NO_VAL``/``UINT64_NO_VAL``/...):
    ``set`` false = Slurm's ``NO_VAL`` (unset), ``infinite`` true = ``INFINITE`` (no limit)."""

    set: bool
    infinite: bool
    number: int


#: slurm.h ``NO_VAL`` and ``INFINITE``: 22.05 writes some unset numbers as these plain values,
#: and later parsers still do for plain-int fields (sacct's ``time.start`` of a job that never
#: ran is 4294967294 on 26.05).
_NO_VAL, _INFINITE = 0xFFFF_FFFE, 0xFFFF_FFFF


def number(v: int | NoVal | None) -> int | None:
    """The value of a JSON number of any declared parser, ``None`` when Slurm has none: ``null``
    (v0.0.38), not ``set`` or ``infinite`` (:class:`NoVal`), ``NO_VAL``/``INFINITE`` or
    negative."""
    if isinstance(v, NoVal):
        if not v.set or v.infinite:
            return None
        v = v.number
    return None if v is None or v < 0 or v >= _NO_VAL else v


def epoch(v: int | NoVal | None) -> int | None:
    """A time in epoch seconds, ``None`` for unset or 0 (Slurm's "not yet")."""
    value = number(v)
    return value or None


#: The flags that squeue and sacct print instead of the base state, first match wins
#: (``job_state_string()`` in ``src/common/slurm_protocol_defs.c``); any other flag
#: (LAUNCH_FAILED, UPDATE_DB, RECONFIG_FAIL, POWER_UP_NODE, EXPEDITING) leaves the base state.
STATE_FLAG_ORDER = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED",
                    "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED",
                    "RESV_DEL_HOLD", "SIGNALING")
#: Flags the JSON's state list may carry that are no state word of their own: ``EXPEDITING``
#: (``JOB_EXPEDITING``, "checking for expedited requeue", a flag bit of the data parser's
#: JOB_STATE list from Slurm 25.11 on, so in 26.05's; squeue's State column has no word for it).
JSON_ONLY_FLAGS = frozenset({"EXPEDITING"})


def state_word(state: str | list[str], what: str) -> str:
    """The one word squeue's State column (and sacct's State) prints for a JSON job state:
    v0.0.38's word as it is, v0.0.42's list (base state first, then flags: ``["PENDING",
    "REQUEUED"]`` → ``REQUEUED``) by :data:`STATE_FLAG_ORDER`. Raises :class:`ShapeError`
    naming ``what`` (``job 12``) and the word for any word not in
    :data:`slurm_plugin.slurm.records.KNOWN_STATES` (a flag after the base state may also be
    one of :data:`JSON_ONLY_FLAGS`), or an empty list."""
    words = [state] if isinstance(state, str) else state
    if not words:
        raise ShapeError(f"{what}: no job state")
    for i, word in enumerate(words):
        if word not in KNOWN_STATES and not (i and word in JSON_ONLY_FLAGS):
            raise ShapeError(f"{what}: job state {word!r} is not a Slurm job state")
    return next((f for f in STATE_FLAG_ORDER if f in words[1:]), words[0])


class _Plugin(msgspec.Struct):
    type: str = ""
    data_parser: str = ""


class _Release(msgspec.Struct):
    release: str = ""


class _Meta(msgspec.Struct):
    plugin: _Plugin
    Slurm: _Release | None = None     # v0.0.38
    slurm: _Release | None = None     # v0.0.40 on


class _Head(msgspec.Struct):
    meta: _Meta


#: ``meta.plugin``'s key and value per (data parser, command): v0.0.38 names its OpenAPI
#: plugin (``openapi/dbv0.0.38`` for slurmdbd's answers), later ones the data parser.
_PLUGIN = {("v0.0.38", "squeue"): ("type", "openapi/v0.0.38"),
           ("v0.0.38", "sacct"): ("type", "openapi/dbv0.0.38"),
           ("v0.0.42", "squeue"): ("data_parser", "data_parser/v0.0.42"),
           ("v0.0.42", "sacct"): ("data_parser", "data_parser/v0.0.42")}

T = TypeVar("T")


def decode(data: bytes | str, release: Release, command: str, shape: type[T]) -> T:
    """``data`` (``COMMAND --json`` of ``release``) decoded as ``shape``, after
    :func:`check_meta`. Raises :class:`ShapeError` with msgspec's path of the first field
    of another shape (``Expected `str`, got `array` - at `$.jobs[0].job_state```)."""
    check_meta(data, release, command)
    try:
        return msgspec.json.decode(data, type=shape)
    except msgspec.DecodeError as exc:   # ValidationError too
        raise ShapeError(f"{command} {release.json_flag}: {exc}") from None


def check_meta(data: bytes | str, release: Release, command: str) -> None:
    """Raise :class:`ShapeError` unless the answer's ``meta.plugin`` names the data parser
    ``release`` is read with (:data:`_PLUGIN`), naming the parser seen and the one expected."""
    key, expected = _PLUGIN[(release.parser, command)]
    try:
        meta = msgspec.json.decode(data, type=_Head).meta
    except msgspec.DecodeError as exc:
        raise ShapeError(f"{command} {release.json_flag}: no data parser named: {exc}") from None
    if getattr(meta.plugin, key) != expected:
        seen = meta.plugin.data_parser or meta.plugin.type or "none"
        version = (meta.slurm or meta.Slurm or _Release()).release or "unknown"
        raise ShapeError(f"{command} {release.json_flag}: data parser {seen!r} (Slurm {version}), "
                         f"expected {expected!r} for Slurm {release.name}")


# ---------------------------------------------------------------- squeue --json's job record
class SqueueJob38(msgspec.Struct, frozen=True):
    """One element of ``jobs`` in ``squeue --json`` on 22.05 (openapi/v0.0.38,
    ``dump_job_info()`` in ``src/plugins/openapi/v0.0.38/jobs.c``), the fields read here.
    That release writes every field of every job; the defaults are its values for an unset
    field (``null`` for a missing number or string, ``time_limit`` ``null`` = unlimited) and
    let a record be made from a few fields (:func:`job_from_json`). Times: epoch s;
    ``time_limit``: minutes."""

    job_id: int
    job_state: str
    name: str | None = ""
    user_name: str | None = ""
    partition: str | None = ""
    account: str | None = ""
    qos: str | None = ""
    state_reason: str | None = ""
    tres_per_node: str | None = ""
    tres_per_job: str | None = ""
    tres_per_task: str | None = ""
    tres_per_socket: str | None = ""
    sockets_per_node: int | None = None
    tasks: int | None = None
    tres_alloc_str: str | None = ""
    nodes: str | None = ""
    node_count: int = 1
    submit_time: int = 0
    start_time: int = 0
    end_time: int = 0
    eligible_time: int = 0
    pre_sus_time: int = 0
    suspend_time: int = 0
    time_limit: int | None = None
    restart_cnt: int = 0
    requeue: bool = False
    priority: int | None = 0
    batch_host: str | None = ""
    batch_flag: bool = True
    standard_output: str | None = ""
    comment: str | None = ""
    admin_comment: str | None = ""
    het_job_id: int = 0
    het_job_offset: int = 0
    array_job_id: int = 0
    array_task_id: int | None = None
    array_task_string: str | None = ""
    gres_detail: list[str] = []


class SqueueJob42(msgspec.Struct, frozen=True):
    """One element of ``jobs`` in ``squeue --json=v0.0.42`` (24.11–26.05;
    ``src/plugins/data_parser/v0.0.42/parsers.c``, ``JOB_INFO``), the fields read here, every
    one required: numbers as :class:`NoVal`, ``job_state`` a list (base state, then flags).
    Times: epoch s; ``time_limit``: minutes (infinite = unlimited)."""

    job_id: int
    job_state: list[str]
    name: str
    user_name: str
    partition: str
    account: str
    qos: str
    state_reason: str
    tres_per_node: str
    tres_per_job: str
    tres_per_task: str
    tres_per_socket: str
    sockets_per_node: NoVal
    tasks: NoVal
    tres_alloc_str: str
    nodes: str
    node_count: NoVal
    submit_time: NoVal
    start_time: NoVal
    end_time: NoVal
    eligible_time: NoVal
    time_limit: NoVal
    restart_cnt: int
    requeue: bool
    priority: NoVal
    batch_host: str
    batch_flag: bool
    standard_output: str
    comment: str
    admin_comment: str
    het_job_id: NoVal
    het_job_offset: NoVal
    array_job_id: NoVal
    array_task_id: NoVal
    array_task_string: str
    gres_detail: list[str]
    #: seconds run before the last suspension, and when the job last resumed (0: never
    #: suspended); squeue's TimeUsed is made of them (:func:`time_used`)
    pre_sus_time: NoVal | None = None
    suspend_time: NoVal | None = None


class _Squeue38(msgspec.Struct):
    jobs: list[SqueueJob38]


class _Squeue42(msgspec.Struct):
    jobs: list[SqueueJob42]


_SQUEUE: dict[str, type[_Squeue38 | _Squeue42]] = {"v0.0.38": _Squeue38, "v0.0.42": _Squeue42}


def jobs_from_json(data: bytes | str, release: Release) -> list[Job]:
    """Every job of one ``squeue <release.json_flag>`` answer, in its order. Raises
    :class:`ShapeError` for an answer of another parser (:func:`check_meta`), a field of
    another shape (msgspec's path) or a job state not known (:func:`state_word`)."""
    answer = decode(data, release, "squeue", _SQUEUE[release.parser])
    return [job_from_record(j) for j in answer.jobs]


def job_from_json(fields: dict[str, object]) -> Job:
    """A :class:`Job` from a 22.05 ``squeue --json`` job record given as a dict, the fields left
    out taking :class:`SqueueJob38`'s defaults (``{"job_id": 7, "job_state": "PENDING"}`` is a
    pending job of no GPUs). Raises :class:`ShapeError` as :func:`jobs_from_json`."""
    try:
        record = msgspec.convert(fields, SqueueJob38)
    except msgspec.ValidationError as exc:
        raise ShapeError(f"squeue --json: {exc}") from None
    return job_from_record(record)


#: state words of a job whose run time is still growing (IS_JOB_RUNNING in slurm.h: base state
#: RUNNING): v0.0.42 gives the base state first; v0.0.38 (22.05) gives one word, the flag
#: squeue prints instead of RUNNING when one is set (CONFIGURING, SIGNALING, RESIZING,
#: STOPPED, whose time squeue counts as used)
_RUNNING_WORDS = frozenset({"RUNNING", "CONFIGURING", "SIGNALING", "RESIZING", "STOPPED"})

#: state words of a job whose base state is PENDING (IS_JOB_PENDING): v0.0.38 gives the flag
#: squeue prints instead of PENDING when one is set (job_state_string() in
#: src/common/slurm_protocol_defs.c)
_PENDING_WORDS = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT",
                            "RESV_DEL_HOLD"})


def time_used(j: SqueueJob38 | SqueueJob42, now: float) -> int | None:
    """squeue's TimeUsed of a JSON record, made as squeue makes it from the same fields
    (``job_time_used()`` in ``src/squeue/print.c``): 0 for a job pending or never started;
    ``pre_sus_time`` while suspended; else ``pre_sus_time`` plus the seconds from the last
    resume (``suspend_time``), or from the start when never suspended, to the end (``now``
    while running or when no end is known). None when negative (squeue prints INVALID)."""
    base = j.job_state if isinstance(j.job_state, str) else (j.job_state or ["UNKNOWN"])[0]
    start = epoch(j.start_time)
    if start is None or base in _PENDING_WORDS:
        return 0
    pre_sus = number(j.pre_sus_time) or 0
    if base == "SUSPENDED":
        return pre_sus
    end = epoch(j.end_time)
    until = now if base in _RUNNING_WORDS or end is None else end
    resumed = epoch(j.suspend_time)
    used = int(until - resumed) + pre_sus if resumed else int(until - start)
    return used if used >= 0 else None


def job_from_record(j: SqueueJob38 | SqueueJob42, now: float | None = None) -> Job:
    """The :class:`Job` of one declared job record: the same values as the formatted read's
    :func:`slurm_plugin.slurm.records.job_from_fields` of the same job, plus ``gpu_indices`` (one
    tuple per allocated node from ``gres_detail``, ``gpu:a100:2(IDX:0-1)``; a shard job's GPU
    from ``shard:2(IDX:0)`` or ``shard:2(2/4,0/4)``, :func:`slurm_plugin.shard.shard_gpus`) and
    ``stdout_path`` as the JSON holds it. ``end_time`` is ``None`` while a job of no time limit
    is active: squeue prints ``NONE`` for an end still ahead of such a job
    (``_print_job_time_end()`` in ``src/squeue/print.c``) where the JSON holds a projection.
    ``time_used_s`` is :func:`time_used` at ``now`` (epoch s; default the clock)."""
    what = f"squeue --json: job {j.job_id}"
    state = state_word(j.job_state, what)
    node_count = number(j.node_count) or 1
    per_node, total = gpu_counts(
        node_count, j.tres_per_node or "", j.tres_per_job or "", j.tres_per_task or "",
        number(j.tasks) or 1, j.tres_per_socket or "", number(j.sockets_per_node) or 1,
        j.tres_alloc_str or "")
    limit = number(j.time_limit)
    unlimited = j.time_limit.infinite if isinstance(j.time_limit, NoVal) else (
        j.time_limit is None or j.time_limit == _INFINITE)
    end = None if unlimited and state in ACTIVE_STATES else epoch(j.end_time)
    task = number(j.array_task_id)
    array_job = number(j.array_job_id) or None
    array_string = j.array_task_string or ""
    nodes = j.nodes or ""
    return Job(
        job_id=j.job_id, name=j.name or "", user=j.user_name or "", partition=j.partition or "",
        state=state, reason=j.state_reason or "None", gpus_per_node=per_node, gpus=total,
        gpu_indices=tuple(gpu_indices(d) or shard_gpus(d) for d in j.gres_detail), nodes=nodes,
        node_list=tuple(hostlist.expand(nodes)) if nodes else (), node_count=node_count,
        submit_time=epoch(j.submit_time), start_time=epoch(j.start_time), end_time=end,
        eligible_time=epoch(j.eligible_time), time_limit_s=limit * 60 if limit else None,
        restart_count=j.restart_cnt, requeue=j.requeue,
        het_job_id=number(j.het_job_id) or None, het_job_offset=number(j.het_job_offset) or 0,
        array_job_id=array_job if task is not None or array_string else None,
        array_task_id=task if array_job else None,
        comment=j.comment or "", admin_comment=j.admin_comment or "",
        priority=number(j.priority) or 0, account=j.account or "", qos=j.qos or "",
        batch_host=j.batch_host or "", stdout_path=j.standard_output or "",
        array_task_string=array_string, batch=j.batch_flag,
        time_used_s=time_used(j, time.time() if now is None else now),
        shards_per_node=shards_in_gres(j.tres_per_node))
