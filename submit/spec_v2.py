"""OpenPAI protocol v2 job specs (YAML): validation and conversion to the job model.

Fields follow the protocol schema (microsoft/openpai-protocol schemas/v2/schema.yaml)
and the rest-server's handling (microsoft/pai src/rest-server/src/middlewares/v2/protocol.js):
each command is trimmed and the list joined by a newline; the active deployment
(``defaults.deployment``) adds its ``preCommands`` before and ``postCommands`` after; then
``<% $ref %>`` templates are rendered (submit/params.py; ``$secrets`` at run time, never into
the script). A role's ``dockerImage`` names a ``dockerimage`` prerequisite.
``completion.minFailedInstances`` defaults to 1 and ``minSucceededInstances`` to -1 (all
instances complete). ``taskRetryCount`` reruns a failed instance's command in place up to N
times (submit/runtime.py); ``jobRetryCount`` is the whole job's budget. ``--param NAME=VALUE``
must name a declared parameter.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from submit import model, params
from submit.extras import Extras
from submit.validation import (Command, GpuCount, Ident, Int, NonEmpty, NotEmpty, OpenStruct, SpecError, Struct, Text, field_path,
                               image_problem, marker, validate)


def _version(v: Any) -> Any:
    if v not in (2, "2"):
        raise ValueError("must be 2")
    return v


def _uri(v: Any) -> str | list[str]:
    if isinstance(v, list):
        for item in v:
            Text.check(item)   # problems() names each bad item by its index (marker's items)
        return v
    if not isinstance(v, str):
        raise ValueError("must be a string or a list of strings")
    return Text.check(v)


ProtocolVersion = marker("ProtocolVersion", object, _version)
"""``protocolVersion``: 2 (or "2")."""
Uri = marker("Uri", (str, list), _uri, items=Text)
"""A prerequisite's ``uri``: a string, or a list of strings (data)."""


class Prerequisite(OpenStruct, kw_only=True):
    """``prerequisites[]`` item: a named docker image, script, output or data URI (list for data)."""

    name: NonEmpty  # type: ignore[valid-type]
    type: Literal["dockerimage", "script", "output", "data"]
    uri: Uri | None = None  # type: ignore[valid-type]


class Resources(Struct, kw_only=True):
    """``resourcePerInstance``: cpu count, memoryMB (MiB), gpu count and named port counts per instance."""

    cpu: Int(1, 4096) = 1  # type: ignore[valid-type]
    memoryMB: Int(1, 1 << 30) = 1024  # type: ignore[valid-type]
    gpu: GpuCount = 0  # type: ignore[valid-type]
    ports: dict[Ident, Int(0, 100)] = msgspec.field(default_factory=dict)  # type: ignore[valid-type]


class Completion(Struct, kw_only=True):
    """``completion``: minFailedInstances (default 1) / minSucceededInstances (default -1)."""

    minFailedInstances: Int(1, 100_000, also=(-1,)) | None = None  # type: ignore[valid-type]
    minSucceededInstances: Int(1, 100_000, also=(-1,)) | None = None  # type: ignore[valid-type]


class ContainerOptions(OpenStruct, kw_only=True):
    """``extraContainerOptions``: only shmMB (MiB) is read."""

    shmMB: Int(0, 1 << 30) | None = None  # type: ignore[valid-type]


class TaskRoleV2(Struct, kw_only=True):
    """``taskRoles.<name>``: one role."""

    instances: Int(1, 100_000) = 1  # type: ignore[valid-type]
    completion: Completion = msgspec.field(default_factory=Completion)
    taskRetryCount: Int(0, 1000) = 0  # type: ignore[valid-type]
    prerequisites: list[Text] = msgspec.field(default_factory=list)  # type: ignore[valid-type]
    dockerImage: Text | None = None  # type: ignore[valid-type]
    data: Text | None = None  # type: ignore[valid-type]
    output: Text | None = None  # type: ignore[valid-type]
    script: Text | None = None  # type: ignore[valid-type]
    extraContainerOptions: ContainerOptions = msgspec.field(default_factory=ContainerOptions)
    resourcePerInstance: Resources
    commands: Annotated[list[Command], NotEmpty]  # type: ignore[valid-type]


class DeploymentRole(Struct, kw_only=True):
    """``deployments[].taskRoles.<name>``: commands run before and after the role's own."""

    preCommands: list[Text] = msgspec.field(default_factory=list)  # type: ignore[valid-type]
    postCommands: list[Text] = msgspec.field(default_factory=list)  # type: ignore[valid-type]


class Deployment(OpenStruct, kw_only=True):
    """``deployments[]`` item, chosen by ``defaults.deployment``."""

    name: NonEmpty  # type: ignore[valid-type]
    taskRoles: dict[str, DeploymentRole] = msgspec.field(default_factory=dict)


class Defaults(OpenStruct, kw_only=True):
    """``defaults``: virtualCluster (mapped by the site config) and the active deployment."""

    virtualCluster: Text | None = None  # type: ignore[valid-type]
    deployment: Text | None = None  # type: ignore[valid-type]


class JobV2(Struct, kw_only=True):
    """A whole protocol-v2 job (top level of the YAML file)."""

    protocolVersion: ProtocolVersion  # type: ignore[valid-type]
    name: NonEmpty  # type: ignore[valid-type]
    type: Literal["job"] = "job"
    version: Any = None
    contributor: Any = None
    description: Any = None
    prerequisites: list[Prerequisite] = msgspec.field(default_factory=list)
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)
    secrets: dict[str, Any] = msgspec.field(default_factory=dict)
    jobRetryCount: Int(0, 1000) = 0  # type: ignore[valid-type]
    taskRoles: Annotated[dict[NonEmpty, TaskRoleV2], NotEmpty]  # type: ignore[valid-type]
    deployments: list[Deployment] = msgspec.field(default_factory=list)
    defaults: Defaults = msgspec.field(default_factory=Defaults)
    extras: Extras = msgspec.field(default_factory=Extras)


def _commands(items: list[str]) -> str:
    """The role's commands as one shell text, one per line, each trimmed of the blanks around
    it (a YAML block scalar ends in a newline) except a blank that a backslash escapes: the
    command ``printf '%s' a\\ `` keeps its escaped space rather than turning the backslash into
    a line continuation that swallows the next command."""
    return "\n".join(_trimmed(c) for c in items)


def _joins_next(command: str) -> bool:
    """Whether ``command``, trimmed (:func:`_trimmed`), ends in a backslash that escapes the
    newline after it: the next command would be read as its continuation."""
    return _trailing_backslashes(_trimmed(command)) % 2 == 1


def _trailing_backslashes(text: str) -> int:
    return len(text) - len(text.rstrip("\\"))


def _trimmed(command: str) -> str:
    out = command.strip()
    if _trailing_backslashes(out) % 2 and len(out) < len(command.lstrip()):
        out += command.lstrip()[len(out)]          # the escaped blank
    return out


def _prereq_scopes(spec: JobV2, data: dict[str, Any]) -> list[tuple[Prerequisite, dict[str, Any]]]:
    """Each prerequisite with its template scope: the declared fields, then the other keys the
    spec gave it (a ``$data`` template may name any of them)."""
    declared = {f.encode_name for f in msgspec.structs.fields(Prerequisite)}
    return [(p, {**msgspec.structs.asdict(p), **{k: v for k, v in raw.items() if k not in declared}})
            for p, raw in zip(spec.prerequisites, data.get("prerequisites") or [], strict=True)]


def _prereq_scope(prereqs: list[tuple[Prerequisite, dict[str, Any]]], name: str | None, kind: str,
                  where: str) -> dict[str, Any]:
    if name is None:
        return {}
    for p, scope in prereqs:
        if p.name == name and p.type == kind:
            return scope
    raise SpecError([f"{where}: no {kind} prerequisite named {name!r}"])


def to_job(data: Any, overrides: dict[str, str] | None = None) -> model.Job:
    """Validate a loaded v2 document and convert it to a :class:`model.Job`.

    ``overrides`` (from ``--param``) replace declared ``parameters`` (an undeclared name is an error). Raises
    :class:`submit.validation.SpecError` naming each bad field
    (``taskRoles.worker.resourcePerInstance.gpu: must be an integer in 0..1024``).
    """
    spec: JobV2 = validate(JobV2, data)
    repeated = (model.repeated_names([p.name for p in spec.prerequisites], "prerequisites")
                + model.repeated_names([d.name for d in spec.deployments], "deployments"))
    if repeated:   # a role's dockerImage or defaults.deployment must name exactly one
        raise SpecError(repeated)
    bad = [k for k in spec.parameters if not params.param_name_ok(k)]
    if bad:
        raise SpecError([f"{field_path('parameters', k)}: {params.PARAM_NAME_RULE}" for k in bad])
    prereqs = _prereq_scopes(spec, data)
    unknown = [k for k in overrides or {} if k not in spec.parameters]
    if unknown:
        known = ", ".join(sorted(map(str, spec.parameters))) or "none"
        raise SpecError([f"--param {k}: the spec declares no parameter {k!r} (parameters: {known})"
                         for k in unknown])
    parameters = {**spec.parameters, **(overrides or {})}
    deployment = None
    if spec.defaults.deployment is not None:
        found = [d for d in spec.deployments if d.name == spec.defaults.deployment]
        if not found:
            names = ", ".join(d.name for d in spec.deployments) or "none defined"
            raise SpecError([f"defaults.deployment: no deployment named "
                             f"{spec.defaults.deployment!r} (deployments: {names})"])
        deployment = found[0]
        for rname in deployment.taskRoles:
            if rname not in spec.taskRoles:
                raise SpecError([f"{field_path('deployments', deployment.name, 'taskRoles', rname)}: "
                                 "no such task role"])
    roles: list[model.Role] = []
    warnings: list[str] = []
    all_secrets: list[str] = []
    problems: list[str] = []
    for rname, r in spec.taskRoles.items():
        path = field_path("taskRoles", rname)
        scopes = {
            "parameters": parameters,
            "data": _prereq_scope(prereqs, r.data, "data", f"{path}.data"),
            "output": _prereq_scope(prereqs, r.output, "output", f"{path}.output"),
            "script": _prereq_scope(prereqs, r.script, "script", f"{path}.script"),
        }
        image = _prereq_scope(prereqs, r.dockerImage, "dockerimage", f"{path}.dockerImage").get("uri")
        why = None if image is None else image_problem(image)
        if why:   # reported with the role's other problems; the job is not built
            problems.append(f"{path}.dockerImage: the uri of prerequisite {r.dockerImage!r} {why}")
        dep = deployment.taskRoles.get(rname) if deployment else None
        pre, post = (dep.preCommands, dep.postCommands) if dep else ([], [])
        items = [*pre, *r.commands, *post]
        dep_path = (field_path("deployments", deployment.name, "taskRoles", rname)
                    if dep and deployment else "")
        sources = [*((f"{dep_path}.preCommands", i) for i in range(len(pre))),
                   *((f"{path}.commands", i) for i in range(len(r.commands))),
                   *((f"{dep_path}.postCommands", i) for i in range(len(post)))]
        joined = [k for k, c in enumerate(items[:-1]) if _joins_next(c)]
        if joined:
            problems += [f"{sources[k][0]}[{sources[k][1]}]: ends with a backslash, which would "
                         "join the next command onto it; drop it, or write \\\\ to print one "
                         "backslash" for k in joined]
            continue
        text = _commands(items)
        try:
            command, secrets = params.render(text, scopes, f"{path}.commands")
        except SpecError as exc:
            problems += exc.problems
            continue
        all_secrets += [s for s in secrets if s not in all_secrets]
        res = r.resourcePerInstance
        if "gpu" not in data["taskRoles"][rname]["resourcePerInstance"]:
            warnings.append(f"{path}.resourcePerInstance.gpu: not given, so the role gets no GPU "
                            "(CUDA_VISIBLE_DEVICES empty); write gpu: 0 if that is meant")
        roles.append(model.Role(
            name=rname, ident=model.role_ident(rname), instances=r.instances, cpus=res.cpu,
            memory_mib=res.memoryMB, gpus=model.split_gpus(res.gpu)[0],
            gpu_share=model.split_gpus(res.gpu)[1], command=command,
            image=image if isinstance(image, str) else None,
            ports=tuple(model.Port(k, v) for k, v in res.ports.items()),
            min_succeeded=_or(r.completion.minSucceededInstances, -1),
            min_failed=_or(r.completion.minFailedInstances, 1),
            shm_mib=_or(r.extraContainerOptions.shmMB, 64), task_retries=r.taskRetryCount,
            path=path,
            fields=(("gpu", "resourcePerInstance.gpu"), ("cpu", "resourcePerInstance.cpu"),
                    ("memory", "resourcePerInstance.memoryMB"), ("instances", "instances"),
                    ("min_failed", "completion.minFailedInstances"),
                    ("min_succeeded", "completion.minSucceededInstances"), ("command", "commands"),
                    ("ports", "resourcePerInstance.ports")),
        ))
    if problems:
        raise SpecError(problems)
    if spec.secrets:
        warnings.append("secrets: values written in the spec are not used (they would land in "
                        "Slurm's copy of the job); give them at submit time with --secrets FILE")
    model.check_role_idents(roles)
    model.check_completion(roles)
    warnings += model.renamed_role_warnings(roles, [r.command for r in roles])
    ex = spec.extras
    ckpt = ex.checkpoint
    return model.Job(
        name=spec.name, roles=tuple(roles), retry_budget=spec.jobRetryCount,
        gang=ex.gangAllocation, placement=ex.placement, gpu_type=ex.gpuType,
        signal=ckpt.signal if ckpt else None, grace_s=ckpt.grace if ckpt else None,
        enforce_binding=ex.enforceBinding, virtual_cluster=spec.defaults.virtualCluster,
        gpu_isolation=ex.gpuIsolation, secrets=tuple(all_secrets),
        warnings=tuple(warnings), version="v2", opportunistic=ex.opportunistic,
    )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value
