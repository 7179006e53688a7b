"""Which node shape ``dlsubmit`` packs a job for (submit/packing.py): GPUs, cores and MiB per node.

Each of the three numbers comes from the first of: a command-line flag (``--gpus-per-node``,
``--cores-per-node``, ``--mem-per-node``), the site config (``gpus_per_node``,
``cores_per_node``, ``mem_per_node_mib``), the cluster, the defaults of
:class:`submit.options.RenderOptions` (8 GPUs, 16 cores, 64000 MiB). The cluster is asked
(``sinfo --json`` through ``SlurmClient.nodes``) on a submit, and on ``--dry-run`` only with
``--cluster-shape``; its shape is that of the largest node in the job's partition (the
``--partition``, else the virtual cluster's, else the partition marked ``Default=YES``; every
node when there is none): the most GPUs, then cores (Slurm's ``CPUs``), then ``RealMemory``,
taken from one real node, so a role that fits on some node of the partition is never refused
and is packed on as few nodes as that node allows. In a partition of mixed shapes, a job that
needs more nodes of that shape than the partition has waits in the queue; :func:`choose` says
so in its note. Shards per GPU (for a fractional ``gpu``) come from the site config or
``--shards-per-gpu``, else from the same nodes' Gres (``gpu:4,shard:16`` is 4 per GPU; the
largest ratio among them: a job asking a step only some nodes give waits for those). Read
nodes also refuse, before any sbatch of the batch (:func:`choose`): a GPU type none of them
has (sinfo's Gres ``gpu:a100:8``; untyped ``gpu:8`` is not checked), a fraction of a GPU where
none has shards (sbatch would refuse either with a message naming no spec field), one instance
larger than the largest node (the field named, before the sum), and a gang that needs more
GPUs, cores or MiB at once than the partition's nodes have in all (:func:`gang_demand`): Slurm
would keep it pending for ever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from slurm_plugin import shard
from submit.errors import SpecError
from submit.model import Job, Role
from submit.options import RenderOptions
from submit.packing import check_fits, mem_per_cpu

FIELDS = ("gpus_per_node", "cores_per_node", "mem_per_node_mib")
"""The RenderOptions fields that make the node shape."""


class NodeLike(Protocol):
    """What is read of a node (``slurm_plugin.slurm.records.Node`` has these)."""

    name: str
    cpus: int
    real_memory_mib: int
    gpus_total: int
    shards_total: int
    gpu_types: tuple[str, ...]
    partitions: tuple[str, ...]


@dataclass(frozen=True)
class Shape:
    """A node shape: GPUs, cores (CPUs as Slurm counts them) and memory in MiB per node."""

    gpus: int
    cores: int
    mem_mib: int

    def text(self) -> str:
        return f"{self.gpus} GPUs, {self.cores} cores, {self.mem_mib} MiB per node"


DEFAULT = Shape(RenderOptions.gpus_per_node, RenderOptions.cores_per_node,
                RenderOptions.mem_per_node_mib)


def shape_of(opts: RenderOptions) -> Shape:
    return Shape(opts.gpus_per_node, opts.cores_per_node, opts.mem_per_node_mib)


def largest(nodes: Iterable[NodeLike]) -> tuple[Shape, int, int, int] | None:
    """``(shape, nodes of that shape, nodes in all, distinct shapes)`` of the largest node
    (most GPUs, then cores, then memory); ``None`` for no node."""
    shapes = [Shape(n.gpus_total, n.cpus, n.real_memory_mib) for n in nodes]
    if not shapes:
        return None
    best = max(shapes, key=lambda s: (s.gpus, s.cores, s.mem_mib))
    return best, shapes.count(best), len(shapes), len(set(shapes))


#: how a note names each shape field
_FIELD_WORDS = {"gpus_per_node": "GPUs", "cores_per_node": "cores", "mem_per_node_mib": "memory"}


def _sources(given: set[str]) -> str:
    """Where a shape packed without the cluster's nodes came from: ``the defaults``, or
    ``GPUs given, cores and memory the defaults`` when a flag or the site config set some."""
    def words(fields: list[str]) -> str:
        names = [_FIELD_WORDS[f] for f in fields]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    set_ = [f for f in FIELDS if f in given]
    rest = [f for f in FIELDS if f not in given]
    if not set_:
        return "the defaults"
    return f"{words(set_)} given, {words(rest)} the default{'s' if len(rest) > 1 else ''}"


@dataclass(frozen=True)
class Choice:
    """The options to pack with and a line saying where their shape came from (``""`` when
    nothing needs saying: every number given, or a uniform partition answered)."""

    opts: RenderOptions
    note: str
    unreachable: bool = False


def choose(opts: RenderOptions, given: set[str], partition: str | None,
           nodes: Callable[[str | None], tuple[str, Sequence[NodeLike]]] | None,
           job: Job, origin: Mapping[str, str] | None = None) -> Choice:
    """The shape for one job, and the checks of ``job`` against the partition's nodes.

    ``given``: the :data:`FIELDS` set by a flag or the site config (kept as they are).
    ``nodes(partition)``: ``(partition name, its nodes)`` from Slurm, raising
    ``slurm_plugin.slurm.client.SlurmError`` when Slurm does not answer; ``None`` when the
    cluster is not to be asked (``--dry-run`` without ``--cluster-shape``). ``origin``: where
    ``opts.gpu_type``, ``opts.shards_per_gpu`` and ``partition`` come from, for messages
    (``{"gpu_type": "--gpu-type", "partition": "SBATCH_PARTITION"}``; default: the site
    config's key, ``--partition`` for the partition).

    Raises :class:`SpecError` (one line, naming the field and the fix), in this order, when the
    partition has no node at all; no GPU while the job asks for GPUs; no GPU of the type the
    job asks (:func:`_check_gpu_type`); no GPU shards while a role asks for a fraction of a GPU
    (:func:`_check_shards`; without nodes read, when the shards per GPU are not given); an
    instance larger than its largest node (:func:`submit.packing.check_fits`); fewer GPUs,
    cores or MiB in all its nodes, whatever their state, than a gang needs at once
    (:func:`gang_demand`: it could never start, Slurm would keep it pending). Nodes are read
    when a shape field is not given, or the job asks a GPU type or a fraction of a GPU."""
    origin = origin or {}
    share = next((r for r in job.roles if r.gpu_share), None)
    all_given = set(FIELDS) <= given
    if nodes is None:
        if share is not None and not opts.shards_per_gpu:
            raise SpecError([f"{share.field_path('gpu')}: {share.gpu_share:g} of a GPU needs GPU "
                             "shards, and a --dry-run reads no node to learn how many a GPU "
                             "has: add --cluster-shape, or give --shards-per-gpu N (or "
                             "shards_per_gpu in the site config)"])
        return Choice(opts, "" if all_given else
                      f"packed for {shape_of(opts).text()} ({_sources(given)}; "
                      "--cluster-shape reads the partition's nodes from Slurm)")
    if all_given and not (_asked_type(job, opts, origin)[0] or share):
        return Choice(opts, "")
    from slurm_plugin.slurm.client import SlurmError, SlurmUnreachable

    try:
        name, found = nodes(partition)
    except SlurmError as exc:
        return Choice(opts, "" if all_given else
                      f"packed for {shape_of(opts).text()} ({_sources(given)}: Slurm did "
                      f"not tell its node shapes: {exc.message})",
                      isinstance(exc, SlurmUnreachable))
    parts = listed(name)
    where = (f"partitions {','.join(parts)}" if len(parts) > 1 else f"partition {parts[0]}") \
        if name else "the cluster"
    source = origin.get("partition", "--partition")
    empty = [p for p in parts if not any(p in n.partitions for n in found)] \
        if len(parts) > 1 else []
    if empty:   # sbatch refuses a list that names a partition the cluster does not have
        raise SpecError([f"partition {empty[0]} (of {source} {name}): sinfo lists no node in "
                         "it (no such partition, or one without nodes): name partitions that "
                         "'sinfo -s' lists"])
    top = largest(found)
    if top is None:
        named = "" if source == "--partition" else f" (from {source})"
        raise SpecError([f"{where}{named}: sinfo lists no node in it (no such partition, or one "
                         "without nodes): name a partition that 'sinfo -s' lists"] if name else
                        [f"{where}: no node to pack the job on (sinfo lists none)"])
    shape, count, total, kinds = top
    if shape.gpus == 0 and any(r.gpus or r.gpu_share for r in job.roles) \
            and "gpus_per_node" not in given:
        raise SpecError([f"{where}: no node has a GPU (largest node: {shape.text()}); "
                         "name a GPU partition with --partition"])
    _check_gpu_type(_asked_type(job, opts, origin), where, found)
    if share is not None:
        _check_shards(share, opts, origin, where, found)
    values: dict[str, Any] = {"gpus_per_node": shape.gpus or opts.gpus_per_node,
                              "cores_per_node": shape.cores, "mem_per_node_mib": shape.mem_mib}
    if not opts.shards_per_gpu:
        per_gpu = [shard.shards_per_gpu(n.gpus_total, n.shards_total) for n in found]
        values["shards_per_gpu"] = max(per_gpu, default=0)
    picked = dataclasses.replace(opts, **{f: v for f, v in values.items() if f not in given})
    for role in job.roles:   # one instance too large names its field, before the gang's sum
        check_fits(role, picked)
    gang = gang_demand(job)
    if gang is not None:
        _check_gang_fits(gang, name, found, opts, given)
    note = ""
    if kinds > 1 and not all_given:
        has, its = ("have", "their") if "," in (name or "") else ("has", "its")
        note = (f"{where} {has} nodes of {kinds} shapes; packed for {its} largest "
                f"({shape_of(picked).text()}, {count} of {total} nodes): a job needing more such "
                "nodes than that waits")
    return Choice(picked, note)


def _asked_type(job: Job, opts: RenderOptions, origin: Mapping[str, str]) -> tuple[str, str]:
    """``(GRES type, where it is set)`` that the job's whole GPUs ask for (the spec's, else
    ``opts.gpu_type``); ``("", "")`` when none, or when no role asks for whole GPUs (a shard
    or CPU request carries no type, submit/render.py)."""
    if not any(r.gpus for r in job.roles):
        return "", ""
    if job.gpu_type:
        return job.gpu_type, job.gpu_type_field
    if opts.gpu_type:
        return opts.gpu_type, origin.get("gpu_type", "the site config's gpu_type")
    return "", ""


def _check_gpu_type(asked: tuple[str, str], where: str, found: Sequence[NodeLike]) -> None:
    """Raise :class:`SpecError` when a GRES type is asked (``(type, field)``) and no node
    ``found`` has GPUs of it. Nothing is checked when a GPU node lists no type (``gpu:8``:
    sinfo does not tell the type). Types compare as Slurm compares them, case and all
    (``--gres=gpu:A100:1`` on ``gpu:a100`` nodes: "Requested node configuration is not
    available", seen on 24.11)."""
    gtype, field = asked
    gpu_nodes = [n for n in found if n.gpus_total]
    if not gtype or not gpu_nodes or any(not n.gpu_types for n in gpu_nodes):
        return
    have = list(dict.fromkeys(t for n in gpu_nodes for t in n.gpu_types))
    if gtype in have:
        return
    raise SpecError([f"{field}: no node of {where} has GPUs of type {gtype} (sinfo lists "
                     f"{', '.join(have)}): set {field} to {' or '.join(have)}, leave it out "
                     f"for any type, or name a partition with {gtype} GPUs with --partition"])


def _check_shards(role: Role, opts: RenderOptions, origin: Mapping[str, str], where: str,
                  found: Sequence[NodeLike]) -> None:
    """Raise :class:`SpecError` when ``role`` asks for a fraction of a GPU and no node
    ``found`` has GPU shards (sinfo lists no ``shard`` GRES): sbatch would refuse
    ``--gres=shard:K`` ("Invalid generic resource (gres) specification")."""
    if any(n.shards_total for n in found):
        return
    fix = ("ask for whole GPUs, or name a partition with GPU shards with --partition (an "
           "admin adds them with dlgres --shards N)")
    if opts.shards_per_gpu:
        source = origin.get("shards_per_gpu", "the site config's shards_per_gpu")
        raise SpecError([f"{source} {opts.shards_per_gpu}: no node of {where} has GPU shards "
                         f"(sinfo lists no shard GRES), so Slurm would refuse the "
                         f"{role.gpu_share:g} GPU of {role.field_path('gpu')}: {fix}"])
    raise SpecError([f"{role.field_path('gpu')}: {role.gpu_share:g} of a GPU needs GPU shards, "
                     f"and no node of {where} has any (sinfo lists no shard GRES): {fix}"])


def listed(name: str) -> list[str]:
    """The partitions of a ``--partition`` value (``gpu,debug``), each once, in order."""
    return list(dict.fromkeys(p for p in name.split(",") if p))


def gang_demand(job: Job) -> Shape | None:
    """What a gang job needs at once, all instances of all roles summed: whole GPUs (a shard
    role's fraction counts none), cores, MiB (``--mem-per-cpu`` × cores, as packed); None for a
    job array (``extras.gangAllocation: false``)."""
    if not job.gang:
        return None
    return Shape(sum(r.instances * r.gpus for r in job.roles),
                 sum(r.instances * r.cpus for r in job.roles),
                 sum(r.instances * mem_per_cpu(r) * r.cpus for r in job.roles))


def _check_gang_fits(gang: Shape, name: str, found: Sequence[NodeLike], opts: RenderOptions,
                     given: set[str]) -> None:
    """Raise :class:`SpecError` when the nodes ``found`` of partition ``name`` ("": the whole
    cluster) hold fewer GPUs, cores or MiB in all than the ``gang`` needs at once. For a list
    of partitions (``gpu,debug``: sbatch(1) starts the job in one of them) only when no one of
    them holds enough. A number the flags or the site config give (``given``) stands for every
    node's, as packing takes it."""
    def in_all(nodes: Sequence[NodeLike]) -> Shape:
        def total(field: str, of_node: Callable[[NodeLike], int]) -> int:
            if field in given:
                return int(getattr(opts, field)) * len(nodes)
            return sum(of_node(n) for n in nodes)
        return Shape(total("gpus_per_node", lambda n: n.gpus_total),
                     total("cores_per_node", lambda n: n.cpus),
                     total("mem_per_node_mib", lambda n: n.real_memory_mib))

    def short(have: Shape) -> list[tuple[int, int, str]]:
        return [(need, got, unit) for need, got, unit in (
            (gang.gpus, have.gpus, "GPUs"), (gang.cores, have.cores, "cores"),
            (gang.mem_mib, have.mem_mib, "MiB")) if need > got]

    parts = listed(name) or [name]
    nodes = {p: [n for n in found if p in n.partitions] if len(parts) > 1 else list(found)
             for p in parts}
    shortfalls = {p: short(in_all(nodes[p])) for p in parts}
    if not all(shortfalls.values()):
        return
    best = max(parts, key=lambda p: in_all(nodes[p]).gpus)   # the one nearest, by GPUs
    need, total, unit = shortfalls[best][0]
    where = (f"partition {best}" if len(parts) == 1 else
             f"the largest of partitions {', '.join(parts)} ({best})") if name else "the cluster"
    raise SpecError([f"the job needs {need} {unit} at once (all instances start together) "
                     f"and {where} has {total} in all ({len(nodes[best])} nodes): it could "
                     "never start; ask for fewer instances or less per instance, or name "
                     "a larger partition with --partition"])


def given_fields(site: dict[str, Any], flags: dict[str, Any]) -> set[str]:
    """The shape fields set by the site config or a flag."""
    return {f for f in FIELDS if f in site or f in flags}


def ask_slurm(client: Any) -> Callable[[str | None], tuple[str, Sequence[NodeLike]]]:
    """``nodes(partition)`` for :func:`choose` over a ``SlurmClient``: the named partition's
    nodes, else the default partition's (``Default=YES``), else every node (name ``""``).
    Remembers each answer, so several specs ask Slurm once per partition."""
    seen: dict[str | None, tuple[str, Sequence[NodeLike]]] = {}

    def nodes(partition: str | None) -> tuple[str, Sequence[NodeLike]]:
        if partition not in seen:
            name = partition
            if name is None:
                name = next((p for p, f in client.show_partitions().items()
                             if f.get("Default") == "YES"), "")
            # a list (gpu,debug): the nodes of every partition in it
            seen[partition] = (name, client.nodes(partitions=name.split(",") if name else None))
        return seen[partition]

    return nodes
