"""Packing a role's instances onto nodes: how many Slurm nodes and tasks per node.

Tiresias places jobs consolidated (as few nodes as possible, NSDI'19 section 4.2, "placement"),
so by default instances are packed greedily: each node takes as many instances as its GPUs,
cores and memory allow, and the instances are spread evenly over the fewest nodes that hold
them. ``spread`` placement puts one instance per node. Because Slurm's ``--gres`` is per node,
every node of the role gets ``tasks_per_node x gpus`` GPUs (the last node may keep some idle
when instances do not divide evenly). Memory per task is ``cpus x ceil(memoryMB / cpus)`` MiB
(``--mem-per-cpu``, sbatch(1)).
"""

from __future__ import annotations

from dataclasses import dataclass

from submit.model import Role
from submit.options import RenderOptions
from submit.errors import SpecError


@dataclass(frozen=True)
class Layout:
    """Where a role's tasks go. ``nodes`` x ``tasks_per_node`` >= instances (block order:
    task i runs on node ``i // tasks_per_node``)."""

    nodes: int
    tasks_per_node: int
    mem_per_cpu_mib: int

    def gres_per_node(self, role: Role) -> int:
        """GPUs requested on each node of the role."""
        return self.tasks_per_node * role.gpus


def mem_per_cpu(role: Role) -> int:
    """``--mem-per-cpu`` in MiB so that one task gets at least ``memory_mib``."""
    return -(-role.memory_mib // role.cpus)


def _limits(role: Role, opts: RenderOptions) -> dict[str, tuple[int, int, str]]:
    """Per spec field: (one instance's need, one node's amount, unit): whole GPUs, cores, MiB
    (``--mem-per-cpu`` × cores, as Slurm gives it)."""
    return {
        "gpu": (role.gpus, opts.gpus_per_node, "GPUs"),
        "cpu": (role.cpus, opts.cores_per_node, "cores"),
        "memory": (mem_per_cpu(role) * role.cpus, opts.mem_per_node_mib, "MiB"),
    }


def check_fits(role: Role, opts: RenderOptions) -> None:
    """Raise :class:`SpecError` naming the role field (``gpu``, ``cpu``, ``memoryMB``) whose
    per-instance request is larger than one node of the shape in ``opts``."""
    for key, (need, have, unit) in _limits(role, opts).items():
        if need > have:
            raise SpecError([f"{role.field_path(key)}: {need} per instance does not fit on one "
                             f"node ({have} {unit} per node; see --gpus-per-node, "
                             "--cores-per-node, --mem-per-node)"])


def pack(role: Role, placement: str, opts: RenderOptions) -> Layout:
    """Layout of ``role`` on nodes of the shape in ``opts``.

    Raises :class:`SpecError` naming the role field that cannot fit on one node
    (:func:`check_fits`).
    """
    check_fits(role, opts)
    fit = role.instances
    for need, have, _ in _limits(role, opts).values():
        if need:
            fit = min(fit, have // need)
    if placement == "spread":
        fit = 1
    nodes = -(-role.instances // fit)
    per_node = -(-role.instances // nodes)
    return Layout(nodes=nodes, tasks_per_node=per_node, mem_per_cpu_mib=mem_per_cpu(role))
