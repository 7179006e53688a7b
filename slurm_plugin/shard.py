"""GPU shards (Slurm's ``gres/shard``): the counts dlsubmit asks for and dlprio reads back.

Slurm 22.05 and later split a GPU into ``N`` shards (gres.conf(5): ``Name=shard Count=N
File=/dev/nvidiaI``, ``GresTypes=gpu,shard`` in slurm.conf). A job asks ``--gres=shard:K`` and
gets K shards on one node; a GPU serves either shard jobs or one whole-GPU job at a time, and a
shard job sees the GPU its shards come from in ``CUDA_VISIBLE_DEVICES`` (Slurm's gres/shard
documentation, "Sharding"). Every GPU of a node has the same number of shards in what this
product writes (``dlgres``): shards per GPU = the node's shard count / its GPU count.

A job's *share* of a GPU is ``K / shards per GPU`` (``shard:2`` on 4 shards per GPU = 0.5).
Pure functions only: texts in, numbers out.
"""

from __future__ import annotations

import re
from fractions import Fraction

_SHARD_ITEM_RE = re.compile(r"(?:^|,)(?:gres[:/])?shard(?::[^:,=(]+)?[:=](\d+[KMGTP]?)(?=[(,]|$)")
"""``shard:8`` (sinfo Gres), ``shard:8(S:0)``, ``shard:1K(S:0-1)``, ``gres:shard:2`` (22.05
tres_per_node), ``gres/shard:2`` (24.11 on), ``gres/shard=2`` (tres_alloc)."""

_COUNT_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def gres_count(text: str) -> int:
    """A GRES count as Slurm prints it in a node's GRES (sinfo ``Gres``/``GresUsed``): digits,
    then a suffix when the count is a whole multiple of 1024ⁿ (``_get_suffix`` in Slurm's
    gres.c: ``1K`` is 1024, ``2M`` 2,097,152; ``1536`` stays as it is)."""
    return int(text.rstrip("KMGTP")) * _COUNT_SUFFIX[text.lstrip("0123456789")]

STEP_TOLERANCE = 0.02
"""How far (in shards) ``gpu × shards per GPU`` may lie from a whole number and still be read as
it: ``0.33`` on 3 shards per GPU is 0.99 shards, one shard; ``0.3`` on 4 is 1.2, refused."""


class ShardError(ValueError):
    """A GPU fraction the site cannot give (message names the steps it can)."""


def shards_in_gres(text: str | None) -> int:
    """Shards in a GRES or TRES text, summed over its items (0 without any).

    ``gpu:2(S:0),shard:8(S:0)`` → 8; ``shard:1K(S:0-1)`` → 1024; ``gres/shard:2`` → 2;
    ``gres/gpu:1`` → 0."""
    if not text:
        return 0
    return sum(gres_count(m.group(1)) for m in _SHARD_ITEM_RE.finditer(text.replace(" ", "")))


_PER_GPU_RE = re.compile(r"^shard(?::[^:(]+)?:\d+\(((?:\d+/\d+,?)+)\)$")


def shard_gpus(detail: str) -> tuple[int, ...]:
    """Indices of the GPUs a job's shards come from, in one ``gres_detail`` entry of
    ``squeue --json`` of the per-GPU form that 24.11 writes (seen live): ``shard:2(2/4,0/4)``
    is shards used / shards of each GPU of the node, in index order, and gives (0,). 22.05
    writes ``shard:2(IDX:0)``, read by :func:`slurm_plugin.slurm.records.gpu_indices` (here: ())."""
    m = _PER_GPU_RE.match(detail.strip())
    if not m:
        return ()
    used = [int(part.split("/")[0]) for part in m.group(1).rstrip(",").split(",")]
    return tuple(i for i, n in enumerate(used) if n > 0)


def shards_per_gpu(gpus: int, shards: int) -> int:
    """Shards per GPU of a node with ``gpus`` GPUs and ``shards`` shards (0: no sharding)."""
    return shards // gpus if gpus > 0 and shards > 0 else 0


def steps(per_gpu: int) -> str:
    """The fractions a site with ``per_gpu`` shards per GPU gives (``0.25, 0.5, 0.75``)."""
    return ", ".join(f"{k / per_gpu:.3g}" for k in range(1, per_gpu))


def shard_count(share: float, per_gpu: int) -> int:
    """Shards for a ``share`` of one GPU (0 < share < 1) on ``per_gpu`` shards per GPU.

    ``shard_count(0.5, 4)`` = 2; ``shard_count(0.33, 3)`` = 1 (within :data:`STEP_TOLERANCE`).
    Raises :class:`ShardError` when the site has no shards or ``share`` is not one of its
    steps (:func:`steps`)."""
    if not 0 < share < 1:
        raise ShardError(f"{share:g} is not a fraction of one GPU (0 < gpu < 1)")
    if per_gpu <= 0:
        raise ShardError(f"{share:g} of a GPU needs GPU shards, and how many a GPU has is not "
                         "known here (no node's Gres was read): give dlsubmit "
                         "--shards-per-gpu N or shards_per_gpu in the site config")
    want = share * per_gpu
    k = round(want)
    if k < 1 or k >= per_gpu or abs(want - k) > STEP_TOLERANCE:
        raise ShardError(f"{share:g} of a GPU is not a step of this site's {per_gpu} shards per "
                         f"GPU; use one of {steps(per_gpu)}")
    return k


def share_of(shards: int, per_gpu: int) -> Fraction:
    """A job's share of one GPU: ``shards / per_gpu`` (``share_of(2, 4)`` = 1/2); 0 when the
    site's shards per GPU are unknown."""
    return Fraction(shards, per_gpu) if per_gpu > 0 else Fraction(0)
