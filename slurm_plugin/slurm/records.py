"""Typed records of Slurm jobs and nodes, parsed from squeue's and sinfo's formatted output.

Pure parsing (no commands run here; :mod:`slurm_plugin.slurm.client` runs them). Jobs are read from
``squeue --Format`` (:data:`SQUEUE_FIELDS`, squeue(1) ``-O``), about 20× cheaper than
``squeue --json`` at 10,000 jobs; :func:`job_from_fields` parses one record of it strictly (an
unknown state or a malformed number raises :class:`ShapeError`, never a half-read job).
:func:`slurm_plugin.slurm.shapes.jobs_from_json` reads ``squeue --json`` into the same
:class:`Job`, for the one field only JSON has (``gres_detail``: GPU indices). Times are epoch
seconds (``None`` where Slurm reports 0/``N/A``/``NONE`` = not yet); ``time_limit_s`` is
seconds (squeue reports minutes); ``time_used_s`` is seconds (squeue's ``TimeUsed``,
``[D-]H:MM:SS``); memory is MiB.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from slurm_plugin import hostlist
from slurm_plugin.shard import gres_count, shards_in_gres

_GPU_TRES_RE = re.compile(r"(?:^|,)gres[:/]gpu(?::([^:,=]+))?(?:([:=])(\d+))?(?=,|$)")
_IDX_ITEM_RE = re.compile(r"(?:^|,)\s*(gpu|shard)(?=[:(])[^(,]*\(IDX:([^)]*)\)")
_GRES_COUNT_RE = re.compile(r"^\s*gpu(?::[^:(]+)?:(\d+[KMGTP]?)(?=[(\s]|$)")


@dataclass(frozen=True)
class Job:
    """One Slurm job (one hetjob component, one array element) as squeue shows it.

    Attributes:
        job_id: the job id (a hetjob component has its own id; ``het_job_id`` is the leader's).
        name, user, partition, account, qos: as Slurm reports them.
        state: ``job_state`` (PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, ...).
        reason: ``state_reason`` (``None``, ``Priority``, ``Resources``, ``BeginTime``, ...).
        gpus_per_node: GPUs requested on each node (0 for CPU-only jobs).
        gpus: total GPUs of the job (``gpus_per_node × node_count``, or from ``--gpus``).
        gpu_indices: per allocated node, the GPU indices Slurm gave (empty while pending).
        nodes: hostlist expression of allocated nodes (``node[1-2]``), "" while pending.
        node_list: the expanded node names.
        node_count: nodes allocated (running) or requested (pending).
        submit_time, start_time, end_time, eligible_time: epoch s, ``None`` when unset.
        time_limit_s: time limit in seconds, ``None`` for no limit.
        restart_count: times the job was requeued (``restart_cnt``).
        requeue: whether the job may be requeued.
        het_job_id, het_job_offset: leader id and component index; ``None``/0 for plain jobs.
        array_job_id, array_task_id: array id and element index; ``None`` for plain jobs.
        array_task_string: the pending elements of an array's meta record (``1-3``), else "".
        comment, admin_comment: free text (the checkpoint marker lives in ``comment``).
        priority: Slurm's current priority value.
        batch_host: node that runs the batch script ("" while pending).
        batch: a batch job (``batch_flag``); False for ``salloc``/``srun`` allocations, which
            ``scontrol requeue`` cannot restart.
        stdout_path: the job's ``--output`` path as Slurm holds it.
        shards_per_node: GPU shards asked per node (``tres_per_node`` ``gres/shard:2``, a share
            of one GPU, slurm_plugin/shard.py); 0 for jobs without shards.
        time_used_s: seconds the job has run in its current (or last) run, time suspended
            not counted: squeue's ``TimeUsed`` (squeue(1): ``%M``; Slurm computes it as the
            run time before the last suspension, ``PreSusTime`` in scontrol(1), plus the time
            since the last resume, ``SuspendTime``; a suspended job's stays still). ``None``
            where Slurm gives none (``INVALID``) and in the JSON read, which does not ask for it.
    """

    job_id: int
    name: str
    user: str
    partition: str
    state: str
    reason: str
    gpus_per_node: int
    gpus: int
    gpu_indices: tuple[tuple[int, ...], ...]
    nodes: str
    node_list: tuple[str, ...]
    node_count: int
    submit_time: int | None
    start_time: int | None
    end_time: int | None
    eligible_time: int | None
    time_limit_s: int | None
    restart_count: int
    requeue: bool
    het_job_id: int | None
    het_job_offset: int
    array_job_id: int | None
    array_task_id: int | None
    comment: str
    admin_comment: str
    priority: int
    account: str = ""
    qos: str = ""
    batch_host: str = ""
    stdout_path: str = ""
    array_task_string: str = ""
    batch: bool = True
    shards_per_node: int = 0
    time_used_s: int | None = None

    @property
    def is_active(self) -> bool:
        """Not finished: waiting in the queue or holding its allocation (:data:`ACTIVE_STATES`)."""
        return self.state in ACTIVE_STATES

    @property
    def unit_id(self) -> int:
        """The schedulable unit's id: the hetjob leader's id, else the job's own."""
        return self.het_job_id if self.het_job_id else self.job_id


#: Job states (the word squeue and sacct print, squeue(1) "JOB STATE CODES") of a job in the
#: queue without an allocation: pending, being requeued, or held (``REQUEUE_HOLD``: requeued
#: and held; ``RESV_DEL_HOLD``: held after its reservation was deleted; ``SPECIAL_EXIT``:
#: requeued in a special state, held).
WAITING_STATES = frozenset(
    {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "SPECIAL_EXIT"})
#: Job states of a job that holds its allocation: started, starting, ending, suspended
#: (``scontrol suspend``) or stopped (``STOPPED``: "execution has been stopped with SIGSTOP
#: signal. CPUS have been retained").
HOLDING_STATES = frozenset(
    {"RUNNING", "CONFIGURING", "COMPLETING", "SIGNALING", "RESIZING", "SUSPENDED", "STOPPED",
     "STAGE_OUT"})
#: Job states of a job that has not finished: every other state word is a final one.
ACTIVE_STATES = WAITING_STATES | HOLDING_STATES


@dataclass(frozen=True)
class Node:
    """One node as sinfo shows it (:func:`node_from_fields`).

    Attributes:
        name: node name (``node1``); address: NodeAddr.
        state: Slurm state word (``idle``, ``mixed``, ``allocated``, ``down``, ``drained``...).
        state_flags: extra flags (``DRAIN``, ``NOT_RESPONDING``...).
        partitions: partitions the node belongs to.
        cpus, sockets, cores_per_socket: CPU shape; real_memory_mib: RealMemory in MiB.
        gpus_total: GPUs configured (from ``gres``); gpus_used: GPUs allocated (``gres_used``).
        gpu_type: GRES type name or "" (of the first ``gpu`` item of ``gres``).
        shards_total: GPU shards configured (``shard:N`` in ``gres``, slurm_plugin/shard.py).
        gpu_types: the GRES type of every ``gpu`` item of ``gres``, in its order
            (``gpu:a100:4,gpu:v100:4`` → ``("a100", "v100")``); () when untyped (``gpu:8``).
    """

    name: str
    address: str
    state: str
    state_flags: tuple[str, ...]
    partitions: tuple[str, ...]
    cpus: int
    sockets: int
    cores_per_socket: int
    real_memory_mib: int
    gpus_total: int
    gpus_used: int
    gpu_type: str
    shards_total: int = 0
    gpu_types: tuple[str, ...] = ()

    @property
    def gpus_free(self) -> int:
        """GPUs not allocated (0 on nodes that cannot take jobs: down, drained, not responding)."""
        if not self.usable:
            return 0
        return max(self.gpus_total - self.gpus_used, 0)

    @property
    def usable(self) -> bool:
        """True when Slurm may start any job on the node: its base state is none of
        :data:`UNUSABLE_STATES` and it has none of :data:`UNUSABLE_FLAGS`."""
        return (self.state.lower() not in UNUSABLE_STATES
                and not UNUSABLE_FLAGS.intersection(f.upper() for f in self.state_flags))


#: Base node states (sinfo ``StateComplete``, lower case) of a node that takes no new job.
UNUSABLE_STATES = frozenset({"down", "drained", "draining", "fail", "failing", "future", "unknown"})
#: Node state flags (sinfo ``StateComplete`` after ``+``) of a node that takes no new job of
#: any user, from sinfo(1) NODE STATE CODES (22.05, 24.11 and 26.05 alike): drained or failing,
#: not responding, "did not register correctly" (``INVALID_REG``, shown as INVAL), "in a
#: reservation with a flag value of maintenance" and "in an advanced reservation and not
#: generally available" (``MAINTENANCE``, ``RESERVED``: ``idle+MAINTENANCE+RESERVED``), "in the
#: process of powering down and not capable of running any jobs", a reboot issued, network
#: performance counters in use. A powered-down node is usable: Slurm powers it up for a job.
UNUSABLE_FLAGS = frozenset({"DRAIN", "NOT_RESPONDING", "FAIL", "INVALID_REG", "MAINTENANCE",
                            "RESERVED", "POWERING_DOWN", "REBOOT_ISSUED", "PERFCTRS"})


class ShapeError(ValueError):
    """Slurm's output has a shape this module does not know (names the field and the value).

    The daemon must not act on such a read: a job whose state failed to parse is not an ended job.
    """


#: The formatted read of jobs: (key, squeue(1) ``-O`` type) in output order. Free text (names,
#: comments, paths) may contain anything, so the client separates fields with a per-call random
#: token (see :meth:`slurm_plugin.slurm.client.SlurmClient.jobs`); times print as epoch seconds with
#: ``SLURM_TIME_FORMAT=%s`` (squeue(1) ENVIRONMENT VARIABLES).
SQUEUE_FIELDS: tuple[tuple[str, str], ...] = (
    ("job_id", "JobID"), ("array_job_id", "ArrayJobID"), ("array_task", "ArrayTaskID"),
    ("het_job_id", "HetJobID"), ("het_job_offset", "HetJobOffset"), ("state", "State"),
    ("reason", "Reason"), ("user", "UserName"), ("partition", "Partition"),
    ("account", "Account"), ("qos", "QOS"), ("tres_per_node", "tres-per-node"),
    ("tres_per_job", "tres-per-job"), ("tres_per_task", "tres-per-task"),
    ("tres_per_socket", "tres-per-socket"), ("sockets", "Sockets"), ("tasks", "NumTasks"),
    ("tres_alloc", "tres-alloc"), ("nodes", "NodeList"), ("node_count", "NumNodes"),
    ("submit_time", "SubmitTime"), ("start_time", "StartTime"), ("end_time", "EndTime"),
    ("eligible_time", "EligibleTime"), ("time_limit", "TimeLimit"),
    ("restart_count", "RestartCnt"), ("requeue", "Requeue"), ("priority", "PriorityLong"),
    ("batch_host", "BatchHost"), ("batch", "BatchFlag"), ("stdout", "STDOUT"), ("comment", "Comment"),
    ("admin_comment", "admin_comment"), ("name", "Name"), ("time_used", "TimeUsed"),
)

#: Every job state word squeue prints (slurm.h ``job_states`` and flags, squeue(1) "JOB STATE
#: CODES", the same words in 22.05, 24.11 and 26.05); any other word is a :class:`ShapeError`.
KNOWN_STATES = frozenset({
    "PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
    "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "CONFIGURING",
    "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "RESV_DEL_HOLD",
    "REVOKED", "SIGNALING", "SPECIAL_EXIT", "STAGE_OUT", "STOPPED", "POWER_UP_NODE",
    "UPDATE_DB", "LAUNCH_FAILED", "RECONFIG_FAIL"})
_UNSET = frozenset({"", "N/A", "n/a", "NONE", "None", "Unknown", "(null)"})
_LIMIT_RE = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")


def _fint(rec: dict[str, str], key: str, default: int | None = 0) -> int | None:
    """An integer field; Slurm's 'unset' words give ``default``; anything else raises."""
    text = rec[key]
    if text.isdigit():
        return int(text)
    text = text.strip()
    if text in _UNSET:
        return default
    if not text.lstrip("-").isdigit():
        raise ShapeError(f"squeue field {key}={text!r}: not an integer")
    return int(text)


def _text(text: str) -> str:
    """A text field; Slurm's placeholders for 'none' become ""."""
    return "" if text in ("(null)", "N/A", "n/a") else text


_CRED_EXPIRE_RE = re.compile(r"(?:^|,)\s*cred_expire=(\d+)\s*(?=,|$)")
#: slurm.conf(5) ``AuthInfo``: "cred_expire: Default job step credential lifetime, in seconds
#: (e.g. "cred_expire=1200"). [...] The default value is 120 seconds."
DEFAULT_CRED_EXPIRE_S = 120


def requeue_delay_s(config: Mapping[str, str]) -> float:
    """Seconds a requeued job waits before it may start again, from ``scontrol show config``:
    Slurm sets its BeginTime to now + ``cred_expire`` + 1 (``AuthInfo cred_expire``, default
    :data:`DEFAULT_CRED_EXPIRE_S`), so a credential of the job's old run has expired first."""
    found = _CRED_EXPIRE_RE.search(config.get("AuthInfo", ""))
    return float((int(found.group(1)) if found else DEFAULT_CRED_EXPIRE_S) + 1)


def time_limit_seconds(text: str) -> int | None:
    """squeue's TimeLimit (``[D-]H:MM:SS``, ``M:SS``, ``UNLIMITED``, ``NOT_SET``) in seconds."""
    text = text.strip()
    if text in _UNSET or text in ("UNLIMITED", "INFINITE", "NOT_SET"):
        return None
    return _clock_seconds("time_limit", text)


def time_used_seconds(text: str) -> int | None:
    """squeue's TimeUsed (``[D-]H:MM:SS``, ``M:SS``; ``INVALID`` when Slurm finds it
    negative, squeue(1)) in seconds, ``None`` for ``INVALID`` or unset."""
    text = text.strip()
    if text in _UNSET or text == "INVALID":
        return None
    return _clock_seconds("time_used", text)


def _clock_seconds(field: str, text: str) -> int:
    """``[D-]H:MM:SS`` or ``M:SS`` of squeue's ``field`` in seconds; ShapeError otherwise."""
    m = _LIMIT_RE.match(text)
    if not m:
        raise ShapeError(f"squeue field {field}={text!r}: not [D-]H:MM:SS")
    d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


_AT = {key: i for i, (key, _) in enumerate(SQUEUE_FIELDS)}


def _num(text: str, key: str, default: int | None = 0) -> int | None:
    """:func:`_fint` of one value (the common all-digits case is checked inline by callers)."""
    return _fint({key: text}, key, default)


def job_from_fields(rec: dict[str, str] | list[str]) -> Job:
    """Build a :class:`Job` from one record of the formatted read: a dict keyed by
    :data:`SQUEUE_FIELDS`' keys, or the list of values in that order (what the client passes).

    Same values as :func:`slurm_plugin.slurm.shapes.jobs_from_json` on the same job (compared on
    captures of each release), except ``gpu_indices`` (JSON only: empty here) and
    ``stdout_path`` (the JSON holds the pattern, ``job-%j.out``, or nothing on 22.05; squeue
    prints the expanded path). Raises :class:`ShapeError` naming the field. Written for speed (10,000
    records a cycle): integers that are plain digits are converted inline.
    """
    v = [rec[k] for k, _ in SQUEUE_FIELDS] if isinstance(rec, dict) else rec
    state = v[_AT["state"]].strip()
    if state not in KNOWN_STATES:
        raise ShapeError(f"squeue field state={state!r}: not a job state of squeue(1)")
    t = v[_AT["job_id"]]
    job_id = int(t) if t.isdigit() else _num(t, "job_id", None)
    if not job_id:
        raise ShapeError(f"squeue field job_id={t!r}: no job id")
    t = v[_AT["node_count"]]
    node_count = (int(t) if t.isdigit() else _num(t, "node_count", 1)) or 1
    sockets = v[_AT["sockets"]].strip()
    per_node, total = gpu_counts(
        node_count, _text(v[_AT["tres_per_node"]]), _text(v[_AT["tres_per_job"]]),
        _text(v[_AT["tres_per_task"]]), _num(v[_AT["tasks"]], "tasks", 1) or 1,
        # --gpus-per-socket needs --sockets-per-node (sbatch(1)); "*" = not given: one
        _text(v[_AT["tres_per_socket"]]), int(sockets) if sockets.isdigit() else 1,
        _text(v[_AT["tres_alloc"]]))
    times = []
    for key in ("submit_time", "start_time", "end_time", "eligible_time"):
        t = v[_AT[key]]
        n = int(t) if t.isdigit() else _num(t, key)
        times.append(n if n and n > 0 else None)
    task = v[_AT["array_task"]].strip()
    element = task.isdigit()
    array_string = "" if element or task in _UNSET else task
    nodes = _text(v[_AT["nodes"]])
    t = v[_AT["het_job_id"]]
    het = (int(t) if t.isdigit() else _num(t, "het_job_id", None)) or None
    t = v[_AT["het_job_offset"]]
    offset = (int(t) if t.isdigit() else _num(t, "het_job_offset")) or 0
    t = v[_AT["priority"]]
    priority = (int(t) if t.isdigit() else _num(t, "priority")) or 0
    t = v[_AT["restart_count"]]
    restarts = (int(t) if t.isdigit() else _num(t, "restart_count")) or 0
    t = v[_AT["requeue"]]
    requeue = bool(int(t) if t.isdigit() else _num(t, "requeue"))
    array_job = (_num(v[_AT["array_job_id"]], "array_job_id", None) or None
                 if (element or array_string) else None)
    return _job(
        job_id=job_id, name=v[_AT["name"]], user=_text(v[_AT["user"]]),
        partition=_text(v[_AT["partition"]]), state=state,
        reason=_text(v[_AT["reason"]]) or "None",
        gpus_per_node=per_node, gpus=total, gpu_indices=(), nodes=nodes,
        node_list=tuple(hostlist.expand(nodes)) if nodes else (), node_count=node_count,
        submit_time=times[0], start_time=times[1], end_time=times[2], eligible_time=times[3],
        time_limit_s=time_limit_seconds(v[_AT["time_limit"]]),
        restart_count=restarts, requeue=requeue,
        het_job_id=het, het_job_offset=offset,
        array_job_id=array_job, array_task_id=int(task) if element else None,
        comment=_text(v[_AT["comment"]]), admin_comment=_text(v[_AT["admin_comment"]]),
        priority=priority, account=_text(v[_AT["account"]]),
        qos=_text(v[_AT["qos"]]), batch_host=_text(v[_AT["batch_host"]]),
        stdout_path=_text(v[_AT["stdout"]]), array_task_string=array_string,
        batch=bool(_num(v[_AT["batch"]], "batch")),
        shards_per_node=shards_in_gres(_text(v[_AT["tres_per_node"]])),
        time_used_s=time_used_seconds(v[_AT["time_used"]]),
    )


def _job(**values: object) -> Job:
    """``Job(**values)`` for a full set of fields without the frozen dataclass's per-field
    ``object.__setattr__`` (Job has no ``__post_init__``; 10,000 jobs a cycle)."""
    job = object.__new__(Job)
    job.__dict__.update(values)
    return job


def gpus_in_tres(tres: str | None) -> int:
    """GPU count in a TRES string.

    Requests (``tres_per_*``): ``gres:gpu:4`` (22.05), ``gres/gpu:4`` (23.02 on),
    ``gres/gpu:a100:4``, and the forms with the count left out, ``gres/gpu`` or
    ``gres/gpu:a100``, which ask for one GPU (sbatch(1) ``--gres``: "the count defaults to 1");
    several items add up (``gres/gpu:a100:2,gres/gpu:v100:1`` is 3). TRES counts
    (``tres_alloc``, sacct's ``tres``): ``gres/gpu=8`` is the total, and the typed items written
    beside it (``gres/gpu:a100=8``) are the same GPUs, counted only where no total is written.
    """
    if not tres:
        return 0
    requested = totals = typed = 0
    for m in _GPU_TRES_RE.finditer(tres):
        typ, sep, count = m.group(1), m.group(2), m.group(3)
        if sep is None and typ is not None and typ.isdigit():
            typ, count = None, typ          # gres:gpu:4: the 4 is the count, not a type
        n = int(count) if count is not None else 1
        if sep == "=":
            totals += n if typ is None else 0
            typed += n if typ is not None else 0
        else:
            requested += n
    return requested + (totals or typed)


def gpu_counts(node_count: int, per_node: str, per_job: str, per_task: str, tasks: int,
               per_socket: str, sockets: int, alloc: str) -> tuple[int, int]:
    """``(GPUs per node, GPUs in all)`` of a job from its TRES texts (:func:`gpus_in_tres`),
    the first that names GPUs: ``tres_per_node`` × ``node_count``, ``tres_per_job``,
    ``tres_per_task`` × ``tasks``, ``tres_per_socket`` × ``sockets`` (per node) × ``node_count``,
    then ``tres_alloc`` (a job whose GPUs come from a default, e.g. a partition's
    ``DefGres``). The per-node count of a total is rounded up over ``node_count`` (≥ 1)."""
    node_count = node_count or 1
    gpus = gpus_in_tres(per_node)
    if gpus:
        return gpus, gpus * node_count
    total = (gpus_in_tres(per_job) or gpus_in_tres(per_task) * max(tasks, 1)
             or gpus_in_tres(per_socket) * sockets * node_count or gpus_in_tres(alloc))
    return (-(-total // node_count) if total else 0), total


def gpu_indices(detail: str) -> tuple[int, ...]:
    """GPU indices of one node's ``gres_detail`` entry (squeue ``--json``), sorted, each once.

    The entry has one item per GRES of the job, joined by commas (``gres_ctld_job_build_details``
    in src/slurmctld/gres_ctld.c): ``gpu:a100:4(IDX:0-2,5)`` → (0, 1, 2, 5);
    ``gpu:a100:1(IDX:0),gpu:v100:1(IDX:4)`` → (0, 4); the GPUs of ``gpu`` and ``shard`` items
    count (22.05 writes a shard job's GPU as ``shard:2(IDX:0)``), other GRES (``nic:1(IDX:0)``)
    do not; ``(IDX:N/A)`` gives none."""
    out: set[int] = set()
    for m in _IDX_ITEM_RE.finditer(detail):
        for part in m.group(2).split(","):
            lo, _, hi = part.partition("-")
            if lo.isdigit():
                out.update(range(int(lo), int(hi) + 1) if hi.isdigit() else [int(lo)])
    return tuple(sorted(out))


#: The formatted read of nodes: (key, sinfo(1) ``-O`` type), one record per node and partition
#: (``sinfo -N``); the same fields and text on 22.05, 24.11 and 26.05 (checked live).
SINFO_FIELDS: tuple[tuple[str, str], ...] = (
    ("name", "NodeList"), ("address", "NodeAddr"), ("state", "StateComplete"),
    ("partition", "Partition"), ("cpus", "CPUs"), ("sockets", "Sockets"), ("cores", "Cores"),
    ("memory", "Memory"), ("gres", "Gres"), ("gres_used", "GresUsed"),
)
_NODE_AT = {key: i for i, (key, _) in enumerate(SINFO_FIELDS)}


def node_from_fields(v: list[str]) -> Node:
    """Build a :class:`Node` from one record of the formatted node read (values in
    :data:`SINFO_FIELDS` order). ``StateComplete`` is the base state and its flags joined by
    ``+`` (``idle+drain``, ``mixed+completing``); a partition name ends in ``*`` when it is the
    default one (sinfo(1)). Raises :class:`ShapeError` naming the field."""
    state, *flags = v[_NODE_AT["state"]].strip().split("+")
    if not state:
        raise ShapeError(f"sinfo field state={v[_NODE_AT['state']]!r}: no node state")
    partition = _text(v[_NODE_AT["partition"]].strip()).rstrip("*")
    numbers = {}
    for key in ("cpus", "sockets", "cores", "memory"):
        text = v[_NODE_AT[key]].strip()
        if not text.isdigit():
            raise ShapeError(f"sinfo field {key}={text!r}: not an integer")
        numbers[key] = int(text)
    return _node_with_gres(
        name=v[_NODE_AT["name"]].strip(), address=v[_NODE_AT["address"]].strip(),
        state=state.lower(), state_flags=tuple(f.upper() for f in flags),
        partitions=(partition,) if partition else (), cpus=numbers["cpus"],
        sockets=numbers["sockets"] or 1, cores_per_socket=numbers["cores"] or 1,
        real_memory_mib=numbers["memory"], gres=_text(v[_NODE_AT["gres"]].strip()),
        gres_used=_text(v[_NODE_AT["gres_used"]].strip()))


def merge_partitions(nodes: Iterable[Node]) -> list[Node]:
    """One :class:`Node` per name from records of one node per partition (``sinfo -N`` writes
    a node once per partition it belongs to), partitions joined in the order first seen."""
    seen: dict[str, Node] = {}
    for node in nodes:
        first = seen.get(node.name)
        if first is None:
            seen[node.name] = node
        else:
            extra = tuple(p for p in node.partitions if p not in first.partitions)
            seen[node.name] = replace(first, partitions=first.partitions + extra)
    return list(seen.values())


def _node_with_gres(*, gres: str, gres_used: str, **fields: object) -> Node:
    """A :class:`Node` whose GPU fields come from its ``gres`` and ``gres_used`` texts
    (``gpu:a100:8(S:0-1)``, ``gpu:a100:2(IDX:0-1)``; counts as :func:`slurm_plugin.shard.gres_count`
    reads them)."""
    total = sum(gres_count(m.group(1)) for g in gres.split(",") if (m := _GRES_COUNT_RE.match(g)))
    in_use = sum(gres_count(m.group(1)) for g in gres_used.split(",") if (m := _GRES_COUNT_RE.match(g)))
    parts = gres.split(",")[0].split("(")[0].split(":")
    gtype = parts[1] if len(parts) == 3 and parts[0] == "gpu" else ""
    items = [g.split("(")[0].split(":") for g in gres.split(",")]
    types = tuple(dict.fromkeys(i[1] for i in items if len(i) == 3 and i[0] == "gpu"))
    return Node(gpus_total=total, gpus_used=in_use, gpu_type=gtype, gpu_types=types,
                shards_total=shards_in_gres(gres), **fields)  # type: ignore[arg-type]


def filter_jobs(
    jobs: Iterable[Job],
    *,
    users: Iterable[str] | None = None,
    states: Iterable[str] | None = None,
    job_ids: Iterable[int] | None = None,
    partitions: Iterable[str] | None = None,
) -> list[Job]:
    """Keep jobs matching every given filter (see :meth:`SlurmClient.jobs`)."""
    u = set(users) if users is not None else None
    s = {x.upper() for x in states} if states is not None else None
    ids = {int(x) for x in job_ids} if job_ids is not None else None
    p = set(partitions) if partitions is not None else None
    out = []
    for j in jobs:
        if u is not None and j.user not in u:
            continue
        if s is not None and j.state not in s:
            continue
        if ids is not None and not ids & {j.job_id, j.het_job_id, j.array_job_id}:
            continue
        if p is not None and not p & set(j.partition.split(",")):
            continue
        out.append(j)
    return out


_TASK_RANGE_RE = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?")
MAX_JOB_ID = 0xFFFF_FFFD
"""Largest job id Slurm can give: ids are ``uint32_t`` and slurm.h reserves ``NO_VAL``
(0xfffffffe) and ``INFINITE`` (0xffffffff); a federated cluster's ids carry its cluster id in
the top bits, past slurm.conf(5) ``MaxJobId`` (at most 67,108,863)."""
MAX_ARRAY_TASK_ID = 4_000_000
"""Largest array element index Slurm can give: slurm.conf(5) ``MaxArraySize`` is at most
4000001 and indexes run from 0 to ``MaxArraySize - 1``."""


def decimal_at_most(digits: str, limit: int) -> bool:
    """Whether the decimal ``digits`` (``[0-9]+``) are at most ``limit`` (a job id against
    :data:`MAX_JOB_ID`, an element index against :data:`MAX_ARRAY_TASK_ID`), compared by length
    first: ``int()`` refuses a string of more than 4,300 digits (ValueError), and what a user
    types may be that long."""
    return len(digits.lstrip("0")) <= len(str(limit)) and int(digits) <= limit


def _task_items(task_string: str) -> list[tuple[int, int, int] | None]:
    """The comma-separated ``N``, ``A-B`` or ``A-B:STEP`` items of an array's task string
    (the ``%LIMIT`` throttle left out) as ``(low, high, step)``, None for one that does not
    parse; the callers judge backwards ranges and steps of 0."""
    out: list[tuple[int, int, int] | None] = []
    for item in task_string.partition("%")[0].split(","):
        m = _TASK_RANGE_RE.fullmatch(item.strip())
        if m is None:
            out.append(None)
            continue
        low = int(m.group(1))
        out.append((low, int(m.group(2)) if m.group(2) is not None else low, int(m.group(3) or 1)))
    return out


def parse_array_tasks(task_string: str) -> list[range]:
    """The elements of ``task_string`` (the text between the brackets of ``30_[5-9,12%2]``,
    grammar of :func:`array_task_in`) as ranges; the ``%LIMIT`` throttle is not an element.
    Raises ValueError for an item that does not parse, a range that runs backwards, a step of
    0 or an index over :data:`MAX_ARRAY_TASK_ID` (strict: this reads what a user typed)."""
    tasks, _, limit = task_string.partition("%")
    if _ and not limit.isdecimal():
        raise ValueError(f"bad throttle %{limit}")
    out = []
    for item, parsed in zip(tasks.split(","), _task_items(tasks)):
        if parsed is None or item != item.strip():
            raise ValueError(f"bad element {item!r}")
        low, high, step = parsed
        if high > MAX_ARRAY_TASK_ID or low > high or step == 0:
            raise ValueError(f"bad element {item!r}")
        out.append(range(low, high + 1, step))
    return out


def array_task_count(task_string: str) -> int:
    """How many elements ``task_string`` names (grammar of :func:`array_task_in`): the
    pending elements an array's meta record stands for, ``2-9%2`` 8 (the throttle limits how
    many run at once, not how many wait); at least 1, the record itself (an item that does
    not parse counts none)."""
    return max(sum(len(range(p[0], p[1] + 1, p[2] or 1))
                   for p in _task_items(task_string) if p is not None), 1)


def array_task_ranges(task_string: str) -> list[range]:
    """The elements of ``task_string`` (grammar of :func:`array_task_in`, read as leniently:
    an item that does not parse names none, a step of 0 is taken as 1) as ranges."""
    return [range(p[0], p[1] + 1, p[2] or 1) for p in _task_items(task_string) if p is not None]


def array_task_in(task_string: str, task: int) -> bool:
    """Whether array element ``task`` is one of ``task_string``, the pending elements of an
    array's meta record as squeue writes them between the brackets of ``30_[5-9]``:
    comma-separated ``N``, ``A-B`` or ``A-B:STEP`` items and an optional ``%LIMIT`` suffix
    (the throttle, not an element). sbatch(1) ``--array``; Slurm 22.05 writes a stepped range
    expanded (``1,3,5,7,9%2`` for ``1-9:2%2``). An item that does not parse matches nothing;
    a step of 0 is taken as 1."""
    return any(p is not None and p[0] <= task <= p[1] and (task - p[0]) % (p[2] or 1) == 0
               for p in _task_items(task_string))
