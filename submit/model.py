"""The normalised job model: what dlsubmit renders, whichever spec version it came from.

``submit/spec_v1.py`` (OpenPAI v1 JSON) and ``submit/spec_v2.py`` (OpenPAI protocol v2 YAML) each
validate their own format and convert it to a :class:`Job` of :class:`Role` records; the renderer
(``submit/render.py``) reads only this model. Units: memory in MiB, grace in seconds, counts are
plain integers; ``-1`` means "off" for the completion thresholds and "unlimited" for the retry
budget. Completion semantics follow OpenPAI's FrameworkController (a role's ``min_failed`` failed
instances fail the job at once, ``min_succeeded`` succeeded instances end it successfully).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from submit.errors import SpecError
from submit.runtime import PORT_ENV_NAMES, ROLE_ENV_NAMES

PLACEMENTS = ("consolidate", "spread")


@dataclass(frozen=True)
class Port:
    """A named port request of every instance of a role (``label`` is a shell identifier)."""

    label: str
    count: int


@dataclass(frozen=True)
class Role:
    """One task role. An instance is one Slurm task.

    Attributes:
        name: the role name as written in the spec (any string).
        ident: ``name`` as a shell identifier (see :func:`role_ident`), used in env names.
        instances: Slurm tasks of the role (>= 1).
        cpus: CPUs per instance (``--cpus-per-task``).
        memory_mib: memory per instance, MiB.
        gpus: whole GPUs per instance (0 = CPU-only role or a fractional one, no ``gres/gpu``).
        gpu_share: a fraction of one GPU per instance (0 < share < 1, asked as GPU shards,
            slurm_plugin/shard.py); 0.0 for whole-GPU and CPU-only roles.
        command: the bash text every instance runs (templates already rendered).
        image: container image URI or ``None``.
        ports: named port requests per instance.
        min_succeeded: succeeded instances that end the job successfully, -1 = off.
        min_failed: failed instances that fail the job, -1 = off.
        shm_mib: shared memory wanted per instance (PAI_RESOURCE only), MiB.
        task_retries: times a failed instance's command is run again in place (same task, same
            rank, no requeue of the gang); OpenPAI v2 ``taskRetryCount``.
        path: the role's field path in the spec (``taskRoles.worker`` / ``taskRoles[1]``).
        fields: spec field names for ``gpu``, ``cpu``, ``memory``, ``instances``,
            ``min_succeeded``, ``command`` (for messages).
    """

    name: str
    ident: str
    instances: int
    cpus: int
    memory_mib: int
    gpus: int
    command: str
    image: str | None = None
    ports: tuple[Port, ...] = ()
    min_succeeded: int = -1
    min_failed: int = 1
    shm_mib: int = 64
    task_retries: int = 0
    path: str = "taskRoles"
    gpu_share: float = 0.0
    fields: tuple[tuple[str, str], ...] = ()

    def field_path(self, key: str) -> str:
        """The spec path of ``key`` (a key of ``fields``) in this role."""
        return f"{self.path}.{dict(self.fields).get(key, key)}"


@dataclass(frozen=True)
class Job:
    """A validated job, ready to render.

    Attributes:
        name: job name as in the spec (rendered to Slurm in a sanitised form, see render.py).
        roles: task roles in spec order; role 0 hosts MASTER_ADDR and the batch shell.
        retry_budget: failed attempts that are retried (requeued), -1 = unlimited.
        gang: all instances start together (False: a job array, one element per instance).
        placement: ``consolidate`` (fewest nodes) or ``spread`` (one instance per node).
        gpu_type: GRES type (``a100``) or ``None`` for any.
        envs: the job's environment (name, value) pairs, set for every task's command and only
            for it (never for the script's own machinery); names Slurm or the runtime set are
            refused (submit/runtime.py ``reserved_env``).
        data_dir, output_dir, code_dir: PAI_DATA_DIR / PAI_OUTPUT_DIR / PAI_CODE_DIR.
        signal, grace_s: checkpoint contract asked by the spec, ``None`` = site default.
        enforce_binding: ``--gres-flags=enforce-binding`` asked by the spec (``None`` = site).
        virtual_cluster: OpenPAI ``virtualCluster`` (``None`` = not given), mapped to Slurm by the
            site config (submit/options.py).
        gpu_isolation: ``node`` (every task sees the node's GPUs of the job, ``LOCAL_RANK``
            picks) or ``task`` (each task sees only its own GPUs), ``extras.gpuIsolation``.
        secrets: names of the ``$secrets`` the commands reference (values come at run time
            from the ``--secrets`` file, never from the script).
        warnings: notes for the user (unsupported fields that were ignored, renamed roles).
        version: ``"v1"`` or ``"v2"``.
        gpu_type_field: the spec field ``gpu_type`` comes from (``extras.gpuType``, or
            ``gpuType`` for v1's top-level field), for messages.
        opportunistic: ``extras.opportunistic``: the job runs only on GPUs production jobs leave
            free and is the first to be preempted (its checkpoint marker carries
            ``class=opportunistic``, slurm_plugin/marker.py).
    """

    name: str
    roles: tuple[Role, ...]
    retry_budget: int = 0
    gang: bool = True
    placement: str = "consolidate"
    gpu_type: str | None = None
    envs: tuple[tuple[str, str], ...] = ()
    data_dir: str = ""
    output_dir: str = ""
    code_dir: str = ""
    signal: str | None = None
    grace_s: int | None = None
    enforce_binding: bool | None = None
    virtual_cluster: str | None = None
    gpu_isolation: str = "node"
    secrets: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    version: str = "v2"
    opportunistic: bool = False
    gpu_type_field: str = "extras.gpuType"


_NON_IDENT = re.compile(r"[^A-Za-z0-9_]")


def split_gpus(value: int | float) -> tuple[int, float]:
    """``(whole GPUs, share of one GPU)`` of a spec's validated GPU count: ``2`` -> (2, 0.0),
    ``0.5`` -> (0, 0.5)."""
    return (value, 0.0) if isinstance(value, int) else (0, float(value))


def role_ident(name: str) -> str:
    """A role name as a shell identifier (the documented role-name rule).

    Every character outside ``[A-Za-z0-9_]`` becomes ``_`` and a leading digit gets a ``_``
    prefix: ``ps-server`` -> ``ps_server``, ``2nd`` -> ``_2nd``, ``wörker`` -> ``w_rker``.
    """
    ident = _NON_IDENT.sub("_", name)
    return "_" + ident if ident[:1].isdigit() or not ident else ident


MAX_TASK_ENV_NAME = 255
"""Longest environment variable name that reaches a task, characters. srun copies its
environment for the tasks through a ``char name[256]`` buffer (Slurm's src/common/env.c,
``env_array_merge`` / ``_env_array_entry_splitter``) and silently drops every variable whose
name is longer; bash and Linux have no such limit. The batch shell exports the role's variables
(``PAI_MIN_SUCCEEDED_TASK_COUNT_<role>``, ``PAI_PORT_LIST_<role>_<index>_<label>``, ...,
submit/runtime.py) and srun hands them to the tasks, whose prologue then stops at
``!dl_var: unbound variable``."""


def _longest_env_name(r: Role, templates: tuple[str, ...], label: str = "") -> tuple[str, str]:
    """The longest of the names ``templates`` (:data:`submit.runtime.ROLE_ENV_NAMES` or
    ``PORT_ENV_NAMES``) give role ``r`` at its last (longest) instance index, and its shape with
    the placeholders written ``<role>``, ``<index>``, ``<label>``."""
    def name(t: str) -> str:
        return t.format(role=r.ident, index=r.instances - 1, label=label)
    longest = max(templates, key=lambda t: len(name(t)))
    return name(longest), longest.format(role="<role>", index="<index>", label="<label>")


_LIMIT_WHY = (f"srun passes no environment variable name over {MAX_TASK_ENV_NAME} characters to "
              "the tasks (Slurm's src/common/env.c), so every task would fail at start")


def env_name_problems(r: Role) -> list[str]:
    """Why role ``r`` could never start because an environment variable named after it (or
    after one of its port labels) is longer than :data:`MAX_TASK_ENV_NAME`; ``[]`` when none is."""
    out = []
    longest, shape = _longest_env_name(r, ROLE_ENV_NAMES)
    if len(longest) > MAX_TASK_ENV_NAME:
        allowed = MAX_TASK_ENV_NAME - (len(longest) - len(r.ident)) - (len(r.ident) - len(r.name))
        out.append(f"{r.path}: a role name of {len(r.name)} characters makes {shape} "
                   f"{len(longest)} characters long; {_LIMIT_WHY}; use at most {allowed} characters")
        return out   # its labels only lengthen names that are too long already
    for p in r.ports:
        longest, shape = _longest_env_name(r, PORT_ENV_NAMES, p.label)
        if len(longest) > MAX_TASK_ENV_NAME:
            allowed = MAX_TASK_ENV_NAME - (len(longest) - len(p.label))
            out.append(f"{r.field_path('ports')}: port label {p.label!r} of {len(p.label)} "
                       f"characters makes {shape} {len(longest)} "
                       f"characters long; {_LIMIT_WHY}; with this role name and "
                       f"{r.instances} instance(s) use at most {allowed} characters")
    return out


def check_role_idents(roles: list[Role]) -> None:
    """Raise :class:`SpecError` when two different role names map to the same identifier, or
    when a role name or port label makes an environment variable name longer than a task can
    get (:func:`env_name_problems`). A name written twice is :func:`repeated_names`'s to report."""
    seen: dict[str, str] = {}
    problems = [line for r in roles for line in env_name_problems(r)]
    for r in roles:
        if r.ident in seen and seen[r.ident] != r.name:   # the same name: repeated_names says so
            problems.append(
                f"{r.path}: role name {r.name!r} becomes {r.ident!r} in environment names, "
                f"like role {seen[r.ident]!r}; rename one of them"
            )
        seen.setdefault(r.ident, r.name)
    if problems:
        raise SpecError(problems)


def repeated_names(names: list[str], list_path: str, key: str = "name") -> list[str]:
    """One problem per item of the list at ``list_path`` whose ``key`` repeats an earlier
    item's (``prerequisites[2].name: 'img' repeats prerequisites[0]; rename one``): a name that
    other fields refer to must pick one item, never the first of several silently."""
    first: dict[str, int] = {}
    out = []
    for i, name in enumerate(names):
        if name in first:
            out.append(f"{list_path}[{i}].{key}: {name!r} repeats {list_path}[{first[name]}]; "
                       "rename one")
        first.setdefault(name, i)
    return out


def check_completion(roles: list[Role]) -> None:
    """Raise :class:`SpecError` for a completion threshold above its role's instance count.
    FrameworkController (OpenPAI's launcher) takes a role's minFailedTaskCount and
    minSucceededTaskCount as -1 or ``1..taskNumber``: with 5 of 2 instances no number of failures
    fails the job, and a job whose every instance failed would end succeeded."""
    problems = []
    for r in roles:
        inst = f"{r.instances} instance{'' if r.instances == 1 else 's'} ({r.field_path('instances')})"
        if r.min_failed > r.instances:
            problems.append(f"{r.field_path('min_failed')}: {r.min_failed} is more than the role's "
                            f"{inst}, so the job could never fail, not even with every instance "
                            f"failed; use 1..{r.instances}, or -1 (failures never fail the job)")
        if r.min_succeeded > r.instances:
            problems.append(f"{r.field_path('min_succeeded')}: {r.min_succeeded} is more than the "
                            f"role's {inst}, so it could never be reached; use 1..{r.instances}, "
                            "or -1 (every instance must complete)")
    if problems:
        raise SpecError(problems)


def renamed_role_warnings(roles: list[Role] | tuple[Role, ...], texts: list[str]) -> list[str]:
    """Warnings for commands that use a role's original name where environment names carry its
    identifier (``$PAI_TASK_ROLE_ps.server_HOST_LIST`` expands ``$PAI_TASK_ROLE_ps`` in bash).

    ``texts``: every command of the job. A reference is a ``PAI_`` word followed by the original
    name (``PAI_HOST_IP_ps.server_0``, ``PAI_TASK_ROLE_ps.server_HOST_LIST``)."""
    out = []
    for r in roles:
        if r.name == r.ident:
            continue
        pat = re.compile(r"PAI_[A-Za-z0-9_]*?_?" + re.escape(r.name))
        if any(pat.search(t) for t in texts):
            out.append(f"{r.path}: role {r.name!r} is {r.ident!r} in environment names "
                       f"(e.g. PAI_TASK_ROLE_{r.ident}_HOST_LIST); a command uses the original "
                       "name, which bash does not read as one variable name")
    return out
