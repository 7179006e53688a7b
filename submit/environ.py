"""The environment ``sbatch`` gets from dlsubmit: the user's, without another job's settings.

``sbatch`` copies its whole environment into the job (``--export=ALL``, sbatch(1)), and ``srun``
inside the new job reads ``SLURM_*``/``SRUN_*`` input variables (srun(1), "INPUT ENVIRONMENT
VARIABLES") as if they were options. Run from inside job 5100, the new job's ``srun`` would so
inherit job 5100's ``SLURM_NTASKS``, ``SLURM_MEM_PER_NODE``, ``SLURM_TRES_PER_TASK``, ... and
Slurm 22.05 refuses conflicting pairs ("mutually exclusive") or allocates the wrong GRES; a
leftover ``CUDA_VISIBLE_DEVICES`` narrows the GPUs the new job's tasks would see. dlsubmit's
script sets everything the job needs, so these are removed before ``sbatch`` runs:

* every ``SLURM_*`` variable except ``SLURM_CONF`` (which cluster) and ``SLURM_TIME_FORMAT``;
* every ``SRUN_*`` and ``SALLOC_*`` variable (input variables of srun and salloc that an
  enclosing allocation leaves behind). ``SBATCH_*`` stays: it is how a user or site sets
  sbatch defaults on purpose (``SBATCH_ACCOUNT``), and Slurm does not set it in jobs;
* ``CUDA_VISIBLE_DEVICES``, ``GPU_DEVICE_ORDINAL``, ``ROCR_VISIBLE_DEVICES`` (set per step by
  Slurm's gres/gpu plugin, gres.conf(5)) and the PMI/PMIx rendezvous variables
  (``PMI_*``, ``PMIX_*``, ``OMPI_*``) of the enclosing step.
"""

from __future__ import annotations

from collections.abc import Mapping

KEEP = ("SLURM_CONF", "SLURM_TIME_FORMAT")
DROP_PREFIXES = ("SLURM_", "SRUN_", "SALLOC_", "PMI_", "PMIX_", "OMPI_")
DROP_NAMES = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES")


def inside_job(env: Mapping[str, str]) -> str | None:
    """The id of the job this process runs in (``SLURM_JOB_ID``), or ``None``."""
    return env.get("SLURM_JOB_ID") or None


def clean(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the enclosing job's Slurm, srun, PMI and GPU settings (module doc)."""
    return {k: v for k, v in env.items()
            if k in KEEP or not (k.startswith(DROP_PREFIXES) or k in DROP_NAMES)}
