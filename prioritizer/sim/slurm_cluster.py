"""``--cluster-from-slurm``: the simulated cluster's node shape read from the real one (sinfo).

The simulator models identical nodes (``engine.Cluster``: N nodes × G GPUs), so the GPU nodes
``sinfo --json`` lists must all have the same GPU count; nodes without GPUs are left out (GPU
replays never place work on them). Nodes that are down or drained still count: the question is
what the cluster would do with its hardware. The replay's requeue delay is the cluster's too
(:func:`requeue_delay_from_slurm`: ``cred_expire`` + 1 s from ``scontrol show config``) where
the policy leaves ``requeue_delay_s`` at its default
(:meth:`prioritizer.policy.config.PolicyConfig.with_cluster_requeue_delay`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from slurm_plugin.slurm.client import SlurmClient, SlurmError
from slurm_plugin.slurm.records import Node, requeue_delay_s


class ClusterShapeError(ValueError):
    """The real cluster cannot be described as N × G GPUs (message says why and what to pass)."""


def shape_from_nodes(nodes: Iterable[Node], partitions: Iterable[str] | None = None) -> tuple[int, int]:
    """(nodes, GPUs per node) of the GPU nodes, optionally only those in ``partitions``.

    Raises:
        ClusterShapeError: no GPU node, or GPU nodes of different sizes (named with counts).
    """
    wanted = set(partitions) if partitions else None
    gpus = [n.gpus_total for n in nodes
            if n.gpus_total > 0 and (wanted is None or wanted & set(n.partitions))]
    if not gpus:
        raise ClusterShapeError("sinfo shows no node with GPUs (gres/gpu); pass --nodes N "
                                "--gpus-per-node G")
    shapes = Counter(gpus)
    if len(shapes) > 1:
        listed = ", ".join(f"{c} node(s) × {g} GPUs" for g, c in sorted(shapes.items()))
        raise ClusterShapeError(f"GPU nodes differ ({listed}); the simulator models identical "
                                "nodes: pass --nodes N --gpus-per-node G")
    return len(gpus), gpus[0]


def shape_from_slurm(client: SlurmClient | None = None) -> tuple[int, int]:
    """:func:`shape_from_nodes` of ``sinfo --json`` on the ``SLURM_CONF`` cluster.

    Raises:
        ClusterShapeError: as above, or Slurm did not answer (the message says which).
    """
    try:
        nodes = (client or SlurmClient(timeout_s=30)).nodes()
    except SlurmError as exc:
        raise ClusterShapeError(f"--cluster-from-slurm: sinfo failed: {exc}") from None
    return shape_from_nodes(nodes)


def requeue_delay_from_slurm(client: SlurmClient | None = None) -> float:
    """Seconds a requeued job waits on the ``SLURM_CONF`` cluster: ``cred_expire`` + 1 from
    ``scontrol show config`` (:func:`slurm_plugin.slurm.records.requeue_delay_s`; 121 when
    ``AuthInfo`` names no ``cred_expire``).

    Raises:
        ClusterShapeError: Slurm did not answer (the message says which command).
    """
    try:
        conf = (client or SlurmClient(timeout_s=30)).show_config()
    except SlurmError as exc:
        raise ClusterShapeError(f"--cluster-from-slurm: scontrol show config failed: {exc}") from None
    return requeue_delay_s(conf)
