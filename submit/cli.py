"""``dlsubmit``: an OpenPAI job spec (v1 JSON / v2 YAML) to one gang sbatch script, submitted.

Pipeline: submit/load.py (file -> validated job model) -> submit/render.py (job -> script, pure)
-> ``slurm_plugin.client.SlurmClient.submit`` (the only door to Slurm, STYLE.md rule 4).
``--dry-run`` prints the script and needs no Slurm at all. Exit status (issue 3):

* 0: submitted (prints the job id) or rendered (``--dry-run``).
* 2: a problem in the spec, the file or the options (one line per problem, naming the field
  path or ``file:line:column``); nothing is submitted.
* 3: Slurm refused the job (``Slurm refused the job: ...``) or could not be reached (``Slurm
  unreachable: ...``, e.g. slurmctld down or a missing ``SLURM_CONF`` file); Slurm's own
  message is shown verbatim.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from slurm_plugin.cli_util import quiet_on_closed_stdout
from submit import load, params
from submit.options import RUNTIMES, RenderOptions, load_site
from submit.render import render_sbatch
from submit.errors import SpecError

EXIT_OK, EXIT_SPEC, EXIT_SLURM = 0, 2, 3


class _Parser(argparse.ArgumentParser):
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
    p.add_argument("spec", metavar="JOB.yaml|JOB.json", help="the job spec file")
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
    return p


_FLAG_TO_OPTION = {
    "partition": "partition", "container_runtime": "container_runtime",
    "gpus_per_node": "gpus_per_node", "cores_per_node": "cores_per_node",
    "mem_per_node": "mem_per_node_mib", "gpu_type": "gpu_type", "signal": "signal",
    "grace": "grace_s", "enforce_binding": "enforce_binding",
    "checkpoint_root": "checkpoint_root", "output": "output",
}


def options_from_args(args: argparse.Namespace) -> RenderOptions:
    """Site file values, then command-line flags. Raises :class:`SpecError`."""
    values: dict[str, Any] = dict(load_site(args.site_config or os.environ.get("DLSUBMIT_CONFIG")))
    for flag, field in _FLAG_TO_OPTION.items():
        v = getattr(args, flag)
        if v is not None:
            values[field] = v
    return RenderOptions(**values)


def _submit(script: str) -> int:
    from slurm_plugin.client import SlurmClient

    return SlurmClient().submit(script)


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    """Run dlsubmit; returns the exit status (0, 2 or 3, see the module doc)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        opts = options_from_args(args)
        job = load.load(args.spec, params.parse_overrides(args.param))
        script = render_sbatch(job, opts)
    except SpecError as exc:
        for line in exc.problems:
            print(f"dlsubmit: {line}", file=sys.stderr)
        return EXIT_SPEC
    for w in job.warnings:
        print(f"dlsubmit: warning: {w}", file=sys.stderr)
    job_id = None
    if not args.dry_run:
        from slurm_plugin.client import SlurmError, SlurmUnreachable

        try:
            job_id = _submit(script)
        except SlurmUnreachable as exc:
            print(f"dlsubmit: Slurm unreachable: {exc.message}", file=sys.stderr)
            return EXIT_SLURM
        except SlurmError as exc:
            print(f"dlsubmit: Slurm refused the job: {exc.message}", file=sys.stderr)
            return EXIT_SLURM
    if args.json:
        print(json.dumps({"job_id": job_id, "script": script}))
    elif args.dry_run:
        sys.stdout.write(script)
    else:
        print(job_id)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
