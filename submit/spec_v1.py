"""OpenPAI v1 job specs (JSON, OpenPAI <= 0.13): validation and conversion to the job model.

Fields and rules follow the v1 JSON schema (microsoft/pai
contrib/pai_vscode/schemas/pai_job_config.schema.json) and the v1 job tutorial: required ``jobName``, ``image``,
``taskRoles[]`` with ``name``, ``taskNumber``, ``cpuNumber``, ``memoryMB``, ``gpuNumber``,
``command``. ``retryCount`` -2 means unlimited retries. ``minFailedTaskCount`` defaults to 1
and ``minSucceededTaskCount`` to off (FrameworkLauncher's ApplicationCompletionPolicy).
``jobEnvs`` are set for every task's command, and only for it (``--param k=v`` overrides a
declared one); names that Slurm or the script's runtime set (``SLURM_*``, ``DL_*``, ``PAI_*``,
``RANK``, ...: submit/runtime.py ``reserved_env``) are refused.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from submit import model
from submit.extras import _GRES_TYPE_RE, Extras
from submit.validation import (_IDENT_RE, Command, EnvName, GpuCount, Ident, Image, Int, NonEmpty, NotEmpty, Scalar, SpecError,
                               Struct, Text, validate)


class PortV1(Struct, kw_only=True):
    """``portList[]`` item: ``portNumber`` ports labelled ``label`` per task (beginAt is ignored:
    ports are assigned from the job id, see docs/dlsubmit.md)."""

    label: Ident  # type: ignore[valid-type]
    beginAt: Int(0, 65535) = 0  # type: ignore[valid-type]
    portNumber: Int(0, 100) = 1  # type: ignore[valid-type]


class TaskRoleV1(Struct, kw_only=True):
    """``taskRoles[]`` item: one role; memory in MiB per task, counts per task."""

    name: NonEmpty  # type: ignore[valid-type]
    taskNumber: Int(1, 100_000)  # type: ignore[valid-type]
    cpuNumber: Int(1, 4096)  # type: ignore[valid-type]
    memoryMB: Int(1, 1 << 30)  # type: ignore[valid-type]
    shmMB: Int(0, 1 << 30) | None = None  # type: ignore[valid-type]
    gpuNumber: GpuCount  # type: ignore[valid-type]
    portList: list[PortV1] = msgspec.field(default_factory=list)
    command: Command  # type: ignore[valid-type]
    minFailedTaskCount: Int(1, 100_000, also=(-1,)) | None = None  # type: ignore[valid-type]
    minSucceededTaskCount: Int(1, 100_000, also=(-1,)) | None = None  # type: ignore[valid-type]


class JobV1(Struct, kw_only=True):
    """A whole v1 job (top level of the JSON file)."""

    jobName: NonEmpty  # type: ignore[valid-type]
    image: Image  # type: ignore[valid-type]
    authFile: Text | None = None  # type: ignore[valid-type]
    dataDir: Text | None = None  # type: ignore[valid-type]
    outputDir: Text | None = None  # type: ignore[valid-type]
    codeDir: Text | None = None  # type: ignore[valid-type]
    virtualCluster: Text | None = None  # type: ignore[valid-type]
    gpuType: Text | None = None  # type: ignore[valid-type]
    retryCount: Int(-2, 1000) = 0  # type: ignore[valid-type]
    killAllOnCompletedTaskNumber: Int(0, 100_000) | None = None  # type: ignore[valid-type]
    jobEnvs: dict[EnvName, Scalar] = msgspec.field(default_factory=dict)  # type: ignore[valid-type]
    extras: Extras = msgspec.field(default_factory=Extras)
    taskRoles: Annotated[list[TaskRoleV1], NotEmpty]


def _env_text(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def to_job(data: Any, overrides: dict[str, str] | None = None) -> model.Job:
    """Validate a loaded v1 document and convert it to a :class:`model.Job`.

    Raises :class:`submit.validation.SpecError` naming each bad field
    (``taskRoles[1].gpuNumber: must be an integer in 0..1024``).
    """
    spec: JobV1 = validate(JobV1, data)
    repeated = model.repeated_names([r.name for r in spec.taskRoles], "taskRoles")
    repeated += [line for i, r in enumerate(spec.taskRoles)
                 for line in model.repeated_names([p.label for p in r.portList],
                                                  f"taskRoles[{i}].portList", key="label")]
    if repeated:   # a name is a key: PAI_TASK_ROLE_<role>_..., PAI_PORT_LIST_<role>_<index>_<label>
        raise SpecError(repeated)
    warnings = []
    if spec.killAllOnCompletedTaskNumber:
        warnings.append("killAllOnCompletedTaskNumber is ignored; use minSucceededTaskCount")
    if spec.retryCount == -1:
        warnings.append("retryCount: -1 is not a documented value; treated as 0")
    if spec.gpuType is not None and not _GRES_TYPE_RE.match(spec.gpuType):
        raise SpecError(["gpuType: must be a GRES type name ([A-Za-z0-9_.-]+, not starting with -), e.g. a100"])
    bad = [k for k in overrides or {} if not _IDENT_RE.match(k)]
    if bad:
        raise SpecError([f"--param {k}: v1 jobEnvs names must be shell variable names" for k in bad])
    unknown = [k for k in overrides or {} if k not in spec.jobEnvs]
    if unknown:
        known = ", ".join(sorted(spec.jobEnvs)) or "none"
        raise SpecError([f"--param {k}: the spec declares no jobEnvs entry {k!r} (jobEnvs: {known})"
                         for k in unknown])
    roles = []
    for i, r in enumerate(spec.taskRoles):
        roles.append(model.Role(
            name=r.name, ident=model.role_ident(r.name), instances=r.taskNumber,
            cpus=r.cpuNumber, memory_mib=r.memoryMB, gpus=model.split_gpus(r.gpuNumber)[0],
            gpu_share=model.split_gpus(r.gpuNumber)[1], command=r.command,
            image=spec.image,
            ports=tuple(model.Port(p.label, p.portNumber) for p in r.portList),
            min_succeeded=r.minSucceededTaskCount if r.minSucceededTaskCount is not None else -1,
            min_failed=r.minFailedTaskCount if r.minFailedTaskCount is not None else 1,
            shm_mib=r.shmMB if r.shmMB is not None else 64,
            path=f"taskRoles[{i}]",
            fields=(("gpu", "gpuNumber"), ("cpu", "cpuNumber"), ("memory", "memoryMB"),
                    ("instances", "taskNumber"), ("min_failed", "minFailedTaskCount"),
                    ("min_succeeded", "minSucceededTaskCount"), ("ports", "portList")),
        ))
    model.check_role_idents(roles)
    model.check_completion(roles)
    warnings += model.renamed_role_warnings(roles, [r.command for r in roles])
    envs = {k: _env_text(v) for k, v in spec.jobEnvs.items()}
    envs.update(overrides or {})
    ex = spec.extras
    ckpt = ex.checkpoint
    return model.Job(
        name=spec.jobName, roles=tuple(roles),
        retry_budget=-1 if spec.retryCount == -2 else max(spec.retryCount, 0),
        gang=ex.gangAllocation, placement=ex.placement,
        gpu_type=ex.gpuType or spec.gpuType, envs=tuple(envs.items()),
        data_dir=spec.dataDir or "", output_dir=spec.outputDir or "", code_dir=spec.codeDir or "",
        signal=ckpt.signal if ckpt else None, grace_s=ckpt.grace if ckpt else None,
        enforce_binding=ex.enforceBinding, virtual_cluster=spec.virtualCluster,
        gpu_isolation=ex.gpuIsolation, warnings=tuple(warnings), version="v1",
        opportunistic=ex.opportunistic,
        gpu_type_field="extras.gpuType" if ex.gpuType else "gpuType",
    )
