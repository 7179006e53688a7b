"""Warnings for specs that are valid but almost surely wrong: printed on stderr, one line each
naming the field; the exit status stays 0 and the script is the same (submit/cli.py).

* ``completion.minSucceededInstances`` (v1 ``minSucceededTaskCount``) below half the role's
  instances in a gang job: when that many instances succeeded the job stops the others and
  reports success (OpenPAI FrameworkController semantics, submit/runtime.py ``dl_decide``), so a
  role of 8 workers with ``minSucceeded: 1`` ends when the first one does (OpenPAI's maintainers
  proposed warning about it). Half or more is taken as meant.
* A checkpoint signal of ``USR1`` when a command runs torchrun (``torch.distributed.run`` /
  ``launch``) or names NCCL: NCCL 2.13 catches SIGUSR1 in its proxy thread (NVIDIA/nccl#704;
  later releases only with ``NCCL_PROXY_DUMP_SIGNAL``), so the preemption notice may never reach
  the program's own handler; submitit moved its preemption signal to USR2 for this reason
  (facebookincubator/submitit#1697). dlsubmit's default is USR2.
* ``--signal`` or ``--grace`` typed on the command line for a spec whose
  ``extras.checkpoint`` sets it otherwise: the spec wins (it says what its program handles),
  so the flag is not used (:func:`flag_warnings`).
"""

from __future__ import annotations

import re

from slurm_plugin import marker
from submit.model import Job
from submit.options import RenderOptions

NCCL_COMMAND = re.compile(r"torchrun|torch\.distributed\.(?:run|launch)|nccl", re.IGNORECASE)
"""A command that starts NCCL ranks (torchrun, its module forms) or configures NCCL."""


def warnings(job: Job, opts: RenderOptions) -> list[str]:
    """The warnings for ``job`` rendered with ``opts`` (see the module doc), in role order."""
    out = []
    for r in job.roles if job.gang else ():
        if r.min_succeeded > 0 and 2 * r.min_succeeded < r.instances:
            out.append(f"{r.field_path('min_succeeded')}: {r.min_succeeded} of {r.instances} "
                       f"instances: once {r.min_succeeded} succeeded, the other "
                       f"{r.instances - r.min_succeeded} are stopped and the job reports success; "
                       f"set it to {r.instances} or -1 (all) unless that is meant")
    signal = marker.make(job.signal or opts.signal).signal
    nccl = [r for r in job.roles if NCCL_COMMAND.search(r.command)]
    if signal == "USR1" and nccl:
        field = "extras.checkpoint.signal" if job.signal else "--signal (or the site's signal)"
        out.append(f"{field}: USR1 with an NCCL/torchrun command ({nccl[0].field_path('command')}):"
                   " NCCL may catch SIGUSR1 itself, so the checkpoint signal may not reach the "
                   "program; use USR2 (the default)")
    return out


def flag_warnings(job: Job, signal: str | None, grace_s: int | None) -> list[str]:
    """The warnings for ``--signal`` / ``--grace`` (None: not typed) that ``job``'s
    ``extras.checkpoint`` overrides with another value."""
    out = []
    if signal is not None and job.signal is not None:
        try:
            typed = marker.make(signal).signal
        except marker.MarkerError:
            typed = signal
        if typed != job.signal:
            out.append(f"--signal {signal}: not used: the spec's extras.checkpoint.signal "
                       f"({job.signal}) wins; change it there")
    if grace_s is not None and job.grace_s is not None and grace_s != job.grace_s:
        out.append(f"--grace {grace_s}: not used: the spec's extras.checkpoint.grace "
                   f"({job.grace_s} s) wins; change it there")
    return out
