"""``dlsubmit``: an OpenPAI job spec (v1 JSON / v2 YAML) to one gang sbatch script, submitted.

Pipeline: submit/load.py (file -> validated job model) -> submit/render.py (job -> script, pure)
-> ``slurm_plugin.client.SlurmClient.submit`` (the only door to Slurm, docs/design.md, code rule 4).
``--dry-run`` prints the script and needs no Slurm at all. Exit status (issue 3):

* 0: submitted (prints the job id) or rendered (``--dry-run``).
* 2: a problem in the spec, the file or the options (one line per problem, naming the field
  path or ``file:line:column``); nothing is submitted.
* 3: Slurm refused the job (``Slurm refused the job: ...``) or could not be reached (``Slurm
  unreachable: ...``, e.g. slurmctld down or a missing ``SLURM_CONF`` file); Slurm's own
  message is shown verbatim.

Several specs in one call (``dlsubmit a.yaml b.yaml``) are all validated and rendered first
(with ``--dry-run`` the scripts print in order, each after the first preceded by the comment
line ``# ---- b.yaml ----``);
if any has a problem nothing is submitted. They are then submitted concurrently (up to
:data:`SUBMIT_THREADS` sbatch calls at once); the ids print in spec order, and a spec Slurm
refused is named on stderr (exit 3) while the others stay submitted. ``sbatch`` runs with a clean environment
(submit/environ.py; a warning says so when dlsubmit runs inside a job). Every submission carries
a unique token in its ``--comment`` (after the checkpoint marker); when ``sbatch`` reports a
timeout the token is looked up (``squeue``/``sacct``) before anything is decided, so a job that
was queued despite the timeout is reported, never submitted twice.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from slurm_plugin.cli_util import ArgumentParser, quiet_on_closed_stdout
from submit import environ, load, params, secrets
from submit.ending import without_final_gc
from submit.errors import SpecError
from submit.options import RUNTIMES, RenderOptions, check_fields, load_site
from submit.render import contract_comment, render_sbatch

EXIT_OK, EXIT_SPEC, EXIT_SLURM = 0, 2, 3
TOKEN_PREFIX = "dlsubmit-token="
LOOKUP_TRIES, LOOKUP_WAIT_S = 3, 2.0
SUBMIT_THREADS = 4
"""After an sbatch timeout: look the token up this many times, this far apart (slurmctld may
still be writing the job when the first look comes)."""


class _Parser(ArgumentParser):
    def error(self, message: str) -> None:  # argparse's usage errors are spec/option errors
        self.print_usage(sys.stderr)
        print(f"dlsubmit: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_SPEC)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="dlsubmit",
        description="Turn an OpenPAI job spec (v1 JSON with // comments, or v2 YAML) into one "
        "gang sbatch script and submit it. Exit status: 0 submitted or rendered, 2 problem in "
        "the spec, file or options, 3 Slurm refused the job or was unreachable.",
    )
    p.add_argument("spec", metavar="JOB.yaml|JOB.json", nargs="+",
                   help="job spec file(s); several are validated together, then submitted in order")
    p.add_argument("--dry-run", action="store_true",
                   help="print the sbatch script instead of submitting (needs no Slurm)")
    p.add_argument("--json", action="store_true",
                   help='print {"job_id": <int or null>, "script": "..."} as JSON')
    p.add_argument("--partition", metavar="P", help="Slurm partition (default: the cluster's)")
    p.add_argument("--param", metavar="k=v", action="append", default=[],
                   help="override a v2 parameter (<%% $parameters.k %%>) or a v1 jobEnvs entry; "
                   "repeatable")
    p.add_argument("--container-runtime", choices=RUNTIMES,
                   help="run each role's image with pyxis (srun --container-image), apptainer "
                   "(apptainer exec --nv) or not at all (default: none, or the site config)")
    p.add_argument("--gpus-per-node", type=int, metavar="N", help="GPUs per node for packing (default 8)")
    p.add_argument("--cores-per-node", type=int, metavar="N", help="cores per node for packing (default 16)")
    p.add_argument("--mem-per-node", type=int, metavar="MiB",
                   help="memory per node for packing, MiB (default 64000)")
    p.add_argument("--gpu-type", metavar="TYPE", help="GRES type when the spec names none (e.g. a100)")
    p.add_argument("--signal", metavar="SIG", help="checkpoint signal (default USR2; spec extras.checkpoint wins)")
    p.add_argument("--grace", type=int, metavar="SECONDS",
                   help="seconds between checkpoint signal and requeue (default 60)")
    p.add_argument("--enforce-binding", action="store_true", default=None,
                   help="add --gres-flags=enforce-binding to GPU roles (CPU-GPU affinity)")
    p.add_argument("--checkpoint-root", metavar="DIR",
                   help="directory for per-job checkpoint dirs (default $SLURM_SUBMIT_DIR/dl-checkpoints)")
    p.add_argument("--output", metavar="PATTERN", help="sbatch --output pattern (default slurm-%%j.out)")
    p.add_argument("--site-config", metavar="FILE",
                   help="site YAML with option defaults (default $DLSUBMIT_CONFIG)")
    p.add_argument("--account", metavar="A", help="Slurm account (default: the virtual cluster's, else yours)")
    p.add_argument("--qos", metavar="Q", help="Slurm QOS (default: the virtual cluster's, else yours)")
    p.add_argument("--secrets", metavar="FILE",
                   help="NAME=VALUE lines (mode 0600) for <%% $secrets.NAME %%>; read by the job "
                   "at run time, never written into the script")
    return p


_FLAG_TO_OPTION = {
    "partition": "partition", "container_runtime": "container_runtime",
    "gpus_per_node": "gpus_per_node", "cores_per_node": "cores_per_node",
    "mem_per_node": "mem_per_node_mib", "gpu_type": "gpu_type", "signal": "signal",
    "grace": "grace_s", "enforce_binding": "enforce_binding",
    "checkpoint_root": "checkpoint_root", "output": "output", "account": "account", "qos": "qos",
}


def options_from_args(args: argparse.Namespace) -> RenderOptions:
    """Site file values, then command-line flags. Raises :class:`SpecError` with every bad
    value, each line naming where it came from (``FILE: key ...`` or ``--flag ...``)."""
    values: dict[str, Any] = dict(load_site(args.site_config or os.environ.get("DLSUBMIT_CONFIG")))
    flags = {}
    for flag, field in _FLAG_TO_OPTION.items():
        v = getattr(args, flag)
        if v is not None:
            values[field] = flags[field] = v
    flag_of = {field: "--" + flag.replace("_", "-") for flag, field in _FLAG_TO_OPTION.items()}
    problems = [flag_of[field] + line[len(field):] for field, line in check_fields(flags)]
    if problems:
        raise SpecError(problems)
    return RenderOptions(**values)


def _render_all(args: argparse.Namespace) -> tuple[RenderOptions, list[tuple[str, Any, str]]]:
    """The options, and (spec path, job, script) for every spec. Raises :class:`SpecError`
    with every problem of every spec (prefixed by the spec's name when there are several)."""
    opts = options_from_args(args)
    overrides = params.parse_overrides(args.param)
    out, problems = [], []
    for path in args.spec:
        try:
            job = load.load(path, overrides)
            # a named secrets file is checked even when the spec references no secret
            sfile = secrets.check(args.secrets, job.secrets) if args.secrets else None
            out.append((path, job, render_sbatch(job, opts, sfile if job.secrets else None)))
        except SpecError as exc:
            problems += [f"{path}: {p}" if len(args.spec) > 1 else p for p in exc.problems]
    if problems:
        raise SpecError(problems)
    return opts, out


def _submit(script: str, extra_args: list[str], env: dict[str, str]) -> int:
    from slurm_plugin.client import SlurmClient

    return SlurmClient().submit(script, extra_args, env=env)


def _find(token: str) -> list[int]:
    from slurm_plugin.client import SlurmClient

    return SlurmClient().find_by_comment(token)


def _maybe_queued(message: str) -> bool:
    """Did sbatch give up waiting for an answer (so slurmctld may have queued the job)? A
    refused connection or a missing SLURM_CONF means the request never arrived."""
    low = message.lower()
    return "timed out" in low or "no answer within" in low


def _lookup(token: str) -> list[int] | None:
    """Job ids carrying ``token`` (``None`` when Slurm could not be asked)."""
    from slurm_plugin.client import SlurmError

    found: list[int] | None = None
    for attempt in range(LOOKUP_TRIES):
        try:
            found = _find(token)
        except SlurmError:
            found = None
        if found:
            return found
        if attempt + 1 < LOOKUP_TRIES:
            time.sleep(LOOKUP_WAIT_S)
    return found


def _submit_one(job: Any, script: str, opts: RenderOptions,
                env: dict[str, str]) -> tuple[int | None, str]:
    """Submit once; returns (job id, "") or (None, error line). Never submits twice."""
    from slurm_plugin.client import SlurmError, SlurmUnreachable

    token = TOKEN_PREFIX + os.urandom(16).hex()  # 128 random bits (uuid4's, without its import)
    comment = f"{contract_comment(job, opts)} {token}"
    try:
        return _submit(script, [f"--comment={comment}"], env), ""
    except SlurmUnreachable as exc:
        if not _maybe_queued(exc.message):
            return None, f"Slurm unreachable: {exc.message}"
        found = _lookup(token)
        if found:
            print(f"dlsubmit: warning: sbatch said '{exc.message}', but job {found[0]} carries this "
                  f"submission's token ({token}): it was queued once; not submitting again",
                  file=sys.stderr)
            return found[0], ""
        if found is None:
            return None, (f"Slurm unreachable: {exc.message}; could not check whether the job was "
                          f"queued: before submitting again, look for {token} in "
                          "`squeue --me -o '%i %k'`")
        return None, (f"Slurm unreachable: {exc.message}; no job carries this submission's token "
                      f"({token}), so nothing was queued")
    except SlurmError as exc:
        return None, f"Slurm refused the job: {exc.message}"


def separator(path: str) -> str:
    """The bash comment line printed before each script after the first in a multi-spec
    ``--dry-run``: ``# ---- b.yaml ----`` (the name with control characters escaped, so the line
    stays one comment line and each script stays valid bash)."""
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in path)
    return f"# ---- {shown} ----"


@quiet_on_closed_stdout
@without_final_gc
def main(argv: list[str] | None = None) -> int:
    """Run dlsubmit; returns the exit status (0, 2 or 3, see the module doc)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        opts, rendered = _render_all(args)
    except SpecError as exc:
        for line in exc.problems:
            print(f"dlsubmit: {line}", file=sys.stderr)
        return EXIT_SPEC
    many = len(rendered) > 1
    for path, job, _ in rendered:
        for w in job.warnings:
            print(f"dlsubmit: warning: {path + ': ' if many else ''}{w}", file=sys.stderr)
    ids: list[int | None] = [None] * len(rendered)
    status = EXIT_OK
    if not args.dry_run:
        outer = environ.inside_job(os.environ)
        if outer:
            print(f"dlsubmit: warning: running inside job {outer}; the new job gets a clean "
                  "environment (that job's SLURM_*, SRUN_*, CUDA_VISIBLE_DEVICES are not passed on)",
                  file=sys.stderr)
        env = environ.clean(os.environ)
        from concurrent.futures import ThreadPoolExecutor

        # sbatch calls are independent: several at once (slurmctld serialises what must be)
        with ThreadPoolExecutor(max_workers=min(SUBMIT_THREADS, len(rendered))) as pool:
            results = list(pool.map(lambda r: _submit_one(r[1], r[2], opts, env), rendered))
        for i, ((path, _, _), (job_id, error)) in enumerate(zip(rendered, results)):
            ids[i] = job_id
            if error:
                print(f"dlsubmit: {path + ': ' if many else ''}{error}", file=sys.stderr)
                status = EXIT_SLURM
    for i, (path, _, script) in enumerate(rendered):
        if not args.dry_run and ids[i] is None:
            continue
        if args.json:
            doc = {"job_id": ids[i], "script": script}
            print(json.dumps({"spec": path, **doc} if many else doc))
        elif args.dry_run:
            if i:
                print(separator(path))
            sys.stdout.write(script)
        else:
            print(ids[i])
    return status


if __name__ == "__main__":
    raise SystemExit(main())
