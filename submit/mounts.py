"""Which directories reach a container runtime's mount list, and what those lists cannot hold.

The one path a dlsubmit job mounts is its checkpoint directory, ``<root>/<job id>``
(submit/runtime.py ``dl_launch``): pyxis gets ``srun --container-mounts=<dir>``, apptainer
``apptainer exec --bind=<dir>``, for every role with an image. The root is ``--checkpoint-root``
(or the site's ``checkpoint_root``); a relative root, and the default ``dl-checkpoints``, lie in
the submit directory (sbatch starts the job there: ``SLURM_SUBMIT_DIR``, sbatch(1)). The job id
is digits and ``_``. So the checkpoint root and, when it is relative, the submit directory are
the paths to check, before anything is submitted.

What each list cannot express (sources: pyxis README, ``--container-mounts=SRC[:DST[:FLAGS]]
[,...]``; apptainer's bind documentation, ``--bind src[:dest[:opts]][,...]``): ``,`` separates
entries and ``:`` source, destination and flags in both; pyxis also hands each entry to enroot as
a line of an fstab-format mount list, whose fields are separated by whitespace. None of them has
an escape. The batch script checks the final directory again (a ``--dry-run`` script may be
submitted from elsewhere).

An existing checkpoint root must also take the job's directory: the default
``dl-checkpoints`` in a submit directory that several users share is made by the first one's
job (mode 0755 under the usual umask), and another user's job then fails at its start
(``mkdir: cannot create directory ...: Permission denied``) after it waited, maybe preempted
other jobs, for its GPUs (:func:`check_writable`). A root that does not exist here is not
checked (it may exist only on the compute nodes; the job makes it).
"""

from __future__ import annotations

import os
import os.path
import pwd

from slurm_plugin.common.cli import visible
from submit.errors import SpecError
from submit.model import Job
from submit.options import RenderOptions

FORBIDDEN = {
    "pyxis": {",": "separates the entries of --container-mounts",
              ":": "separates a mount's source, destination and flags",
              " ": "separates the fields of enroot's mount list (fstab format)",
              "\t": "separates the fields of enroot's mount list (fstab format)"},
    "apptainer": {",": "separates the entries of --bind",
                  ":": "separates a bind's source, destination and options"},
}
"""Per runtime, the characters its mount list cannot carry in a path, with the reason."""

DEFAULT_ROOT = "dl-checkpoints"
"""The checkpoint root when none is given, relative to the submit directory (submit/render.py)."""


def _mounts(job: Job, opts: RenderOptions) -> bool:
    return opts.container_runtime in FORBIDDEN and any(r.image for r in job.roles)


def check(job: Job, opts: RenderOptions, submit_dir: str) -> None:
    """Raise :class:`SpecError` (one line per directory) when the checkpoint root, or the submit
    directory ``submit_dir`` a relative root lies in, holds a character the job's container
    runtime cannot carry in its mount list. Nothing to check without a runtime or an image."""
    if not _mounts(job, opts):
        return
    runtime = opts.container_runtime
    root = opts.checkpoint_root or DEFAULT_ROOT
    places = [(root, "checkpoint root (--checkpoint-root, or the site's checkpoint_root)",
               "choose a checkpoint root without it")]
    if not os.path.isabs(root):
        places.append((submit_dir, f"submit directory (the checkpoint root {root!r} is relative "
                       "to it)", "submit from a directory without it, or give an absolute "
                       "--checkpoint-root"))
    problems = []
    for path, what, fix in places:
        bad = [ch for ch in FORBIDDEN[runtime] if ch in path]
        if bad:
            ch = bad[0]
            problems.append(f"{what} {visible(repr(path))}: holds {ch!r}, which {runtime} cannot "
                            f"mount: {ch!r} {FORBIDDEN[runtime][ch]}; {fix}")
    if problems:
        raise SpecError(problems)


def check_writable(opts: RenderOptions, submit_dir: str) -> None:
    """Raise :class:`SpecError` when the checkpoint root (relative to ``submit_dir``) exists but
    is not a directory this user can create the job's directory in (see the module doc)."""
    root = opts.checkpoint_root or DEFAULT_ROOT
    path = os.path.join(submit_dir, root)   # an absolute root stays itself
    if not os.path.lexists(path):
        return
    what = f"checkpoint root {visible(repr(path))}"
    fix = "give --checkpoint-root DIR, a directory of yours"
    if not os.path.isdir(path):
        raise SpecError([f"{what}: not a directory; the job could not make its checkpoint "
                         f"directory in it; {fix}"])
    if not os.access(path, os.W_OK | os.X_OK):
        st = os.stat(path)
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = f"uid {st.st_uid}"
        raise SpecError([f"{what}: not writable by you (owner {owner}, mode "
                         f"{st.st_mode & 0o7777:04o}); the job could not make its checkpoint "
                         f"directory in it; {fix}, or ask the owner to make it group-writable"])
