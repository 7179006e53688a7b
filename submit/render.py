"""Rendering a validated job as ONE sbatch script (pure: job + options in, text out).

Like submitit's ``_make_sbatch_string`` (docs/design.md, code rule 5), ``#SBATCH`` lines come in a fixed
order and every user string is quoted for the layer it lands in (submit/quoting.py). Mapping
(docs/design.md, "dlsubmit mapping"): one role is one job, several roles one heterogeneous
job (``#SBATCH hetjob`` between components); ``extras.gangAllocation: false`` becomes a job array
with one element per instance. Per role: ``--nodes``/``--ntasks``/``--ntasks-per-node`` from
submit/packing.py, ``--cpus-per-task``, ``--mem-per-cpu=<N>M`` (memoryMB is per instance; never
``--mem``; the unit suffix is always written, so nothing rests on sbatch(1)'s default unit),
``--gres=gpu[:type]:N`` per node, or ``--gres=shard:K`` for a fraction of one GPU (K = the
fraction × the site's shards per GPU, slurm_plugin/shard.py; the task sees the one GPU its
shards come from, ``DL_ROLE_GPUS`` 1). The OpenPAI
``virtualCluster`` becomes ``--partition``/``--account``/``--qos`` through the site config.
Every value lands quoted for its layer, site and command-line values included: bash arrays are
single-quoted word by word, ``#SBATCH`` values go through :func:`sbatch_word`. The job's
values follow as bash variables (the job's environment, v1 ``jobEnvs``, too: as the plain
array ``DL_JOB_ENV``, applied by each task to its command alone, never exported to the batch
shell), then the fixed runtime of submit/runtime.py. The checkpoint
contract is declared with ``slurm_plugin.marker`` in ``--comment``.
"""

from __future__ import annotations

from submit import mounts, packing, runtime
from submit.model import Job, Role
from submit.options import RenderOptions
from submit.packing import Layout
from submit.quoting import bash_word, sbatch_word, slurm_name
from submit.errors import SpecError
from submit.validation import _IDENT_RE   # the spec models' shell-name rule
from slurm_plugin import marker, shard
from slurm_plugin.common.readfile import PATH_MAX

MAX_PORTS = 25000


_SQUASHFS_SUFFIXES = (".sqsh", ".squashfs", ".sqfs")


def _pyxis_image(uri: str) -> str:
    """Docker reference -> enroot/pyxis form: a registry host (first part with ``.`` or ``:``)
    is separated by ``#`` (``nvcr.io/nvidia/pytorch:23.10`` -> ``nvcr.io#nvidia/pytorch:23.10``).

    A local squashfs file (``.sqsh``, ``.squashfs``, ``.sqfs``) must reach pyxis as a path: pyxis
    reads ``--container-image`` as a file only when it starts with ``/`` or ``.``, anything else
    as a registry image name. So ``pt.sqsh`` and ``images/pt.sqsh`` become ``./pt.sqsh`` and
    ``./images/pt.sqsh`` (relative to the job's working directory, the submit directory) and
    ``~/pt.sqsh`` becomes ``$HOME/pt.sqsh`` written out at submit time.

    A ``docker://`` scheme is dropped first (pyxis adds it when it asks enroot to import the
    image; ``docker://nvcr.io/nvidia/pytorch:23.10`` is ``nvcr.io#nvidia/pytorch:23.10``); any
    other ``scheme://`` reference is passed as given."""
    if uri.startswith("docker://"):
        uri = uri[len("docker://"):]
    if "://" in uri:
        return uri
    if uri.lower().endswith(_SQUASHFS_SUFFIXES):
        if uri.startswith("~/"):
            import os.path

            return os.path.expanduser(uri)
        return uri if uri.startswith(("/", "./", "../")) else "./" + uri
    head, sep, rest = uri.partition("/")
    if sep and ("." in head or ":" in head or head == "localhost") and "#" not in uri:
        return f"{head}#{rest}"
    return uri


def _apptainer_image(uri: str) -> str:
    """Docker reference -> apptainer URI (``docker://...``); ``.sif`` files and URIs stay."""
    if "://" in uri or uri.endswith(".sif") or uri.startswith("/"):
        return uri
    return "docker://" + uri


def _image(role: Role, opts: RenderOptions) -> str:
    if not role.image or opts.container_runtime == "none":
        return ""
    if opts.container_runtime == "pyxis":
        return _pyxis_image(role.image)
    return _apptainer_image(role.image)


def _gres(job: Job, role: Role, count: int, opts: RenderOptions) -> str:
    if role.gpu_share:
        return f"shard:{_shards(role, opts)}"
    if role.gpus == 0:
        return "none"
    gtype = job.gpu_type or opts.gpu_type
    return f"gpu:{gtype}:{count}" if gtype else f"gpu:{count}"


def _shards(role: Role, opts: RenderOptions) -> int:
    """GPU shards one instance of a fractional role asks for (slurm_plugin/shard.py).

    A fraction of a GPU is one process's share of one device: such a role has one instance per
    job (``gangAllocation: false`` makes one array element per instance), and its shards come
    from one GPU. Raises :class:`SpecError` naming the field."""
    try:
        return shard.shard_count(role.gpu_share, opts.shards_per_gpu)
    except shard.ShardError as exc:
        raise SpecError([f"{role.field_path('gpu')}: {exc}"]) from None


def _check_shares(job: Job) -> None:
    for r in job.roles:
        if r.gpu_share and r.instances > 1 and job.gang:
            raise SpecError([f"{r.field_path('instances')}: a role with a fraction of a GPU "
                             f"({r.gpu_share:g}) runs one instance; ask for whole GPUs, or set "
                             "extras.gangAllocation: false to run each instance on its own"])


def _check_array(job: Job) -> None:
    first = job.roles[0]
    for r in job.roles[1:]:
        if ((r.cpus, r.memory_mib, r.gpus, r.gpu_share)
                != (first.cpus, first.memory_mib, first.gpus, first.gpu_share)):
            raise SpecError([
                f"extras.gangAllocation: false runs every instance as one element of a job "
                f"array, so all roles need the same resources; {r.path} differs from "
                f"{first.path} (set gangAllocation: true or equalise them)"])


def _layouts(job: Job, opts: RenderOptions) -> list[Layout]:
    _check_shares(job)
    if not job.gang:
        _check_array(job)
        for r in job.roles:   # each element is one instance on one node
            packing.check_fits(r, opts)
        return [Layout(1, 1, packing.mem_per_cpu(r)) for r in job.roles]
    return [packing.pack(r, job.placement, opts) for r in job.roles]


def _resource_lines(job: Job, role: Role, lay: Layout, opts: RenderOptions,
                    binding: bool) -> list[str]:
    ntasks = role.instances if job.gang else 1
    lines = [f"--nodes={lay.nodes}", f"--ntasks={ntasks}",
             f"--ntasks-per-node={lay.tasks_per_node}", f"--cpus-per-task={role.cpus}",
             f"--mem-per-cpu={lay.mem_per_cpu_mib}M"]
    if role.gpu_share:
        lines.append(f"--gres={_gres(job, role, 1, opts)}")
    elif role.gpus:
        lines.append(f"--gres={_gres(job, role, lay.gres_per_node(role), opts)}")
        if binding:
            lines.append("--gres-flags=enforce-binding")
    return lines


def job_contract(job: Job, opts: RenderOptions) -> marker.CheckpointContract:
    """The job's checkpoint contract and class (slurm_plugin/marker.py)."""
    return marker.make(job.signal or opts.signal, job.grace_s or opts.grace_s,
                       "opportunistic" if job.opportunistic else "production")


def contract_comment(job: Job, opts: RenderOptions) -> str:
    """The job's ``--comment``: the checkpoint marker (slurm_plugin/marker.py)."""
    return job_contract(job, opts).to_comment()


def directives(job: Job, layouts: list[Layout], opts: RenderOptions) -> list[str]:
    """The ``#SBATCH`` block, in fixed order: identity, contract, array, then per component
    the resources (``hetjob`` line between components)."""
    contract = job_contract(job, opts)
    binding = opts.enforce_binding if job.enforce_binding is None else job.enforce_binding
    name = f"--job-name={sbatch_word(slurm_name(job.name))}"
    vc = opts.virtual_cluster(job.virtual_cluster)
    part = [f"--{flag}={sbatch_word(value)}" for flag, value in (
        ("partition", opts.partition or vc.partition), ("account", opts.account or vc.account),
        ("qos", opts.qos or vc.qos)) if value]
    head = [name, *part]
    if opts.output:
        head.append(f"--output={sbatch_word(opts.output)}")
    head += ["--requeue", "--open-mode=append",
             f"--signal=B:{contract.signal}@{contract.grace_s}",
             f"--comment={sbatch_word(contract.to_comment())}"]
    if not job.gang:
        total = sum(r.instances for r in job.roles)
        head.append(f"--array=0-{total - 1}")
        return [f"#SBATCH {x}" for x in head + _resource_lines(
            job, job.roles[0], layouts[0], opts, binding)]
    out = [f"#SBATCH {x}" for x in head + _resource_lines(job, job.roles[0], layouts[0], opts, binding)]
    for role, lay in zip(job.roles[1:], layouts[1:]):
        out.append("#SBATCH hetjob")
        out += [f"#SBATCH {x}" for x in [name, *part, *_resource_lines(job, role, lay, opts, binding)]]
    return out


def _array(name: str, values: list[str]) -> str:
    """``NAME=('v0' 'v1' ...)``: every element single-quoted, whatever it holds."""
    items = [bash_word(v) for v in values]
    if any("\n" in v for v in values):
        return f"{name}=(\n" + "".join(f"  {i}\n" for i in items) + ")"
    return f"{name}=({' '.join(items)})"


def _ports(role: Role) -> tuple[str, int]:
    """(``label:count ...`` of the declared ports, ports per task incl. the task's own port)."""
    spec = " ".join(f"{p.label}:{p.count}" for p in role.ports if p.count > 0)
    return spec, 1 + sum(p.count for p in role.ports)


def job_variables(job: Job, layouts: list[Layout], opts: RenderOptions,
                  secrets_file: str | None = None) -> list[str]:
    """The job's values as bash assignments (user strings single-quoted)."""
    contract = job_contract(job, opts)
    roles = job.roles
    port0, total_ports = [], 0
    for r in roles:
        port0.append(total_ports)
        total_ports += r.instances * _ports(r)[1]
    if total_ports > MAX_PORTS:
        raise SpecError([f"taskRoles: {total_ports} ports requested in all; at most {MAX_PORTS}"])
    root = (bash_word(opts.checkpoint_root) if opts.checkpoint_root
            else f'"${{SLURM_SUBMIT_DIR:-$PWD}}/{mounts.DEFAULT_ROOT}"')
    lines = [
        f"DL_JOB_NAME={bash_word(job.name)}",
        f"DL_SIGNAL={contract.signal}",
        f"DL_GRACE_S={contract.grace_s}",
        f"DL_RETRY_BUDGET={job.retry_budget}",
        f"DL_PORT_FLOOR={opts.port_floor}",
        f"DL_PORT_BLOCK={1 + total_ports}",
        f"DL_GANG={int(job.gang)}",
        f"DL_HET={int(job.gang and len(roles) > 1)}",
        f"DL_CONTAINER={bash_word(opts.container_runtime)}",
        f"DL_GPU_ISOLATION={bash_word(job.gpu_isolation)}",
        f"DL_VC_NAME={bash_word(job.virtual_cluster or 'default')}",
        f"DL_SECRETS_FILE={bash_word(secrets_file or '')}",
        _array("DL_SECRET_NAMES", list(job.secrets)),
        f"DL_CHECKPOINT_ROOT={root}",
        _array("DL_ROLE_NAME", [r.name for r in roles]),
        _array("DL_ROLE_IDENT", [r.ident for r in roles]),
        _array("DL_ROLE_INSTANCES", [str(r.instances) for r in roles]),
        _array("DL_ROLE_NODES", [str(lay.nodes) for lay in layouts]),
        _array("DL_ROLE_TASKS_PER_NODE", [str(lay.tasks_per_node) for lay in layouts]),
        _array("DL_ROLE_CPUS", [str(r.cpus) for r in roles]),
        _array("DL_ROLE_MEM_PER_CPU", [f"{lay.mem_per_cpu_mib}M" for lay in layouts]),
        _array("DL_ROLE_GPUS", [str(r.gpus or int(bool(r.gpu_share))) for r in roles]),
        _array("DL_ROLE_GRES", [_gres(job, r, lay.gres_per_node(r), opts)
                                for r, lay in zip(roles, layouts)]),
        _array("DL_ROLE_MIN_SUCCEEDED", [str(r.min_succeeded) for r in roles]),
        _array("DL_ROLE_MIN_FAILED", [str(r.min_failed) for r in roles]),
        _array("DL_ROLE_TASK_RETRIES", [str(r.task_retries) for r in roles]),
        _array("DL_ROLE_PORTS", [_ports(r)[0] for r in roles]),
        _array("DL_ROLE_PORT0", [str(p) for p in port0]),
        _array("DL_ROLE_PORTS_PER_TASK", [str(_ports(r)[1]) for r in roles]),
        _array("DL_ROLE_RESOURCE", [f"{r.gpus or r.gpu_share:g},{r.cpus},{r.memory_mib},{r.shm_mib}"
                                    for r in roles]),
        _array("DL_ROLE_IMAGE", [_image(r, opts) for r in roles]),
        "DL_ROLE_COMMAND=(",
        *[f"{bash_word(r.command)}" for r in roles],
        ")",
        f"PAI_DEFAULT_FS_URI={bash_word(opts.default_fs_uri)}",
        f"PAI_DATA_DIR={bash_word(job.data_dir)}",
        f"PAI_OUTPUT_DIR={bash_word(job.output_dir)}",
        f"PAI_CODE_DIR={bash_word(job.code_dir)}",
        "export PAI_DEFAULT_FS_URI",
    ]
    lines.append(_array("DL_JOB_ENV", job_env_words(job)))
    return lines


def job_env_words(job: Job) -> list[str]:
    """The job's environment as ``NAME=VALUE`` words. The script keeps them in the plain array
    ``DL_JOB_ENV`` (never exported): each task hands them to ``env`` for its command's shell
    only (submit/runtime.py), so nothing of the script's own machinery runs under them. The spec
    models refuse reserved and malformed names with their field path; this refuses them again
    for a :class:`Job` built another way."""
    bad = [k for k, _ in job.envs if not _IDENT_RE.match(k) or runtime.reserved_env(k)]
    if bad:
        raise SpecError([f"jobEnvs: {k!r} cannot be a job environment variable: "
                         f"{runtime.reserved_env(k) or 'not a shell variable name'}" for k in bad])
    return [f"{k}={v}" for k, v in job.envs]


def render_sbatch(job: Job, options: RenderOptions, secrets_file: str | None = None) -> str:
    """The complete batch script for ``job`` on a site described by ``options``.

    ``secrets_file``: absolute path of the user's secrets file (its *path* goes into the script,
    never its values; the batch shell reads it at run time). Pure and deterministic. Raises
    :class:`SpecError` when a role cannot fit on one node, when an array job's roles differ in
    resources, when too many ports are requested, when the spec's virtual cluster is unknown to
    the site, or when commands reference secrets and no secrets file is given.
    """
    if job.secrets and not secrets_file:
        raise SpecError([f"commands reference $secrets ({', '.join(job.secrets)}); give their "
                         "values with --secrets FILE (NAME=VALUE lines, mode 0600)"])
    layouts = _layouts(job, options)
    head = directives(job, layouts, options)
    body = job_variables(job, layouts, options, secrets_file)
    prologue = (
        "read -r -d '' DL_TASK_PROLOGUE <<'DL_TASK_PROLOGUE_END'\n"
        + runtime.TASK_PROLOGUE + "DL_TASK_PROLOGUE_END\n"
    )
    script = ("#!/bin/bash\n" + "\n".join(head) + "\n"
              + f"# Generated by dlsubmit from a {job.version} OpenPAI spec; user strings are quoted.\n"
              + "\n# ---- this job ----\n" + "\n".join(body) + "\n\n" + prologue + runtime.RUNTIME)
    check_slurm_limits(job, options, script)
    return script


MAX_NAME_BYTES = 1024
"""slurmctld refuses a job whose name is longer than 1024 bytes ("Pathname or file name is too
long"; Slurm 22.05 src/slurmctld/job_mgr.c ``_test_job_desc_fields``: ``name``, 1024)."""
MAX_PATH_BYTES = PATH_MAX
"""... and an ``--output`` path longer than MAXPATHLEN (4096 bytes on Linux), same check."""
MAX_HET_COMPONENTS = 128
"""sbatch and slurmctld refuse a heterogeneous job of more components ("Refusing HetJob
submission too many components"; slurm.h ``MAX_HET_JOB_COMPONENTS``, 128 in 22.05 to 26.05):
a gang job's task roles are its components."""
MAX_ARG_BYTES = 131_072
"""Linux's ``MAX_ARG_STRLEN`` (32 pages of 4 KiB; execve(2), "Limits on size of arguments and
environment"): one argument or one ``NAME=value`` environment string, its NUL included, may be
at most this long, else execve fails with E2BIG. Each task gets its role's whole command as one
``srun`` argument and as the environment string ``DL_CMD=...`` (submit/runtime.py), so a
role's command may be at most ``MAX_ARG_BYTES - len("DL_CMD=") - 1`` bytes."""
MAX_COMMAND_BYTES = MAX_ARG_BYTES - len("DL_CMD=") - 1
MAX_TASK_ARGS_BYTES = 1 << 20
"""What a role's command and the job environment may take together, bytes: each ``srun`` of
the batch script gets them all as arguments, and each task's command shell gets them as its
environment. Linux passes arguments and environment of at most ``ARG_MAX`` together, a quarter
of the stack limit (2 MiB with the usual 8 MiB; execve(2)), else E2BIG ("Argument list too
long"); half of it is left to what Slurm and the batch script put in the environment."""



def check_slurm_limits(job: Job, options: RenderOptions, script: str) -> None:
    """Refuse what passes our schema but sbatch would refuse, so a batch of specs stays all or
    nothing: the job name over :data:`MAX_NAME_BYTES` (UTF-8), the ``--output`` pattern over
    :data:`MAX_PATH_BYTES`, a role's command over :data:`MAX_COMMAND_BYTES` or a job environment
    string over :data:`MAX_ARG_BYTES`, a command and job environment over
    :data:`MAX_TASK_ARGS_BYTES` together, a gang job of more
    task roles than :data:`MAX_HET_COMPONENTS`, the script over ``options.max_script_size``, a
    job array with more elements than ``options.max_array_size`` (indexes 0..MaxArraySize-1).
    Raises :class:`SpecError` naming the field."""
    problems = []
    n = len(slurm_name(job.name).encode("utf-8", "surrogatepass"))
    if n > MAX_NAME_BYTES:
        problems.append(f"name (v1: jobName): {n} bytes in UTF-8; Slurm accepts a job name of at "
                        f"most {MAX_NAME_BYTES} bytes: shorten it")
    if options.output is not None:
        n = len(options.output.encode("utf-8", "surrogatepass"))
        if n > MAX_PATH_BYTES:
            problems.append(f"output: {n} bytes; Slurm accepts a path of at most {MAX_PATH_BYTES}")
    n = len(script.encode("utf-8", "surrogatepass"))
    if n > options.max_script_size:
        problems.append(f"taskRoles.*.commands: the batch script would be {n} bytes; Slurm "
                        f"accepts at most {options.max_script_size} (max_script_size, default "
                        "4 MiB; a site raising it sets max_script_size in the site config): keep "
                        "long commands in a script file the job runs")
    for role in job.roles:
        n = len(role.command.encode("utf-8", "surrogatepass"))
        if n > MAX_COMMAND_BYTES:
            problems.append(f"{role.field_path('command')}: {n} bytes in all; Linux passes a "
                            f"task's command of at most {MAX_COMMAND_BYTES} (MAX_ARG_STRLEN, one "
                            "argument): keep long commands in a script file the job runs")
    for name, value in job.envs:
        n = len(f"{name}={value}".encode("utf-8", "surrogatepass"))
        if n + 1 > MAX_ARG_BYTES:
            problems.append(f"jobEnvs.{name}: {n} bytes as NAME=value; Linux passes at most "
                            f"{MAX_ARG_BYTES - 1} (MAX_ARG_STRLEN, one environment string): keep "
                            "long values in a file the job reads")
    env_bytes = sum(len(f"{name}={value}".encode("utf-8", "surrogatepass")) + 1
                    for name, value in job.envs)
    for role in job.roles:
        n = len(role.command.encode("utf-8", "surrogatepass")) + 1 + env_bytes
        if job.envs and n > MAX_TASK_ARGS_BYTES:
            problems.append(f"jobEnvs: {n} bytes with {role.field_path('command')}, which each "
                            f"task gets together; at most {MAX_TASK_ARGS_BYTES} (Linux passes "
                            "about 2 MiB of arguments and environment, ARG_MAX, and Slurm needs "
                            "its share): keep long values in a file the job reads")
    if job.gang and len(job.roles) > MAX_HET_COMPONENTS:
        problems.append(f"taskRoles: {len(job.roles)} task roles make a heterogeneous job of as "
                        f"many components; Slurm accepts at most {MAX_HET_COMPONENTS}: merge "
                        "roles that ask the same resources")
    total = sum(r.instances for r in job.roles)
    if not job.gang and total > options.max_array_size:
        problems.append(f"extras.gangAllocation: false makes a job array of {total} elements "
                        f"(indexes 0..{total - 1}); Slurm accepts at most {options.max_array_size} "
                        "(MaxArraySize, default 1001; a site with a larger one sets "
                        "max_array_size in the site config)")
    if problems:
        raise SpecError(problems)
